"""Imports stay in isort's order (ruff's I rules) and nothing is left unused or shadowed (pyflakes,
ruff's F rules) across the tree, so an added import cannot leave a block unsorted, or a dead name
behind, for the next change to trip over. Ruff reads the whole tree in well under a second."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_imports_are_sorted_and_names_used() -> None:
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run(
        [str(ruff), "check", "--select", "F,I", "--no-cache", "--output-format", "concise", "."],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, (
        f"{result.stdout}{result.stderr}\nfix with: ruff check --select F,I --fix ."
    )
