"""The decision log's records as the fold reads them.

The fold decodes every decision of the log on a rebuild, so it reads them through its own
tagged union: the same tags, fields and types as `domain.decisions` (a record the engine's
decoder refuses is refused here too), but Structs outside the cyclic GC, and an assignment's
`podSetAssignments` kept as its JSON text. What the fold needs of an assignment is the quota it
holds per (flavor, resource); the same few assignments come back all the time, so that is
computed once per distinct text (validated with the engine's own `PodSetAssignment` type) and
shared, read-only, by every record that carries it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from domain.decisions import PodSetAssignment
from domain.quantity import QuantityError, amount
from streams.log import LogError, Record

FR = tuple[str, str]  # (flavor, resource)


class Cause(msgspec.Struct, gc=False):
    offset: int
    index: int


class FoldDecision(msgspec.Struct, tag_field="type", kw_only=True, gc=False):
    workload: str | None = None
    cause: Cause


class Admitted(FoldDecision, tag="Admitted", kw_only=True, gc=False):
    clusterQueue: str
    podSetAssignments: msgspec.Raw


class QuotaReserved(FoldDecision, tag="QuotaReserved", kw_only=True, gc=False):
    clusterQueue: str
    podSetAssignments: msgspec.Raw


class Pending(FoldDecision, tag="Pending", kw_only=True, gc=False):
    reason: str
    message: str


class Preempted(FoldDecision, tag="Preempted", kw_only=True, gc=False):
    preemptor: str
    reason: str
    message: str


class Evicted(FoldDecision, tag="Evicted", kw_only=True, gc=False):
    reason: str
    message: str


class QuotaReleased(FoldDecision, tag="QuotaReleased", kw_only=True, gc=False):
    clusterQueue: str


class Finished(FoldDecision, tag="Finished", kw_only=True, gc=False):
    pass


class Deleted(FoldDecision, tag="Deleted", kw_only=True, gc=False):
    pass


class Rejected(FoldDecision, tag="Rejected", kw_only=True, gc=False):
    reason: str
    message: str
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    batchIndex: int | None = None


class Applied(FoldDecision, tag="Applied", kw_only=True, gc=False):
    kind: str
    name: str | None = None
    namespace: str | None = None
    action: str
    batchIndex: int | None = None


AnyFoldDecision = (
    Admitted | QuotaReserved | Pending | Preempted | Evicted | QuotaReleased | Finished | Deleted | Rejected | Applied
)

# The name a decision is counted under (`Counters.decisions`); None: a record this version cannot decode.
KIND_NAMES: dict[type, str] = {
    cls: cls.__name__
    for cls in (
        Admitted, QuotaReserved, Pending, Preempted, Evicted, QuotaReleased, Finished, Deleted, Rejected, Applied
    )
}
KIND_NAMES[type(None)] = "Unknown"


class DecisionRecord(msgspec.Struct, gc=False):
    """One record of the decision log: where it is, the decision, and its bytes as recorded.

    A Struct outside the cyclic GC (one per decision on a rebuild; it cannot be in a cycle)."""

    offset: int  # in the decision log
    decision: AnyFoldDecision | None  # None: a decision type this version cannot decode
    cause_offset: int
    cause_index: int
    value: bytes
    usage: Mapping[FR, int] | None = None  # Admitted / QuotaReserved: the quota it holds (shared: read only)


class ProjectionError(LogError):
    """The logs do not fit together (a decision without a cause, or caused by an input event that
    is not there)."""


class _CauseOnly(msgspec.Struct, gc=False):
    cause: Cause


_decode = msgspec.json.Decoder(AnyFoldDecision).decode
_cause = msgspec.json.Decoder(_CauseOnly).decode
_assignments = msgspec.json.Decoder(list[PodSetAssignment]).decode

_AMOUNTS: dict[tuple[str, str], int] = {}
_USAGE: dict[bytes, dict[FR, int]] = {}


def _amount(resource: str, quantity: str) -> int:
    """`domain.quantity.amount`, memoized: the same few quantities come back all the time."""
    key = (resource, quantity)
    value = _AMOUNTS.get(key)
    if value is None:
        try:
            value = amount(resource, quantity)
        except QuantityError:
            value = 0
        if len(_AMOUNTS) > 65536:
            _AMOUNTS.clear()
        _AMOUNTS[key] = value
    return value


def assignment_usage(assignments: Iterable[PodSetAssignment]) -> dict[FR, int]:
    """(flavor, resource) -> amount held, from an Admitted/QuotaReserved decision's assignments."""
    usage: dict[FR, int] = {}
    for ps in assignments:
        flavors = ps.flavors
        for res, qty in ps.resourceUsage.items():
            fr = (flavors.get(res, ""), res)
            usage[fr] = usage.get(fr, 0) + _amount(res, qty)
    return usage


def usage_of(assignments: msgspec.Raw | bytes) -> dict[FR, int] | None:
    """The quota held by an assignment's `podSetAssignments` text; None when the engine's
    decoder would refuse it. Shared between records: never change the dict returned."""
    text = bytes(assignments)
    usage = _USAGE.get(text)
    if usage is None:
        try:
            usage = assignment_usage(_assignments(text))
        except msgspec.DecodeError:
            return None
        if len(_USAGE) >= 4096:
            _USAGE.clear()
        _USAGE[text] = usage
    return usage


def decode_decision(offset: int, value: bytes | None) -> DecisionRecord:
    raw = value or b""
    try:
        decision = _decode(raw)
    except msgspec.DecodeError:
        try:
            cause = _cause(raw).cause
        except msgspec.DecodeError:
            raise ProjectionError(f"decision log record at offset {offset} has no cause") from None
        return DecisionRecord(offset, None, cause.offset, cause.index, raw)
    cause = decision.cause
    kind = type(decision)
    if kind is Admitted or kind is QuotaReserved:
        usage = usage_of(decision.podSetAssignments)
        if usage is None:  # the engine's decoder refuses the whole record
            return DecisionRecord(offset, None, cause.offset, cause.index, raw)
        return DecisionRecord(offset, decision, cause.offset, cause.index, raw, usage)
    return DecisionRecord(offset, decision, cause.offset, cause.index, raw)


def decode_records(records: Iterable[Record]) -> list[DecisionRecord]:
    """`decode_decision` of each record, in one loop (a rebuild decodes every decision of the
    log; the common records take no function call of their own here)."""
    out: list[DecisionRecord] = []
    append = out.append
    decode = _decode
    memo = _USAGE
    for r in records:
        raw = r.value
        try:
            d = decode(raw or b"")
        except msgspec.DecodeError:
            append(decode_decision(r.offset, raw))
            continue
        kind = type(d)
        if kind is Admitted or kind is QuotaReserved:
            usage = memo.get(bytes(d.podSetAssignments))  # type: ignore[union-attr]
            if usage is None:  # a new assignment (or one the engine's decoder refuses)
                append(decode_decision(r.offset, raw))
                continue
            cause = d.cause
            append(DecisionRecord(r.offset, d, cause.offset, cause.index, raw or b"", usage))
        else:
            cause = d.cause
            append(DecisionRecord(r.offset, d, cause.offset, cause.index, raw or b""))
    return out
