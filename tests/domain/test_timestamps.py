"""Event times: the fast path (C fromisoformat on strings) reads exactly what the general RFC 3339 parser reads."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.timestamps import TimestampError, _parse_general, format_time, parse_time


def _outcome(parse, value: object) -> object:  # type: ignore[no-untyped-def]
    try:
        return parse(value)
    except TimestampError as exc:
        return ("error", str(exc))


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)))
def test_fast_path_matches_general_parser_on_valid_times(moment: datetime) -> None:
    text = moment.isoformat(timespec="microseconds") + "Z"
    assert len(text) == 27
    expected = moment.replace(tzinfo=timezone.utc) - datetime(1970, 1, 1, tzinfo=timezone.utc)
    micros = (expected.days * 86_400 + expected.seconds) * 1_000_000 + expected.microseconds
    assert parse_time(text) == _parse_general(text) == micros


@given(st.integers(0, 26), st.sampled_from("x+ -_.:T\u0663Z9"))
def test_fast_path_matches_general_parser_on_altered_times(position: int, char: str) -> None:
    text = "2025-01-31T23:59:59.999999Z"
    altered = text[:position] + char + text[position + 1 :]
    assert _outcome(parse_time, altered) == _outcome(_parse_general, altered)


@pytest.mark.parametrize(
    "value",
    ["2025-02-30T00:00:00.000000Z", "2025-01-01T24:00:00.000000Z", "2025-01-01T00:60:00.000000Z",
     "2025-01-01T00:00:60.000000Z", "2025-00-01T00:00:00.000000Z", "2025-01-01T00:00:00Z", "", 5],
)
def test_out_of_range_and_other_layouts_give_the_general_answer(value: object) -> None:
    assert _outcome(parse_time, value) == _outcome(_parse_general, value)


def test_round_trip_with_format_time() -> None:
    assert parse_time(format_time(parse_time("2025-01-01T00:00:04.052470Z"))) == parse_time(
        "2025-01-01T00:00:04.052470Z"
    )
