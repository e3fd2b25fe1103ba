"""The agent on a real Kafka broker: the seed scenario, garbage input, SIGKILLs, a broker
restart, and an active/standby pair. No mocks: every test talks to a real broker."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import msgspec
import pytest
from agent_harness import (
    CRASH_ARGS,
    ENGINE_MODES,
    AgentProcess,
    assert_exactly_once,
    check_recoveries,
    engine_pids,
    kill_points,
    replay,
    run_with_kills,
    running,
    stream_and_replay,
    wait_for_cause,
    wait_for_engine,
    write_input,
)
from aiokafka import AIOKafkaProducer
from kafka_fixtures import kafka_required

from streams.agent.loop import Agent, AgentConfig
from streams.client import Client
from streams.log import Topics
from streams.log.event_files import read_events
from streams.log.kafka import ENV_INSTANCE_ID, KafkaLog
from streams.settings import Settings

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(150, func_only=True)]

SEED = Path(__file__).resolve().parents[1] / "conformance" / "scenarios" / "borrowing_lending" / "seed_borrowing_cohort_lends_idle_quota.yaml"


@pytest.fixture
def topics(kafka_topic_factory: Callable[[str], str]) -> Topics:
    return Topics(kafka_topic_factory("events"), kafka_topic_factory("decisions"), kafka_topic_factory("snapshots"))


@pytest.fixture
async def kafka_log(kafka_bootstrap: str, topics: Topics) -> AsyncIterator[KafkaLog]:
    log = KafkaLog(kafka_bootstrap)
    await log.ensure_topics(topics.specs(), single_partition=[topics.input, topics.decisions])
    yield log
    await log.close()


def settings_for(bootstrap: str, topics: Topics) -> Settings:
    return Settings(
        broker_url=f"kafka://{bootstrap}",
        kafka_bootstrap=bootstrap,
        input_topic=topics.input,
        decisions_topic=topics.decisions,
        snapshots_topic=topics.snapshots,
    )


async def run_agent_until(log: KafkaLog, topics: Topics, last_offset: int, **config: object) -> Agent:
    agent = Agent(log, AgentConfig(topics, **config))  # type: ignore[arg-type]
    task = asyncio.create_task(agent.run())
    progress = asyncio.ensure_future(agent.wait_processed(last_offset, timeout=60))
    await asyncio.wait({task, progress}, return_when=asyncio.FIRST_COMPLETED)
    agent.stop()
    await task
    progress.result()
    return agent


@pytest.mark.parametrize("engine_process", [True, False], ids=["process", "inprocess"])
async def test_seed_scenario_through_kafka_equals_replay(
    kafka_bootstrap: str, kafka_log: KafkaLog, topics: Topics, engine_process: bool
) -> None:
    events = list(read_events(SEED))
    async with Client(settings=settings_for(kafka_bootstrap, topics)) as qf:
        offsets = await qf.publish_many(events)  # type: ignore[arg-type]
        assert offsets == list(range(len(events)))
        await run_agent_until(kafka_log, topics, offsets[-1], snapshot_every_events=2, engine_process=engine_process)
        from_client = [d async for d in qf.decisions(follow=False)]
    decisions = [r.value for r in await kafka_log.read_all(topics.decisions)]
    expected = replay(SEED)
    assert decisions == expected
    # Every configuration event's outcome (Applied), then the workloads' decisions.
    config_events = [e for e in events if e["type"].startswith("Config")]
    assert [type(d).__name__ for d in from_client[: len(config_events)]] == ["Applied"] * len(config_events)
    assert [d.workload for d in from_client[len(config_events):]] == ["team-a/big", "team-a/one-more", "team-a/too-many"]
    records = await kafka_log.read_all(topics.decisions)
    admitted = records[len(config_events)]
    assert admitted.header("ce_type") == b"dev.quotaflow.decision.Admitted"
    assert admitted.header("ce_id") == b"4.0"
    assert admitted.key == b"team-a/big"
    inputs = await kafka_log.read_all(topics.input)
    assert inputs[1].key == b"ClusterQueue/team-a-cq"
    assert inputs[1].header("ce_specversion") == b"1.0"
    assert inputs[1].header("ce_type") == b"dev.quotaflow.event.ConfigApplied"


@pytest.mark.parametrize("engine_process", [True, False], ids=["process", "inprocess"])
async def test_garbage_and_invalid_json_are_rejected_and_the_agent_goes_on(
    kafka_bootstrap: str, kafka_log: KafkaLog, topics: Topics, engine_process: bool
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        for value in (b"\x00\xff\xfe\x80 binary", b'{"type": "WorkloadSubmitted", "workload": {', b"[]", None, b""):
            # a null value (a tombstone) needs a key
            await producer.send_and_wait(topics.input, key=b"k" if value is None else None, value=value, partition=0)
    finally:
        await producer.stop()
    async with Client(settings=settings_for(kafka_bootstrap, topics)) as qf:
        await qf.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "f"}})
        last = await qf.finish("ns", "never-submitted")
    await run_agent_until(kafka_log, topics, last, engine_process=engine_process)
    decisions = [r.value or b"" for r in await kafka_log.read_all(topics.decisions)]
    causes = [d.split(b'"cause":')[1].split(b"}")[0] for d in decisions]
    # The valid ResourceFlavor (offset 5) is Applied; every other record is Rejected.
    assert [b'"type":"Applied"' in d for d in decisions] == [i == 5 for i in range(len(decisions))]
    assert all(b'"type":"Rejected"' in d for i, d in enumerate(decisions) if i != 5)
    assert sum(b'"reason":"MalformedEvent"' in d for d in decisions) == 5
    assert causes[:5] == [b'{"offset":%d,"index":0' % i for i in range(5)]
    assert b'"offset":6' in causes[-1], "the valid event after the garbage was processed"


@pytest.mark.parametrize("mode", ["process", "inprocess"])
async def test_kafka_crash_test(kafka_bootstrap: str, kafka_log: KafkaLog, topics: Topics, tmp_path: Path, mode: str) -> None:
    """20,000 events; the agent process is SIGKILLed at 6 random points and restarted; the
    decision log read read_committed has no duplicate and no gap and equals replay."""
    n = 20_000
    events, expected_task = stream_and_replay(n, 21, tmp_path)
    await write_input(kafka_log, topics.input, events)
    agent = AgentProcess(
        f"kafka://{kafka_bootstrap}",
        topics,
        tmp_path / "agent.log",
        args=[*CRASH_ARGS, ENGINE_MODES[mode]],
        env={ENV_INSTANCE_ID: f"crash-{uuid.uuid4().hex[:6]}"},  # static membership: restarts rejoin at once
    )
    # Kill points in the first three quarters: a kill is only noticed when the harness next reads
    # the decisions, and near the end a fast agent may have decided the rest by then.
    code = await run_with_kills(agent, kafka_log, topics.decisions, kill_points(5, 6, n * 3 // 4), n - 1)
    assert code == 0, agent.tail()
    actual = [r.value or b"" for r in await kafka_log.read_all(topics.decisions)]
    assert agent.kills == 6
    assert agent.interrupted >= 5, "at least five kills must hit an agent in the middle of its work"
    assert_exactly_once(actual, await expected_task)
    assert any(b'"reason":"MalformedEvent"' in v for v in actual)
    check_recoveries(agent)
    lines = agent.lines()
    decision_line = next(line for line in lines if line.get("event") == "decision")
    assert {"cause_offset", "cause_index", "offset", "type"} <= set(decision_line)
    assert (mode == "process") == bool(engine_pids(agent))
    assert not any(running(pid) for pid in engine_pids(agent)), "an engine process outlived its agent"


async def wait_for_recoveries(agent: AgentProcess, count: int, timeout: float) -> None:
    """Until the agent has logged `count` recoveries (one per engine process that finished
    recovering)."""
    deadline = time.monotonic() + timeout
    while sum(line.get("event") == "recovered" for line in agent.lines()) < count:
        assert agent.alive, agent.tail()
        assert time.monotonic() < deadline, f"fewer than {count} recoveries in {timeout} s\n{agent.tail()}"
        await asyncio.sleep(0.1)


async def test_kafka_killing_the_engine_process_makes_the_agent_recover(
    kafka_bootstrap: str, kafka_log: KafkaLog, topics: Topics, tmp_path: Path
) -> None:
    """SIGKILL the agent's engine process (not the agent) at 4 points: the agent closes its
    writer, becomes active again, recovers from the logs and goes on; it never exits, and the
    decision log has no duplicate and no gap and equals replay."""
    import signal

    n = 12_000
    events, expected_task = stream_and_replay(n, 29, tmp_path)
    await write_input(kafka_log, topics.input, events)
    agent = AgentProcess(
        f"kafka://{kafka_bootstrap}",
        topics,
        tmp_path / "agent.log",
        args=[*CRASH_ARGS, ENGINE_MODES["process"]],
        env={ENV_INSTANCE_ID: f"engine-kill-{uuid.uuid4().hex[:6]}"},
    )
    points = kill_points(9, 4, n)
    try:
        agent.start()
        for k, point in enumerate(points, start=1):
            pid = await wait_for_engine(agent, k, timeout=60)
            # Kill each engine only once it has recovered: decisions may already be past the
            # next point when it starts (its predecessor got there), and an engine killed while
            # it recovers never logs its recovery, which the count below relies on.
            await wait_for_recoveries(agent, k, timeout=60)
            await wait_for_cause(kafka_log, topics.decisions, point, timeout=60, agents=[agent])
            os.kill(pid, signal.SIGKILL)
            # The next engine process: the death is noticed even if the dead one had finished.
            await wait_for_engine(agent, k + 1, timeout=60)
        await wait_for_recoveries(agent, len(points) + 1, timeout=60)  # may come after the last decision
        await wait_for_cause(kafka_log, topics.decisions, n - 1, timeout=90, agents=[agent])
        assert agent.alive, agent.tail()
        assert len(engine_pids(agent)) == len(points) + 1
    finally:
        code = agent.stop()
    assert code == 0, agent.tail()
    assert agent.starts == 1
    actual = [r.value or b"" for r in await kafka_log.read_all(topics.decisions)]
    assert_exactly_once(actual, await expected_task)
    recoveries = [line for line in agent.lines() if line.get("event") == "recovered"]
    assert len(recoveries) == len(points) + 1, agent.tail()
    assert sum("engine process" in str(line.get("error", "")) for line in agent.lines()) >= len(points)


@pytest.fixture
def own_broker() -> Iterator[dict[str, object]]:
    """A broker of this test's own, which it may stop and restart."""
    from devtools import local_broker

    if not (shutil.which("java") and shutil.which("mvn")):
        if kafka_required():
            pytest.fail("QUOTAFLOW_REQUIRE_KAFKA=1 but java/mvn are missing for the broker-restart test")
        pytest.skip("the broker-restart test needs java and mvn for a broker of its own")
    broker = local_broker.start_broker(owner_pid=os.getpid())
    state = {"broker": broker}
    yield state
    local_broker.stop_broker(state["broker"])


async def test_kafka_broker_stopped_and_restarted_mid_run(own_broker: dict[str, object], tmp_path: Path) -> None:
    from broker_control import restart, stop_keeping_data

    broker = own_broker["broker"]
    bootstrap = broker.bootstrap  # type: ignore[attr-defined]
    topics = Topics("restart.events", "restart.decisions", "restart.snapshots")
    n = 12_000
    events, expected_task = stream_and_replay(n, 33, tmp_path)
    log = KafkaLog(bootstrap)
    await log.ensure_topics(topics.specs(), single_partition=[topics.input, topics.decisions])
    await write_input(log, topics.input, events)
    await log.close()
    agent = AgentProcess(
        f"kafka://{bootstrap}", topics, tmp_path / "agent.log", args=["--snapshot-every", "2500", "--max-batch", "300"]
    )
    restarts = 0
    try:
        agent.start()
        log = KafkaLog(bootstrap)
        await wait_for_cause(log, topics.decisions, n // 3, timeout=60, agents=[agent])
        await log.close()
        await asyncio.to_thread(stop_keeping_data, broker)  # type: ignore[arg-type]
        await asyncio.sleep(2.0)
        broker = await asyncio.to_thread(restart, broker)  # type: ignore[arg-type]
        own_broker["broker"] = broker
        log = KafkaLog(bootstrap)
        deadline = asyncio.get_running_loop().time() + 120
        while True:
            # A supervisor's job (Kubernetes restarts a failed pod): restart the agent if it exited.
            if not agent.alive:
                restarts += 1
                agent.start()
            try:
                await wait_for_cause(log, topics.decisions, n - 1, timeout=2, agents=[agent])
                break
            except AssertionError:
                if asyncio.get_running_loop().time() > deadline:
                    raise
    finally:
        code = agent.stop()
    actual = [r.value or b"" for r in await log.read_all(topics.decisions)]
    await log.close()
    assert code == 0, agent.tail()
    assert_exactly_once(actual, await expected_task)
    assert restarts == 0, f"the agent exited {restarts} time(s) while the broker was away:\n{agent.tail()}"


async def test_kafka_two_agents_only_one_writes_and_the_standby_takes_over(
    kafka_bootstrap: str, kafka_log: KafkaLog, topics: Topics, tmp_path: Path
) -> None:
    n = 10_000
    events, expected_task = stream_and_replay(n, 44, tmp_path)
    url = f"kafka://{kafka_bootstrap}"
    args = ["--snapshot-every", "2000", "--max-batch", "500"]
    first = AgentProcess(url, topics, tmp_path / "first.log", args=args, env={ENV_INSTANCE_ID: "pod-a"})
    second = AgentProcess(url, topics, tmp_path / "second.log", args=args, env={ENV_INSTANCE_ID: "pod-b"})
    half = n // 2

    def active(a: AgentProcess) -> bool:
        return any(line.get("event") == "active" for line in a.lines())

    try:
        first.start()
        second.start()  # at once
        await write_input(kafka_log, topics.input, events[:half])
        await wait_for_cause(kafka_log, topics.decisions, half - 100, timeout=60, agents=[first, second])
        await asyncio.sleep(1.0)
        writers = [a for a in (first, second) if active(a)]
        assert len(writers) == 1, "exactly one of two agents may become active"
        (writer,) = writers
        standby = second if writer is first else first
        assert standby.alive and not any(line.get("event") == "decision" for line in standby.lines())
        writer.kill()
        await write_input(kafka_log, topics.input, events[half:], start=half)
        await wait_for_cause(kafka_log, topics.decisions, n - 1, timeout=60, agents=[standby])
        assert active(standby)
    finally:
        first.stop()
        second.stop()
    actual = [r.value or b"" for r in await kafka_log.read_all(topics.decisions)]
    assert_exactly_once(actual, await expected_task)



@pytest.mark.timeout(300, func_only=True)
async def test_kafka_a_paused_active_agent_that_resumes_stays_standby(
    kafka_bootstrap: str, kafka_log: KafkaLog, topics: Topics, tmp_path: Path
) -> None:
    """SIGSTOP the active agent: the standby takes over after the session timeout. SIGCONT it:
    the agent that took over keeps the role, and the resumed one stays standby."""
    n = 6_000
    events, expected_task = stream_and_replay(n, 45, tmp_path)
    url = f"kafka://{kafka_bootstrap}"
    # The test writes the input log itself, at dense offsets, around pauses longer than the
    # idle-log Tick interval on a busy machine: an agent's Tick would take an offset.
    args = ["--snapshot-every", "2000", "--max-batch", "500", "--tick-interval", "0"]
    first = AgentProcess(url, topics, tmp_path / "first.log", args=args, env={ENV_INSTANCE_ID: "pod-a"})
    second = AgentProcess(url, topics, tmp_path / "second.log", args=args, env={ENV_INSTANCE_ID: "pod-b"})
    third = n // 3

    def times_active(a: AgentProcess) -> int:
        return sum(line.get("event") == "active" for line in a.lines())

    try:
        first.start()
        second.start()
        await write_input(kafka_log, topics.input, events[:third])
        await wait_for_cause(kafka_log, topics.decisions, third - 1, timeout=60, agents=[first, second])
        (paused,) = [a for a in (first, second) if times_active(a)]
        taker = second if paused is first else first
        assert paused.proc is not None
        os.killpg(paused.proc.pid, signal.SIGSTOP)
        try:
            await write_input(kafka_log, topics.input, events[third : 2 * third], start=third)
            await wait_for_cause(kafka_log, topics.decisions, 2 * third - 1, timeout=60, agents=[taker])
            assert times_active(taker) == 1
        finally:
            os.killpg(paused.proc.pid, signal.SIGCONT)
        # The resumed agent rejoins the group within a few heartbeats; give it the time it took
        # to take the role back before the fix (about 1 s), several times over.
        await asyncio.sleep(8.0)
        await write_input(kafka_log, topics.input, events[2 * third :], start=2 * third)
        await wait_for_cause(kafka_log, topics.decisions, n - 1, timeout=60, agents=[taker])
        assert times_active(taker) == 1, taker.tail()
        assert times_active(paused) == 1, paused.tail()
        assert not any("moved to another member" in str(line.get("event")) for line in taker.lines()), taker.tail()
    finally:
        first.stop()
        second.stop()
    actual = [r.value or b"" for r in await kafka_log.read_all(topics.decisions)]
    assert_exactly_once(actual, await expected_task)


@pytest.mark.timeout(300, func_only=True)
async def test_client_publishes_through_a_broker_outage_exactly_once(own_broker: dict[str, object]) -> None:
    """The broker stops for 40 s, with sends in flight, and comes back with its data: four
    producers' sends wait and land, each event exactly once and each producer's in its order."""
    from broker_control import restart, stop_keeping_data

    broker = own_broker["broker"]
    bootstrap = broker.bootstrap  # type: ignore[attr-defined]
    settings = Settings(
        broker_url=f"kafka://{bootstrap}",
        input_topic="outage.events",
        decisions_topic="outage.decisions",
        snapshots_topic="outage.snapshots",
    )
    # Half carry an id and half do not: the retry must not lean on the engine's duplicate check.
    events = [
        {"type": "WorkloadFinished", "namespace": "ns", "name": f"wl-{i}", **({"id": f"outage-{i}"} if i % 2 else {})}
        for i in range(240)
    ]
    producers = 4
    offsets: dict[int, int] = {}
    async with Client(settings=settings) as qf:

        async def produce(k: int) -> None:
            for i in range(k, len(events), producers):
                offsets[i] = await qf.publish(events[i])
                await asyncio.sleep(0.05)

        sending = [asyncio.create_task(produce(k)) for k in range(producers)]
        await asyncio.sleep(1.0)
        await asyncio.to_thread(stop_keeping_data, broker)  # type: ignore[arg-type]
        await asyncio.sleep(40)
        assert not any(task.done() for task in sending), "a send returned without a broker"
        broker = await asyncio.to_thread(restart, broker)  # type: ignore[arg-type]
        own_broker["broker"] = broker
        await asyncio.wait_for(asyncio.gather(*sending), 180)
    log = KafkaLog(bootstrap)
    try:
        stored = [msgspec.json.decode(r.value or b"null") for r in await log.read_all(settings.input_topic)]
    finally:
        await log.close()
    names = [e["name"] for e in stored]
    assert sorted(names) == sorted(e["name"] for e in events), "an event lost or doubled"
    for k in range(producers):
        mine = [n for n in names if int(n.split("-")[1]) % producers == k]
        assert mine == [f"wl-{i}" for i in range(k, len(events), producers)], "a producer's events out of order"
    assert sorted(offsets.values()) == list(range(len(events)))
    assert all(stored[offsets[i]] == events[i] for i in offsets)
