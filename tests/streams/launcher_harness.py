"""Helpers for the launcher tests: `quotaflow launch` as a restartable subprocess, workloads whose
pods record in a journal when they start (and whether another copy of the same pod was still
running), and the checks on the logs afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_harness import (
    _die_with_parent,
    agent_env,
    assert_exactly_once,
    replay,
    with_suppress,
)
from cli_harness import Live

API = "kueue.x-k8s.io/v1beta1"

# A pod: takes a lock only one copy of this pod can hold (a second copy running at the same time
# writes DOUBLE), writes `start` with its admission, sleeps, exits with the code asked. Its n-th
# run sleeps the n-th of the comma-separated seconds (the last one from then on).
POD_SCRIPT = """
import fcntl, os, sys, time
d, secs, code = sys.argv[1], [float(s) for s in sys.argv[2].split(",")], int(sys.argv[3])
e = os.environ
pod = e["QUOTAFLOW_POD_SET"] + "-" + e["QUOTAFLOW_POD_INDEX"]
line = " ".join([e["QUOTAFLOW_WORKLOAD"], e["QUOTAFLOW_ADMISSION"], pod, e["QUOTAFLOW_FLAVOR_CPU"], str(os.getpid())])
lock = open(os.path.join(d, e["QUOTAFLOW_WORKLOAD"].replace("/", "_") + "_" + pod + ".lock"), "w")
try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    word = "start"
except OSError:
    word = "DOUBLE"
with open(os.path.join(d, "journal"), "a") as j:
    j.write(word + " " + line + "\\n")
if word == "DOUBLE":
    sys.exit(99)
print("hello from", pod, flush=True)
with open(os.path.join(d, "journal")) as j:
    runs = sum(1 for x in j if x.split()[1:2] == [e["QUOTAFLOW_WORKLOAD"]] and x.split()[3] == pod)
time.sleep(secs[min(runs, len(secs)) - 1])
sys.exit(code)
"""

CLUSTER_QUEUE = {
    "apiVersion": API,
    "kind": "ClusterQueue",
    "metadata": {"name": "team-a-cq"},
    "spec": {
        "namespaceSelector": {},
        "preemption": {"withinClusterQueue": "LowerPriority"},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": 2}, {"name": "memory", "nominalQuota": "1Gi"}]}
                ],
            }
        ],
    },
}


def job(name: str, journal: Path, *, seconds: str | float, pods: int = 1, priority: int = 0, exit_code: int = 0, command: bool = True) -> dict[str, Any]:
    """A Workload of `pods` pods of 1 CPU each, whose container runs POD_SCRIPT."""
    container: dict[str, Any] = {"name": "c", "resources": {"requests": {"cpu": "1"}}}
    if command:
        container["command"] = [sys.executable, "-I", "-c", POD_SCRIPT]
        container["args"] = [str(journal), str(seconds), str(exit_code)]
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "queueName": "team-a",
            "priority": priority,
            "podSets": [{"name": "main", "count": pods, "template": {"spec": {"containers": [container]}}}],
        },
    }


@dataclass
class LauncherProcess:
    """`quotaflow launch` as a subprocess, restartable; every run appends to one log file."""

    live: Live
    state_dir: Path
    grace: float = 1.0
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.live.tmp / "launcher.log"

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None
        with self.log_path.open("ab") as log:
            log.write(f"--- start {self.starts}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [
                    sys.executable, "-m", "streams.cli.main", "launch", "--broker", self.live.url,
                    "--state-dir", str(self.state_dir), "--grace-period", str(self.grace), "--poll", "0.1",
                ],
                env=agent_env(self.live.topics, QUOTAFLOW_LOG_LEVEL="info"),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        self.starts += 1

    async def wait_started(self, timeout: float) -> None:
        """Until the current run logged that it started (its state open, its logs followed)."""
        deadline = time.monotonic() + timeout
        marker = f"--- start {self.starts - 1}\n".encode()
        while b'"event":"up"' not in self.log_path.read_bytes().rpartition(marker)[2]:
            assert self.proc is not None and self.proc.poll() is None, self.tail()
            assert time.monotonic() < deadline, f"the launcher did not start in {timeout} s\n{self.tail()}"
            await asyncio.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL of the launcher's own group: its pods, in sessions of their own, live on."""
        assert self.proc is not None
        with_suppress(lambda: os.killpg(self.proc.pid, signal.SIGKILL))  # type: ignore[union-attr]
        self.proc.wait(10)

    def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        with_suppress(lambda: os.killpg(self.proc.pid, signal.SIGTERM))  # type: ignore[union-attr]
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            with_suppress(lambda: os.killpg(self.proc.pid, signal.SIGKILL))  # type: ignore[union-attr]
            self.proc.wait(5)
            return self.proc.returncode

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def kill_pods(self) -> None:
        """Cleanup: SIGKILL every pod process group the state file still knows."""
        import sqlite3

        db = self.state_dir / "launcher.db"
        if not db.exists():
            return
        with sqlite3.connect(db) as conn:
            for (pid,) in conn.execute("SELECT pid FROM pods").fetchall():
                with_suppress(lambda pid=pid: os.killpg(pid, signal.SIGKILL))


@contextlib.contextmanager
def launched(live: Live, *configuration: dict[str, Any], grace: float) -> Iterator[tuple[LauncherProcess, Path]]:
    """`configuration` applied, then the agent and `quotaflow launch` started; yields the launcher
    and the directory its pods journal to. On the way out the launcher is stopped, the pods its
    state still knows are killed, and the agent is stopped (and must exit 0)."""
    pods = live.tmp / "pods"
    pods.mkdir()
    done = live.cli("apply", "-f", str(live.write("cq.yaml", *configuration)), "--no-wait")
    assert done.returncode == 0, done.stderr
    launcher = LauncherProcess(live, live.tmp / "launch-state", grace=grace)
    live.start_agent()
    launcher.start()
    try:
        yield launcher, pods
    finally:
        launcher.stop()
        launcher.kill_pods()
        assert live.agent is not None
        assert live.agent.stop() == 0, live.agent.tail()


def by_workload(decisions: list[dict[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for d in decisions:
        if d.get("workload"):
            out[d["workload"]].append(d["type"])
    return out


async def wait_until_finished(live: Live, names: list[str], timeout: float, launcher: LauncherProcess) -> list[dict[str, Any]]:
    """The decisions, once every workload in `names` has a `Finished` decision."""
    deadline = time.monotonic() + timeout
    wanted = {f"team-a/{n}" for n in names}
    while True:
        decisions = [json.loads(v) for v in await live.values(live.topics.decisions)]
        done = {d["workload"] for d in decisions if d["type"] == "Finished"}
        if wanted <= done:
            return decisions
        if time.monotonic() > deadline:
            raise AssertionError(
                f"not finished in {timeout} s: {sorted(wanted - done)}\n{dict(by_workload(decisions))}\n{launcher.tail()}"
            )
        await asyncio.sleep(0.2)


def journal(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def check_journal(lines: list[list[str]]) -> None:
    """No pod ran while another copy of it ran, and no admission started a pod twice."""
    doubles = [line for line in lines if line[0] == "DOUBLE"]
    assert not doubles, f"pods started while a copy of them ran: {doubles}"
    starts = Counter((w, admission, pod) for word, w, admission, pod, *_ in lines)
    twice = {k: n for k, n in starts.items() if n > 1}
    assert not twice, f"pods started twice for one admission: {twice}"


def check_released(decisions: list[dict[str, Any]]) -> None:
    """Every preempted or evicted workload gave its quota back (released, finished or deleted)."""
    holding: dict[str, bool] = {}
    for d in decisions:
        w = d.get("workload")
        if d["type"] in ("Preempted", "Evicted"):
            holding[w] = True
        elif d["type"] in ("QuotaReleased", "Finished", "Deleted"):
            holding[w] = False
    assert not any(holding.values()), f"evicted and never released: {[w for w, h in holding.items() if h]}"


async def check_replay(live: Live) -> list[bytes]:
    """The decision log equals `quotaflow replay` of the input log (exported by the CLI)."""
    events = live.tmp / "events.jsonl"
    done = live.cli("export", "-o", str(events))
    assert done.returncode == 0, done.stderr
    expected = await asyncio.to_thread(replay, events)
    actual = await live.values(live.topics.decisions)
    assert_exactly_once(actual, expected)
    return actual


async def input_events(live: Live) -> list[dict[str, Any]]:
    return [json.loads(v) for v in await live.values(live.topics.input)]
