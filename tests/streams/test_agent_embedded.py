"""The agent on the embedded SQLite log: conformance scenarios, crashes, a standby, the CLI."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from agent_harness import (
    CRASH_ARGS,
    ENGINE_MODES,
    SENTINEL,
    AgentProcess,
    assert_exactly_once,
    check_recoveries,
    decided,
    kill_points,
    replay,
    run_with_kills,
    running,
    stream_and_replay,
    wait_for_cause,
    wait_for_engine,
    write_input,
    write_jsonl,
)

from devtools.generate import generated_events
from domain.engine import Unparseable
from streams.agent.loop import Agent, AgentConfig
from streams.log import Topics
from streams.log.event_files import read_events
from streams.log.sqlite import SqliteLog
from streams.settings import DEFAULT_STEP_BYTES

pytestmark = pytest.mark.timeout(120, func_only=True)

SCENARIOS = Path(__file__).resolve().parents[1] / "conformance" / "scenarios"


def scenario_files() -> list[Path]:
    return sorted(p for p in SCENARIOS.rglob("*.yaml") if not p.name.endswith(".expected.yaml"))


@pytest.mark.parametrize("mode", ["inprocess", "process", "process-steps"])
async def test_every_conformance_scenario_through_the_agent_equals_replay(tmp_path: Path, mode: str) -> None:
    files = scenario_files()
    assert files
    # process-steps: every record its own engine step, so every read is split.
    step_bytes = 1 if mode == "process-steps" else DEFAULT_STEP_BYTES
    if mode != "inprocess":
        # Every tenth: an engine process per scenario costs a Python start (~0.3 s) each.
        files = files[::10]
    log = SqliteLog(tmp_path / "conformance.db")
    await log.start()
    ran = 0
    try:
        for n, path in enumerate(files):
            events = list(read_events(path))
            if any(isinstance(e, Unparseable) for e in events):
                continue  # a broken YAML document has no counterpart in a log of JSON records
            ran += 1
            expected = decided(events)
            topics = Topics(f"s{n}.events", f"s{n}.decisions", f"s{n}.snapshots")
            await write_input(log, topics.input, events)
            agent = Agent(log, AgentConfig(topics, standby=False, snapshot_every_events=3,
                                           engine_process=mode != "inprocess", step_bytes=step_bytes))
            task = asyncio.create_task(agent.run())
            await agent.wait_processed(len(events) - 1, timeout=30)
            agent.stop()
            await task
            actual = [r.value for r in await log.read_all(topics.decisions)]
            assert actual == expected, f"{path.name}: the agent's decisions differ from replay"
    finally:
        await log.close()
    assert ran >= len(files) * 0.9


@pytest.mark.parametrize("engine_process", [True, False], ids=["process", "inprocess"])
async def test_restart_resumes_after_events_that_decide_nothing(tmp_path: Path, engine_process: bool) -> None:
    """The last input events decide nothing: a restart must neither redo nor skip anything."""
    db = tmp_path / "quiet.db"
    topics = Topics("in", "out", "snap")
    events = list(generated_events(300, seed=5))
    quiet = {"type": "ConfigApplied", "object": {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "idle"}}}
    all_events: list[bytes | dict[str, object]] = [*events, quiet, quiet, quiet]
    expected = decided(all_events)

    for snapshot_every in (1_000_000, 1):  # without snapshots, then with one after every batch
        log = SqliteLog(db)
        await log.start()
        await log.ensure_topics(topics.specs())
        if await log.end_offset(topics.input) == 0:
            await write_input(log, topics.input, all_events)
        for _ in range(3):
            agent = Agent(
                log, AgentConfig(topics, standby=False, snapshot_every_events=snapshot_every, engine_process=engine_process)
            )
            task = asyncio.create_task(agent.run())
            await agent.wait_processed(len(all_events) - 1, timeout=30)
            agent.stop()
            await task
            actual = [r.value for r in await log.read_all(topics.decisions)]
            assert actual == expected
        await log.close()


@pytest.mark.parametrize("mode", ["process", "inprocess"])
async def test_embedded_crash_test(tmp_path: Path, mode: str) -> None:
    """20,000 events; the agent process is SIGKILLed at 6 random points and restarted."""
    n = 20_000
    events, expected_task = stream_and_replay(n, 11, tmp_path)
    db = tmp_path / "crash.db"
    url = f"sqlite:///{db}"
    topics = Topics("quotaflow.events", "quotaflow.decisions", "quotaflow.snapshots")
    log = SqliteLog(db)
    await log.start()
    await log.ensure_topics(topics.specs())
    await write_input(log, topics.input, events)

    agent = AgentProcess(url, topics, tmp_path / "agent.log", args=[*CRASH_ARGS, ENGINE_MODES[mode]])
    code = await run_with_kills(agent, log, topics.decisions, kill_points(7, 6, n), n - 1)
    assert code == 0, agent.tail()
    actual = [r.value or b"" for r in await log.read_all(topics.decisions)]
    await log.close()
    assert agent.kills == 6
    assert agent.interrupted >= 5, "at least five kills must hit an agent in the middle of its work"
    assert_exactly_once(actual, await expected_task)
    assert any(b'"reason":"MalformedEvent"' in v for v in actual), "garbage input must give Rejected decisions"
    check_recoveries(agent)
    assert (mode == "process") == any(line.get("event") == "engine process" for line in agent.lines())


async def test_killing_the_engine_process_makes_the_agent_recover(tmp_path: Path) -> None:
    """SIGKILL the agent's engine process at 5 points: each time the agent drops its writer,
    recovers from the logs with a new engine process and goes on; no duplicate, no gap."""
    import os
    import signal

    n = 12_000
    events = [*generated_events(n - 1, seed=17), SENTINEL]
    expected = decided(events)
    topics = Topics("in", "out", "snap")
    log = SqliteLog(tmp_path / "engine-kill.db")
    await log.start()
    await log.ensure_topics(topics.specs())
    await write_input(log, topics.input, events)
    config = AgentConfig(
        topics, standby=False, snapshot_every_events=2000, max_batch=300, engine_process=True, retry_backoff=0.05
    )
    agent = Agent(log, config)
    task = asyncio.create_task(agent.run())
    killed: list[int] = []
    try:
        for point in kill_points(3, 5, n):
            while agent.status.processed < point or agent.status.role != "active":
                assert not task.done(), agent.status
                await asyncio.sleep(0.005)
            pid = agent.status.engine_pid
            assert pid is not None and pid not in killed
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            assert agent.status.processed < n - 1, "the kill must land with work left"
            # Noticed even when the dead engine had already answered every batch handed to it.
            while agent.status.engine_pid == pid or agent.status.role != "active":
                assert not task.done(), agent.status
                await asyncio.sleep(0.005)
        await agent.wait_processed(n - 1, timeout=60)
    finally:
        agent.stop()
        await task
    actual = [r.value or b"" for r in await log.read_all(topics.decisions)]
    await log.close()
    assert_exactly_once(actual, expected)
    assert agent.status.recoveries == len(killed) + 1
    assert "engine process" in (agent.status.last_error or ""), agent.status.last_error
    assert not any(running(pid) for pid in killed)


async def test_batches_folded_while_a_commit_waits_share_the_next_transaction(tmp_path: Path) -> None:
    """With the engine in its own process, batches it answered while a commit was in flight are
    committed together (else each would wait behind the other: latency); still exactly once."""
    from streams.log import TransactionalWriter

    gate = asyncio.Event()

    class SlowCommits(SqliteLog):
        def writer(self, name: str, *, standby_topic: str | None = None) -> TransactionalWriter:
            writer = super().writer(name, standby_topic=standby_topic)
            commit = writer.commit

            async def gated(items):  # type: ignore[no-untyped-def]
                await gate.wait()
                return await commit(items)

            writer.commit = gated  # type: ignore[method-assign]
            return writer

    events = list(generated_events(60, seed=12))
    expected = decided(events)
    topics = Topics("in", "out", "snap")
    log = SlowCommits(tmp_path / "gated.db")
    await log.start()
    await log.ensure_topics(topics.specs())
    agent = Agent(log, AgentConfig(topics, standby=False, engine_process=True, poll_timeout=0.05))
    task = asyncio.create_task(agent.run())
    try:
        for _ in range(200):
            if agent.status.role == "active":
                break
            await asyncio.sleep(0.05)
        # Six appends, each read as a batch of its own, while the first batch's commit waits.
        for start in range(0, 60, 10):
            await write_input(log, topics.input, events[start : start + 10], start=start)
            await asyncio.sleep(0.3)
        assert agent.status.transactions == 0
        gate.set()
        await agent.wait_processed(59, timeout=30)
    finally:
        gate.set()
        agent.stop()
        await task
    actual = [r.value or b"" for r in await log.read_all(topics.decisions)]
    await log.close()
    assert actual == expected
    # Without merging: one transaction per append (6), the first commit holding up the rest.
    assert agent.status.transactions <= 3, agent.status


async def test_the_engine_process_dies_with_the_agent(tmp_path: Path) -> None:
    """SIGKILL of the agent alone (not its process group): the kernel kills its engine process."""
    import os
    import signal

    db = tmp_path / "orphan.db"
    topics = Topics("quotaflow.events", "quotaflow.decisions", "quotaflow.snapshots")
    agent = AgentProcess(f"sqlite:///{db}", topics, tmp_path / "agent.log", args=[ENGINE_MODES["process"]])
    agent.start()
    try:
        child = await wait_for_engine(agent, 1, timeout=30)
        await agent.wait_recovered(timeout=30)
        assert running(child)
        assert agent.proc is not None
        os.kill(agent.proc.pid, signal.SIGKILL)
        agent.proc.wait(10)
        for _ in range(100):
            if not running(child):
                break
            await asyncio.sleep(0.05)
        assert not running(child), "the engine process outlived its agent"
    finally:
        agent.stop()


async def test_embedded_second_agent_is_standby_until_the_first_dies(tmp_path: Path) -> None:
    n = 6_000
    events = [*generated_events(n - 1, seed=3), SENTINEL]
    events_file = tmp_path / "events.jsonl"
    write_jsonl(events_file, events)
    db = tmp_path / "pair.db"
    topics = Topics("quotaflow.events", "quotaflow.decisions", "quotaflow.snapshots")
    log = SqliteLog(db)
    await log.start()
    await log.ensure_topics(topics.specs())
    first = AgentProcess(f"sqlite:///{db}", topics, tmp_path / "first.log")
    second = AgentProcess(f"sqlite:///{db}", topics, tmp_path / "second.log")
    try:
        first.start()
        await asyncio.sleep(0.2)
        second.start()
        for _ in range(100):
            if any(line.get("event") == "active" for line in first.lines() + second.lines()):
                break
            await asyncio.sleep(0.1)
        await write_input(log, topics.input, events[: n // 2])
        await wait_for_cause(log, topics.decisions, n // 2 - 50, timeout=30, agents=[first, second])
        active = [a for a in (first, second) if any(line.get("event") == "active" for line in a.lines())]
        assert len(active) == 1, "exactly one agent may be active"
        (writer,) = active
        standby = second if writer is first else first
        assert not any(line.get("event") == "decision" for line in standby.lines())
        writer.kill()
        await write_input(log, topics.input, events[n // 2 :], start=n // 2)
        await wait_for_cause(log, topics.decisions, n - 1, timeout=30, agents=[standby])
        assert any(line.get("event") == "active" for line in standby.lines())
    finally:
        first.stop()
        second.stop()
    actual = [r.value or b"" for r in await log.read_all(topics.decisions)]
    await log.close()
    assert_exactly_once(actual, replay(events_file))


def run_cli(*args: str, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "streams.cli.main", *args], input=stdin, capture_output=True, timeout=timeout, check=False
    )


async def test_cli_commands_on_the_embedded_log(tmp_path: Path) -> None:
    from streams.cli.demo import STEPS

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    import yaml

    objects = [e["object"] for _, _, evs in STEPS for e in evs if e["type"] == "ConfigApplied"]
    workloads = [e["workload"] for _, _, evs in STEPS for e in evs if e["type"] == "WorkloadSubmitted"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump_all(objects))
    (tmp_path / "workloads.yaml").write_text(yaml.safe_dump_all(workloads))

    applied = run_cli("apply", "-f", str(tmp_path / "config.yaml"), "--broker", url)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.decode().splitlines()[:2] == [
        "resourceflavor/default-flavor applied (offset 0)",
        "clusterqueue/team-a-cq applied (offset 1)",
    ]
    submitted = run_cli("submit", "-f", "-", "--broker", url, stdin=(tmp_path / "workloads.yaml").read_bytes())
    assert submitted.returncode == 0, submitted.stderr
    assert "workload/team-a/big submitted" in submitted.stdout.decode()
    assert run_cli("finish", "research/job-1", "--broker", url).returncode == 0
    deleted = run_cli("delete", "workload", "big", "-n", "team-a", "--broker", url)
    assert deleted.stdout.decode().strip().startswith("workload/team-a/big deleted")
    assert run_cli("delete", "clusterqueue", "team-d-cq", "--broker", url).returncode == 0
    bad = run_cli("submit", "-f", str(tmp_path / "config.yaml"), "--broker", url)
    assert bad.returncode == 2 and b"is not a Workload" in bad.stderr

    agent = AgentProcess(url, Topics("quotaflow.events", "quotaflow.decisions", "quotaflow.snapshots"), tmp_path / "agent.log")
    agent.start()
    try:
        log = SqliteLog(tmp_path / "cli.db")
        await log.start()
        end = await log.end_offset("quotaflow.events")
        await wait_for_cause(log, "quotaflow.decisions", end - 2, timeout=30, agents=[agent])  # the last decides nothing
        await log.close()
    finally:
        assert agent.stop() == 0

    watched = run_cli("watch", "--json", "--no-follow", "--broker", url)
    assert watched.returncode == 0, watched.stderr
    decisions = [json.loads(line) for line in watched.stdout.splitlines()]
    events_file = tmp_path / "events.jsonl"
    log = SqliteLog(tmp_path / "cli.db")
    await log.start()
    write_jsonl(events_file, [r.value or b"" for r in await log.read_all("quotaflow.events")])
    await log.close()
    assert decisions == [json.loads(line) for line in replay(events_file)]
    admitted = {d["workload"] for d in decisions if d["type"] == "Admitted"}
    assert {"team-a/big", "research/job-2", "research/job-3", "team-a/too-many"} <= admitted

    human = run_cli("watch", "--no-follow", "--broker", url)
    assert human.returncode == 0
    assert "Admitted" in human.stdout.decode() and "research/job-3" in human.stdout.decode()


def test_demo_runs_out_of_the_box(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "streams.cli.main", "demo"], cwd=tmp_path, capture_output=True, timeout=60, check=False
    )
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode() + out
    assert "Quota usage per ClusterQueue and flavor" in out
    for line in ("team-a/big", "team-a/too-many", "team-c/eleventh-cpu", "research/job-3"):
        assert line in out
    # job-3 waits behind job-2 (StrictFIFO) and is admitted once job-1 finishes
    assert "Queued" in out
    assert list(tmp_path.iterdir()) == [], "the demo must clean up after itself"


@pytest.mark.parametrize("engine_process", [True, False], ids=["process", "inprocess"])
async def test_an_unusable_snapshot_falls_back_to_folding_from_zero(tmp_path: Path, engine_process: bool) -> None:
    from streams.log import Message

    topics = Topics("in", "out", "snap")
    events = list(generated_events(400, seed=9))
    expected = decided(events)
    log = SqliteLog(tmp_path / "bad-snapshot.db")
    await log.start()
    await log.ensure_topics(topics.specs())
    await write_input(log, topics.input, events[:200])
    agent = Agent(log, AgentConfig(topics, standby=False, snapshot_every_events=50, engine_process=engine_process))
    task = asyncio.create_task(agent.run())
    await agent.wait_processed(199, timeout=30)
    agent.stop()
    await task
    # A snapshot this version cannot read (say, from a future format), newest in the log:
    headers = (("qf_snapshot_offset", b"199"), ("qf_chunk", b"0"), ("qf_chunks", b"1"), ("qf_encoding", b"zlib+msgspec"))
    await log.append(topics.snapshots, [Message(b"not a snapshot", b"engine/0", headers)])
    await write_input(log, topics.input, events[200:], start=200)
    agent = Agent(log, AgentConfig(topics, standby=False, engine_process=engine_process))
    task = asyncio.create_task(agent.run())
    await agent.wait_processed(len(events) - 1, timeout=30)
    agent.stop()
    await task
    assert agent.status.last_recovery["snapshot_offset"] is None
    assert agent.status.last_recovery["replay_from"] == 0
    assert [r.value for r in await log.read_all(topics.decisions)] == expected
    await log.close()


@pytest.mark.parametrize("level", ["debug", "info"])
async def test_snapshot_by_time_and_json_log_lines(tmp_path: Path, level: str) -> None:
    """A snapshot is taken after `snapshot_every_seconds` even when few events came; the agent
    logs one JSON line per input event and per decision (both debug), with offsets; at info it
    logs its lifecycle and snapshots, not every event (the decision log already has them)."""
    import io
    import logging

    import structlog

    from streams.agent import structured_logs as logs

    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    buffer = io.StringIO()
    logs.configure(level, stream=buffer)
    try:
        topics = Topics("in", "out", "snap")
        events = list(generated_events(30, seed=4))
        log = SqliteLog(tmp_path / "timed.db")
        await log.start()
        await log.ensure_topics(topics.specs())
        agent = Agent(log, AgentConfig(topics, standby=False, snapshot_every_events=1_000_000, snapshot_every_seconds=0.3))
        task = asyncio.create_task(agent.run())
        await write_input(log, topics.input, events)
        await agent.wait_processed(len(events) - 1, timeout=30)
        for _ in range(50):
            if agent.status.last_snapshot_offset == len(events) - 1:
                break
            await asyncio.sleep(0.1)
        agent.stop()
        await task
        assert agent.status.last_snapshot_offset == len(events) - 1, agent.status
        snapshot = await log.read_last(topics.snapshots, 1)
        assert snapshot[0].header("qf_snapshot_offset") == str(len(events) - 1).encode()
        await log.close()
    finally:
        structlog.reset_defaults()
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    lines = [json.loads(line) for line in buffer.getvalue().splitlines()]
    inputs = [line for line in lines if line["event"] == "input event"]
    decisions = [line for line in lines if line["event"] == "decision"]
    assert [line["event"] for line in lines if line["event"] in ("recovered", "snapshot")][:2] == ["recovered", "snapshot"]
    if level == "info":
        assert not inputs and not decisions
        return
    assert [line["offset"] for line in inputs] == list(range(len(events)))
    assert all(line["level"] == "debug" for line in inputs)
    assert decisions and all(line["level"] == "debug" for line in decisions)
    assert [line["offset"] for line in decisions] == list(range(len(decisions)))
    assert {"cause_offset", "cause_index", "type", "workload", "timestamp"} <= set(decisions[0])
