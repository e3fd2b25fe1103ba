"""Whose time an input event has, and how it reaches the engine.

The engine never reads a wall clock. An event's time is:

1. the record's log time, when the log gives one (`Engine.apply(..., log_time=...)`): the
   broker's append time on Kafka (the input topic is created with
   `message.timestamp.type=LogAppendTime`, so no producer can set it), the time the SQLite log
   stamped when it appended the record. It moves the log's clock whatever the event is, even a
   rejected one: it is the log's word, not the producer's. An event's own `time` field is then
   checked (a malformed one is refused) but not used.
2. otherwise (an events file, `quotaflow replay`, the conformance scenarios), the event's own
   `time`: a top-level event's, inherited by the events of a Batch that have none. As before,
   it moves the clock only when the event is applied, except that timers due by it fire (below).

Timers (domain/timers.py) fire at the first record whose time reaches their deadline, before
that record is decided; the clock is then at least that time, even if the record is rejected.
This module reads a record's own time before it is decided, cheaply: only the `time` field.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from domain.envelope import Record, Unparseable
from domain.timestamps import TimestampError, parse_time


class _Timed(msgspec.Struct):
    time: str | None = None


_decode_timed = msgspec.json.Decoder(_Timed).decode


def own_time(event: Record) -> int | None:
    """The record's own top-level `time` in µs; None when it has none or it cannot be read (the
    event is then refused, or has no time, when it is decided)."""
    raw: object
    if isinstance(event, Mapping):
        raw = event.get("time")
    elif isinstance(event, Unparseable):
        return None
    else:
        try:
            raw = _decode_timed(event).time
        except (msgspec.DecodeError, UnicodeDecodeError):
            return None
    if raw is None:
        return None
    try:
        return parse_time(raw)
    except TimestampError:
        return None
