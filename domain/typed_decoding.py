"""Reading the typed workload events (domain/typed_events.py holds their Structs) into what the
engine needs: the event, a workload's key, a submission's WorkloadSpec. Compiled with the engine;
the Structs stay interpreted, since msgspec reads their annotations at run time.

Anything this path does not fully understand makes `decode` return None or `workload_spec` raise
`NotTyped`, and the engine takes its general path over the same bytes (see typed_events).
"""

from __future__ import annotations

import msgspec

from domain import reasons
from domain.api_fields import schema_for, strict_problems
from domain.fields import Fields, InvalidInput
from domain.names import (
    ANNOTATIONS_MAX,
    label_problem,
    labels_message,
    subdomain_problem,
)
from domain.shared_values import shared_labels, shared_name
from domain.timestamps import TimestampError, parse_time
from domain.typed_events import TypedEvent, TypedWorkload
from domain.workload import (
    MAX_EXEC_TIME_LABEL,
    WORKLOAD_PRIORITY_CLASS_SOURCE,
    PodSet,
    WorkloadSpec,
    pod_sets_of,
    resources_error,
)

_KUEUE_GROUP = "kueue.x-k8s.io"
_V1BETA1 = "kueue.x-k8s.io/v1beta1"
_V1BETA2 = "kueue.x-k8s.io/v1beta2"


class NotTyped(Exception):
    """The typed path cannot decide this event alone: take the general path."""


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
        try:
            # A number out of range (1e400) fails here, not when the envelope was decoded.
            items = _decode_any(key) if key else None
        except msgspec.DecodeError:
            raise NotTyped from None
        unknown, refused = strict_problems({"spec": {"podSets": items}}, schema_for("Workload", ""))
        if unknown or refused:
            raise NotTyped
        try:
            pod_sets = pod_sets_of(Fields({"podSets": items}, "workload.spec", reasons.INVALID_WORKLOAD))
        except InvalidInput:
            raise NotTyped from None
        cached = (pod_sets, resources_error(pod_sets))
        if len(_POD_SETS) >= _POD_SETS_LIMIT:
            _POD_SETS.clear()
        _POD_SETS[key] = cached
    return cached


def workload_spec(wl: TypedWorkload | None) -> WorkloadSpec:
    """What `workload.parse_workload` returns for the same object; NotTyped where it would
    raise (or where this path does not follow it)."""
    if wl is None or wl.metadata is None or wl.spec is None:
        raise NotTyped
    if wl.kind is not None and wl.kind != "Workload":
        raise NotTyped
    api = wl.apiVersion
    spec = wl.spec
    # What the general path refuses, or reads beyond this path: a version's own spelling used in
    # the other, a PriorityClass source, a fully spelled priorityClassRef, fields not supported.
    if api is not None and api not in (_V1BETA1, _V1BETA2):
        raise NotTyped
    if api == _V1BETA2 and (spec.priorityClassName is not None or spec.priorityClassSource is not None):
        raise NotTyped
    if api == _V1BETA1 and (spec.priorityClassRef is not None or spec.preemptionGates):
        raise NotTyped
    if spec.priorityClassSource not in (None, "", WORKLOAD_PRIORITY_CLASS_SOURCE):
        raise NotTyped
    ref = spec.priorityClassRef
    if ref is not None and (
        ref.group not in (None, _KUEUE_GROUP) or ref.kind not in (None, "WorkloadPriorityClass")
    ):
        raise NotTyped  # a PriorityClass, or a mismatch the general path refuses
    if spec.maximumExecutionTimeSeconds or spec.preemptionGates:
        raise NotTyped
    meta = wl.metadata
    name = meta.name
    if not name or subdomain_problem(name) is not None:
        raise NotTyped
    namespace = meta.namespace or "default"
    if label_problem(namespace) is not None:
        raise NotTyped
    # The general path weighs the decoded annotations; their raw JSON is never shorter.
    if len(meta.annotations) > ANNOTATIONS_MAX:
        raise NotTyped
    creation: int | None = None
    if meta.creationTimestamp is not None:
        try:
            creation = parse_time(meta.creationTimestamp)
        except TimestampError:
            raise NotTyped from None
    priority = spec.priority
    if priority is not None and not -(2**31) <= priority < 2**31:
        raise NotTyped
    pcn = spec.priorityClassName
    if pcn is None and spec.priorityClassRef is not None:
        pcn = spec.priorityClassRef.name
    if pcn and subdomain_problem(pcn) is not None:
        raise NotTyped
    queue_name = spec.queueName or ""
    if queue_name and subdomain_problem(queue_name) is not None:
        raise NotTyped
    labels = meta.labels
    if labels and (labels_message(sorted(labels.items())) is not None or MAX_EXEC_TIME_LABEL in labels):
        raise NotTyped
    pod_sets, error = _pod_sets(spec.podSets)
    return WorkloadSpec(
        namespace=shared_name(namespace),
        name=name,
        queue_name=shared_name(queue_name),
        priority=priority,
        priority_class=pcn or None,
        active=True if spec.active is None else spec.active,
        labels=shared_labels(tuple(sorted(labels.items()))) if labels else (),
        creation_time=creation,
        pod_sets=pod_sets,
        uid=meta.uid,
        resources_error=error,
    )


__all__ = ["NotTyped", "decode", "workload_ref", "workload_spec"]
