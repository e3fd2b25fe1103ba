"""How the agent splits one read's records into engine steps (streams/agent/loop.py, `_steps`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.agent.loop import _steps
from streams.log import Record


def _records(sizes: list[int]) -> list[Record]:
    return [Record("in", i, b"x" * n) for i, n in enumerate(sizes)]


def test_small_records_share_a_step_up_to_the_size_and_a_large_one_goes_alone() -> None:
    parts = _steps(_records([10, 10, 10, 100, 10]), 25)
    assert [[r.offset for r in p] for p in parts] == [[0, 1], [2], [3], [4]]


def test_no_records_is_one_empty_step_for_a_snapshot_alone() -> None:
    assert _steps([], 64) == [[]]


@given(st.lists(st.integers(0, 300), max_size=60), st.integers(1, 500))
def test_steps_keep_every_record_in_order_and_each_step_within_the_size_or_one_record(
        sizes: list[int], step_bytes: int) -> None:
    records = _records(sizes)
    parts = _steps(records, step_bytes)
    assert [r for p in parts for r in p] == records
    if records:
        assert all(p for p in parts)
    for p in parts:
        assert len(p) == 1 or sum(len(r.value or b"") for r in p) <= step_bytes
    # A step ends only where the next record would have taken it past the size.
    for a, b in zip(parts, parts[1:]):
        assert sum(len(r.value or b"") for r in a) + len(b[0].value or b"") > step_bytes
