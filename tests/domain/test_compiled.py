"""The engine compiled by mypyc (deploy/compile.py) decides exactly what its sources decide.

Where domain/ is compiled, the whole suite runs against the compiled engine (CI requires it:
QUOTAFLOW_REQUIRE_COMPILED=1), and this module adds two checks against the sources: the same
input logs give byte-identical decisions, and the tests that patch domain functions (marked
`pure_python`, which compiled callers would not see) pass on the sources. Without a build,
everything already runs on the sources and there is nothing to compare.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from event_streams import random_stream

from domain._engine_form import ENV, running_compiled

ROOT = Path(__file__).resolve().parents[2]

compiled_only = pytest.mark.skipif(not running_compiled(), reason="domain/ runs from its sources here: nothing to compare")


def _env(pure: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if pure:
        env[ENV] = "1"
    return env


def _replay(path: Path, pure: bool) -> bytes:
    done = subprocess.run([sys.executable, "-m", "streams.cli.main", "replay", str(path)], cwd=ROOT,
                          env=_env(pure), capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout


def _with_preemption(stream: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """Every other ClusterQueue preempts, so the searches run too."""
    policies = ({"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
                {"withinClusterQueue": "LowerOrNewerEqualPriority", "reclaimWithinCohort": "LowerPriority",
                 "borrowWithinCohort": {"policy": "LowerPriority"}})
    out = []
    for i, event in enumerate(stream):
        obj = event.get("object")
        if isinstance(obj, dict) and obj.get("kind") == "ClusterQueue" and (i + seed) % 2 == 0:
            obj = {**obj, "spec": {**obj["spec"], "preemption": policies[(i + seed) % 4 // 2]}}
            event = {**event, "object": obj}
        out.append(event)
    return out


@compiled_only
def test_the_compiled_engine_decides_byte_for_byte_as_its_sources(tmp_path: Path) -> None:
    from devtools.kueue_perf import virtual
    from devtools.kueue_perf.config import load
    from devtools.kueue_perf.generator import generate

    encode = msgspec.json.encode
    logs: dict[str, list[Any]] = {f"random-{seed}": _with_preemption(random_stream(seed, events=600), seed)
                                  for seed in range(6)}
    # Kueue's baseline performance run: 15,000 workloads, cohorts, priorities and preemption.
    run = virtual.run(generate(load("baseline")), keep_log=True)
    assert run.input_log is not None
    logs["kueue-baseline"] = run.input_log
    for name, events in logs.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(b"".join(encode(e) + b"\n" for e in events))
        compiled, pure = _replay(path, pure=False), _replay(path, pure=True)
        assert b'"type":"Admitted"' in compiled and b'"type":"Pending"' in compiled, name
        assert compiled == pure, f"{name}: the compiled engine's decisions differ from its sources'"


@compiled_only
@pytest.mark.timeout(1200)
def test_tests_that_patch_the_engine_pass_on_its_sources() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "pure_python", "-q", "-p", "no:cacheprovider", "tests/domain"],
        cwd=ROOT, env=_env(pure=True), capture_output=True, text=True, timeout=1150,
    )
    tail = done.stdout[-4000:]
    assert done.returncode == 0, tail
    assert " passed" in tail and " failed" not in tail, tail


def test_no_msgspec_struct_is_defined_in_a_compiled_module() -> None:
    """mypyc compiles a Struct's annotations into a form msgspec misreads (a `str | None` field
    decodes as if typed `type`), so a Struct in a compiled module silently decodes nothing where
    its sources work: Structs live in the modules deploy/compile.py keeps interpreted. Checked
    on the sources, so it holds without a build too."""
    import ast
    import runpy

    root = Path(__file__).resolve().parents[2]
    interpreted = runpy.run_path(str(root / "deploy" / "compile.py"), run_name="not_main")["INTERPRETED"]
    offenders = []
    for path in sorted((root / "domain").rglob("*.py")):
        name = ".".join(path.relative_to(root / "domain").with_suffix("").parts)
        if path.name == "__init__.py" or name in interpreted:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any("Struct" in ast.unparse(base) for base in node.bases):
                offenders.append(f"{name}.{node.name}")
    assert offenders == []
