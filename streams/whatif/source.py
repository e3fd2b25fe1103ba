"""The recorded input log as timed records: the order the engine saw and the time of each event.

A record's time is the engine's (domain/clock.py): its own `time` (RFC 3339, not a tenant's),
else its log time (the broker's append time, the SQLite log's stamp, an export's
`quotaflow.logTime` line), else for a Batch the first time among its events; a record with none,
or with one that cannot be read, takes the time of the record before it, and a time earlier than
the previous record's is raised to it, so that simulated time never runs backwards (producers'
clocks may disagree). Each record keeps its log time and its offset in the log (an export's gaps
counted), which the engine is given with it, as the agent and `quotaflow replay` give them.
Records keep their bytes: an unchanged record reaches the engine as the bytes it was recorded
as, so the world without a change is the recorded one, byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from domain.clock import trusts_time
from domain.engine import Unparseable
from domain.timestamps import TimestampError, parse_time

Event = bytes | dict[str, Any] | Unparseable


class SourceError(Exception):
    """The log cannot be read at all (one clear message; nothing was simulated)."""


@dataclass(slots=True)
class TimedRecord:
    offset: int  # in the recorded input log
    time: int  # microseconds since the epoch (monotonic over the log)
    event: Event  # as recorded: what the engine is given when nothing about it changes
    value: dict[str, Any] | None  # the decoded object, when the record is one
    log_time: int | None = None  # its time in the log (µs), where the log keeps one


_decode = msgspec.json.decode


def event_time(value: dict[str, Any] | None, log_time: int | None = None) -> int | None:
    if value is None:
        return log_time
    t = value.get("time") if trusts_time(value.get("source")) else None
    if t is not None:
        try:
            return parse_time(t)
        except TimestampError:
            t = None
    if log_time is not None:
        return log_time
    if value.get("type") == "Batch":
        inner = value.get("events")
        if isinstance(inner, list):
            t = next((e.get("time") for e in inner if isinstance(e, dict) and e.get("time") is not None), None)
    if t is None:
        return None
    try:
        return parse_time(t)
    except TimestampError:
        return None


def decoded(event: Event) -> dict[str, Any] | None:
    if isinstance(event, dict):
        return event
    if isinstance(event, bytes):
        try:
            value = _decode(event)
        except (msgspec.DecodeError, UnicodeDecodeError):
            return None
        return value if isinstance(value, dict) else None
    return None


def timed(events: Iterable[Event]) -> list[TimedRecord]:
    """Records numbered from 0, without log times (events in memory, a test's)."""
    return timed_entries((offset, event, None) for offset, event in enumerate(events))


def timed_entries(entries: Iterable[tuple[int, Event, int | None]]) -> list[TimedRecord]:
    """Records from (offset, event, log time) entries, as the log or an events file holds them."""
    out: list[TimedRecord] = []
    now: int | None = None
    pending: list[TimedRecord] = []  # records before the first time: they take that time
    for offset, event, log_time in entries:
        value = decoded(event)
        t = event_time(value, log_time)
        if t is not None and (now is None or t > now):
            now = t
        rec = TimedRecord(offset, now if now is not None else 0, event, value, log_time)
        if now is None:
            pending.append(rec)
        out.append(rec)
        if now is not None and pending:
            for p in pending:
                p.time = now
            pending = []
    return out


def read_file(path: str | Path) -> list[TimedRecord]:
    from streams.log.event_files import EventFileError, positioned_events

    p = Path(path)
    if not p.is_file():
        raise SourceError(f"cannot read {p}: no such file")
    try:
        return timed_entries(positioned_events(p))
    except EventFileError as exc:
        raise SourceError(str(exc)) from None


async def read_log(url: str) -> list[TimedRecord]:
    """The whole input log of a broker URL (SQLite or Kafka). A null record folds as empty
    bytes, as the agent folds it."""
    from streams.log import LogError, Topics, open_log
    from streams.log.kafka_config import KafkaConfigError
    from streams.settings import Settings

    settings = Settings.from_env()
    if url.startswith("sqlite://"):
        from streams.log import BrokerUrl

        try:
            location = BrokerUrl.parse(url, settings).location
        except LogError as exc:
            raise SourceError(str(exc)) from None
        if not Path(location).is_file():
            raise SourceError(f"no log at {url}: {location} does not exist")
    try:
        log = open_log(url, settings)
        await log.start()
        try:
            records = await log.read_all(Topics.from_settings(settings).input)
        finally:
            await log.close()
    except KafkaConfigError:
        raise  # a setting to fix, not a log that cannot be read: the command names it
    except LogError as exc:
        raise SourceError(f"cannot read the log at {url}: {exc}") from None
    except Exception as exc:  # a corrupt SQLite file, an unreachable broker
        raise SourceError(f"cannot read the log at {url}: {type(exc).__name__}: {exc}") from None
    return timed_entries((r.offset, r.value or b"", r.log_time) for r in records)


async def read_decisions(url: str, n_inputs: int) -> dict[int, list[Any]] | None:
    """The decision log by input offset, when it covers the whole input log; else None (an
    agent still behind, or a log without decisions: the recorded world is then replayed).

    Decisions of a type this version does not know are skipped: what-if reads only the shapes
    CONTRACT.md documents."""
    from domain.decisions import decode
    from streams.log import Topics, open_log
    from streams.settings import Settings

    settings = Settings.from_env()
    topics = Topics.from_settings(settings)
    log = open_log(url, settings)
    await log.start()
    try:
        inputs = [r.offset for r in await log.read_all(topics.input)]
        if len(inputs) != n_inputs or not inputs:
            return None
        position = {off: i for i, off in enumerate(inputs)}
        out: dict[int, list[Any]] = {}
        last = -1
        for r in await log.read_all(topics.decisions):
            try:
                d = decode(r.value or b"")
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            i = position.get(d.cause.offset)
            if i is None:
                return None
            out.setdefault(d.cause.offset, []).append(d)
            last = max(last, i)
    finally:
        await log.close()
    # Complete when the agent decided the last input event; one that decides nothing (a valid
    # configuration change) cannot show it, so the recorded world is then replayed.
    return out if last == n_inputs - 1 else None


def read_decision_file(path: str | Path, records: list[TimedRecord]) -> dict[int, list[Any]]:
    """The recorded world's decisions from a file of JSON Lines (what `quotaflow replay FILE`
    prints, or `quotaflow watch -o json` of the agent that decided the log), by input offset.
    They must be the decisions of these very records: each one's cause an offset of the log, and
    the last record decided. A line of a decision type this version does not know is skipped."""
    from domain.decisions import decode

    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise SourceError(f"cannot read {p}: {exc.strerror or exc}") from None
    offsets = {r.offset for r in records}
    out: dict[int, list[Any]] = {}
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = decode(line)
        except msgspec.ValidationError:
            continue  # a decision type this version does not know
        except msgspec.DecodeError as exc:
            raise SourceError(f"{p}:{n}: not a decision: {exc}") from None
        if d.cause.offset not in offsets:
            raise SourceError(f"{p}:{n}: a decision of offset {d.cause.offset}, which the events file does not have: "
                              "these are not its decisions")
        out.setdefault(d.cause.offset, []).append(d)
    if records and records[-1].offset not in out:
        last = max(out, default=None)
        raise SourceError(f"{p} does not decide the whole events file: its last decision is of offset {last}, the "
                          f"file goes on to offset {records[-1].offset} (`quotaflow replay FILE` prints them all)")
    return out
