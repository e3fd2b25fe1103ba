"""A typed fast path for the events of a busy log: submissions, finishes, deletions and releases
as bytes.

Most input events are `WorkloadSubmitted`, `WorkloadFinished`, `WorkloadDeleted` and (where
workloads are preempted) `WorkloadReleased`. Decoding them into plain dicts and then walking
those with `Fields` cost more than the decisions they lead to; here msgspec decodes them
straight into Structs with Kueue's field names, and a
submission's pod sets stay raw JSON bytes that key a memo of their parse (job templates
repeat), so a pod template is neither built as dicts nor parsed again.

A `Batch` is read the same way: its envelope typed with the inner events left as raw JSON,
and each inner event then typed on its own (agents and producers batch busy streams, so most
submissions arrive inside one).

The fast path only ever accepts: anything it does not fully understand — another event type,
a field of an unexpected type, a value the general parser would refuse — makes `decode` return
None (or `workload_spec` raise `NotTyped`), and the engine takes its general path over the same
bytes, which produces the `Rejected` decision and its message. So for every input this path
either yields exactly what the general path would, or defers to it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from domain import reasons
from domain.fields import Fields, InvalidInput
from domain.timestamps import TimestampError, parse_time
from domain.workload import PodSet, WorkloadSpec, pod_sets_of, resources_error


class NotTyped(Exception):
    """The typed path cannot decide this event alone: take the general path."""


class _Ref(msgspec.Struct):
    name: str | None = None


class _Meta(msgspec.Struct):
    name: str | None = None
    namespace: str | None = None
    creationTimestamp: Any = None
    labels: dict[str, str] | None = None
    uid: str | None = None


class _Spec(msgspec.Struct):
    queueName: str | None = None
    priority: int | None = None
    priorityClassName: str | None = None
    priorityClassRef: _Ref | None = None
    active: bool | None = None
    podSets: msgspec.Raw = msgspec.Raw()  # empty: absent


class _Workload(msgspec.Struct):
    kind: str | None = None
    metadata: _Meta | None = None
    spec: _Spec | None = None


class Submitted(msgspec.Struct, tag_field="type", tag="WorkloadSubmitted"):
    id: str | None = None
    time: str | None = None
    workload: _Workload | None = None


class _ByName(msgspec.Struct):
    """The fields of an event that names a workload by namespace and name."""

    id: str | None = None
    time: str | None = None
    namespace: str | None = None
    name: str | None = None


class Finished(_ByName, tag_field="type", tag="WorkloadFinished"):
    pass


class Deleted(_ByName, tag_field="type", tag="WorkloadDeleted"):
    pass


class Released(_ByName, tag_field="type", tag="WorkloadReleased"):
    pass


class Batch(msgspec.Struct, tag_field="type", tag="Batch"):
    """A Batch whose inner events stay raw JSON: each is then read like a top-level event,
    typed where it can be and by the general path where not."""

    id: str | None = None
    time: str | None = None
    events: list[msgspec.Raw] | None = None  # None: absent (the general path decides)


WorkloadEvent = Submitted | Finished | Deleted | Released
TypedEvent = WorkloadEvent | Batch

_decoder: msgspec.json.Decoder[TypedEvent] = msgspec.json.Decoder(TypedEvent)


def decode(event: bytes | msgspec.Raw) -> TypedEvent | None:
    """The event as a typed Struct, or None when the general path must read it."""
    try:
        return _decoder.decode(event)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None


def workload_ref(namespace: str | None, name: str | None) -> str:
    """`namespace/name` as the general path's lookup builds it (name required: else NotTyped)."""
    if name is None:
        raise NotTyped
    return f"{namespace or 'default'}/{name}"


# Raw `podSets` bytes -> (pod sets, resources error). Only successful parses are kept, and the
# result does not depend on what the memo holds.
_POD_SETS: dict[bytes, tuple[tuple[PodSet, ...], str | None]] = {}
_POD_SETS_LIMIT = 4096
_decode_any = msgspec.json.decode


def _pod_sets(raw: msgspec.Raw) -> tuple[tuple[PodSet, ...], str | None]:
    key = bytes(raw)
    cached = _POD_SETS.get(key)
    if cached is None:
        items = _decode_any(key) if key else None
        try:
            pod_sets = pod_sets_of(Fields({"podSets": items}, "workload.spec", reasons.INVALID_WORKLOAD))
        except InvalidInput:
            raise NotTyped from None
        cached = (pod_sets, resources_error(pod_sets))
        if len(_POD_SETS) >= _POD_SETS_LIMIT:
            _POD_SETS.clear()
        _POD_SETS[key] = cached
    return cached


def workload_spec(wl: _Workload | None) -> WorkloadSpec:
    """What `workload.parse_workload` returns for the same object; NotTyped where it would
    raise (or where this path does not follow it)."""
    if wl is None or wl.metadata is None or wl.spec is None:
        raise NotTyped
    if wl.kind is not None and wl.kind != "Workload":
        raise NotTyped
    meta = wl.metadata
    name = meta.name
    if not name:
        raise NotTyped
    creation: int | None = None
    if meta.creationTimestamp is not None:
        try:
            creation = parse_time(meta.creationTimestamp)
        except TimestampError:
            raise NotTyped from None
    spec = wl.spec
    priority = spec.priority
    if priority is not None and not -(2**31) <= priority < 2**31:
        raise NotTyped
    pcn = spec.priorityClassName
    if pcn is None and spec.priorityClassRef is not None:
        pcn = spec.priorityClassRef.name
    pod_sets, error = _pod_sets(spec.podSets)
    labels = meta.labels
    return WorkloadSpec(
        namespace=meta.namespace or "default",
        name=name,
        queue_name=spec.queueName or "",
        priority=priority,
        priority_class=pcn or None,
        active=True if spec.active is None else spec.active,
        labels=tuple(sorted(labels.items())) if labels else (),
        creation_time=creation,
        pod_sets=pod_sets,
        uid=meta.uid,
        resources_error=error,
    )


__all__ = ["Batch", "Deleted", "Finished", "NotTyped", "Released", "Submitted", "TypedEvent", "WorkloadEvent", "decode", "workload_ref", "workload_spec"]
