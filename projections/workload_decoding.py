"""Reading workload events and accepted Workloads fast: msgspec Structs for what the fold reads,
and `parse_workload` memoized per template."""

from __future__ import annotations

from typing import Any

import msgspec

from domain.timestamps import parse_time
from domain.workload import WorkloadSpec, parse_workload

_json = msgspec.json.Decoder()


class _WorkloadMeta(msgspec.Struct, gc=False):
    name: Any = None
    namespace: Any = None
    labels: msgspec.Raw = msgspec.Raw()
    creationTimestamp: Any = None
    uid: Any = None


class _WorkloadDoc(msgspec.Struct, gc=False):
    """The members of a Workload that `parse_workload` reads (it reads no other top-level one),
    the parts that make its template as JSON text."""

    kind: msgspec.Raw = msgspec.Raw()  # empty: absent (a Raw field cannot be optional)
    metadata: _WorkloadMeta | None = None
    spec: msgspec.Raw = msgspec.Raw()


class Envelope(msgspec.Struct, gc=False):
    """What the fold reads of a workload event on its fast path (the other fields are skipped
    unparsed). Decoding into this instead of a dict builds no objects for the event's body. An
    event this cannot hold (a `workload` or its `metadata` that is not an object) is read as a
    dict instead."""

    type: Any = None
    id: Any = None
    time: Any = None
    workload: _WorkloadDoc | None = None


envelope_decoder = msgspec.json.Decoder(Envelope)
workload_doc_decoder = msgspec.json.Decoder(_WorkloadDoc)
# Top-level events the fold takes from `Envelope` alone; the rest are decoded as dicts.



_encode = msgspec.json.Encoder().encode
_SPECS: dict[tuple[Any, ...], WorkloadSpec] = {}
_IDENTITY = ("name", "creationTimestamp", "uid")


def parse_accepted(raw: Any) -> WorkloadSpec:
    """`parse_workload` of a Workload the engine accepted, memoized per template.

    Workloads of one job template differ only in their identity (name, creationTimestamp, uid);
    everything else -- namespace, labels, priority, queue, pod sets -- is parsed once by
    `parse_workload` itself and shared. Only for events the engine accepted (their validity is
    settled); inner events of a Batch are parsed in full every time.
    """
    template = template_of(raw)
    if template is None:
        return parse_workload(raw)
    meta = raw["metadata"]
    return stamped(template, meta["name"], created_of(meta.get("creationTimestamp")), meta.get("uid"))


def template_of(raw: Any) -> WorkloadSpec | None:
    """The parsed template of a Workload dict; None when it cannot be memoized (parse it whole)."""
    meta = raw.get("metadata") if type(raw) is dict else None
    if type(meta) is not dict or not isinstance(meta.get("name"), str):
        return None
    try:
        key = (
            meta.get("namespace"),
            _encode(meta.get("labels")),
            _encode({k: v for k, v in raw.items() if k != "metadata"}),
        )
        template = _SPECS.get(key)
    except (TypeError, msgspec.EncodeError):
        return None
    if template is None:
        generic = {**raw, "metadata": {k: v for k, v in meta.items() if k not in _IDENTITY} | {"name": "template"}}
        template = parse_workload(generic)
        if len(_SPECS) >= 4096:
            _SPECS.clear()
        _SPECS[key] = template
    return template


def created_of(value: Any) -> int | None:
    return parse_time(value) if value is not None else None


def stamped(template: WorkloadSpec, name: str, created: int | None, uid: Any) -> WorkloadSpec:
    return WorkloadSpec(
        template.namespace, name, template.queue_name, template.priority, template.priority_class,
        template.active, template.labels, created, template.pod_sets, uid if isinstance(uid, str) else None,
        pod_priority_class=template.pod_priority_class,
    )


_RAW_SPECS: dict[tuple[Any, ...], WorkloadSpec] = {}
Stamp = tuple[WorkloadSpec, str, int | None, str | None]  # (template, name, creation time, uid)


def accepted_stamp(data: msgspec.Raw | bytes) -> Stamp | None:
    """A Workload given as JSON, that the engine accepted, as (its template, name, creation
    time, uid), reading only its identity unless its template is new. None: not memoizable
    (parse it whole).

    The template key is the JSON text of what `parse_workload` reads besides the identity (the
    namespace, the labels' text, `kind` and `spec`, as written): equal text is equal content, so
    a hit is exactly the template `parse_accepted` would use; text that differs only in spelling
    just misses and is parsed."""
    try:
        doc = workload_doc_decoder.decode(data)
    except msgspec.DecodeError:  # not an object (or metadata is not): the full parse says why
        return None
    return stamp_of(doc, data, False)


def stamp_of(doc: _WorkloadDoc, source: msgspec.Raw | bytes, in_event: bool) -> Stamp | None:
    """`accepted_stamp` of a decoded `_WorkloadDoc`. `source` is the JSON it was decoded from
    (the Workload, or the event holding it when `in_event`), decoded again only when its
    template is new."""
    meta = doc.metadata
    if meta is None or type(meta.name) is not str or not (meta.namespace is None or type(meta.namespace) is str):
        return None
    key = (meta.namespace, bytes(meta.labels), bytes(doc.kind), bytes(doc.spec))
    template = _RAW_SPECS.get(key)
    if template is None:
        whole = _json.decode(source)
        template = template_of(whole.get("workload") if in_event else whole)
        if template is None:
            return None
        if len(_RAW_SPECS) >= 4096:
            _RAW_SPECS.clear()
        _RAW_SPECS[key] = template
    created = meta.creationTimestamp
    uid = meta.uid
    return (template, meta.name, parse_time(created) if created is not None else None, uid if type(uid) is str else None)


def parse_accepted_json(data: msgspec.Raw | bytes) -> WorkloadSpec:
    """`parse_accepted` of a Workload given as JSON (see `accepted_stamp`). Empty `data`: no workload."""
    if not data:
        return parse_workload(None)
    stamp = accepted_stamp(data)
    if stamp is None:
        return parse_accepted(_json.decode(data))
    return stamped(*stamp)
