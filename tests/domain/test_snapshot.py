"""A restored snapshot continues exactly as the engine it was taken from."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from event_streams import random_stream

from domain.decisions import encode
from domain.engine import Engine
from domain.snapshot import SnapshotError, dump, load


def run(engine: Engine, events: list[dict], start: int) -> list[bytes]:
    return run_range(engine, events, start, len(events))


def run_range(engine: Engine, events: list[dict], start: int, stop: int) -> list[bytes]:
    out: list[bytes] = []
    for offset, event in enumerate(events[start:stop], start):
        out.extend(encode(d) for d in engine.apply(event, offset))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_restored_engine_decides_like_the_original(seed: int) -> None:
    """A snapshot every 20 events, each restored and run to the end: cuts land in every phase
    of the stream, and a piece of bookkeeping the snapshot forgets shows at the first cut after
    it matters (a parked class's filing by resource did at seeds 3, 4 and 6)."""
    events = random_stream(seed, events=400)
    expected = run(Engine(), events, 0)

    engine = Engine()
    head: list[bytes] = []
    for cut in range(20, len(events), 20):
        head += run_range(engine, events, cut - 20, cut)
        tail = run(load(dump(engine)), events, cut)
        assert head + tail == expected, f"diverged after a snapshot at offset {cut}"


def test_a_restored_queue_keeps_each_parked_class_filed_as_it_was() -> None:
    engine = Engine()
    filed: list[tuple[str, tuple[str, int] | None]] = []
    for offset, event in enumerate(random_stream(3, events=400)):
        engine.apply(event, offset)
        filed = _filings(engine)
        if any(needs is not None for _, needs in filed):
            break
    assert any(needs is not None for _, needs in filed), "the stream never filed a class by resource"
    assert _filings(load(dump(engine))) == filed


def _filings(engine: Engine) -> list[tuple[str, tuple[str, int] | None]]:
    out = []
    for cq in engine.state.cluster_queues.values():
        q = cq.queue
        for cls in q.parked:
            out.append((q.classes[cls].first()[3], q.filing(cls)))
    return sorted(out, key=lambda kv: kv[0])


PARKED_PREEMPTOR = (
    Path(__file__).parent.parent / "conformance" / "scenarios" / "preemption"
    / "preemptor_parked_after_a_failure_heads_its_queue_again_before_a_higher_priority_workload.yaml"
)


def test_a_restored_queue_keeps_its_parked_preemptor_as_its_preferred_head() -> None:
    """Cut where q1's preemptor ns-q1/w6 waits parked after a failure (no longer `sticky`) and a
    higher-priority ns-q1/w14 waits behind it: restored, w6 still heads q1 once the last event
    wakes it (admitted before w14), as in the original engine."""
    events = list(yaml.safe_load_all(PARKED_PREEMPTOR.read_text()))
    cut = len(events) - 1
    expected = run(Engine(), events, 0)
    engine = Engine()
    head = run_range(engine, events, 0, cut)
    q1 = engine.state.cluster_queues["q1"]
    assert q1.sticky is None and q1.preemptor == "ns-q1/w6" and q1.queue.is_parked("ns-q1/w6")
    restored = load(dump(engine))
    assert restored.state.cluster_queues["q1"].preemptor == "ns-q1/w6"
    tail = run(restored, events, cut)
    assert head + tail == expected
    assert b'"Admitted","workload":"ns-q1/w6"' in b"".join(tail)


def test_snapshot_of_a_snapshot_is_identical() -> None:
    engine = Engine()
    run(engine, random_stream(3, events=300), 0)
    data = dump(engine)
    assert dump(load(data)) == data


def test_garbage_is_refused() -> None:
    with pytest.raises(SnapshotError):
        load(b"\x00not a snapshot")


RETRY = (
    Path(__file__).parent.parent / "conformance" / "scenarios" / "admission_checks"
    / "admission_check_retry_requeues_then_ready_admits.yaml"
)


def test_a_restored_workload_waiting_by_its_eviction_time_keeps_its_creation_time() -> None:
    """Cut where team/w1 waits after an admission check's Retry, ordered by that eviction's
    time: restored, it keeps both times, and its creation orders it again once it reserves."""
    events = list(yaml.safe_load_all(RETRY.read_text()))
    cut = 8
    expected = run(Engine(), events, 0)
    engine = Engine()
    head = run_range(engine, events, 0, cut)
    w1 = engine.state.workloads["team/w1"]
    assert w1.admission is None and w1.created_queue_time is not None and w1.queue_time > w1.created_queue_time
    restored = load(dump(engine))
    kept = restored.state.workloads["team/w1"]
    assert (kept.queue_time, kept.created_queue_time) == (w1.queue_time, w1.created_queue_time)
    tail = run(restored, events, cut)
    assert head + tail == expected
    assert kept.admission is not None and kept.queue_time == w1.created_queue_time and kept.created_queue_time is None
