"""Whose time an input event has, and how it reaches the engine.

The engine never reads a wall clock. An event's time is:

1. its own `time`, when it has one: what a producer asserts (a history replayed with its
   times, a test, an events file); the events of a Batch without one inherit the Batch's. Not
   a tenant's (an event whose `source` is `tenant:<namespace>`, domain/authority.py): a tenant
   asserting a time far ahead would fire every workload's timers and move everyone's clock, so
   a tenant's event has the log's time;
2. otherwise the record's log time, when the log keeps one (`Engine.apply(..., log_time=...)`):
   the broker's append time on Kafka (the input topic is created with
   `message.timestamp.type=LogAppendTime`, so no producer can set it), the time the SQLite log
   stamped when it appended the record. quotaflow's own producers (the CLI, `streams.client`,
   the launcher) write no `time` unless asked, so on a live log the time is the log's;
3. otherwise none (a record of an events file without `time`).

An applied event's time moves the log's clock (a rejected one's does not). Timers
(domain/timers.py) fire at the first record whose time reaches their deadline, before that
record is decided and whatever it is; the clock is then at least that time, even if the record
is rejected. This module reads a record's own time before it is decided, cheaply: only the
`time` field.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from domain.envelope import Record, Unparseable
from domain.tenant_limits import TENANT_PREFIX
from domain.timestamps import TimestampError, parse_time
from domain.typed_events import decode_timed


def trusts_time(source: object) -> bool:
    """Whether an event from `source` may give its own time (not a tenant's: see above)."""
    return not (isinstance(source, str) and source.startswith(TENANT_PREFIX))


def own_time(event: Record) -> int | None:
    """The record's own top-level `time` in µs; None when it has none or it cannot be read (the
    event is then refused, or has no time, when it is decided)."""
    raw: object
    if isinstance(event, Mapping):
        raw, source = event.get("time"), event.get("source")
    elif isinstance(event, Unparseable):
        return None
    else:
        try:
            timed = decode_timed(event)
        except (msgspec.DecodeError, UnicodeDecodeError):
            return None
        raw, source = timed.time, timed.source
    if raw is None or not trusts_time(source):
        return None
    try:
        return parse_time(raw)
    except TimestampError:
        return None
