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


@pytest.mark.parametrize("command", [["export"], ["watch", "--no-follow", "-o", "json"], ["watch", "--no-follow"]])
def test_a_reader_of_stdout_that_goes_away_is_not_blamed_on_the_log(tmp_path: Path, command: list[str]) -> None:
    import asyncio

    from streams.log import Message, open_log

    url = f"sqlite:///{tmp_path / 'q.db'}"

    async def fill() -> None:
        async with open_log(url) as log:
            tick = b'{"type":"Tick","time":"2025-01-01T00:00:00Z"}'
            await log.append("quotaflow.events", [Message(tick)] * 50)
            applied = b'{"type":"Applied","cause":{"offset":%d,"index":0},"kind":"Tick","action":"updated"}'
            await log.append("quotaflow.decisions", [Message(applied % i) for i in range(50)])

    asyncio.run(fill())
    env = {**os.environ, "PYTHONPATH": str(WORKTREE)}
    env.pop("QUOTAFLOW_BROKER_URL", None)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line is written (`... | head -0`)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "streams.cli.main", *command, "--broker", url],
            stdout=write_end, stderr=subprocess.PIPE, env=env, text=True, timeout=60, check=False,
        )
    finally:
        os.close(write_end)
    assert "cannot reach the log" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
