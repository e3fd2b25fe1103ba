"""Pod processes: starting a pod's shim in a process group of its own, telling one pod process
from another that reuses its pid, and signalling and watching a pod's whole group.

Linux: a process is identified by its pid and its start time (field 22 of /proc/PID/stat, clock
ticks since boot), which a later process with the same pid cannot share. A process group is
gone when none of its members is alive; a member that has exited but was not yet reaped (a
zombie: a shim left to an init that does not reap) counts as gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SHIM = Path(__file__).with_name("pod_shim.py")


def _stat(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/PID/stat (state first), or None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def start_ticks(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[19]) if fields else None  # field 22: starttime


def alive(pid: int, ticks: int) -> bool:
    """Whether the process `pid` that started at `ticks` still runs (a zombie does not)."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z" and int(fields[19]) == ticks


def group_alive(pgid: int) -> bool:
    """Whether any process of group `pgid` still runs (zombies aside)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid:  # field 5: pgrp
            return True
    return False


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Spawned:
    """A pod's shim, started and waiting for `go`."""

    def __init__(self, proc: subprocess.Popen[bytes], ticks: int) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.ticks = ticks

    def go(self) -> None:
        """Let it run the pod (only once its pid is durably recorded)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.close()
        except BrokenPipeError:  # it died already: its outcome file (or its absence) says so
            pass


def spawn(pod: dict[str, Any], spec_file: Path, exit_file: Path, log_dir: Path) -> Spawned:
    """Start the shim for `pod` in a new session (so a new process group, outside the
    launcher's: a signal to the launcher's group does not reach pods). It waits for `go`."""
    spec = {
        "initContainers": pod["initContainers"],
        "containers": pod["containers"],
        "exitFile": str(exit_file),
        "logDir": str(log_dir),
    }
    spec_file.parent.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(json.dumps(spec))
    if exit_file.exists():
        exit_file.unlink()
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / "shim.stderr", "ab") as shim_errors:
        proc = subprocess.Popen(
            [sys.executable, "-I", str(SHIM), str(spec_file)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=shim_errors,
            start_new_session=True,
            close_fds=True,
        )
    ticks = start_ticks(proc.pid)
    # It cannot have exited yet: it waits for `go` (at worst it is a zombie, still in /proc).
    return Spawned(proc, ticks if ticks is not None else -1)


def read_outcome(exit_file: str) -> dict[str, Any] | None:
    try:
        with open(exit_file) as f:
            outcome = json.load(f)
    except (OSError, ValueError):
        return None
    return outcome if isinstance(outcome, dict) else None


def reap(children: dict[int, Spawned]) -> None:
    """Collect the exit of the shims this launcher started (they are its children)."""
    for pid, child in list(children.items()):
        if child.proc.poll() is not None:
            del children[pid]

