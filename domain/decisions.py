"""The decision log's records (contract v1), as msgspec Structs.

Field order is the wire order: `type` first (the tag), then `workload`, then `cause`, then the
type's own fields. msgspec encodes Structs field by field and dicts in insertion order, so the
engine builds every dict in sorted key order and the bytes are the same on every run.

Decisions are outside the cyclic GC (`gc=False`): they are immutable records that never refer
back to anything that refers to them, and a consumer that keeps many of them (a replay, a
benchmark, a batch waiting for its commit) should not make every full collection walk them.
"""

from __future__ import annotations

import msgspec


class Cause(msgspec.Struct, frozen=True, gc=False):
    offset: int
    index: int


class PodSetAssignment(msgspec.Struct, frozen=True, gc=False):
    name: str
    flavors: dict[str, str]
    resourceUsage: dict[str, str]
    count: int


class Decision(msgspec.Struct, frozen=True, tag_field="type", omit_defaults=True, kw_only=True, gc=False):
    workload: str | None = None
    cause: Cause


class Admitted(Decision, tag="Admitted", frozen=True, kw_only=True):
    clusterQueue: str
    podSetAssignments: list[PodSetAssignment]


class QuotaReserved(Decision, tag="QuotaReserved", frozen=True, kw_only=True):
    clusterQueue: str
    podSetAssignments: list[PodSetAssignment]


class Pending(Decision, tag="Pending", frozen=True, kw_only=True):
    reason: str
    message: str


class Preempted(Decision, tag="Preempted", frozen=True, kw_only=True):
    preemptor: str
    reason: str
    message: str


class Evicted(Decision, tag="Evicted", frozen=True, kw_only=True):
    reason: str
    message: str


class QuotaReleased(Decision, tag="QuotaReleased", frozen=True, kw_only=True):
    """An evicted workload's quota is given back (its pods are gone, or the policy is Immediate)."""

    clusterQueue: str


class Finished(Decision, tag="Finished", frozen=True, kw_only=True):
    pass


class Deleted(Decision, tag="Deleted", frozen=True, kw_only=True):
    pass


class Rejected(Decision, tag="Rejected", frozen=True, kw_only=True):
    """The event changed nothing. `kind`, `name` and `namespace` say what it named, where it
    named it validly (a Workload, or the config object); `batchIndex` which inner event of its
    Batch it was."""

    reason: str
    message: str
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    batchIndex: int | None = None


class Applied(Decision, tag="Applied", frozen=True, kw_only=True):
    """A configuration event took effect: the object `kind`/`name` (in `namespace` for a
    namespaced kind; no name for the Configuration) was `created`, `updated` or `deleted`.
    `batchIndex`: which inner event of its Batch it was."""

    kind: str
    name: str | None = None
    namespace: str | None = None
    action: str
    batchIndex: int | None = None


class InternalError(Decision, tag="InternalError", frozen=True, kw_only=True):
    """The engine failed on its cause: a bug in quotaflow, not bad input (that is `Rejected`).
    `error` is the exception's type, `message` its text."""

    error: str
    message: str


class Tally:
    """How many InternalError decisions this process has made: the test suite fails any test
    that makes one (tests/conftest.py). Nothing in the engine reads it."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


INTERNAL_ERRORS = Tally()

AnyDecision = (
    Admitted
    | QuotaReserved
    | Pending
    | Preempted
    | Evicted
    | QuotaReleased
    | Finished
    | Deleted
    | Rejected
    | Applied
    | InternalError
)

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyDecision)


def encode(decision: Decision) -> bytes:
    return _encoder.encode(decision)


def decode(data: bytes) -> AnyDecision:
    decision: AnyDecision = _decoder.decode(data)
    return decision
