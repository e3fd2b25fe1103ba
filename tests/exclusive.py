"""Tests marked `exclusive` run while no other test does, also under pytest-xdist.

`make test` runs the suite on several workers (more than the cores). A test that asserts wall
clock latencies (a real-time run through the broker must stay within its simulation's times by
a margin) would measure its neighbours' load instead of the code. Such a test is marked
`exclusive`: it takes a lock every other test shares, so it starts once the tests running then
have ended, and no test starts until it ends.

The lock is a pair of flock(2) locks in the run's base temp dir, which every worker of one run
shares: `turnstile` gives the exclusive test priority (a worker waiting for it stops others from
starting new tests), `run` is held shared by ordinary tests and exclusively by marked ones. flock
is released by the kernel when its process dies, so a crashed worker cannot wedge the run.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

MARKER = "exclusive"


def _lock_dir(config: pytest.Config) -> Path | None:
    """The directory every worker of this run shares, or None outside pytest-xdist."""
    if not hasattr(config, "workerinput"):
        return None
    # Each worker's basetemp is <run's basetemp>/popen-gwN.
    return config._tmp_path_factory.getbasetemp().parent  # type: ignore[attr-defined]


@contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases its lock


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Around the whole test, its fixtures' setup and teardown included."""
    where = _lock_dir(item.config)
    if where is None:
        yield
        return
    turnstile, run = where / "exclusive.turnstile", where / "exclusive.run"
    if item.get_closest_marker(MARKER) is not None:
        with _flock(turnstile, fcntl.LOCK_EX), _flock(run, fcntl.LOCK_EX):
            yield
        return
    with _flock(turnstile, fcntl.LOCK_EX):
        fd = os.open(run, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_SH)
    try:
        yield
    finally:
        os.close(fd)
