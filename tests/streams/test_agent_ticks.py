"""The agent appends Ticks on an idle input log (domain/clock.py), and they fire timers."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import msgspec
from agent_harness import write_input

from domain.decisions import encode
from domain.engine import Engine
from streams.agent.loop import Agent, AgentConfig
from streams.log import Topics
from streams.log.sqlite import SqliteLog

EVENTS = [
    {"type": "ConfigApplied", "object": {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        # The first PodsReady timeout deactivates the workload: one eviction, nothing requeued.
        "waitForPodsReady": {"timeout": "1s", "requeuingStrategy": {"backoffLimitCount": 0}},
    }},
    {"type": "ConfigApplied", "object": {"kind": "ResourceFlavor", "metadata": {"name": "f"}}},
    {"type": "ConfigApplied", "object": {
        "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]},
    }},
    {"type": "ConfigApplied", "object": {
        "kind": "LocalQueue", "metadata": {"namespace": "ns", "name": "lq"}, "spec": {"clusterQueue": "cq"},
    }},
    {"type": "WorkloadSubmitted", "workload": {
        "metadata": {"namespace": "ns", "name": "never-ready"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "1"}}]},
    }},
]


async def test_ticks_on_an_idle_log_fire_a_pods_ready_timeout_that_an_audit_replays(tmp_path: Path) -> None:
    log = SqliteLog(tmp_path / "ticks.db")
    await log.start()
    topics = Topics("t.events", "t.decisions", "t.snapshots")
    try:
        await write_input(log, topics.input, EVENTS)
        agent = Agent(log, AgentConfig(topics, standby=False, tick_interval=0.2, poll_timeout=0.05,
                                       engine_process=False))
        task = asyncio.create_task(agent.run())
        try:
            deadline = time.monotonic() + 20
            evicted: list[dict[str, object]] = []
            while not evicted and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                decisions = [msgspec.json.decode(r.value) for r in await log.read_all(topics.decisions)]
                evicted = [d for d in decisions if d["type"] == "Evicted"]
        finally:
            agent.stop()
            await task
        assert evicted and evicted[0]["workload"] == "ns/never-ready"
        assert evicted[0]["reason"] == "Deactivated"
        records = await log.read_all(topics.input)
        ticks = [r for r in records[len(EVENTS):] if msgspec.json.decode(r.value)["type"] == "Tick"]
        assert ticks, "no Tick was appended"
        assert evicted[0]["cause"]["offset"] in {t.offset for t in ticks}
        # The log's times are the records' own: an audit folding the log with them agrees.
        engine = Engine()
        replayed = [encode(d) for r in records for d in engine.apply(r.value or b"", r.offset, r.log_time)]
        assert replayed == [r.value for r in await log.read_all(topics.decisions)][: len(replayed)]
    finally:
        await log.close()
