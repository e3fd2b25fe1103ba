"""Kueue's admission attempt metrics, measured by the agent around the engine: which events are
attempts and with which result, the same from both engine hosts, and served on `/metrics`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agent_harness import as_message, write_input
from prometheus_client.parser import text_string_to_metric_families

from devtools.generate import generated_events
from domain.engine import Engine
from streams.agent.admission_attempts import BUCKETS, Attempts, attempt_of
from streams.agent.engine_host import ChildEngine, LocalEngine, Shell
from streams.agent.loop import Agent, AgentConfig
from streams.agent.process import metrics_exposition
from streams.log import Record, Topics
from streams.log.sqlite import SqliteLog

pytestmark = pytest.mark.timeout(60, func_only=True)


def test_which_events_are_attempts() -> None:
    assert attempt_of(["Finished", "Admitted"]) is True
    assert attempt_of(["Pending", "QuotaReserved"]) is True
    assert attempt_of(["Preempted", "Pending"]) is False
    assert attempt_of(["Applied"]) is None
    assert attempt_of(["QuotaReleased", "Finished"]) is None


def test_counts_and_buckets() -> None:
    attempts = Attempts()
    for success, seconds in ((True, 0.001), (True, 0.3), (False, 0.02), (False, 20.0)):
        attempts.record(success, seconds)
    got = {(s.name, s.labels.get("result"), s.labels.get("le")): s.value
           for f in attempts.families() for s in f.samples}
    assert got[("kueue_admission_attempts_total", "success", None)] == 2
    assert got[("kueue_admission_attempts_total", "inadmissible", None)] == 2
    assert got[("kueue_admission_attempt_duration_seconds_bucket", "success", "0.005")] == 1
    assert got[("kueue_admission_attempt_duration_seconds_bucket", "success", "0.5")] == 2
    assert got[("kueue_admission_attempt_duration_seconds_bucket", "inadmissible", "10.0")] == 1
    assert got[("kueue_admission_attempt_duration_seconds_bucket", "inadmissible", "+Inf")] == 2
    assert got[("kueue_admission_attempt_duration_seconds_sum", "inadmissible", None)] == pytest.approx(20.02)
    assert len(BUCKETS) == 11  # the Prometheus client's default buckets, as Kueue's histogram


def expected_attempts(events: list[bytes]) -> list[bool]:
    engine = Engine()
    out = []
    for offset, value in enumerate(events):
        success = attempt_of([type(d).__name__ for d in engine.apply(value, offset)])
        if success is not None:
            out.append(success)
    return out


async def test_both_engine_hosts_report_the_same_attempts() -> None:
    events = [as_message(e).value or b"" for e in generated_events(600, seed=3)]
    stream = [Record("in", offset, value, None, []) for offset, value in enumerate(events)]
    shell = Shell("decisions", b"src", keep_decided=False)
    local, child = LocalEngine(shell), await ChildEngine.start(shell)
    try:
        results = []
        for host in (local, child):
            await host.restore(None)
            batches = [await host.apply(stream[lo:lo + 100], snapshot=False, time=b"t") for lo in range(0, 600, 100)]
            attempts = [a for b in batches for a in b.attempts]
            assert all(seconds > 0 for _, seconds in attempts)
            results.append([success for success, _ in attempts])
    finally:
        await child.close()
    assert results[0] == results[1] == expected_attempts(events)
    assert True in results[0] and False in results[0]


async def test_the_agent_serves_them(tmp_path: Path) -> None:
    topics = Topics("in", "out", "snap")
    log = SqliteLog(tmp_path / "log.db")
    await log.start()
    await log.ensure_topics(topics.specs())
    events = list(generated_events(200, seed=4))
    await write_input(log, topics.input, events)
    agent = Agent(log, AgentConfig(topics, standby=False, engine_process=False))
    task = asyncio.create_task(agent.run())
    try:
        await agent.wait_processed(len(events) - 1, timeout=30)
    finally:
        agent.stop()
        await task
        await log.close()
    want = expected_attempts([as_message(e).value or b"" for e in events])
    got = {(s.name, s.labels.get("result")): s.value
           for f in text_string_to_metric_families(metrics_exposition(agent).decode()) for s in f.samples}
    assert got[("kueue_admission_attempts_total", "success")] == want.count(True)
    assert got[("kueue_admission_attempts_total", "inadmissible")] == want.count(False)
    assert got[("kueue_admission_attempt_duration_seconds_count", "success")] == want.count(True)
    assert got[("kueue_build_info", None)] == 1


async def test_the_agents_http_server_serves_them_behind_the_token(tmp_path: Path) -> None:
    """The page both runtimes serve (StatusServer: a service of the Faust app on Kafka, beside
    the embedded runtime on SQLite); like /status it needs the token when one is set."""
    import aiohttp

    from streams.agent.process import StatusServer
    from streams.http_guard import HttpGuard

    token = "metrics-token-0123456789abcdef"
    agent = Agent(SqliteLog(tmp_path / "log.db"), AgentConfig(Topics("in", "out", "snap"), standby=False, engine_process=False))
    agent.attempts.record(True, 0.002)
    server = StatusServer(agent, 0, HttpGuard(token=token))
    await server.start()
    try:
        async with aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{server.bound}/metrics"
            async with http.get(url) as refused:
                assert refused.status == 401
            async with http.get(url, headers={"Authorization": f"Bearer {token}"}) as resp:
                assert resp.status == 200 and resp.content_type == "text/plain"
                body = await resp.read()
        assert b'kueue_admission_attempts_total{replica_role="standalone",result="success"} 1.0' in body
    finally:
        await server.stop()
