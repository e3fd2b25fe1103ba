"""`quotaflow launch` SIGKILLed at seeded random moments of a run with preemptions, on the embedded
log and on Kafka, and started again each time with the same state directory: every pod runs at
most once at a time and once per admission, every preempted workload is released, every
workload finishes, nothing is published twice to effect (no Rejected decision but `NotAdmitted`:
a pods-ready report that crossed the workload's preemption, which CONTRACT.md documents as
harmless), and the decision log equals `quotaflow replay` of the input log."""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import time
from typing import Any

import pytest
from agent_harness import running
from cli_harness import Live
from launcher_harness import (
    CLUSTER_QUEUE,
    LauncherProcess,
    by_workload,
    check_journal,
    check_released,
    check_replay,
    input_events,
    job,
    journal,
    launched,
    wait_until_finished,
)

from streams.client import Client
from streams.settings import Settings

pytestmark = pytest.mark.timeout(300)

SEED = int(os.environ.get("QUOTAFLOW_LAUNCH_SEED", "20261127"))
KILLS = 5


def schedule(pods_dir: Any) -> list[tuple[float, list[dict[str, Any]]]]:
    """(seconds after the start, workloads submitted then): low-priority work that
    higher-priority work preempts, in a ClusterQueue of 2 CPUs."""
    return [
        (0.0, [job("low-0", pods_dir, seconds="2,0.4", pods=2), job("low-1", pods_dir, seconds="0.8", pods=1)]),
        (1.0, [job("high-0", pods_dir, seconds="0.5", pods=2, priority=10)]),
        (2.0, [job("low-2", pods_dir, seconds="0.5"), job("fail-0", pods_dir, seconds="0.3", exit_code=1)]),
        (3.0, [job("high-1", pods_dir, seconds="0.6", priority=10)]),
        (3.5, [job("low-3", pods_dir, seconds="1.5,0.3", pods=2)]),
        (4.5, [job("high-2", pods_dir, seconds="0.4", pods=2, priority=5)]),
    ]


async def test_launcher_killed_at_random_points_starts_nothing_twice_and_loses_nothing(logs: Live) -> None:
    live = logs
    rng = random.Random(SEED)
    settings = Settings(
        broker_url=live.url, input_topic=live.topics.input, decisions_topic=live.topics.decisions,
        snapshots_topic=live.topics.snapshots,
    )
    killed_with_runs = 0
    with launched(live, CLUSTER_QUEUE, grace=1.0) as (launcher, pods_dir):
        plan = schedule(pods_dir)
        names = [w["metadata"]["name"] for _, ws in plan for w in ws]

        async def submit() -> None:
            async with Client(live.url, settings=settings, source="/quotaflow/tests") as qf:
                began = time.monotonic()
                for at, workloads in plan:
                    await asyncio.sleep(max(0.0, began + at - time.monotonic()))
                    for w in workloads:
                        await qf.submit(w)

        async def kill() -> None:
            # Each kill a random moment after the launcher is up again (it takes a while to start).
            nonlocal killed_with_runs
            for _ in range(KILLS):
                await launcher.wait_started(timeout=60)
                # A random moment once it holds a run: on a busy machine a restart can take longer
                # than the work it was meant to interrupt, and a kill with nothing in hand tests less.
                holds_runs = time.monotonic() + 3
                while _runs(launcher) == 0 and time.monotonic() < holds_runs:
                    await asyncio.sleep(0.05)
                await asyncio.sleep(rng.uniform(0.0, 0.5))
                launcher.kill()
                killed_with_runs += _runs(launcher) > 0
                await asyncio.sleep(rng.uniform(0.0, 0.3))
                launcher.start()

        await asyncio.gather(submit(), kill())
        decisions = await wait_until_finished(live, names, 120, launcher)
    # Counted once the launcher stopped; killing its pods on the way out leaves its state as it was.
    left = _runs(launcher)

    assert launcher.starts == KILLS + 1
    assert killed_with_runs >= 2, f"only {killed_with_runs} kills found work in progress: move the kill points"
    flow = by_workload(decisions)
    assert any(d["type"] == "Preempted" for d in decisions), "the run preempts (else it tests less than it says)"
    refused = [d for d in decisions if d["type"] == "Rejected" and d["reason"] != "NotAdmitted"]
    assert not refused, refused
    check_released(decisions)
    for name in names:
        assert flow[f"team-a/{name}"][-1] == "Finished", (name, flow[f"team-a/{name}"])
    assert left == 0, "every run ends: the state holds nothing once everything finished"

    lines = journal(pods_dir / "journal")
    check_journal(lines)
    assert not [int(line[5]) for line in lines if running(int(line[5]))], "no pod is left running"
    events = await input_events(live)
    finishes: dict[str, set[str]] = {}
    for e in events:
        if e["type"] == "WorkloadFinished":
            finishes.setdefault(e["name"], set()).add(e["id"])
    assert {n: len(ids) for n, ids in finishes.items()} == {n: 1 for n in names}, "one finish per workload (a resend keeps its id)"
    reasons = {e["name"]: e["reason"] for e in events if e["type"] == "WorkloadFinished"}
    assert reasons == {n: "Failed" if n.startswith("fail") else "Succeeded" for n in names}
    await check_replay(live)


def _runs(launcher: LauncherProcess) -> int:
    db = launcher.state_dir / "launcher.db"
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        try:
            return int(conn.execute("SELECT count(*) FROM runs").fetchone()[0])
        except sqlite3.OperationalError:  # killed before it made its tables
            return 0
