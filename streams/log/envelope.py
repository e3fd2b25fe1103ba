"""How events, decisions and snapshots sit in log records: CloudEvents' Kafka binding, binary mode.

The record value is the contract's JSON object itself (an input event, or a decision), unchanged:
the engine reads only the value, so a log written by any producer folds the same way as a file
given to `quotaflow replay`. The CloudEvents envelope travels in headers, as the Kafka protocol
binding's binary content mode puts it (https://github.com/cloudevents/spec, kafka-protocol-binding):

| header | input events | decisions |
| --- | --- | --- |
| `ce_specversion` | `1.0` | `1.0` |
| `ce_type` | `dev.quotaflow.event.<type>` (e.g. `...event.WorkloadSubmitted`) | `dev.quotaflow.decision.<type>` |
| `ce_id` | the event's `id` if it has one, else a fresh UUID | `<cause.offset>.<cause.index>`: a re-delivered decision keeps its id |
| `ce_time` | the event's `time` if it has one, else when it was sent (RFC 3339, UTC) | when it was decided |
| `ce_source` | who sent it (the client's `source`, `/quotaflow/cli` for the CLI) | `/quotaflow/agent/<input topic>` |
| `ce_subject` | the record key, when there is one | the workload, when there is one |
| `content-type` | `application/json` | `application/json` |

Record keys: `namespace/name` for workload events and decisions about a workload, `Kind/name` for
cluster-scoped configuration objects and `Kind/namespace/name` for namespaced ones (LocalQueue),
none for a `Batch` or a decision that names no workload. The envelope is informational: nothing
downstream depends on headers being present, so raw JSON written by any Kafka producer is fine,
and garbage is rejected by the engine like any other bad input.

Snapshot records (`dev.quotaflow.snapshot`) carry a zlib-compressed msgspec snapshot in chunks;
see `streams.log.snapshots`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from domain.decisions import Decision
from streams.log import Message, Record

SPECVERSION = b"1.0"
JSON = b"application/json"
EVENT_TYPE_PREFIX = "dev.quotaflow.event."
DECISION_TYPE_PREFIX = "dev.quotaflow.decision."
SNAPSHOT_TYPE = "dev.quotaflow.snapshot"
CLI_SOURCE = "/quotaflow/cli"

_json_encode = msgspec.json.Encoder().encode

WORKLOAD_EVENTS = ("WorkloadSubmitted", "WorkloadUpdated")
WORKLOAD_REF_EVENTS = (
    "WorkloadFinished",
    "WorkloadDeleted",
    "WorkloadReleased",
    "AdmissionCheckStateChanged",
    "WorkloadPodsReady",
)
NAMESPACED_KINDS = ("LocalQueue",)


def now_rfc3339() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def config_key(kind: str, name: str, namespace: str | None = None) -> str:
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


def event_key(event: Mapping[str, Any]) -> str | None:
    """The record key of an input event (see the module doc); None when it has none."""
    etype = event.get("type")
    try:
        if etype in WORKLOAD_EVENTS:
            meta = event["workload"].get("metadata") or {}
            return f"{meta.get('namespace') or 'default'}/{meta['name']}"
        if etype in WORKLOAD_REF_EVENTS:
            return f"{event.get('namespace') or 'default'}/{event['name']}"
        if etype == "ConfigApplied":
            obj = event["object"]
            meta = obj.get("metadata") or {}
            namespace = meta.get("namespace") if obj.get("kind") in NAMESPACED_KINDS else None
            return config_key(obj["kind"], meta["name"], namespace)
        if etype == "ConfigDeleted":
            namespace = event.get("namespace") if event.get("kind") in NAMESPACED_KINDS else None
            return config_key(event["kind"], event["name"], namespace)
    except (KeyError, TypeError, AttributeError):
        return None  # an invalid event: the engine will say what is wrong with it
    return None


def event_message(event: Mapping[str, Any] | bytes, *, source: str = CLI_SOURCE) -> Message:
    """An input event as a log message. The value is the event's JSON, as given."""
    if isinstance(event, bytes):
        try:
            parsed = msgspec.json.decode(event)
        except msgspec.DecodeError:
            parsed = None
        value = event
    else:
        parsed = event
        value = _json_encode(event)
    etype = "Unknown"
    key = None
    event_id = None
    event_time = None
    if isinstance(parsed, Mapping):
        etype = str(parsed.get("type", "Unknown"))
        key = event_key(parsed)
        if isinstance(parsed.get("id"), str):
            event_id = parsed["id"]
        if isinstance(parsed.get("time"), str):
            event_time = parsed["time"]
    headers: list[tuple[str, bytes]] = [
        ("ce_specversion", SPECVERSION),
        ("ce_type", (EVENT_TYPE_PREFIX + etype).encode()),
        ("ce_id", (event_id or str(uuid.uuid4())).encode()),
        ("ce_time", (event_time or now_rfc3339()).encode()),
        ("ce_source", source.encode()),
    ]
    if key is not None:
        headers.append(("ce_subject", key.encode()))
    headers.append(("content-type", JSON))
    return Message(value=value, key=key.encode() if key is not None else None, headers=tuple(headers))


_SPEC = ("ce_specversion", SPECVERSION)
_CONTENT_TYPE = ("content-type", JSON)
_decision_types: dict[type, tuple[str, bytes]] = {}


def _decision_type(cls: type) -> tuple[str, bytes]:
    header = _decision_types.get(cls)
    if header is None:
        header = _decision_types[cls] = ("ce_type", (DECISION_TYPE_PREFIX + cls.__name__).encode())
    return header


def decision_message(decision: Decision, value: bytes, *, source: str | bytes, time: bytes) -> Message:
    """A decision as a log message; `value` is `domain.decisions.encode(decision)`.

    The agent makes one per decision, so the constant headers are shared tuples, not rebuilt."""
    cause = decision.cause
    head = (
        _SPEC,
        _decision_type(type(decision)),
        ("ce_id", b"%d.%d" % (cause.offset, cause.index)),
        ("ce_time", time),
        ("ce_source", source if isinstance(source, bytes) else source.encode()),
    )
    workload = decision.workload
    if workload:
        key = workload.encode()
        return Message(value, key, (*head, ("ce_subject", key), _CONTENT_TYPE))
    return Message(value, None, (*head, _CONTENT_TYPE))


_decision_types_by_name: dict[str, tuple[str, bytes]] = {}


def decision_message_of(
    type_name: str, workload: str | None, offset: int, index: int, value: bytes, *, source: bytes, time: bytes
) -> Message:
    """`decision_message` from a decision's parts, for a shell that holds only its encoded bytes
    (the engine runs in another process: `streams.agent.engine_host`). Same headers, same key."""
    ce_type_header = _decision_types_by_name.get(type_name)
    if ce_type_header is None:
        ce_type_header = _decision_types_by_name[type_name] = ("ce_type", (DECISION_TYPE_PREFIX + type_name).encode())
    head = (
        _SPEC,
        ce_type_header,
        ("ce_id", b"%d.%d" % (offset, index)),
        ("ce_time", time),
        ("ce_source", source),
    )
    if workload:
        key = workload.encode()
        return Message(value, key, (*head, ("ce_subject", key), _CONTENT_TYPE))
    return Message(value, None, (*head, _CONTENT_TYPE))


def agent_source(input_topic: str) -> str:
    return f"/quotaflow/agent/{input_topic}"


def ce_type(record: Record) -> str | None:
    raw = record.header("ce_type")
    return raw.decode(errors="replace") if raw is not None else None
