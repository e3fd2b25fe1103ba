"""Classical preemption: which admitted workloads a pending one may evict, and the fewest of them.

Follows Kueue's classical preemptor (pkg/scheduler/preemption): candidates come from the
preemptor's own ClusterQueue (per `withinClusterQueue`) and from ClusterQueues of its cohort tree
that use more than their nominal quota (per `reclaimWithinCohort`, with `borrowWithinCohort` and
`maxPriorityThreshold` deciding whether the preemptor may borrow while reclaiming). Candidates are
taken in Kueue's order (already evicted first; other ClusterQueues before its own; lower priority
first; most recently admitted first) until the preemptor fits, then every victim that turns out
not to be needed is given back, last to first.

Cost: each ClusterQueue keeps its workloads in candidate order (domain/candidates.py); an attempt
chooses the queues to take from (one look at each queue of the cohort tree), then merges their
candidates lazily, reading only as many as the search examines: k·log q for k candidates from q
queues, whatever the number of workloads the cohort holds.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass

from domain import reasons
from domain.objects import ANY, LOWER_OR_NEWER_EQUAL, LOWER_PRIORITY, NEVER
from domain.quota import FR, QuotaNode
from domain.state import ClusterQueueState, State, WorkloadState

# Preemption variants (Kueue's classical.preemptionVariant).
WITHIN_CQ = 1
HIERARCHICAL_RECLAIM = 2
RECLAIM_WITHOUT_BORROWING = 3
RECLAIM_WHILE_BORROWING = 4

VARIANT_REASON = {
    WITHIN_CQ: reasons.IN_CLUSTER_QUEUE,
    HIERARCHICAL_RECLAIM: reasons.IN_COHORT_RECLAMATION,
    RECLAIM_WITHOUT_BORROWING: reasons.IN_COHORT_RECLAMATION,
    RECLAIM_WHILE_BORROWING: reasons.IN_COHORT_RECLAIM_WHILE_BORROWING,
}

HUMAN_REASON = {
    reasons.IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    reasons.IN_COHORT_RECLAMATION: "reclamation within the cohort",
    reasons.IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    reasons.IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}


@dataclass(frozen=True, slots=True)
class Target:
    ws: WorkloadState
    reason: str
    cq: ClusterQueueState


@dataclass(slots=True)
class _Candidate:
    ws: WorkloadState
    cq: ClusterQueueState
    variant: int
    lca: QuotaNode | None


def satisfies_policy(preemptor: WorkloadState, candidate: WorkloadState, policy: str) -> bool:
    if policy == LOWER_PRIORITY:
        return preemptor.priority > candidate.priority
    if policy == LOWER_OR_NEWER_EQUAL:
        if preemptor.priority > candidate.priority:
            return True
        return preemptor.priority == candidate.priority and preemptor.queue_time < candidate.queue_time
    return policy == ANY


def within_nominal(node: QuotaNode, frs: list[FR]) -> bool:
    return all(node.usage.get(fr, 0) <= node.subtree.get(fr, 0) for fr in frs)


def uses(ws: WorkloadState, frs: list[FR]) -> bool:
    admission = ws.admission
    return admission is not None and any(admission.usage.get(fr, 0) > 0 for fr in frs)


def preemptible_now(ws: WorkloadState, offset: int) -> bool:
    """A workload admitted by the event being applied is not a victim within that same event.

    Each step of a preemption chain can be right by Kueue's rules and still lead back to where it
    started (A reclaims from B, C preempts A, B takes the room back, A reclaims again...). Kueue
    takes one step per scheduling cycle, with pods stopping in between; with Immediate release
    quotaflow would take them all inside one input event and never return. Deferring a victim
    admitted by this very event to the next event keeps every step and bounds each event's work;
    it also spares a launcher a start immediately followed by a stop."""
    admission = ws.admission
    return admission is not None and admission.sequence[0] != offset


def cq_path(cq: ClusterQueueState) -> str:
    parts = [cq.name] + [node.name for node in cq.node.ancestors()]
    return "/" + "/".join(reversed(parts))


def preemption_message(preemptor: WorkloadState, preemptor_cq: ClusterQueueState, target: Target) -> str:
    return (
        f"Preempted to accommodate a workload (UID: {preemptor.uid}, JobUID: {preemptor.job_uid}) due to "
        f"{HUMAN_REASON.get(target.reason, 'UNKNOWN')}; preemptor path: {cq_path(preemptor_cq)}; "
        f"preemptee path: {cq_path(target.cq)}"
    )


class _OrderedCandidates:
    """A group of candidates, read lazily in Kueue's order and remembered for the next attempt."""

    def __init__(self, source: Iterator[_Candidate]) -> None:
        self._source = source
        self._taken: list[_Candidate] = []

    def any(self) -> bool:
        if self._taken:
            return True
        first = next(self._source, None)
        if first is None:
            return False
        self._taken.append(first)
        return True

    def __iter__(self) -> Iterator[_Candidate]:
        i = 0
        while True:
            if i == len(self._taken):
                candidate = next(self._source, None)
                if candidate is None:
                    return
                self._taken.append(candidate)
            yield self._taken[i]
            i += 1


# A ClusterQueue whose workloads may be candidates: (queue, hierarchical advantage, lowest
# common ancestor with the preemptor for the validity check).
_Source = tuple[ClusterQueueState, bool, "QuotaNode | None"]


def max_candidate_priority(policy: str, preemptor: WorkloadState) -> int | None:
    """The highest priority a candidate can have under this policy (None: any); the candidate
    index is read no further."""
    if policy == ANY:
        return None
    if policy == LOWER_OR_NEWER_EQUAL:
        return preemptor.priority
    if policy == LOWER_PRIORITY:
        return preemptor.priority - 1
    return -(1 << 63)  # Never: nothing qualifies


class ClassicalPreemptor:
    def __init__(self, state: State) -> None:
        self.state = state

    def targets(
        self,
        cq: ClusterQueueState,
        ws: WorkloadState,
        requests: dict[FR, int],
        frs: list[FR],
    ) -> list[Target]:
        policy = cq.spec.preemption
        if policy.within_cluster_queue == NEVER and (
            cq.node.parent is None or policy.reclaim_within_cohort == NEVER
        ):
            return []  # a non-preemptive queue: no candidate can exist
        same_queue: list[_Source] = [] if policy.within_cluster_queue == NEVER else [(cq, False, None)]
        hierarchy, priority = self._cohort_sources(cq, requests, frs)
        offset = self.state.offset
        for sources in (same_queue, hierarchy, priority):
            if any(member.candidates.admitted_at(offset) for member, _, _ in sources):
                self.state.deferred[cq.name] = None
        groups = [
            _OrderedCandidates(self._candidates(cq, ws, sources, evicted, frs))
            for evicted in (True, False)
            for sources in (hierarchy, priority, same_queue)
        ]
        any_hierarchy = groups[0].any() or groups[3].any()
        forbidden = cq.spec.preemption.borrow_within_cohort == NEVER
        attempts: tuple[bool, ...]
        if (not any_hierarchy and not (groups[1].any() or groups[4].any())) or (
            forbidden and not self._under_nominal(cq, frs)
        ):
            attempts = (True,)
        elif forbidden and not any_hierarchy:
            attempts = (False, True)
        else:
            attempts = (True, False)
        for allow_borrowing in attempts:
            chosen: list[_Candidate] = []
            try:
                for group in groups:
                    for candidate in group:
                        if not self._valid(cq, candidate, allow_borrowing, frs):
                            continue
                        self._remove(candidate)
                        chosen.append(candidate)
                        if self._fits(cq, requests, allow_borrowing):
                            chosen = self._fill_back(cq, requests, allow_borrowing, chosen)
                            return [Target(c.ws, VARIANT_REASON[c.variant], c.cq) for c in chosen]
            finally:
                for candidate in chosen:
                    self._restore(candidate)
        return []

    # -- candidates -------------------------------------------------------------------------
    def _classify(self, cq: ClusterQueueState, preemptor: WorkloadState, candidate: WorkloadState,
                  candidate_cq: str, frs: list[FR], advantage: bool) -> int:
        if not uses(candidate, frs):
            return 0
        spec = cq.spec.preemption
        own = candidate_cq == cq.name
        policy = spec.within_cluster_queue if own else spec.reclaim_within_cohort
        if not satisfies_policy(preemptor, candidate, policy):
            return 0
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

    def _candidates(self, cq: ClusterQueueState, preemptor: WorkloadState, sources: list[_Source],
                    evicted: bool, frs: list[FR]) -> Iterator[_Candidate]:
        """The candidates of these queues that are (or are not yet) evicted, in Kueue's order,
        merged across the queues only as far as they are read."""
        if not sources:
            return
        spec = cq.spec.preemption
        walks = []
        for i, (member, _, _) in enumerate(sources):
            policy = spec.within_cluster_queue if member is cq else spec.reclaim_within_cohort
            walks.append(_walk(member, evicted, max_candidate_priority(policy, preemptor), i))
        merged = walks[0] if len(walks) == 1 else heapq.merge(*walks)
        workloads = self.state.workloads
        offset = self.state.offset
        for _, _, _, key, i in merged:
            candidate = workloads[key]
            if not preemptible_now(candidate, offset):
                continue
            member, advantage, lca = sources[i]
            variant = self._classify(cq, preemptor, candidate, member.name, frs, advantage)
            if variant:
                yield _Candidate(candidate, member, variant, lca)

    def _cohort_sources(self, cq: ClusterQueueState, requests: dict[FR, int],
                        frs: list[FR]) -> tuple[list[_Source], list[_Source]]:
        hierarchy: list[_Source] = []
        priority: list[_Source] = []
        if cq.node.parent is None or cq.spec.preemption.reclaim_within_cohort == NEVER:
            return hierarchy, priority
        advantage, remaining = _fit_in_quota(cq.node, requests)
        previous: QuotaNode | None = None
        for subtree in cq.node.ancestors():
            target = hierarchy if advantage else priority
            self._collect(cq, subtree, subtree, previous, frs, advantage, target)
            fits, remaining = _fit_in_quota(subtree, remaining)
            advantage = advantage or fits
            previous = subtree
        return hierarchy, priority

    def _collect(self, cq: ClusterQueueState, node: QuotaNode, subtree_root: QuotaNode,
                 skip: QuotaNode | None, frs: list[FR], advantage: bool, out: list[_Source]) -> None:
        for name in sorted(node.children):
            child = node.children[name]
            if child is skip or child is cq.node:
                continue
            if within_nominal(child, frs):
                continue
            if child.is_cluster_queue:
                member = self.state.cluster_queues.get(name)
                if member is not None:
                    out.append((member, advantage, subtree_root))
            else:
                self._collect(cq, child, subtree_root, skip, frs, advantage, out)

    # -- simulation -------------------------------------------------------------------------
    def _valid(self, cq: ClusterQueueState, c: _Candidate, allow_borrowing: bool, frs: list[FR]) -> bool:
        if c.cq is cq:
            return True
        if allow_borrowing and c.variant == RECLAIM_WITHOUT_BORROWING:
            return False
        if within_nominal(c.cq.node, frs):
            return False
        for node in c.cq.node.ancestors():
            if node is c.lca:
                break
            if within_nominal(node, frs):
                return False
        return True

    @staticmethod
    def _under_nominal(cq: ClusterQueueState, frs: list[FR]) -> bool:
        return all(cq.node.usage.get(fr, 0) < cq.node.nominal.get(fr, 0) for fr in frs)

    @staticmethod
    def _fits(cq: ClusterQueueState, requests: dict[FR, int], allow_borrowing: bool) -> bool:
        node = cq.node
        for fr, value in requests.items():
            if not allow_borrowing and node.borrowing_with(fr, value):
                return False
            if value > max(0, node.available(fr)):
                return False
        return True

    def _fill_back(self, cq: ClusterQueueState, requests: dict[FR, int], allow_borrowing: bool,
                   chosen: list[_Candidate]) -> list[_Candidate]:
        # Give back, last to first (the last one is needed by construction), every victim the
        # preemptor still fits without; Kueue swaps the last element into the freed slot.
        for i in range(len(chosen) - 2, -1, -1):
            self._restore(chosen[i])
            if self._fits(cq, requests, allow_borrowing):
                chosen[i] = chosen[-1]
                chosen.pop()
            else:
                self._remove(chosen[i])
        return chosen

    @staticmethod
    def _remove(c: _Candidate) -> None:
        assert c.ws.admission is not None
        c.cq.node.add_usages(c.ws.admission.usage, -1)

    @staticmethod
    def _restore(c: _Candidate) -> None:
        assert c.ws.admission is not None
        c.cq.node.add_usages(c.ws.admission.usage)


def _walk(member: ClusterQueueState, evicted: bool, max_priority: int | None,
          i: int) -> Iterator[tuple[int, int, int, str, int]]:
    for priority, offset, index, key in member.candidates.ordered(evicted, max_priority):
        yield priority, offset, index, key, i


def _fit_in_quota(node: QuotaNode, requests: dict[FR, int]) -> tuple[bool, dict[FR, int]]:
    fits = True
    remaining: dict[FR, int] = {}
    for fr, value in requests.items():
        if node.subtree.get(fr, 0) < node.usage.get(fr, 0) + value:
            fits = False
        remaining[fr] = max(0, value - node.local_available(fr))
    return fits, remaining
