"""devtools/compile_cache.py: a cached mypyc build is found again only for the same inputs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from devtools import compile_cache

ROOT = Path(__file__).resolve().parents[1]


def test_the_key_follows_the_sources_and_the_build_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(ROOT / "domain", tmp_path / "domain", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    (tmp_path / "deploy").mkdir()
    shutil.copy(ROOT / "deploy" / "compile.py", tmp_path / "deploy" / "compile.py")
    monkeypatch.setattr(compile_cache, "ROOT", tmp_path)
    monkeypatch.setattr(compile_cache, "DOMAIN", tmp_path / "domain")
    first = compile_cache.key()
    assert compile_cache.key() == first
    source = tmp_path / "domain" / "engine.py"
    text = source.read_text()
    source.write_text(text + "\n# edited\n")
    assert compile_cache.key() != first
    source.write_text(text)
    assert compile_cache.key() == first
    (tmp_path / "deploy" / "compile.py").write_text("# another build\n")
    assert compile_cache.key() != first


def test_the_cache_sits_beside_the_broker_jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUOTAFLOW_CACHE_DIR", str(tmp_path))
    assert compile_cache.cache_root() == tmp_path / "mypyc"
