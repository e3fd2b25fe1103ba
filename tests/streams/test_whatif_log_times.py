"""What-if on a log whose events carry only their log times (a live log: the broker's append
time, an export's `quotaflow.logTime` lines): time-driven rules (`maximumExecutionTimeSeconds`,
`waitForPodsReady`, timers fired by `Tick`s) decide in what-if as in a replay, and a launcher's
pods-ready reports follow the changed world's admissions."""

from __future__ import annotations

import asyncio
import heapq
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest
from whatif_helpers import FLAVOR, KeepingEngine, cq, lq

from devtools.timed_stream import stamp
from domain.decisions import Admitted, Evicted, Preempted
from domain.engine import Engine
from domain.timestamps import parse_time
from streams.log import Message, Topics, open_log
from streams.log.event_files import export_line, positioned_events
from streams.settings import Settings
from streams.whatif.changes import At, Change, sweep
from streams.whatif.simulation import record, simulate
from streams.whatif.source import read_file, read_log

T0 = parse_time(stamp(0))
CONFIGURATION = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
    "waitForPodsReady": {"timeout": "60s", "requeuingStrategy": {"backoffBaseSeconds": 10, "backoffLimitCount": 1}},
}


def live_log(n: int, seed: int) -> list[tuple[bytes, int]]:
    """(record, log time) of a log written by a launcher, no event with a `time` of its own.

    One ClusterQueue of 8 cpu, workloads of 2-4 cpu; the launcher reports a run's pods ready 5 s
    after its admission (every fifth workload never does: its runs, 150 s long, time out; the
    next ones only from their second run), finishes it after
    its runtime (some are cut short by their `maximumExecutionTimeSeconds`), releases an evicted
    run 2 s after its eviction (but never those of every eleventh workload, from job-6), and the
    agent appends a `Tick` after 10 s without a record."""
    rng = random.Random(seed)
    engine = Engine()
    out: list[tuple[bytes, int]] = []
    heap: list[tuple[float, int, dict[str, Any], Any]] = []
    seq = 0
    runtime: dict[str, float] = {}
    token: dict[str, int] = {}

    def push(at: float, event: dict[str, Any], guard: Any = None) -> None:
        nonlocal seq
        heapq.heappush(heap, (at, seq, event, guard))
        seq += 1

    t = 0.0
    for i in range(n):
        t += rng.expovariate(1 / 20)
        name = f"job-{i}"
        runtime[f"team-a/{name}"] = rng.uniform(20, 120) if i % 5 != 1 else 150
        spec: dict[str, Any] = {"queueName": "main", "priority": rng.choice((0, 100)),
                                "podSets": [{"name": "main", "count": 1, "requests": {"cpu": str(rng.choice((2, 4)))}}]}
        if i % 7 == 3:
            spec["maximumExecutionTimeSeconds"] = 30
        push(round(t, 3), {"type": "WorkloadSubmitted", "workload": {"metadata": {"namespace": "team-a", "name": name},
                                                                      "spec": spec}})
    def decided(d: Any, at: float) -> None:
        w = d.workload
        if w is None:
            return
        ns, _, name = w.partition("/")
        i = int(name.split("-")[1])
        if isinstance(d, Admitted):
            token[w] = token.get(w, 0) + 1
            if i % 5 != 1 and not (i % 5 == 2 and token[w] == 1):  # (job-2, job-7...: ready from their second run)
                push(at + 5, {"type": "WorkloadPodsReady", "namespace": ns, "name": name}, (w, token[w]))
            push(at + runtime[w], {"type": "WorkloadFinished", "namespace": ns, "name": name}, (w, token[w]))
        elif isinstance(d, (Preempted, Evicted)):
            token[w] = token.get(w, 0) + 1
            if i % 11 != 6:  # a stuck node: these pods are never gone
                push(at + 2, {"type": "WorkloadReleased", "namespace": ns, "name": name})

    now = 0.0
    for obj in (CONFIGURATION, FLAVOR, cq("team-a", 8, preemption={"withinClusterQueue": "LowerPriority"}),
                lq("team-a", "team-a")):
        apply_at(engine, out, {"type": "ConfigApplied", "object": obj}, 0)
    while heap:
        at, _, event, guard = heapq.heappop(heap)
        if guard is not None and token.get(guard[0]) != guard[1]:
            continue  # the run it belongs to was cut short
        while at - now > 10:  # an idle log: the agent's Ticks
            now += 10
            for d in apply_at(engine, out, {"type": "Tick"}, now):
                decided(d, now)
        now = max(now, at)
        for d in apply_at(engine, out, event, at):
            decided(d, at)
    return out


def apply_at(engine: Engine, out: list[tuple[bytes, int]], event: dict[str, Any], seconds: float) -> list[Any]:
    log_time = T0 + round(seconds * 1e6)
    out.append((msgspec.json.encode(event), log_time))
    return engine.apply(out[-1][0], len(out) - 1, log_time)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("log-times") / "export.jsonl"
    path.write_bytes(b"".join(export_line(raw, log_time) + b"\n" for raw, log_time in live_log(60, seed=4)))
    return path


def replayed(path: Path) -> list[bytes]:
    engine = KeepingEngine([])
    for offset, event, log_time in positioned_events(path):
        engine.apply(event, offset, log_time)
    return engine.out


def test_no_change_reproduces_the_time_driven_decisions_of_a_log_with_only_log_times(exported: Path) -> None:
    assert b'"time"' not in exported.read_bytes().replace(b'{"quotaflow.logTime"', b"")
    expected = replayed(exported)
    reasons = [msgspec.json.decode(d).get("reason") for d in expected]
    # The log does what this test is about: pods-ready timeouts, maximum execution times, Ticks.
    assert reasons.count("PodsReadyTimeout") >= 3 and reasons.count("Deactivated") >= 3
    ticks = {o for o, e, _ in positioned_events(exported) if e == b'{"type":"Tick"}'}
    assert any(msgspec.json.decode(d)["cause"]["offset"] in ticks and b'"Evicted"' in d for d in expected)

    records = read_file(exported)
    recorded_out: list[bytes] = []
    whatif_out: list[bytes] = []
    rec = record(records, engine_factory=lambda: KeepingEngine(recorded_out))
    sim = simulate(records, rec, Change("no change"), engine_factory=lambda: KeepingEngine(whatif_out))
    assert recorded_out == expected
    assert whatif_out == expected
    assert sim.events == len(records)


def test_pods_ready_reports_follow_the_changed_worlds_admissions(exported: Path) -> None:
    records = read_file(exported)
    rec = record(records)
    out: list[bytes] = []
    sim = simulate(records, rec, sweep([], ["clusterqueue/team-a.nominal=cpu:x2"], At())[0], keep_log=True,
                   engine_factory=lambda: KeepingEngine(out))
    assert sim.measure.workloads["team-a/job-5"].first_admitted != rec.measure.workloads["team-a/job-5"].first_admitted
    timed_out = {msgspec.json.decode(d)["workload"] for d in out if b'"PodsReadyTimeout"' in d}
    # Only the workloads whose pods the launcher never reported ready time out (every fifth, from
    # job-1), and the first runs of those ready from their second (from job-2), whenever the
    # changed world admits them.
    assert timed_out and all(int(w.split("-")[-1]) % 5 in (1, 2) for w in timed_out)
    # The changed world's log, as written, replays to its decisions: log times included.
    assert sim.log is not None and sim.log_times is not None
    engine = Engine()
    again = [msgspec.json.encode(d) for i, (e, lt) in enumerate(zip(sim.log, sim.log_times, strict=True))
             for d in engine.apply(e, i, lt)]
    assert again == out


def test_a_sqlite_log_gives_each_record_its_log_time(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'log.db'}"

    async def fill() -> None:
        log = open_log(url)
        await log.start()
        try:
            await log.append(Topics.from_settings(Settings.from_env()).input,
                             [Message(b'{"type":"Tick"}'), Message(b'{"type":"Tick","time":"2025-01-01T00:00:00Z"}')])
        finally:
            await log.close()

    asyncio.run(fill())
    first, second = asyncio.run(read_log(url))
    assert first.log_time is not None and first.time == first.log_time
    assert second.time == max(first.time, T0)  # its own time first, never before the record before it


def test_a_moved_events_time_is_written_as_the_engine_writes_times() -> None:
    from domain.timestamps import format_time
    from streams.whatif.simulation import event_time_text

    rng = random.Random(9)
    samples = [0, 1, 999_999, 1_000_000, -1, -86_400_000_001, T0, T0 + 86_399_999_999, 253_402_300_799_000_000]
    samples += [rng.randrange(-10**16, 10**17) for _ in range(2000)]
    assert [event_time_text(t) for t in samples] == [format_time(t) for t in samples]
