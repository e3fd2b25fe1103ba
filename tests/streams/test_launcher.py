"""`quotaflow launch` against a live agent, on the embedded log and on Kafka: a workload runs, is
preempted by a higher-priority one, is stopped and released, runs again and finishes; a failing
workload and one that cannot run finish as Failed, with Kueue's reasons."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

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

pytestmark = pytest.mark.timeout(240)


async def wait_for_starts(path: Path, workload: str, count: int, launcher: LauncherProcess, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while sum(1 for line in journal(path) if line[1] == workload) < count:
        assert time.monotonic() < deadline, f"{workload} did not start {count} pods\n{launcher.tail()}"
        await asyncio.sleep(0.1)


async def test_a_preempted_workload_is_stopped_released_readmitted_and_finished(logs: Live) -> None:
    live = logs
    with launched(live, CLUSTER_QUEUE, grace=2.0) as (launcher, pods_journal):
        log_file = pods_journal / "journal"
        # Stopped by preemption long before its first run would end; its second run is short.
        low = job("low", pods_journal, seconds="30,0.3", pods=2)
        assert live.cli("submit", "-f", str(live.write("low.yaml", low)), "--no-wait").returncode == 0
        await wait_for_starts(log_file, "team-a/low", 2, launcher)
        # Once preempted it runs again from the start: make the second run short.
        high = job("high", pods_journal, seconds=0.3, pods=2, priority=10)
        assert live.cli("submit", "-f", str(live.write("high.yaml", high)), "--no-wait").returncode == 0
        await wait_for_starts(log_file, "team-a/high", 2, launcher)
        failing = job("fails", pods_journal, seconds=0.1, exit_code=3)
        no_command = job("no-command", pods_journal, seconds=0, command=False)
        assert live.cli("submit", "-f", str(live.write("more.yaml", failing, no_command)), "--no-wait").returncode == 0
        decisions = await wait_until_finished(live, ["low", "high", "fails", "no-command"], 90, launcher)

    flow = by_workload(decisions)
    assert flow["team-a/low"][:3] == ["Admitted", "Preempted", "QuotaReleased"], flow["team-a/low"]
    assert flow["team-a/low"][-2:] == ["Admitted", "Finished"], flow["team-a/low"]
    assert flow["team-a/high"][-2:] == ["Admitted", "Finished"], flow["team-a/high"]
    assert not [d for d in decisions if d["type"] == "Rejected"], [d for d in decisions if d["type"] == "Rejected"]
    check_released(decisions)

    events = await input_events(live)
    released = [e for e in events if e["type"] == "WorkloadReleased"]
    assert [e["name"] for e in released] == ["low"]
    assert released[0]["id"].startswith("quotaflow-launch/release/team-a/low/")
    # Each admission's pods, once all started, are reported ready (waitForPodsReady), once.
    ready = [e for e in events if e["type"] == "WorkloadPodsReady"]
    assert len({e["id"] for e in ready if e["name"] == "low"}) == 2  # its two admissions
    assert len([e for e in ready if e["name"] == "high"]) == 1
    assert all(e["id"].startswith(f"quotaflow-launch/pods-ready/team-a/{e['name']}/") for e in ready)
    finishes = {e["name"]: e for e in events if e["type"] == "WorkloadFinished"}
    for name in ("low", "high"):
        assert (finishes[name]["reason"], finishes[name]["message"]) == ("Succeeded", "Pods succeeded: 2/2.")
    assert finishes["fails"]["reason"] == "Failed"
    assert finishes["fails"]["message"] == "Pods succeeded: 0/1. Pod main-0: container c exited with code 3."
    assert finishes["no-command"]["reason"] == "Failed"
    assert "container c has no command" in finishes["no-command"]["message"]

    lines = journal(log_file)
    check_journal(lines)
    low_admissions = [admission for _, w, admission, *_ in lines if w == "team-a/low"]
    assert len(set(low_admissions)) == 2, "low ran under its first admission and again under its second"
    assert all(line[4] == "default-flavor" for line in lines), "the flavor is in the pods' environment"
    stdout = live.tmp / "launch-state" / "logs" / "team-a" / "high"
    assert [p.read_text() for p in sorted(stdout.glob("*/main-0/c.stdout"))] == ["hello from main-0\n"]
    await check_replay(live)


async def test_a_restarted_launcher_adopts_its_pods_finishes_what_ended_and_stops_what_was_preempted(logs: Live) -> None:
    """While the launcher is down (SIGKILL) one workload's pod ends and another is preempted: the
    next start reports the first as finished from the outcome its pod left, and stops the
    second's pod, which it did not start in this life, before it releases it."""
    live = logs
    cq = {**CLUSTER_QUEUE, "spec": {**CLUSTER_QUEUE["spec"]}}
    cq["spec"]["resourceGroups"] = [
        {"coveredResources": ["cpu"], "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": 3}]}]}
    ]
    with launched(live, cq, grace=5.0) as (launcher, pods_journal):
        log_file = pods_journal / "journal"
        short = job("short", pods_journal, seconds=1.0, priority=5)
        low = job("low", pods_journal, seconds="60,0.2")
        assert live.cli("submit", "-f", str(live.write("first.yaml", short, low)), "--no-wait").returncode == 0
        await wait_for_starts(log_file, "team-a/short", 1, launcher)
        await wait_for_starts(log_file, "team-a/low", 1, launcher)
        launcher.kill()
        first_low = int(next(line[5] for line in journal(log_file) if line[1] == "team-a/low"))
        await asyncio.sleep(1.5)  # short's pod ends, with nobody watching
        high = job("high", pods_journal, seconds=0.3, pods=2, priority=10)
        assert live.cli("submit", "-f", str(live.write("high.yaml", high)), "--no-wait").returncode == 0
        assert running(first_low), "the preempted pod runs on while the launcher is down"
        launcher.start()
        decisions = await wait_until_finished(live, ["short", "low", "high"], 90, launcher)

    flow = by_workload(decisions)
    assert flow["team-a/short"] == ["Admitted", "Finished"], flow["team-a/short"]
    assert flow["team-a/low"][:3] == ["Admitted", "Preempted", "QuotaReleased"], flow["team-a/low"]
    assert flow["team-a/low"][-2:] == ["Admitted", "Finished"]
    assert not running(first_low)
    events = await input_events(live)
    finishes = {e["name"]: e["reason"] for e in events if e["type"] == "WorkloadFinished"}
    assert finishes == {"short": "Succeeded", "low": "Succeeded", "high": "Succeeded"}
    assert [e["name"] for e in events if e["type"] == "WorkloadReleased"] == ["low"]
    check_journal(journal(log_file))
    await check_replay(live)


async def test_under_immediate_release_the_launcher_stops_the_preempted_workload_and_sends_no_release(logs: Live) -> None:
    """With `evictionRelease: Immediate` the engine gives a preempted workload's quota back in the
    same step (`QuotaReleased` with the `Preempted`): the launcher still stops its pods, but a
    release of its own would be refused (the workload is no longer evicted), so it sends none."""
    live = logs
    configuration = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration", "quotaflow": {"evictionRelease": "Immediate"}}
    with launched(live, CLUSTER_QUEUE, configuration, grace=2.0) as (launcher, pods_journal):
        log_file = pods_journal / "journal"
        low = job("low", pods_journal, seconds="60,0.2", pods=2)
        assert live.cli("submit", "-f", str(live.write("low.yaml", low)), "--no-wait").returncode == 0
        await wait_for_starts(log_file, "team-a/low", 2, launcher)
        first_low = [int(line[5]) for line in journal(log_file) if line[1] == "team-a/low"]
        high = job("high", pods_journal, seconds=0.5, pods=2, priority=10)
        assert live.cli("submit", "-f", str(live.write("high.yaml", high)), "--no-wait").returncode == 0
        decisions = await wait_until_finished(live, ["low", "high"], 90, launcher)

    flow = by_workload(decisions)
    assert flow["team-a/low"][:3] == ["Admitted", "Preempted", "QuotaReleased"], flow["team-a/low"]
    assert flow["team-a/low"][-2:] == ["Admitted", "Finished"]
    assert not [d for d in decisions if d["type"] == "Rejected"], [d for d in decisions if d["type"] == "Rejected"]
    events = await input_events(live)
    assert not [e for e in events if e["type"] == "WorkloadReleased"]
    assert not [pid for pid in first_low if running(pid)], "the preempted pods were stopped"
    check_journal(journal(log_file))
    await check_replay(live)


def test_a_state_directory_of_another_log_is_refused(tmp_path: Path) -> None:
    import subprocess
    import sys

    from streams.launcher.state import LauncherState

    state = LauncherState(tmp_path / "state" / "launcher.db")
    state.bind("sqlite:///elsewhere.db quotaflow.events quotaflow.decisions")
    state.close()
    result = subprocess.run(
        [sys.executable, "-m", "streams.cli.main", "launch", "--broker", f"sqlite:///{tmp_path / 'here.db'}", "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "belongs to another log (sqlite:///elsewhere.db" in result.stderr
