"""Moves of one workload between states: queued, parked, holding quota, gone.

Shared by event handling (engine.py) and the admission cycle (scheduler.py). Every move that
Kueue would report emits its decision here, so each transition has exactly one place that
decides what the decision log says about it.
"""

from __future__ import annotations

from typing import cast

from domain import local_queue_usage, reasons, requeue_backoff
from domain.decisions import (
    Admitted,
    Evicted,
    Pending,
    Preempted,
    QuotaReleased,
    QuotaReserved,
)
from domain.emitter import Emitter
from domain.objects import ANY, IMMEDIATE, NEVER, STOP_NONE
from domain.preemption.policy import never_preempts
from domain.queues import PendingQueue, Status
from domain.quota import FR, QuotaNode
from domain.shared_values import order_key, shared_status
from domain.state import Admission, ClusterQueueState, State, WorkloadState
from domain.workload import PodSet


def set_pending(state: State, out: Emitter, ws: WorkloadState, status: Status) -> None:
    """Record why a workload waits; a decision only when the reason changes (the contract's
    rule): a message that merely updates a number ("2 more needed") is not news to anyone."""
    last = ws.last_status
    ws.last_status = shared_status(status)
    if last is None or last[0] != status[0]:
        out.emit(Pending, ws.key, reason=status[0], message=status[1])


def equivalence_class(ws: WorkloadState, cq: ClusterQueueState | None = None) -> tuple[object, ...]:
    """Namespace, priority and pod-set shape: what admission depends on (equal classes, equal
    answers). In a queue with admission fair sharing also the LocalQueue, last: its usage
    orders the class."""
    shape = _shape(ws.spec.pod_sets)
    if cq is not None and cq.queue.fair is not None:
        return (ws.spec.namespace, ws.priority, shape, ws.spec.queue_name)
    return (ws.spec.namespace, ws.priority, shape)


# The shape of a pod-sets tuple, by the tuple's id, with the tuple kept (so the id is not
# reused while the entry stands). Workloads decoded alike share one pod-sets tuple
# (typed_decoding._pod_sets), and so one shape: the classes of a deep backlog, one per namespace,
# priority and shape, hold it once. Bounded: when full it starts again, which costs only sharing.
_SHAPES: dict[int, tuple[tuple[PodSet, ...], tuple[object, ...]]] = {}
_SHAPES_LIMIT = 4096


def _shape(pod_sets: tuple[PodSet, ...]) -> tuple[object, ...]:
    kept = _SHAPES.get(id(pod_sets))
    if kept is not None and kept[0] is pod_sets:
        return kept[1]
    shape = tuple(
        (p.name, p.count, p.min_count, p.per_pod, p.node_selector, p.node_affinity, p.tolerations, p.above_limits)
        for p in pod_sets
    )
    if len(_SHAPES) >= _SHAPES_LIMIT:
        _SHAPES.clear()
    _SHAPES[id(pod_sets)] = (pod_sets, shape)
    return shape


def new_queue(state: State, cq: ClusterQueueState, strict: bool) -> PendingQueue:
    """An empty queue for cq, ordered by admission fair sharing where cq uses it."""
    fair = local_queue_usage.QueueRanks(state) if local_queue_usage.wants_fair(state, cq) else None
    return PendingQueue(strict, fair)


def rebuild_queue(state: State, cq: ClusterQueueState, strict: bool) -> None:
    """cq's queue under a new strategy or fair-sharing mode: every pending workload queued again
    in its order, none parked (a new queue, tried afresh)."""
    old = cq.queue
    cq.queue = new_queue(state, cq, strict)
    for key in list(old.keys()):
        cq.queue.push(key, equivalence_class(state.workloads[cast(str, key[3])], cq))
    if cq.active and cq.queue.is_ready():
        state.ready[cq.name] = None


def park(state: State, ws: WorkloadState, on: str) -> None:
    ws.parked_on = on
    state.parked.setdefault(on, {})[ws.key] = None


def unpark(state: State, ws: WorkloadState) -> None:
    if ws.parked_on is None:
        return
    waiting = state.parked.get(ws.parked_on)
    if waiting is not None:
        waiting.pop(ws.key, None)
        if not waiting:
            del state.parked[ws.parked_on]
    ws.parked_on = None


def route(state: State, out: Emitter, ws: WorkloadState) -> None:
    """Put a pending workload where it waits: its ClusterQueue's queue, or parked on what is missing."""
    spec = ws.spec
    lq = state.local_queues.get((spec.namespace, spec.queue_name))
    if lq is None:
        park(state, ws, f"lq:{spec.namespace}/{spec.queue_name}")
        set_pending(state, out, ws, (reasons.MISCONFIGURED, reasons.MSG_LQ_MISSING.format(lq=spec.queue_name)))
        return
    if lq.stop_policy != STOP_NONE:
        park(state, ws, f"lq:{spec.namespace}/{spec.queue_name}")
        set_pending(state, out, ws, (reasons.SUSPENDED, reasons.MSG_LQ_INACTIVE.format(lq=spec.queue_name)))
        return
    cq = state.cluster_queues.get(lq.cluster_queue)
    if cq is None:
        park(state, ws, f"cq:{lq.cluster_queue}")
        set_pending(state, out, ws, (reasons.MISCONFIGURED, reasons.MSG_CQ_MISSING.format(cq=lq.cluster_queue)))
        return
    ws.cluster_queue = cq.name
    ws.queued = True
    blocker = cq.queue.blocker
    parked_status = cq.queue.push(ws.order_key, equivalence_class(ws, cq))
    if blocker is not None and cq.queue.blocker is None and cq.spec.preemption.reclaim_within_cohort != ANY:
        # A new head before the blocked StrictFIFO head, which may have held room in its tree's
        # cycles (Scheduler._hold_room): Kueue's next cycle tries the new head instead, and what
        # the old head's room kept out is tried again there, as Kueue retries it every cycle.
        _wake_held_out(state, cq)
    if not cq.active:
        set_pending(state, out, ws, (reasons.SUSPENDED, reasons.MSG_CQ_INACTIVE.format(cq=cq.name)))
    elif parked_status is not None:
        # Same shape as a head that just failed, and nothing changed since: same answer.
        set_pending(state, out, ws, parked_status)
    else:
        state.ready[cq.name] = None


def drop_sticky(state: State, cq: ClusterQueueState, room_freed: bool = False) -> None:
    """cq's head no longer waits for its victims at the head of the queue (admitted, parked,
    or gone): the queue's next head gets its turn. `heads` dropped the queue from `ready` while
    its preemptor waited (the preemptor joined cycles as a waiting preemptor), and nothing else
    would put it back. `room_freed`: it stopped waiting without taking the room it held in its
    tree's cycles (parked, deleted, moved), so what waited because of that room may fit now."""
    cq.sticky = None
    state.waiting_preemptors.pop(cq.name, None)
    if cq.active and cq.queue.is_ready():
        state.ready[cq.name] = None
    if room_freed:
        _wake_held_out(state, cq)


def _wake_held_out(state: State, cq: ClusterQueueState) -> None:
    """Wake the heads of cq's tree parked until something changes (generic): among them those
    that no longer fitted behind the room cq's preemptor held (Scheduler.run_cycle), which no
    release would wake now that the room is free without one."""
    for member in _tree_of(state, cq):
        if member.queue.wake_released(_NOTHING_FILED) and member.active:
            state.ready[member.name] = None


def unroute(state: State, ws: WorkloadState, admitted: bool = False) -> None:
    """Take a pending workload out of wherever it waits (`admitted`: into the quota it takes)."""
    if ws.queued and ws.cluster_queue is not None:
        cq = state.cluster_queues[ws.cluster_queue]
        blocked = cq.queue.blocker == ws.order_key
        cq.queue.remove(ws.order_key)
        ws.queued = False
        ws.cluster_queue = None
        if cq.preemptor == ws.key:
            cq.preemptor = None  # Kueue's ClusterQueue.delete clears its preemptor workload
        if cq.sticky == ws.key:
            # The waiting preemptor is gone (deleted, deactivated, moved).
            drop_sticky(state, cq, room_freed=True)
        else:
            if cq.queue.strict and cq.queue.is_ready():
                state.ready[cq.name] = None  # the StrictFIFO head that held the queue is gone
            if blocked and not admitted and cq.spec.preemption.reclaim_within_cohort != ANY:
                # It may have held room in its tree's cycles (Scheduler._hold_room), and leaves
                # without taking it: what that room kept out is tried again, as Kueue, retrying
                # it every cycle, would.
                _wake_held_out(state, cq)
    unpark(state, ws)


def admit(state: State, out: Emitter, cq: ClusterQueueState, ws: WorkloadState, admission: Admission) -> None:
    """Reserve quota; Admitted at once, or QuotaReserved while admission checks are not Ready."""
    unroute(state, ws, admitted=True)
    order_by_creation(ws)
    cq.node.add_usages(admission.usage)
    cq.admitted[ws.key] = None
    ws.cluster_queue = cq.name
    ws.admission = admission
    ws.last_status = None
    ws.shielded_at = state.offset if ws.preempted_at == state.offset else -1
    cq.candidates.add(ws.key, ws.evicted, ws.priority, admission.sequence, admission.usage,
                      ws.shielded_at == state.offset)
    if cq.queue.waiting_for and cq.spec.preemption.within_cluster_queue != NEVER:
        cq.queue.candidate_admitted(ws.priority)
    state.admitted_roots[id(cq.node.root())] = None
    admission.checks = applicable_checks(cq, admission)
    admission.admitted = not admission.checks
    local_queue_usage.reserved(state, cq, ws, admission)
    kind = Admitted if admission.admitted else QuotaReserved
    out.emit(kind, ws.key, clusterQueue=cq.name, podSetAssignments=admission.pod_sets)
    if cq.queue.is_ready():
        state.ready[cq.name] = None


def applicable_checks(cq: ClusterQueueState, admission: Admission) -> dict[str, str]:
    """Checks with no onFlavors, and those naming a flavor the workload was assigned."""
    if not cq.spec.admission_checks:
        return {}
    assigned = {flavor for ps in admission.pod_sets for flavor in ps.flavors.values()}
    names = sorted(
        rule.name
        for rule in cq.spec.admission_checks
        if not rule.on_flavors or assigned.intersection(rule.on_flavors)
    )
    return dict.fromkeys(names, "Pending")


def sync_checks(state: State, out: Emitter, cq: ClusterQueueState) -> None:
    """cq's admission checks changed: every reservation in it carries the checks that now apply,
    keeping the states of those it had and adding the others as Pending; one not admitted yet
    whose checks are now all Ready (or that has none left) is admitted. As Kueue's workload
    controller does for the workloads of a ClusterQueue whose checks change
    (pkg/controller/core/workload_controller.go, `reconcileSyncAdmissionChecks`, then
    `SyncAdmittedCondition`); an admitted workload stays admitted."""
    for key in list(cq.admitted):
        ws = state.workloads[key]
        admission = ws.admission
        if admission is None or ws.evicted:
            continue
        checks = {name: admission.checks.get(name, "Pending") for name in applicable_checks(cq, admission)}
        if checks == admission.checks:
            continue
        admission.checks = checks
        if not admission.admitted and all(v == "Ready" for v in checks.values()):
            admission.admitted = True
            local_queue_usage.admitted(state, ws)
            out.emit(Admitted, ws.key, clusterQueue=cq.name, podSetAssignments=admission.pod_sets)


def release(state: State, ws: WorkloadState, wakes: DeferredWakes | None = None) -> ClusterQueueState | None:
    """Give back a workload's quota and wake what it may let in (now, or with `wakes` when they
    are flushed); returns the ClusterQueue it held quota in."""
    admission = ws.admission
    if admission is None:
        return None
    cq = state.cluster_queues[admission.cluster_queue]
    cq.node.add_usages(admission.usage, -1)
    cq.admitted.pop(ws.key, None)
    cq.candidates.discard(ws.key)
    local_queue_usage.released(state, ws)
    ws.admission = None
    ws.cluster_queue = None
    ws.evicted = False
    if wakes is not None and not cq.terminating:
        wakes.add(cq, admission.usage)
    else:
        if wakes is not None:
            wakes.flush(state)  # a terminating queue may leave its tree next: wake with the tree as it is
        wake_after_release(state, cq, admission.usage)
    return cq


class DeferredWakes:
    """The wakes of a run of releases, made once per cohort tree after the last of them.

    Within one Batch, a run of finishes (and deletions) of workloads holding quota changes
    nothing but usage, downwards, and reads no parked state until the next scheduling pass. So
    the heads a run of releases wakes one release at a time are the heads one wake per tree
    wakes at the end of the run, given every ClusterQueue that released and every
    flavor-resource released: availability only grows along the run, a class filed by resource
    wakes at the last release of that resource if at all, and a queue that released wakes
    whole. One pass per tree instead of one per release over its members (a finish in a
    100-queue cohort visits them all). The caller flushes before anything else happens: any
    other event, a release that routes its workload again, a queue that may leave its tree."""

    __slots__ = ("trees",)

    def __init__(self) -> None:
        # id of the tree's root -> (a ClusterQueue of the tree, the flavor-resources released,
        # the ids of the ClusterQueues that released); roots stay put until the next flush.
        self.trees: dict[int, tuple[ClusterQueueState, dict[FR, None], set[int]]] = {}

    def add(self, cq: ClusterQueueState, usage: dict[FR, int], own: bool = True) -> None:
        """`own`: cq's own queue wakes whole (its usage went down); False when that wake was
        already made at the release itself (Scheduler.run_cycle's wake after the cycle)."""
        key = id(cq.node.root())
        tree = self.trees.get(key)
        if tree is None:
            tree = self.trees[key] = (cq, {}, set())
        released = tree[1]
        for fr, value in usage.items():
            if value > 0:
                released[fr] = None
        if own:
            tree[2].add(id(cq))

    def flush(self, state: State) -> None:
        if not self.trees:
            return
        trees, self.trees = self.trees, {}
        for cq, released, own in trees.values():
            _wake_tree_after_release(state, cq, list(released), own)


_NOTHING_FILED: dict[str, int] = {}  # no class filed by resource: nothing to compute (read only)


def wake_after_release(state: State, cq: ClusterQueueState, usage: dict[FR, int]) -> None:
    """Quota came back in cq's cohort tree: wake, in every ClusterQueue of the tree, the parked
    heads that a release could help (see PendingQueue.wake_released)."""
    _wake_tree_after_release(state, cq, [fr for fr, value in usage.items() if value > 0], {id(cq)})


def _wake_tree_after_release(state: State, cq: ClusterQueueState, released: list[FR], own: set[int]) -> None:
    """`released` came back in cq's cohort tree, from the ClusterQueues whose ids are `own`."""
    root = cq.node.root()
    members: list[ClusterQueueState | None]
    if root is cq.node:
        nodes, members = [cq.node], [cq]
    else:
        nodes, members = root.leaves(), tree_members(state, root)
    through_parent: dict[tuple[int, FR], int] = {}  # siblings share their parent's availability
    for node, member in zip(nodes, members):
        if member is None:
            continue
        queue = member.queue
        if not queue.parked and queue.blocker is None:
            continue
        filed = queue.thresholds
        if filed and id(member) in own and not never_preempts(member):
            # Its own usage went down: a head filed there because it would borrow may reclaim now.
            if queue.requeue_all() and member.active:
                state.ready[member.name] = None
            continue
        if not filed:
            if queue.wake_released(_NOTHING_FILED) and member.active:
                state.ready[member.name] = None
            continue
        available: dict[str, int] = {}
        quotas = member.quotas
        parent = node.parent
        for fr in released:
            if fr[1] not in filed or fr not in quotas:
                continue
            if parent is None:
                amount = node.available(fr)
            else:
                key = (id(parent), fr)
                above = through_parent.get(key)
                if above is None:
                    above = through_parent[key] = parent.available(fr)
                amount = node.available_below(fr, above)
            if amount < 0:
                amount = 0
            if amount > available.get(fr[1], -1):
                available[fr[1]] = amount
        if queue.wake_released(available) and member.active:
            state.ready[member.name] = None


def tree_members(state: State, root: QuotaNode) -> list[ClusterQueueState | None]:
    """The ClusterQueue of each of root.leaves(), in that order (None where there is none).

    Kept on the root with its leaves: the ClusterQueues of a tree change only with the tree's
    shape (a ClusterQueue joins or leaves a tree through topology.set_parent), and every change
    of shape recomputes the tree, which clears both. A release then finds its cohort's queues
    without a lookup per member in the cluster-wide map (with thousands of ClusterQueues, those
    lookups read memory beyond the CPU caches)."""
    owners = root.leaf_owners
    if owners is None:
        cluster_queues = state.cluster_queues
        owners = root.leaf_owners = [cluster_queues.get(node.name) for node in root.leaves()]
    return owners


def set_priority(state: State, ws: WorkloadState, priority: int) -> None:
    """A workload's priority changed: its queue position and, if it holds quota, its place
    among the preemption candidates."""
    ws.priority = priority
    ws.order_key = (-priority, ws.queue_time, ws.seq, ws.key)
    if ws.admission is not None:
        admission = ws.admission
        candidates = state.cluster_queues[admission.cluster_queue].candidates
        candidates.refile(ws.key, ws.evicted, ws.priority, admission.sequence)


def order_by_eviction(ws: WorkloadState, at: int) -> None:
    """An eviction whose time orders the workload in its queue until it reserves quota again
    (Kueue's GetQueueOrderTimestamp: an admission check's Retry; a PodsReady timeout with
    `timestamp: Eviction`). Called before it queues again."""
    if ws.created_queue_time is None:
        ws.created_queue_time = ws.queue_time
    ws.queue_time = at
    ws.order_key = order_key(ws.priority, at, ws.seq, ws.key)


def order_by_creation(ws: WorkloadState) -> None:
    """A quota reservation resets the eviction that ordered the workload by its time (Kueue's
    SetQuotaReservation sets the Evicted condition False), so its creation orders it again: in
    its queue once it is evicted for another reason, and as a preemptor or candidate whose time
    a policy compares (LowerOrNewerEqualPriority). Called while it is out of its queue."""
    created = ws.created_queue_time
    if created is not None:
        ws.created_queue_time = None
        ws.queue_time = created
        ws.order_key = order_key(ws.priority, created, ws.seq, ws.key)


def release_policy(state: State, cq: ClusterQueueState) -> str:
    return cq.spec.eviction_release or state.configuration.eviction_release


def evict(
    state: State,
    out: Emitter,
    ws: WorkloadState,
    reason: str,
    message: str,
    preemptor: str | None = None,
) -> None:
    """Evict (or, with a preemptor, preempt) a workload holding quota.

    An admitted workload keeps its quota until its pods are gone: until a WorkloadReleased
    event, or at once when the ClusterQueue's eviction release policy is Immediate. One that only
    reserved quota (admission checks not Ready) has no pods yet and gives it back at once. Only
    then does it queue again.
    """
    admission = ws.admission
    assert admission is not None and not ws.evicted
    cq = state.cluster_queues[admission.cluster_queue]
    if preemptor is not None:
        out.emit(Preempted, ws.key, preemptor=preemptor, reason=reason, message=message)
        ws.preempted_at = state.offset
    else:
        out.emit(Evicted, ws.key, reason=reason, message=message)
    ws.evicted = True
    cq.candidates.refile(ws.key, ws.evicted, ws.priority, admission.sequence)
    local_queue_usage.no_longer_admitted(state, ws)
    if not admission.admitted or release_policy(state, cq) == IMMEDIATE:
        release_evicted(state, out, ws)


def release_evicted(state: State, out: Emitter, ws: WorkloadState) -> None:
    """The evicted workload's pods are gone: give its quota back and queue it again."""
    cq = release(state, ws)
    ws.evicted = False
    if cq is None:
        return
    out.emit(QuotaReleased, ws.key, clusterQueue=cq.name)
    drop_if_terminated(state, out, cq)
    if ws.spec.active:
        if not requeue_backoff.holds(state, out, ws):
            route(state, out, ws)
    else:
        set_pending(state, out, ws, (reasons.DEACTIVATED, reasons.MSG_DEACTIVATED))


def wake_tree(state: State, cq: ClusterQueueState) -> None:
    """Something that could change admission happened in cq's cohort tree: retry its parked heads."""
    for member in _tree_of(state, cq):
        wake_queue(state, member)


def _tree_of(state: State, cq: ClusterQueueState) -> list[ClusterQueueState]:
    """The ClusterQueues of cq's cohort tree (cq alone outside a cohort), in leaf order."""
    root = cq.node.root()
    if root is cq.node:
        return [cq]
    return [member for member in tree_members(state, root) if member is not None]


def wake_all(state: State) -> None:
    for cq in state.cluster_queues.values():
        wake_queue(state, cq)


def wake_queue(state: State, cq: ClusterQueueState) -> None:
    """Retry cq's parked heads (and only cq's)."""
    cq.queue.requeue_all()
    if cq.active and cq.queue.is_ready():
        state.ready[cq.name] = None


def drop_if_terminated(state: State, out: Emitter, cq: ClusterQueueState) -> None:
    """A deleted ClusterQueue lingers, inactive, while workloads hold its quota, as Kueue's
    finalizer keeps it; once the last one is gone, so is the queue, and the workloads that
    waited in it now wait for a ClusterQueue that does not exist."""
    if not cq.terminating or cq.admitted:
        return
    from domain.topology import remove_cluster_queue

    waiting = [state.workloads[cast(str, key[3])] for key in cq.queue.keys()]
    remove_cluster_queue(state, cq)
    for ws in waiting:
        ws.queued = False
        ws.cluster_queue = None
        route(state, out, ws)
