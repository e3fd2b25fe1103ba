"""The architecture as a test: import-linter checks the contracts in pyproject.toml (the layers
cli -> agent | projections | client | importers -> log -> settings -> domain, no product
import of devtools/, no import cycle inside domain/, and domain's preemption package between the
scheduler and the state)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_only_the_benchmarks_own_tests_import_bench() -> None:
    """bench/ is a consumer of the product, not a library: what tests share with the benchmarks
    (generated streams, Kueue's performance scenario) lives in devtools/."""
    import ast

    tests = ROOT / "tests"
    offenders = []
    for path in sorted(tests.rglob("*.py")):
        if (tests / "bench") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [a.name for a in node.names] if isinstance(node, ast.Import)
                else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n == "bench" or n.startswith("bench.")]
    assert not offenders, offenders
