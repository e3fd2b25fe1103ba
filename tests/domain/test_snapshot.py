"""A restored snapshot continues exactly as the engine it was taken from."""

from __future__ import annotations

import pytest

from domain.decisions import encode
from domain.engine import Engine
from domain.snapshot import SnapshotError, dump, load
from event_streams import random_stream


def run(engine: Engine, events: list[dict], start: int) -> list[bytes]:
    out: list[bytes] = []
    for offset, event in enumerate(events[start:], start):
        out.extend(encode(d) for d in engine.apply(event, offset))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_restored_engine_decides_like_the_original(seed: int) -> None:
    events = random_stream(seed, events=400)
    straight = Engine()
    expected = run(straight, events, 0)

    for cut in (10, 150, 333):
        engine = Engine()
        head = run(engine, events[:cut], 0)
        restored = load(dump(engine))
        tail = run(restored, events, cut)
        assert head + tail == expected, f"diverged after a snapshot at offset {cut}"


def test_snapshot_of_a_snapshot_is_identical() -> None:
    engine = Engine()
    run(engine, random_stream(3, events=300), 0)
    data = dump(engine)
    assert dump(load(data)) == data


def test_garbage_is_refused() -> None:
    with pytest.raises(SnapshotError):
        load(b"\x00not a snapshot")
