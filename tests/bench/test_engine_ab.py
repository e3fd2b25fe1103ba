"""Smoke test of bench/engine_ab.py: the baseline engine really is another revision's code,
this checkout's modules are left in place, and the side-by-side fold compares decisions."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import domain.engine
from bench import engine_ab, engine_variants
from devtools import cluster_stream


def test_base_engine_comes_from_the_extracted_tree_and_ours_stay(tmp_path: Path) -> None:
    ours = domain.engine.Engine
    base = engine_ab.load_engine_at("HEAD", tmp_path)
    assert base is not ours
    assert Path(base.apply.__code__.co_filename).is_relative_to(tmp_path)
    assert sys.modules["domain.engine"] is domain.engine  # this checkout's modules are back

    gen = cluster_stream.generate(60, 1, seed=3)
    variants, _ = engine_variants.build_variants(gen, ("base",))
    v = variants["base"]
    cpu_base, cpu_ours, same = engine_ab.compare(base, ours, v.prelude, v.stream, chunk=25)
    assert same and cpu_base > 0 and cpu_ours > 0

    # A stream on which the two sides decide differently is reported as such.
    class Skewed(ours):  # type: ignore[misc, valid-type]
        def apply(self, event, offset):  # type: ignore[no-untyped-def]
            return super().apply(event, offset)[:-1]

    assert not engine_ab.compare(base, Skewed, v.prelude, v.stream, chunk=25)[2]


def test_a_base_dir_is_imported_as_it_stands_there(tmp_path: Path) -> None:
    """--base-dir: another checkout's domain/ (here sources only, so run from its sources)."""
    archive = subprocess.run(["git", "-C", str(engine_ab.ROOT), "archive", "HEAD", "domain"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(tmp_path, filter="data")
    ours = domain.engine.Engine
    base = engine_ab.load_engine_from(tmp_path)
    assert base is not ours
    assert Path(base.apply.__code__.co_filename).is_relative_to(tmp_path)
    assert engine_ab.engine_form(base) == "from its sources"
    assert sys.modules["domain.engine"] is domain.engine
