"""What-if with no change is the recorded world: the same input reaches the engine, so every
decision is the recorded one, byte for byte and in order, on an events file and on a SQLite log;
and the changed world's own input log, written out, replays to the changed world's decisions."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest
from whatif_helpers import KeepingEngine

from devtools.generate import generated_events, write_jsonl
from devtools.timed_stream import recorded_log
from domain.engine import Engine
from domain.timestamps import format_time
from streams.log import Message, Topics, open_log
from streams.log.event_files import read_events
from streams.settings import Settings
from streams.whatif.changes import At, Change, parse_at, sweep
from streams.whatif.simulation import record, simulate
from streams.whatif.source import read_file, read_log


def _decisions_both_ways(records: list) -> tuple[list[bytes], list[bytes], int]:
    recorded_out: list[bytes] = []
    whatif_out: list[bytes] = []
    rec = record(records, engine_factory=lambda: KeepingEngine(recorded_out))
    sim = simulate(records, rec, Change("no change"), engine_factory=lambda: KeepingEngine(whatif_out))
    return recorded_out, whatif_out, sim.events


@pytest.fixture(scope="module")
def timed_events() -> list[bytes]:
    return [msgspec.json.encode(e) for e in recorded_log(300, seed=7)]


def test_a_timed_log_with_preemptions_is_reproduced_from_an_events_file(tmp_path: Path, timed_events: list[bytes]) -> None:
    path = tmp_path / "recorded.jsonl"
    write_jsonl(path, timed_events)
    records = read_file(path)
    recorded_out, whatif_out, events = _decisions_both_ways(records)
    kinds = [msgspec.json.decode(d)["type"] for d in recorded_out]
    assert kinds.count("Preempted") > 20 and kinds.count("QuotaReleased") > 20  # the stream does preempt
    assert events == len(records)
    assert whatif_out == recorded_out
    # ...and both are what `quotaflow replay` decides.
    engine = Engine()
    replayed = [msgspec.json.encode(d) for i, e in enumerate(read_events(path)) for d in engine.apply(e, i)]
    assert replayed == recorded_out


def test_a_log_with_bad_records_and_no_times_is_reproduced(tmp_path: Path) -> None:
    path = tmp_path / "generated.jsonl"
    write_jsonl(path, generated_events(3000, seed=3))
    recorded_out, whatif_out, _ = _decisions_both_ways(read_file(path))
    assert any(b'"Rejected"' in d for d in recorded_out)
    assert whatif_out == recorded_out


def test_a_sqlite_log_is_reproduced(tmp_path: Path, timed_events: list[bytes]) -> None:
    url = f"sqlite:///{tmp_path / 'log.db'}"

    async def fill() -> None:
        log = open_log(url)
        await log.start()
        try:
            await log.append(Topics.from_settings(Settings.from_env()).input, [Message(e) for e in timed_events])
        finally:
            await log.close()

    asyncio.run(fill())
    records = asyncio.run(read_log(url))
    assert len(records) == len(timed_events)
    recorded_out, whatif_out, _ = _decisions_both_ways(records)
    assert whatif_out == recorded_out
    assert any(b'"Preempted"' in d for d in recorded_out)


def test_the_changed_worlds_input_log_replays_to_its_decisions(tmp_path: Path, timed_events: list[bytes]) -> None:
    records = read_file(_write(tmp_path / "r.jsonl", timed_events))
    rec = record(records)
    change = sweep([], ["clusterqueue/team-a.nominal=cpu:x2"], At())[0]
    out: list[bytes] = []
    sim = simulate(records, rec, change, keep_log=True, engine_factory=lambda: KeepingEngine(out))
    assert sim.log is not None and len(sim.log) == sim.events
    engine = Engine()
    replayed = [msgspec.json.encode(d) for i, e in enumerate(sim.log) for d in engine.apply(e, i)]
    assert replayed == out
    assert out != _decisions_both_ways(records)[0]  # the change did change something


def _write(path: Path, events: list[bytes]) -> Path:
    write_jsonl(path, events)
    return path


def test_the_recorded_world_is_read_from_the_decision_log_when_it_covers_the_input(tmp_path: Path, timed_events: list[bytes]) -> None:
    from domain.decisions import encode
    from streams.whatif.run import run
    from streams.whatif.source import read_decisions

    url = f"sqlite:///{tmp_path / 'decided.db'}"
    topics = Topics.from_settings(Settings.from_env())
    engine = Engine()
    decided = [encode(d) for i, e in enumerate(timed_events) for d in engine.apply(e, i)]

    async def fill(decisions: list[bytes]) -> None:
        log = open_log(url)
        await log.start()
        try:
            if not await log.end_offset(topics.input):
                await log.append(topics.input, [Message(e) for e in timed_events])
            # A decision type this version does not know is skipped, not an error.
            await log.append(topics.decisions, [Message(b'{"type":"Applied","cause":{"offset":0,"index":0}}')]
                             + [Message(d) for d in decisions])
        finally:
            await log.close()

    asyncio.run(fill(decided[:-5]))
    records = asyncio.run(read_log(url))
    assert asyncio.run(read_decisions(url, len(records))) is None  # the agent is behind: replay
    asyncio.run(fill(decided[-5:]))
    decisions = asyncio.run(read_decisions(url, len(records)))
    assert decisions is not None
    change = sweep([], ["clusterqueue/team-b.nominal=cpu:x2"], At())
    assert run(records, change, decisions=decisions) == run(records, change)


def test_a_log_without_times_runs_with_a_change_and_says_its_times_mean_nothing(tmp_path: Path) -> None:
    from streams.whatif.run import run

    path = tmp_path / "generated.jsonl"
    write_jsonl(path, generated_events(3000, seed=5))
    report = run(read_file(path), sweep([], ["clusterqueue/cq-a.nominal=cpu:x2"], At()))
    assert report["warnings"] and "no times" in report["warnings"][0]
    assert report["whatIf"][0]["totals"]["admitted"] >= report["recorded"]["totals"]["admitted"]


@pytest.mark.parametrize("at", ["offset", "time"])
def test_a_change_from_a_later_point_shares_the_recorded_prefix_and_decides_as_a_whole_replay(
        tmp_path: Path, at: str) -> None:
    """From --at on the changed world is decided by the engine restored from the recorded
    world's snapshot there; before it, the recorded decisions stand. The same decisions, event by
    event, as the changed world replayed whole."""
    from streams.whatif.simulation import index_at

    events = [msgspec.json.encode(e) for e in recorded_log(100, seed=7)]
    records = read_file(_write(tmp_path / "r.jsonl", events))
    point = records[len(records) // 2]
    where = str(point.offset) if at == "offset" else format_time(point.time + 1)
    change = sweep([], ["clusterqueue/team-a.nominal=cpu:x2"], parse_at(where))[0]
    index = index_at(records, change)
    whole: list[bytes] = []
    sim_whole = simulate(records, record(records), change, keep_log=True, engine_factory=lambda: KeepingEngine(whole))
    shared_rec = record(records, keep_prefix=index)
    assert shared_rec.prefix is not None and shared_rec.prefix.index == index
    sim = simulate(records, shared_rec, change, keep_log=True,
                   engine_factory=lambda: pytest.fail("the changed world was decided from the start"))
    assert sim.log == sim_whole.log and sim.origins == sim_whole.origins
    # The changed world's own log, replayed, decides what the shared run measured.
    engine = Engine()
    replayed = [msgspec.json.encode(d) for i, (e, lt) in enumerate(zip(sim.log, sim.log_times, strict=True))
                for d in engine.apply(e, i, lt)]
    assert replayed == whole
    # The whole report, with the prefix shared and without.
    from unittest import mock

    from streams.whatif import run as run_module

    assert b'"Preempted"' in b"".join(whole[len(whole) // 2:])  # the part decided anew preempts
    if at == "time":
        return
    shared_report = run_module.run(records, [change])
    unshared = lambda rs, **kw: record(rs, **{**kw, "keep_prefix": 0})  # noqa: E731
    with mock.patch.object(run_module, "record", unshared):
        assert run_module.run(records, [change]) == shared_report
