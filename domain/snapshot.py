"""Engine snapshots: the whole state after some input offset, msgspec-encoded.

A snapshot stores what the state was built from and every piece of bookkeeping whose order can
reach a decision (who waits where, in which order, which queue heads are parked and why), so an
engine restored from a snapshot taken after offset N produces, for the events after N, exactly
the decisions the original engine produces. Quota usage and queue orderings are derived again on
restore, never stored twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import msgspec

from domain.admission_fair_sharing import LedgerEntry, UsageLedger
from domain.decisions import PodSetAssignment
from domain.emitter import Emitter
from domain.engine import Engine
from domain.lifecycle import equivalence_class
from domain.objects import parse_object
from domain.quota import fr_key
from domain.shared_values import shared_status
from domain.state import Admission, WorkloadState
from domain.timers import PodsReadyState, Timers
from domain.workload import WorkloadSpec

# 2: parked classes keep their filing by resource (QueueSnap.filed).
# 3: a queue's preemptor workload, kept while it is parked (QueueSnap.preemptor).
# 4: a workload's creation queue time while an eviction's time orders it (created_queue_time).
FORMAT_VERSION = 4


class AdmissionSnap(msgspec.Struct, array_like=True):
    cluster_queue: str
    pod_sets: list[PodSetAssignment]
    usage: list[tuple[str, str, int]]
    sequence: tuple[int, int]
    checks: list[tuple[str, str]]
    admitted: bool


class WorkloadSnap(msgspec.Struct, array_like=True):
    spec: WorkloadSpec
    seq: int
    queue_time: int
    priority: int
    cluster_queue: str | None
    queued: bool
    admission: AdmissionSnap | None
    last_status: tuple[str, str] | None
    parked_on: str | None
    evicted: bool
    created_queue_time: int | None


class QueueSnap(msgspec.Struct, array_like=True):
    name: str
    admitted: list[str]
    parked: list[tuple[str, tuple[str, str]]]  # (a member of the parked class, status)
    blocked: bool
    sticky: str | None
    # (a member of the class, resource, amount) of each parked class filed by resource: a class
    # restored generic would wake where the original sleeps.
    filed: list[tuple[str, str, int]]
    # Kueue's preemptor workload of the queue (ClusterQueueState.preemptor): once woken it heads
    # its queue again, so a restored engine without it would try a different head.
    preemptor: str | None


class LedgerSnap(msgspec.Struct, array_like=True):
    """One LocalQueue's admission-fair-sharing entry (domain/admission_fair_sharing.py)."""

    namespace: str
    name: str
    last_update: int
    # nano-units outgrow msgpack's 64-bit integers (8Gi of memory is 8.6e18): decimal strings
    consumed: list[tuple[str, str]]
    penalties: list[tuple[str, list[tuple[str, str]]]]
    admitted: list[tuple[str, int]]
    base: list[tuple[str, str]]
    base_ticks: int


class TimersSnap(msgspec.Struct, array_like=True):
    """The time-driven rules' state (domain/timers.py): live deadlines as (deadline, kind, key),
    accounts of execution time, PodsReady bookkeeping as (key, ready, requeue count, requeue
    at), in their own order."""

    live: list[tuple[int, str, str]]
    executed: list[tuple[str, int]]
    admitted_since: list[tuple[str, int]]
    pods: list[tuple[str, bool, int, int | None]]
    not_ready: list[str]
    watch_execution: bool


class Snapshot(msgspec.Struct):
    version: int
    objects: list[tuple[str, dict[str, Any]]]
    terminating: list[str]
    workloads: list[WorkloadSnap]
    queues: list[QueueSnap]
    by_local_queue: list[tuple[str, str, list[str]]]
    by_priority_class: list[tuple[str, list[str]]]
    parked: list[tuple[str, list[str]]]
    ready: list[str]
    finished: list[str]
    seen_ids: list[str]
    clock: int
    deferred: list[str]
    # Admission fair sharing: the ledger's entries, and the admitted workloads counted in them
    # as (workload, namespace, LocalQueue, usage). Absent from snapshots made without it.
    afs: list[LedgerSnap] = []
    afs_counted: list[tuple[str, str, str, list[tuple[str, int]]]] = []
    timers: TimersSnap | None = None


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Snapshot)


class SnapshotError(ValueError):
    pass


def dump(engine: Engine) -> bytes:
    state = engine.state
    workloads = [
        WorkloadSnap(
            ws.spec,
            ws.seq,
            ws.queue_time,
            ws.priority,
            ws.cluster_queue,
            ws.queued,
            None
            if ws.admission is None
            else AdmissionSnap(
                ws.admission.cluster_queue,
                ws.admission.pod_sets,
                [(f, r, v) for (f, r), v in ws.admission.usage.items()],
                ws.admission.sequence,
                list(ws.admission.checks.items()),
                ws.admission.admitted,
            ),
            cast("tuple[str, str] | None", ws.last_status),
            ws.parked_on,
            ws.evicted,
            ws.created_queue_time,
        )
        for ws in state.workloads.values()
    ]
    queues = []
    for cq in state.cluster_queues.values():
        q = cq.queue
        parked = []
        filed = []
        for cls, status in q.parked.items():
            member = cast(str, q.classes[cls].first()[3])
            parked.append((member, cast("tuple[str, str]", status)))
            needs = q.filing(cls)
            if needs is not None:
                filed.append((member, needs[0], needs[1]))
        queues.append(QueueSnap(cq.name, list(cq.admitted), parked, q.blocked, cq.sticky, filed, cq.preemptor))
    snap = Snapshot(
        version=FORMAT_VERSION,
        objects=[(key, _plain(obj)) for key, obj in state.objects.items()],
        terminating=[cq.name for cq in state.cluster_queues.values() if cq.terminating],
        workloads=workloads,
        queues=queues,
        by_local_queue=[(ns, lq, list(keys)) for (ns, lq), keys in state.by_local_queue.items()],
        by_priority_class=[(pc, list(keys)) for pc, keys in state.by_priority_class.items()],
        parked=[(on, list(keys)) for on, keys in state.parked.items()],
        ready=list(state.ready),
        finished=list(state.finished),
        seen_ids=sorted(state.seen_ids),
        clock=state.clock,
        deferred=list(state.deferred),
        afs=[
            LedgerSnap(
                ns, name, e.last_update, [(r, str(v)) for r, v in e.consumed.items()],
                [(w, [(r, str(v)) for r, v in p.items()]) for w, p in e.penalties.items()],
                list(e.admitted.items()), [(r, str(v)) for r, v in e.base.items()], e.base_ticks,
            )
            for (ns, name), e in state.afs.entries.items()
        ],
        afs_counted=[(w, lq[0], lq[1], list(u.items())) for w, (lq, u) in state.afs.counted.items()],
        timers=_timers_snap(state.timers),
    )
    return _encoder.encode(snap)


def load(data: bytes) -> Engine:
    try:
        snap = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise SnapshotError(f"not a quotaflow snapshot: {exc}") from None
    if snap.version != FORMAT_VERSION:
        raise SnapshotError(f"snapshot format {snap.version} is not supported (expected {FORMAT_VERSION})")
    engine = Engine()
    state = engine.state
    scratch = Emitter(-1)  # config replay on an empty engine decides nothing
    for key, raw in snap.objects:
        engine.apply_object(parse_object(raw), scratch)
        state.objects[key] = raw
    for name in snap.terminating:
        state.cluster_queues[name].terminating = True
    engine._refresh_activeness(scratch)
    _restore_ledger(state.afs, snap)  # before the queues: a fair queue's order reads it
    for w in snap.workloads:
        key = w.spec.key
        ws = WorkloadState(
            w.spec, w.seq, w.queue_time, w.priority, (-w.priority, w.queue_time, w.seq, key)
        )
        ws.cluster_queue = w.cluster_queue
        ws.last_status = None if w.last_status is None else shared_status(w.last_status)
        ws.parked_on = w.parked_on
        ws.evicted = w.evicted
        ws.created_queue_time = w.created_queue_time
        state.workloads[key] = ws
        if w.admission is not None:
            a = w.admission
            usage = {fr_key(f, r): v for f, r, v in a.usage}
            ws.admission = Admission(a.cluster_queue, a.pod_sets, usage, a.sequence, dict(a.checks), a.admitted)
            state.cluster_queues[a.cluster_queue].node.add_usages(usage)
        elif w.queued and w.cluster_queue is not None:
            ws.queued = True
            cq = state.cluster_queues[w.cluster_queue]
            cq.queue.push(ws.order_key, equivalence_class(ws, cq))
    for q in snap.queues:
        cq = state.cluster_queues[q.name]
        cq.admitted = dict.fromkeys(q.admitted)
        for key in q.admitted:
            admitted = state.workloads[key]
            assert admitted.admission is not None
            # derived: rebuilt, not stored
            cq.candidates.add(admitted.key, admitted.evicted, admitted.priority, admitted.admission.sequence,
                              admitted.admission.usage)
        needs = {member: (resource, amount) for member, resource, amount in q.filed}
        for member, status in q.parked:
            cq.queue.restore_parked(cq.queue.class_id(member), status, needs.get(member))
        if q.blocked:
            cq.queue.restore_blocked()
        cq.sticky = q.sticky
        cq.preemptor = q.preemptor
        if q.sticky is not None and cq.queue.is_parked(q.sticky):
            state.waiting_preemptors[q.name] = None
    state.by_local_queue = {(ns, lq): dict.fromkeys(keys) for ns, lq, keys in snap.by_local_queue}
    state.by_priority_class = {pc: dict.fromkeys(keys) for pc, keys in snap.by_priority_class}
    state.parked = {on: dict.fromkeys(keys) for on, keys in snap.parked}
    state.ready = dict.fromkeys(snap.ready)
    state.finished = dict.fromkeys(snap.finished)
    state.seen_ids = set(snap.seen_ids)
    state.clock = snap.clock
    state.deferred = dict.fromkeys(snap.deferred)
    if snap.timers is not None:
        state.timers = _restore_timers(snap.timers)
    if scratch.decisions:
        raise SnapshotError("restoring the configuration produced decisions; snapshot is inconsistent")
    return engine


def _timers_snap(t: Timers) -> TimersSnap | None:
    if not t.live and not t.executed and not t.pods and not t.watch_execution:
        return None
    return TimersSnap(
        [(deadline, kind, key) for (kind, key), deadline in t.live.items()],
        list(t.executed.items()),
        list(t.admitted_since.items()),
        [(key, p.ready, p.requeue_count, p.requeue_at) for key, p in t.pods.items()],
        list(t.not_ready),
        t.watch_execution,
    )


def _restore_timers(snap: TimersSnap) -> Timers:
    t = Timers()
    for deadline, kind, key in snap.live:
        t.set(kind, key, deadline)
    t.executed = dict(snap.executed)
    t.admitted_since = dict(snap.admitted_since)
    t.pods = {key: PodsReadyState(ready, count, at) for key, ready, count, at in snap.pods}
    t.not_ready = dict.fromkeys(snap.not_ready)
    t.watch_execution = snap.watch_execution
    return t


def _restore_ledger(ledger: UsageLedger, snap: Snapshot) -> None:
    """The entries as they were (the configuration replay made fresh ones), and when each
    one's next sampling is due."""
    ledger.entries = {}
    ledger.due = []
    for s in snap.afs:
        e = LedgerEntry(
            s.last_update,
            consumed={r: int(v) for r, v in s.consumed},
            base={r: int(v) for r, v in s.base},
            base_ticks=s.base_ticks,
            penalties={w: {r: int(v) for r, v in p} for w, p in s.penalties},
            admitted=dict(s.admitted),
        )
        for penalty in e.penalties.values():
            for res, value in penalty.items():
                e.pending[res] = e.pending.get(res, 0) + value
        lq = (s.namespace, s.name)
        ledger.entries[lq] = e
        ledger._schedule(lq, e)
    ledger.counted = {w: ((ns, name), dict(usage)) for w, ns, name, usage in snap.afs_counted}


def _plain(obj: Mapping[str, Any]) -> dict[str, Any]:
    # Objects may arrive as any Mapping (YAML, JSON); store plain dicts.
    return msgspec.to_builtins(obj)  # type: ignore[no-any-return]
