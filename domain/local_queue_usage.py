"""Where the engine meets admission fair sharing: the hooks that keep each LocalQueue's usage
(domain/admission_fair_sharing.py, `State.afs`) in step with admissions, evictions, releases,
configuration and the log's time, and the ranks a fair ClusterQueue's queue orders by.

Each hook costs what its event touches: a workload's own LocalQueue entry, or (time) the entries
whose sampling falls due, found through a heap.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from domain.admission_fair_sharing import USAGE_BASED, LQKey
from domain.quota import FR
from domain.state import Admission, ClusterQueueState, State, WorkloadState


class QueueRanks:
    """A fair ClusterQueue's ranks: its LocalQueues' usage as of the log's time."""

    __slots__ = ("state",)

    def __init__(self, state: State) -> None:
        self.state = state

    def rank(self, lq: LQKey) -> Any:
        state = self.state
        e = state.afs.entries.get(lq)
        if e is not None and e.rank is not None:
            return e.rank  # dropped whenever its usage or its LocalQueue's weight changes
        return state.afs.rank(lq, state.clock, weight_of(state, lq))


def weight_of(state: State, lq: LQKey) -> int:
    """The LocalQueue's fairSharing.weight (milli); 1 when it is missing, as Kueue's
    `ResolveLQWeight` falls back."""
    spec = state.local_queues.get(lq)
    return 1000 if spec is None else spec.fair_weight


def enabled(state: State) -> bool:
    return state.configuration.admission_fair_sharing is not None


def wants_fair(state: State, cq: ClusterQueueState) -> bool:
    """Kueue's `ResourceWeights`: the Configuration enables it and the ClusterQueue opts in."""
    return enabled(state) and cq.spec.admission_mode == USAGE_BASED


def _by_resource(usage: dict[FR, int]) -> dict[str, int]:
    """An admission's usage with its flavors summed (`FlattenFlavors`)."""
    out: dict[str, int] = {}
    for fr, amount in usage.items():
        res = fr[1]
        out[res] = out.get(res, 0) + amount
    return out


def _lq_of(ws: WorkloadState) -> LQKey:
    return (ws.spec.namespace, ws.spec.queue_name)


def reserved(state: State, cq: ClusterQueueState, ws: WorkloadState, admission: Admission) -> None:
    """Quota reserved in cq (lifecycle.admit): the entry penalty, in a fair ClusterQueue; and,
    when admitted at once (no admission checks), its settlement."""
    if not enabled(state):
        return
    fair = cq.spec.admission_mode == USAGE_BASED
    lq = _lq_of(ws)
    usage = _by_resource(admission.usage)
    if fair and admission.admitted:
        state.afs.admitted_at_once(lq, ws.key, usage, state.clock)
    else:
        if fair:
            state.afs.push_penalty(lq, ws.key, usage, state.clock)
        if admission.admitted:
            state.afs.admitted(lq, ws.key, usage, state.clock, settle=fair)
    if fair:
        order_changed(state, lq)


def admitted(state: State, ws: WorkloadState) -> None:
    """Its admission checks all Ready: admitted now (Kueue settles the penalty at this step)."""
    admission = ws.admission
    if admission is None or not enabled(state):
        return
    cq = state.cluster_queues.get(admission.cluster_queue)
    fair = cq is not None and cq.spec.admission_mode == USAGE_BASED
    lq = _lq_of(ws)
    state.afs.admitted(lq, ws.key, _by_resource(admission.usage), state.clock, settle=fair)
    if fair:
        order_changed(state, lq)


def no_longer_admitted(state: State, ws: WorkloadState) -> None:
    """Evicted or preempted: its usage leaves its LocalQueue's admitted usage."""
    if state.afs.counted:
        state.afs.uncount(ws.key, state.clock)
        order_changed(state, _lq_of(ws))


def released(state: State, ws: WorkloadState) -> None:
    """Its quota is given back: no longer admitted, and a penalty it never settled is dropped."""
    afs = state.afs
    if not afs.entries:
        return
    afs.uncount(ws.key, state.clock)
    lq = _lq_of(ws)
    afs.drop_penalty(lq, ws.key)
    order_changed(state, lq)


def local_queue_applied(state: State, lq: LQKey) -> None:
    """A LocalQueue applied: its entry starts its sampling now; a new weight reorders."""
    if enabled(state):
        state.afs.entry(lq, state.clock).rank = None  # its weight may have changed
        order_changed(state, lq)


def local_queue_deleted(state: State, lq: LQKey) -> None:
    state.afs.forget(lq)


def configuration_applied(state: State) -> None:
    state.afs.set_config(state.configuration.admission_fair_sharing, state.clock)
    if enabled(state):
        for lq in state.local_queues:
            state.afs.entry(lq, state.clock)
    for cq in state.cluster_queues.values():  # new weights: each fair queue's order may differ
        if cq.queue.fair_order_changed() and cq.active:
            state.ready[cq.name] = None


def advance(state: State) -> None:
    """The log's time moved: make the samplings now due; a StrictFIFO queue held by a head that
    no longer sorts first tries the new first."""
    afs = state.afs
    if not afs.due or afs.due[0][0] > state.clock:
        return
    for lq in afs.advance(state.clock):
        order_changed(state, lq)


def order_changed(state: State, lq: LQKey) -> None:
    """lq's usage changed: only a fair StrictFIFO queue held by a failed head needs telling (a
    BestEffortFIFO queue reads usages afresh for each head)."""
    spec = state.local_queues.get(lq)
    if spec is None:
        return
    cq = state.cluster_queues.get(spec.cluster_queue)
    if cq is None or cq.queue.blocker is None:
        return
    if cq.queue.fair_order_changed() and cq.active:
        state.ready[cq.name] = None


Place = tuple[int, int, int, str]  # a candidate's place in a ClusterQueue (domain/candidate_index.py)


def by_usage(state: State, places: Iterator[Place]) -> Iterator[Place]:
    """One fair ClusterQueue's preemption candidates, those of the most used LocalQueue first,
    then in their own order (priority, most recently admitted, name).

    As Kueue's CandidatesOrdering with AdmissionFairSharing on
    (pkg/scheduler/preemption/common/ordering.go): between two workloads of the same ClusterQueue
    whose LocalQueues differ and both have a usage (the ClusterQueue opts in), the higher usage
    goes first, before priority is compared. The usages are those its admission queue orders by
    (as of the latest sampling, as Kueue's snapshot takes them at the start of a cycle). The
    queue's candidates are then read in full and sorted: this costs what the queue holds, only
    in a fair ClusterQueue."""
    workloads = state.workloads
    ranks: dict[LQKey, tuple[int, float]] = {}
    keyed = []
    for place in places:
        lq = _lq_of(workloads[place[3]])
        rank = ranks.get(lq)
        if rank is None:
            rank = ranks[lq] = _usage_rank(state, lq)
        keyed.append(((-rank[0], -rank[1]), place))
    keyed.sort()
    return iter([place for _, place in keyed])


def _usage_rank(state: State, lq: LQKey) -> tuple[int, float]:
    """(1, 0) for an infinite usage (weight 0), else (0, usage); a LocalQueue with no entry
    (deleted) has none: 0, as Kueue reads a missing ledger entry. Reading creates no entry."""
    weight = weight_of(state, lq)
    if weight <= 0:
        return (1, 0.0)
    if lq not in state.afs.entries:
        return (0, 0.0)
    return state.afs.rank(lq, state.clock, weight)
