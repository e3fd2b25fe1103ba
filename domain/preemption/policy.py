"""The preemption policy: who may preempt whom, and as what.

A ClusterQueue's `preemption` spec says which of its own workloads a pending one may preempt
(`withinClusterQueue`), which of its cohort's (`reclaimWithinCohort`), and whether it may borrow
while doing so (`borrowWithinCohort`, with `maxPriorityThreshold`). `classify` reads them for one
candidate and names the variant it would be preempted as (Kueue's classical.preemptionVariant),
which also gives the reason the decision carries.
"""

from __future__ import annotations

from dataclasses import dataclass

from domain import reasons
from domain.objects import ANY, LOWER_OR_NEWER_EQUAL, LOWER_PRIORITY, NEVER
from domain.quota import FR
from domain.state import ClusterQueueState, WorkloadState

# Preemption variants (Kueue's classical.preemptionVariant).
WITHIN_CQ = 1
HIERARCHICAL_RECLAIM = 2
RECLAIM_WITHOUT_BORROWING = 3
RECLAIM_WHILE_BORROWING = 4
NOT_A_CANDIDATE = 0

VARIANT_REASON = {
    WITHIN_CQ: reasons.IN_CLUSTER_QUEUE,
    HIERARCHICAL_RECLAIM: reasons.IN_COHORT_RECLAMATION,
    RECLAIM_WITHOUT_BORROWING: reasons.IN_COHORT_RECLAMATION,
    RECLAIM_WHILE_BORROWING: reasons.IN_COHORT_RECLAIM_WHILE_BORROWING,
}


@dataclass(frozen=True, slots=True)
class Target:
    ws: WorkloadState
    reason: str
    cq: ClusterQueueState


def satisfies_policy(preemptor: WorkloadState, candidate: WorkloadState, policy: str) -> bool:
    """May the preemptor take the candidate under this policy (withinClusterQueue or
    reclaimWithinCohort)? LowerOrNewerEqual also takes an equal priority queued later."""
    if policy == LOWER_PRIORITY:
        return preemptor.priority > candidate.priority
    if policy == LOWER_OR_NEWER_EQUAL:
        if preemptor.priority > candidate.priority:
            return True
        return preemptor.priority == candidate.priority and preemptor.queue_time < candidate.queue_time
    return policy == ANY


def preemptor_reads(cq: ClusterQueueState, preemptor: WorkloadState) -> tuple[int, int | None]:
    """What a search of `cq`'s candidates reads of the preemptor: its priority, and its queue
    time only where a policy of `cq` is LowerOrNewerEqual (`satisfies_policy`,
    `max_candidate_priority`). Searches asked alike under it may share one answer."""
    policy = cq.spec.preemption
    if LOWER_OR_NEWER_EQUAL in (policy.within_cluster_queue, policy.reclaim_within_cohort):
        return preemptor.priority, preemptor.queue_time
    return preemptor.priority, None


def max_candidate_priority(policy: str, preemptor: WorkloadState) -> int | None:
    """The highest priority a candidate can have under this policy (None: any).

    Speed-up of `satisfies_policy`: the candidate index is sorted by priority, so a stream stops
    reading at this bound. Exact: every candidate above it fails `satisfies_policy`, and those
    at or below it are still checked one by one (`classify`)."""
    if policy == ANY:
        return None
    if policy == LOWER_OR_NEWER_EQUAL:
        return preemptor.priority
    if policy == LOWER_PRIORITY:
        return preemptor.priority - 1
    return -(1 << 63)  # Never: nothing qualifies


def uses(ws: WorkloadState, frs: list[FR]) -> bool:
    """Does the workload hold any of the flavor-resources the preemptor needs room in? Only
    those are candidates (a victim that frees nothing needed helps nothing)."""
    admission = ws.admission
    if admission is None:
        return False
    usage = admission.usage
    if len(frs) == 1:
        return usage.get(frs[0], 0) > 0
    return any(usage.get(fr, 0) > 0 for fr in frs)


def preemptible_now(ws: WorkloadState, offset: int) -> bool:
    """A workload preempted by the event being applied and admitted again by it is not a victim
    within that same event.

    Each step of a preemption chain can be right by Kueue's rules and still lead back to where it
    started (A reclaims from B, C preempts A, B takes the room back, A reclaims again...). Kueue
    takes one step per scheduling cycle, with pods stopping in between; with Immediate release
    quotaflow would take them all inside one input event and never return. Shielding a workload
    the event has already preempted once, when the same event admits it again, leaves each
    workload at most one preemption per event, which bounds the event's work; the queue that could
    not take it retries at the next event (`state.deferred`). A workload the event admitted
    without having preempted it is a candidate like any other, in Kueue's order (lowest priority
    first, pkg/scheduler/preemption/common/ordering.go CandidatesOrdering), as in Kueue's next
    cycle: sparing it would make a higher-priority workload the victim instead."""
    admission = ws.admission
    return admission is not None and ws.shielded_at != offset


def never_preempts(cq: ClusterQueueState) -> bool:
    """A non-preemptive ClusterQueue: `ClassicalPreemptor.targets` and
    `FairSharingPreemptor.targets` return no target for it, whatever is asked, and neither they
    nor `defer` change anything (the scheduler then skips asking).

    Speed-up of the searches: with both policies Never, `classify` rejects every candidate, so
    skipping the search finds the same nothing."""
    policy = cq.spec.preemption
    return policy.within_cluster_queue == NEVER and (cq.node.parent is None or policy.reclaim_within_cohort == NEVER)


def own_may_yield(cq: ClusterQueueState, preemptor: WorkloadState) -> bool:
    """Could the preemptor's own queue give a candidate stream (`ClassicalPreemptor._stream`
    of its own queue, evicted or not)? A cheap bound the search uses to stop early: False means
    `classify` would reject all of its own queue's workloads."""
    policy = cq.spec.preemption.within_cluster_queue
    if policy == NEVER:
        return False
    bound = max_candidate_priority(policy, preemptor)
    return cq.candidates.holds(True, bound) or cq.candidates.holds(False, bound)


def classify(cq: ClusterQueueState, preemptor: WorkloadState, candidate: WorkloadState,
             own: bool, frs: list[FR], advantage: bool) -> int:
    """The variant the candidate would be preempted as, or NOT_A_CANDIDATE. `own`: it is of
    the preemptor's own ClusterQueue; `advantage`: the preemptor fits in the quota of a cohort
    the candidate's queue is outside of (hierarchical reclaim)."""
    if not uses(candidate, frs):
        return NOT_A_CANDIDATE
    spec = cq.spec.preemption
    policy = spec.within_cluster_queue if own else spec.reclaim_within_cohort
    if not satisfies_policy(preemptor, candidate, policy):
        return NOT_A_CANDIDATE
    if own:
        return WITHIN_CQ
    if advantage:
        return HIERARCHICAL_RECLAIM
    if spec.borrow_within_cohort == NEVER:
        return RECLAIM_WITHOUT_BORROWING
    threshold = spec.max_priority_threshold
    if candidate.priority >= preemptor.priority or (threshold is not None and candidate.priority > threshold):
        return RECLAIM_WITHOUT_BORROWING
    return RECLAIM_WHILE_BORROWING
