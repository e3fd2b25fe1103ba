"""Reading an input record: its bytes into an event, and the event's envelope.

The envelope is what every event has whatever its type (the contract's optional `id` and
`time`) and its position in the log. The one place that reads it, for every path an event
takes (decoded typed or as a dict, at the top level or inside a Batch):

- `id`: a producer-chosen string; an event whose id was already seen is a producer's retry,
  which changes nothing and gets no decision (`is_retry`); an applied event's id is remembered
  (`remember`).
- `time`: RFC 3339, in microseconds (`event_time`); the latest time of an applied event is the
  log's clock (`advance_clock`), which stands in for Kueue's wall clock.
- position: an event at log offset `o` is at `o * BATCH_SLOTS`, the i-th event of a Batch there
  at `o * BATCH_SLOTS + i` (a workload's FIFO tie-break).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import msgspec

from domain import reasons
from domain.decisions import Rejected
from domain.emitter import Emitter
from domain.fields import InvalidInput, type_name
from domain.limits import record_error, value_error
from domain.names import label_problem, subdomain_problem
from domain.objects import KINDS, NAMESPACED_KINDS
from domain.state import State
from domain.timestamps import TimestampError, parse_time

BATCH_SLOTS = 1 << 16  # log positions inside one Batch event

_json = msgspec.json.Decoder()


class Unparseable(NamedTuple):
    """An input record the reader could not even decode (say, a broken YAML document)."""

    message: str


Record = bytes | str | Mapping[str, Any] | Unparseable


def limit_error(event: Record) -> str | None:
    """Which input limit (domain/limits.py) the record is over, measured before it is decoded."""
    if type(event) is bytes:
        return record_error(event)
    if type(event) is str:
        return record_error(event.encode("utf-8", "replace"))
    if isinstance(event, Unparseable):
        return None
    return value_error(event)


def decode_record(event: Record, out: Emitter) -> Mapping[str, Any] | None:
    """The record as an event object, or None after a `Rejected` saying why it is not one."""
    if type(event) is bytes:
        try:
            raw = _json.decode(event)
        except (msgspec.DecodeError, UnicodeDecodeError):
            pass  # reported below, by the general path
        else:
            if type(raw) is dict:
                return raw
    if isinstance(event, Mapping):
        return event
    if isinstance(event, Unparseable):
        out.emit(Rejected, reason=reasons.MALFORMED_EVENT, message=event.message)
        return None
    try:
        raw = _json.decode(event)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        out.emit(Rejected, reason=reasons.MALFORMED_EVENT, message=f"event is not valid JSON: {exc}")
        return None
    if not isinstance(raw, Mapping):
        out.emit(
            Rejected, reason=reasons.MALFORMED_EVENT, message=f"event must be a JSON object, got {type_name(raw)}"
        )
        return None
    return raw


def is_retry(state: State, event_id: object) -> bool:
    """Whether an event with this `id` was applied already; a malformed id is refused."""
    if event_id is None:
        return False
    if not isinstance(event_id, str):
        raise InvalidInput(reasons.MALFORMED_EVENT, f"id: expected a string, got {type_name(event_id)}")
    return event_id in state.seen_ids


def event_time(raw_time: object) -> int | None:
    """The event's `time` in microseconds, None when it has none; a malformed one is refused."""
    if raw_time is None:
        return None
    try:
        return parse_time(raw_time)
    except TimestampError as bad_time:  # not `exc`: mypyc types a name by its first except
        raise InvalidInput(reasons.MALFORMED_EVENT, f"time: {bad_time}") from None


def advance_clock(state: State, time: int | None) -> None:
    if time is not None and time > state.clock:
        state.clock = time


def remember(state: State, event_id: str | None) -> None:
    if event_id is not None:
        state.seen_ids.add(event_id)


_WORKLOAD_EVENTS = (
    "WorkloadFinished", "WorkloadDeleted", "WorkloadReleased", "AdmissionCheckStateChanged", "WorkloadPodsReady",
)


def subject(raw: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """The kind, name and namespace of what an event names (a Workload, or a config object), each
    where it is one Kubernetes would accept: a Rejected decision carries them, and an invalid
    name is quoted, cut short, in its message instead."""
    etype = raw.get("type")
    kind: object = None
    name: object = None
    namespace: object = None
    if etype in ("WorkloadSubmitted", "WorkloadUpdated"):
        kind = "Workload"
        meta = _mapping(_mapping(raw.get("workload")).get("metadata"))
        name, namespace = meta.get("name"), meta.get("namespace") or "default"
    elif etype in _WORKLOAD_EVENTS:
        kind, name, namespace = "Workload", raw.get("name"), raw.get("namespace") or "default"
    elif etype == "ConfigApplied":
        obj = _mapping(raw.get("object"))
        meta = _mapping(obj.get("metadata"))
        kind, name, namespace = obj.get("kind"), meta.get("name"), meta.get("namespace") or "default"
    elif etype == "ConfigDeleted":
        kind, name, namespace = raw.get("kind"), raw.get("name"), raw.get("namespace") or "default"
    if kind != "Workload" and kind not in KINDS:
        return None, None, None
    assert isinstance(kind, str)
    if kind == "Configuration":
        return kind, None, None
    if kind != "Workload" and kind not in NAMESPACED_KINDS:
        namespace = None
    valid_name = isinstance(name, str) and (label_problem if kind == "Namespace" else subdomain_problem)(name) is None
    valid_namespace = isinstance(namespace, str) and label_problem(namespace) is None
    return (
        kind,
        name if valid_name and isinstance(name, str) else None,
        namespace if valid_namespace and isinstance(namespace, str) else None,
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
