"""Read-only commands: a missing embedded log is an error, never an empty file they create."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKTREE = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "command", [["status"], ["pending", "cq"], ["history", "a/b"], ["explain", "a/b"], ["audit"], ["watch", "--no-follow"], ["serve"], ["list", "workloads"], ["get", "clusterqueue", "cq"]]
)
def test_a_view_on_a_missing_sqlite_log_fails_and_creates_nothing(tmp_path: Path, command: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(WORKTREE)}
    env.pop("QUOTAFLOW_BROKER_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "streams.cli.main", *command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"no log at {tmp_path / 'quotaflow.db'}" in done.stderr
    assert list(tmp_path.iterdir()) == []
