"""Projections on real logs: live (tailing while the agent writes) equals a rebuild from offset 0,
time travel, the audit catching a tampered decision, explain, and the HTTP API with /metrics on
a real server in front of a real Kafka broker. No mocks."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest
from projection_harness import Generator, check_against_engine
from prometheus_client.parser import text_string_to_metric_families
from test_projection_fold import scenario_borrowing, scenario_positions

from domain.decisions import encode
from domain.engine import Engine
from domain.snapshot import dump
from projections.audit import audit
from projections.explain import engine_at, explain
from projections.fold import Projection
from projections.follower import Follower, rebuild
from projections.server import ProjectionServer
from streams.agent.loop import Agent, AgentConfig
from streams.log import EventLog, Message, Topics
from streams.log.envelope import event_message
from streams.log.kafka import KafkaLog
from streams.log.sqlite import SqliteLog

pytestmark = pytest.mark.timeout(120, func_only=True)

SENTINEL = b"end of test: not JSON"  # always Rejected, so its decision marks the end


def messages(events: list[bytes]) -> list[Message]:
    out = []
    for e in events:
        try:
            parsed = msgspec.json.decode(e)
        except msgspec.DecodeError:
            parsed = None
        out.append(event_message(e) if isinstance(parsed, dict) else Message(e))
    return out


@pytest.fixture
def sqlite_log(tmp_path: Path) -> tuple[EventLog, Topics]:
    return SqliteLog(tmp_path / "log.db"), Topics("quotaflow.events", "quotaflow.decisions", "quotaflow.snapshots")


@pytest.fixture
def kafka_topics(kafka_topic_factory: Callable[[str], str]) -> Topics:
    return Topics(kafka_topic_factory("events"), kafka_topic_factory("decisions"), kafka_topic_factory("snapshots"))


@pytest.fixture
async def kafka_log(kafka_bootstrap: str) -> AsyncIterator[KafkaLog]:
    log = KafkaLog(kafka_bootstrap)
    yield log
    await log.close()


async def start_agent(log: EventLog, topics: Topics, **config: Any) -> tuple[Agent, asyncio.Task[None]]:
    agent = Agent(log, AgentConfig(topics, **config))
    return agent, asyncio.create_task(agent.run())


async def stop_agent(agent: Agent, task: asyncio.Task[None]) -> None:
    agent.stop()
    await asyncio.wait_for(task, 30)


async def live_equals_rebuild(log: EventLog, topics: Topics, events: list[bytes], seed: int) -> Projection:
    """Producer, agent and a live projection run together; then a rebuild from 0 must equal it."""
    rng = random.Random(seed)
    await log.start()
    await log.ensure_topics(topics.specs(), single_partition=[topics.input, topics.decisions])
    live = Projection()
    follower = Follower(log, topics, live, batch=rng.choice((7, 50, 500)))
    stop = asyncio.Event()
    tail = asyncio.create_task(follower.run(stop, poll=0.05, snapshot_every=0.2))
    agent, agent_task = await start_agent(
        log, topics, snapshot_every_events=rng.choice((50, 200)), snapshot_every_seconds=0.3, max_batch=rng.choice((1, 17, 300)),
    )
    try:
        i = 0
        while i < len(events):
            n = rng.choice((1, 3, 40, 250))
            await log.append(topics.input, messages(events[i : i + n]))
            i += n
            if rng.random() < 0.3:
                await asyncio.sleep(rng.choice((0.0, 0.05)))
            assert not tail.done(), tail
        last = (await log.append(topics.input, [Message(SENTINEL)]))[0]
        await agent.wait_processed(last, timeout=90)
        while live.position < last:
            assert not tail.done(), tail
            await asyncio.sleep(0.05)
    finally:
        await stop_agent(agent, agent_task)
        stop.set()
        await tail
        await follower.close()
    rebuilt, _ = await rebuild(log, topics)
    assert rebuilt.position == live.position == last
    assert not live.anomalies, live.anomalies
    a, b = live.state_dict(), rebuilt.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == b[key], f"live and rebuilt projections differ in {key}"
    # ... and both equal the engine's own state after the whole log (its records' times
    # included: an event without a time of its own has its log time, domain/clock.py)
    engine = Engine()
    for r in await log.read_all(topics.input):
        engine.apply(r.value or b"", r.offset, r.log_time)
    check_against_engine(rebuilt, engine, last)
    return rebuilt


async def test_live_projection_equals_rebuild_sqlite(sqlite_log: tuple[EventLog, Topics]) -> None:
    log, topics = sqlite_log
    try:
        await live_equals_rebuild(log, topics, list(Generator(11).events(2500)), seed=11)
    finally:
        await log.close()


@pytest.mark.kafka
async def test_live_projection_equals_rebuild_kafka(kafka_log: KafkaLog, kafka_topics: Topics) -> None:
    await live_equals_rebuild(kafka_log, kafka_topics, list(Generator(12).events(1500)), seed=12)


async def write_agent_like(
    log: EventLog,
    topics: Topics,
    events: list[bytes],
    alter: Callable[[list[list[bytes]]], list[list[bytes]]] | None = None,
) -> list[list[bytes]]:
    """An input log, and a decision log written exactly as the agent writes it (one
    transaction per event here; the engine reads each record's log time, as the agent's does),
    possibly altered by the caller. Returns the decisions as the agent decided them."""
    await log.start()
    await log.ensure_topics(topics.specs(), single_partition=[topics.input, topics.decisions])
    await log.append(topics.input, messages(events))
    engine = Engine()
    decided = [
        [encode(d) for d in engine.apply(r.value or b"", r.offset, r.log_time)]
        for r in await log.read_all(topics.input)
    ]
    decisions = alter(decided) if alter is not None else decided
    async with log.writer("tests") as writer:
        await writer.acquire()
        for values in decisions:
            if values:
                await writer.commit([(topics.decisions, Message(v)) for v in values])
    return decided


async def test_time_travel_equals_folding_a_prefix(sqlite_log: tuple[EventLog, Topics]) -> None:
    log, topics = sqlite_log
    events = list(Generator(5).events(600))
    try:
        await write_agent_like(log, topics, events)
        for as_of in (0, 17, 250, 599):
            past, _ = await rebuild(log, topics, as_of=as_of)
            engine = Engine()
            for r in (await log.read_all(topics.input))[: as_of + 1]:
                engine.apply(r.value or b"", r.offset, r.log_time)
            assert past.position == as_of
            check_against_engine(past, engine, as_of)
    finally:
        await log.close()


def tamper(value: bytes) -> bytes:
    decision = msgspec.json.decode(value)
    if "clusterQueue" in decision:
        decision["clusterQueue"] += "-x"
    else:
        decision["type"] = "Finished" if decision["type"] != "Finished" else "Deleted"
    return msgspec.json.encode(decision)


async def test_audit_verifies_and_catches_a_tampered_decision(tmp_path: Path) -> None:
    events = list(Generator(7).events(800))
    topics = Topics("quotaflow.events", "quotaflow.decisions", "quotaflow.snapshots")

    honest = SqliteLog(tmp_path / "honest.db")
    try:
        # Every log stamps one append with one time, later than the events' own: the same
        # decisions in every log below.
        decisions = await write_agent_like(honest, topics, events)
        total = sum(map(len, decisions))
        result = await audit(honest, topics)
        assert result.ok, result.describe()
        assert result.verified == total and result.describe().startswith(f"{total} decisions verified")
    finally:
        await honest.close()

    # a tampered copy in a fresh log: one decision changed
    flat = [(i, j) for i, values in enumerate(decisions) for j in range(len(values))]
    offset, index = flat[len(flat) * 2 // 3]
    changed = [list(v) for v in decisions]
    original = changed[offset][index]
    changed[offset][index] = tamper(original)
    forged = SqliteLog(tmp_path / "tampered.db")
    try:
        assert await write_agent_like(forged, topics, events, lambda _: changed) == decisions
        result = await audit(forged, topics)
        assert not result.ok
        d = result.divergence
        assert d is not None
        assert (d.input_offset, d.index, d.decision_offset) == (offset, index, len(flat) * 2 // 3)
        assert d.recorded == changed[offset][index] and d.replayed == original
        assert f"divergence at input offset {offset}" in result.describe()
    finally:
        await forged.close()

    # a decision missing, and one too many
    for name, alter in (("missing", lambda v: v[:index] + v[index + 1 :]), ("extra", lambda v: [*v, v[-1]])):
        altered = [list(v) for v in decisions]
        altered[offset] = alter(altered[offset])
        log = SqliteLog(tmp_path / f"{name}.db")
        try:
            await write_agent_like(log, topics, events, lambda _, altered=altered: altered)
            result = await audit(log, topics)
            assert not result.ok and result.divergence is not None, name
            assert result.divergence.input_offset == offset, (name, result.describe())
        finally:
            await log.close()


async def test_explain_a_pending_workload(sqlite_log: tuple[EventLog, Topics]) -> None:
    log, topics = sqlite_log
    events = scenario_borrowing()
    try:
        await write_agent_like(log, topics, events)
        result = await explain(log, topics, "team-a/a3")
        assert result["state"]["phase"] == "Pending"
        assert result["state"]["positionInClusterQueue"] == 0
        assert [h["decision"]["type"] for h in result["history"]] == ["Pending"]
        assert result["history"][0]["event"]["type"] == "WorkloadSubmitted"
        why = result["why"]
        assert why["reason"] == "WaitingForQuota" and why["clusterQueue"] == "cq-a"
        assert sorted(h["workload"] for h in why["heldBy"]) == ["team-a/a0", "team-a/a1", "team-a/a2"]
        # the rebuilt engine is a plain fold of the log; explaining leaves it as it was
        engine, source = await engine_at(log, topics, len(events) - 1)
        before = dump(engine)
        from projections.explain import why_pending

        why_pending(engine.state, "team-a/a3")
        assert dump(engine) == before and "replay" in source
        admitted = await explain(log, topics, "team-a/a0")
        assert admitted["state"]["phase"] == "Admitted" and "why" not in admitted
        assert [h["decision"]["type"] for h in admitted["history"]] == ["Admitted"]
    finally:
        await log.close()


def parse_metrics(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.mark.kafka
async def test_http_api_on_a_real_server_and_broker(kafka_log: KafkaLog, kafka_topics: Topics) -> None:
    topics = kafka_topics
    log = kafka_log
    await log.ensure_topics(topics.specs(), single_partition=[topics.input, topics.decisions])
    events = scenario_borrowing() + scenario_positions()[:12]
    offsets = await log.append(topics.input, messages(events))
    agent, agent_task = await start_agent(log, topics, snapshot_every_events=5)
    server = ProjectionServer(log, topics)
    try:
        await agent.wait_processed(offsets[-1], timeout=60)
        port = await server.start("127.0.0.1", 0)
        await server.wait_for_offset(offsets[-1])
        base = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as http:

            async def get(path: str, status: int = 200) -> Any:
                async with http.get(base + path) as resp:
                    assert resp.status == status, (path, resp.status, await resp.text())
                    return await resp.json() if resp.content_type == "application/json" else await resp.text()

            cqs = await get("/clusterqueues")
            assert [c["metadata"]["name"] for c in cqs["items"]] == ["cq", "cq-a", "cq-b", "cq-c"]
            assert cqs["asOf"]["inputOffset"] == offsets[-1]
            a = await get("/clusterqueues/cq-a")
            assert a["status"]["flavorsReservation"][0]["resources"][0] == {"name": "cpu", "total": "9", "borrowed": "5"}
            assert (a["status"]["pendingWorkloads"], a["status"]["admittedWorkloads"]) == (1, 3)
            await get("/clusterqueues/nope", 404)
            lq = await get("/localqueues/team-a/q")
            assert lq["status"]["admittedWorkloads"] == 3
            assert [x["metadata"]["name"] for x in (await get("/localqueues/ns-a"))["items"]] == ["q1"]
            pool = await get("/cohorts/pool")
            assert pool["status"]["lending"] == [{"from": "cq-b", "to": "cq-a", "flavor": "default", "resource": "cpu", "amount": "5"}]
            summary = await get("/clusterqueues/cq/pendingworkloads")
            got = [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in summary["items"]]
            assert got == [("w3", 0, 0), ("w6", 1, 0), ("w7", 2, 1), ("w2", 3, 1), ("w1", 4, 2), ("w4", 5, 2), ("w5", 6, 3)]
            assert (await get("/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/cq/pendingworkloads?offset=5&limit=1"))["items"][0]["metadata"]["name"] == "w4"
            lq_summary = await get("/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/ns-b/localqueues/q2/pendingworkloads")
            assert [(i["metadata"]["name"], i["positionInLocalQueue"]) for i in lq_summary["items"]] == [("w6", 0), ("w2", 1), ("w4", 2)]
            assert (await get("/pending/workloads/ns-a/w7"))["positionInClusterQueue"] == 2
            assert set((await get("/pending"))["clusterQueues"]) == {"cq", "cq-a", "cq-b", "cq-c"}
            history = await get("/workloads/team-a/a1")
            assert history["state"]["phase"] == "Admitted"
            assert [(h["decision"]["type"], h["event"]["type"]) for h in history["history"]] == [("Admitted", "WorkloadSubmitted")]
            assert history["history"][0]["cause"]["offset"] == 9
            await get("/workloads/ns-a/nobody", 404)
            metrics = parse_metrics(await get("/metrics"))
            role = ("replica_role", "standalone")
            assert metrics[("kueue_pending_workloads", frozenset({("cluster_queue", "cq"), ("status", "inadmissible"), role}))] == 7
            assert metrics[("kueue_cluster_queue_resource_usage", frozenset({("cohort", "pool"), ("cluster_queue", "cq-a"), ("flavor", "default"), ("resource", "cpu"), role}))] == 9.0
            assert metrics[("kueue_admitted_workloads_total", frozenset({("cluster_queue", "cq-a"), ("priority_class", ""), role}))] == 4 - 1

            # the server follows the logs: finishing the blocker admits the head of cq
            more = await log.append(topics.input, messages([b'{"type": "WorkloadFinished", "namespace": "ns-a", "name": "blocker"}']))
            await agent.wait_processed(more[0], timeout=60)
            await server.wait_for_offset(more[0])
            summary = await get("/clusterqueues/cq/pendingworkloads")
            assert [i["metadata"]["name"] for i in summary["items"]] == ["w6", "w7", "w2", "w1", "w4", "w5"]
            metrics = parse_metrics(await get("/metrics"))
            assert metrics[("kueue_admitted_workloads_total", frozenset({("cluster_queue", "cq"), ("priority_class", "high"), role}))] == 1
            status = await get("/status")
            assert status["inputOffset"] == more[0] and not status["anomalies"]
        result = await audit(log, topics)
        assert result.ok and result.verified > 0, result.describe()
        # explain rebuilds the engine from the agent's newest snapshot, then replays the rest
        why = await explain(log, topics, "ns-a/w1")
        assert why["engine"].startswith("snapshot after input offset"), why["engine"]
        assert why["state"]["positionInClusterQueue"] == 3
        assert [h["workload"] for h in why["why"]["heldBy"]] == ["ns-a/w3"]
        assert [h["decision"]["type"] for h in why["history"]] == ["Pending"]
    finally:
        await server.stop()
        await stop_agent(agent, agent_task)


async def config_change_shows_once_decided(log: EventLog, topics: Topics) -> None:
    """A configuration-only change (no workload decision follows it, no snapshot covers it)
    shows in `status` (a rebuild) and in `serve`'s JSON and /metrics as soon as the agent has
    decided it: its `Applied` decision is what the views follow."""
    await log.start()
    await log.ensure_topics(topics.specs(), single_partition=[topics.input, topics.decisions])
    first = scenario_borrowing()
    offsets = await log.append(topics.input, messages(first))
    # No snapshot while the test runs: only decisions can tell the views an event was decided.
    agent, agent_task = await start_agent(log, topics, snapshot_every_events=10**9, snapshot_every_seconds=10**6)
    server = ProjectionServer(log, topics)
    late = msgspec.json.encode({"type": "ConfigApplied", "object": {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "late"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "default", "resources": [{"name": "cpu", "nominalQuota": 3}]}]}]}}})
    gone = msgspec.json.encode({"type": "ConfigDeleted", "kind": "ClusterQueue", "name": "late"})
    try:
        await agent.wait_processed(offsets[-1], timeout=60)
        port = await server.start("127.0.0.1", 0)
        await server.wait_for_offset(offsets[-1])
        async with aiohttp.ClientSession() as http:

            async def get(path: str) -> Any:
                async with http.get(f"http://127.0.0.1:{port}{path}") as resp:
                    assert resp.status == 200, (path, resp.status)
                    return await resp.json() if resp.content_type == "application/json" else await resp.text()

            async def served() -> tuple[list[str], bool]:
                names = [c["metadata"]["name"] for c in (await get("/clusterqueues"))["items"]]
                metrics = parse_metrics(await get("/metrics"))
                return names, any(dict(labels).get("cluster_queue") == "late" for _, labels in metrics)

            async def shown(offset: int) -> tuple[list[str], bool, list[str]]:
                await agent.wait_processed(offset, timeout=60)
                await server.wait_for_offset(offset, timeout=10)  # decided: no later event needed
                status, _ = await rebuild(log, topics, history=False)
                assert status.position == offset
                return (*(await served()), sorted(status.cluster_queues))

            names, metric, status = await shown((await log.append(topics.input, [event_message(late)]))[0])
            assert "late" in names and metric and "late" in status
            names, metric, status = await shown((await log.append(topics.input, [event_message(gone)]))[0])
            assert "late" not in names and not metric and "late" not in status
    finally:
        await server.stop()
        await stop_agent(agent, agent_task)


async def test_config_change_shows_once_decided_sqlite(sqlite_log: tuple[EventLog, Topics]) -> None:
    log, topics = sqlite_log
    try:
        await config_change_shows_once_decided(log, topics)
    finally:
        await log.close()


@pytest.mark.kafka
async def test_config_change_shows_once_decided_kafka(kafka_log: KafkaLog, kafka_topics: Topics) -> None:
    await config_change_shows_once_decided(kafka_log, kafka_topics)
