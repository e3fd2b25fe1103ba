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

These are the Structs (msgspec reads their annotations at run time, so this module stays
interpreted); domain/typed_decoding.py reads them, compiled with the engine.

The fast path only ever accepts: anything it does not fully understand — another event type,
a field of an unexpected type, a value the general parser would refuse — makes `decode` return
None (or `workload_spec` raise `NotTyped`), and the engine takes its general path over the same
bytes, which produces the `Rejected` decision and its message. So for every input this path
either yields exactly what the general path would, or defers to it.
"""

from __future__ import annotations

from typing import Any

import msgspec


# Each Struct forbids fields it does not know: a workload with a field Kubernetes' API server would
# not decode (or one quotaflow refuses) fails here and takes the general path, which rejects it.
class _Ref(msgspec.Struct, forbid_unknown_fields=True):
    group: str | None = None
    kind: str | None = None
    name: str | None = None


class _Meta(msgspec.Struct, forbid_unknown_fields=True):
    name: str | None = None
    namespace: str | None = None
    creationTimestamp: Any = None
    labels: dict[str, str] | None = None
    uid: str | None = None
    annotations: msgspec.Raw = msgspec.Raw()  # only its size is read: empty when absent
    # The rest of ObjectMeta: accepted, not read.
    generateName: msgspec.Raw = msgspec.Raw()
    selfLink: msgspec.Raw = msgspec.Raw()
    resourceVersion: msgspec.Raw = msgspec.Raw()
    generation: msgspec.Raw = msgspec.Raw()
    deletionTimestamp: msgspec.Raw = msgspec.Raw()
    deletionGracePeriodSeconds: msgspec.Raw = msgspec.Raw()
    ownerReferences: msgspec.Raw = msgspec.Raw()
    finalizers: msgspec.Raw = msgspec.Raw()
    managedFields: msgspec.Raw = msgspec.Raw()


class _Spec(msgspec.Struct, forbid_unknown_fields=True):
    queueName: str | None = None
    priority: int | None = None
    priorityClassName: str | None = None
    priorityClassSource: str | None = None
    priorityClassRef: _Ref | None = None
    active: bool | None = None
    podSets: msgspec.Raw = msgspec.Raw()  # empty: absent
    # Read (maximumExecutionTimeSeconds) or refused (preemptionGates) by the general path: here
    # only seen, to defer to it.
    maximumExecutionTimeSeconds: msgspec.Raw = msgspec.Raw()
    preemptionGates: msgspec.Raw = msgspec.Raw()


class TypedWorkload(msgspec.Struct, forbid_unknown_fields=True):
    apiVersion: str | None = None
    kind: str | None = None
    metadata: _Meta | None = None
    spec: _Spec | None = None
    status: msgspec.Raw = msgspec.Raw()


class Submitted(msgspec.Struct, tag_field="type", tag="WorkloadSubmitted"):
    id: str | None = None
    time: str | None = None
    workload: TypedWorkload | None = None


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

__all__ = ["Batch", "Deleted", "Finished", "Released", "Submitted", "TypedEvent", "TypedWorkload", "WorkloadEvent"]


class Timed(msgspec.Struct):
    """An event's top-level `time` and `source`, read before it is decided (domain/clock.py).
    A `source` that is not a string fails this decode, so its time is not read either: the
    event is refused for its source when it is decided."""

    time: str | None = None
    source: str | None = None


decode_timed = msgspec.json.Decoder(Timed).decode
