"""A bound on a classical preemption search: the preemptor's shortfall beyond every workload it
could ever take.

A search (`ClassicalPreemptor.targets`) takes candidates one by one, removing each one's usage,
until the preemptor fits; it finds nothing when even the last candidate leaves it short. With a
deep backlog most searches end so: a woken head of low priority, borrowing, with a few
candidates of its own, reads them all and still does not fit. `cannot_fit` answers the same
"nothing" from the usage the candidate index keeps summed per priority, before any candidate is
read. It is a speed-up, exact: it says True only when no search attempt could fit, for these
reasons (Kueue's classical preemptor, pkg/scheduler/preemption/preemption.go, as the search
follows it):

- An attempt without borrowing fits only once the preemptor's own ClusterQueue stops borrowing
  (`fits` with borrowing not allowed), and only victims of its own queue lower that queue's
  usage: if all of the candidates its `withinClusterQueue` policy allows (every workload of the
  queue up to the policy's priority bound, a superset) leave it borrowing, that attempt fails.
- An attempt with borrowing may take, besides its own queue's, only other queues' candidates
  preempted as "reclaim while borrowing" (borrowWithinCohort: priority below the preemptor's and
  at most maxPriorityThreshold) or as hierarchical reclaim (when the preemptor fits in the quota
  of some cohort below the root: then this bound does not answer). Removing usage anywhere in
  the tree raises what the preemptor's queue has available by at most that usage (Kueue's
  available() is a sum of clamped differences and minima of terms, each moving by at most the
  change below it): if some requested flavor-resource still lacks more than all of those
  workloads hold, the attempt fails. Only queues the search may take from count: one whose
  every node up to the common ancestor with the preemptor's uses more than its nominal quota of
  some searched flavor-resource (Kueue's reclaimable queues, `ClassicalPreemptor._collect`; a
  queue within nominal gives no candidate, and usage only falls while a search reads, so it
  never becomes one). The searched flavor-resources are among the requested ones, so a queue
  within nominal in every requested one is none (`_may_give`).

The caller keeps the search's one side effect (deferring the ClusterQueue when a queue it may
take from holds a workload admitted by the event being applied: `ClassicalPreemptor.defer`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from domain.objects import NEVER
from domain.preemption.fit import fit_in_quota
from domain.preemption.policy import max_candidate_priority
from domain.quota import FR, QuotaNode
from domain.state import ClusterQueueState, State, WorkloadState

_NONE = -(1 << 63)  # a priority bound nothing is at or below

# Count, as other queues' candidates, only those of queues the search may take from (`_may_give`):
# the same answers where the bound answers, more often "cannot fit". Checked against the bound
# that counts every other queue by tests/domain/test_search_shortcuts.py.
ONLY_RECLAIMABLE = True


def cannot_fit(state: State, cq: ClusterQueueState, ws: WorkloadState, requests: dict[FR, int]) -> bool:
    """True when no classical search for these requests can find targets (module docstring);
    False when one might."""
    node = cq.node
    usage, subtree = node.usage, node.subtree
    for fr, value in requests.items():
        if usage.get(fr, 0) + value > subtree.get(fr, 0):
            break
    else:
        # It does not borrow even with no candidate taken (so neither with its own taken,
        # below): an attempt without borrowing may fit. The common answer, read first.
        return False
    spec = cq.spec.preemption
    own_bound = _NONE if spec.within_cluster_queue == NEVER else _bound(spec.within_cluster_queue, ws)
    index = cq.candidates
    short: dict[FR, int] = {}  # what the own queue's candidates leave missing, per flavor-resource
    unborrowed = True
    for fr, value in requests.items():
        own = index.used_upto(own_bound, fr) if own_bound != _NONE else 0
        if usage.get(fr, 0) - own + value > subtree.get(fr, 0):
            unborrowed = False
        available = node.available(fr)
        missing = value - (available if available > 0 else 0) - own
        if missing > 0:
            short[fr] = missing
    if unborrowed or not short:
        return False  # without borrowing, or with its own victims only, it may fit
    parent = node.parent
    if parent is None or spec.reclaim_within_cohort == NEVER:
        return True
    if parent.parent is not None and _advantage_possible(node, requests):
        return False
    if spec.borrow_within_cohort == NEVER:
        return True
    bound = ws.priority - 1
    reclaim = _bound(spec.reclaim_within_cohort, ws)
    if reclaim < bound:
        bound = reclaim
    threshold = spec.max_priority_threshold
    if threshold is not None and threshold < bound:
        bound = threshold
    if bound == _NONE:
        return True
    return not covered(short, _others(state, node, requests), bound)


def covered(short: dict[FR, int], members: Iterable[ClusterQueueState], bound: int) -> bool:
    """Could the candidates of these ClusterQueues up to priority `bound` together hold every
    flavor-resource's shortfall (`short`, not empty; this uses it up)? Read queue by queue,
    until they could (the classical bound and the fair-sharing one, fair_shortfall.py)."""
    for member in members:
        index = member.candidates
        for fr in list(short):
            left = short[fr] - index.used_upto(bound, fr)
            if left > 0:
                short[fr] = left
            else:
                del short[fr]
        if not short:
            return True
    return False


def _others(state: State, node: QuotaNode, requests: dict[FR, int]) -> Iterator[ClusterQueueState]:
    """The ClusterQueues of node's cohort tree other than node's, in the tree's order, that a
    search for these requests may take from (`_may_give`, with ONLY_RECLAIMABLE)."""
    cluster_queues = state.cluster_queues
    above: dict[int, None] | None = (
        {id(ancestor): None for ancestor in node.ancestors()} if ONLY_RECLAIMABLE else None
    )
    for leaf in node.root().leaves():
        if leaf is node:
            continue
        if above is not None and not _may_give(leaf, above, requests):
            continue
        member = cluster_queues.get(leaf.name)
        if member is not None:
            yield member


def _may_give(leaf: QuotaNode, above: dict[int, None], requests: dict[FR, int]) -> bool:
    """May a search for these requests take a candidate from this other ClusterQueue? Not when
    it, or a cohort between it and the common ancestor with the preemptor (the first of its
    ancestors in `above`, the preemptor's ancestors by id), uses no more than its nominal quota
    of every requested flavor-resource: the search collects only queues above nominal in some
    searched one at every level below that ancestor (`ClassicalPreemptor._collect`,
    `quota.over_nominal`), reads a queue's candidates only while it stays so
    (`reading.read_group`, `path_valid`), and searches among the requested ones."""
    node: QuotaNode | None = leaf
    while node is not None and id(node) not in above:
        usage, subtree = node.usage, node.subtree
        for fr in requests:
            if usage.get(fr, 0) > subtree.get(fr, 0):
                break
        else:
            return False
        node = node.parent
    return True


def _bound(policy: str, ws: WorkloadState) -> int:
    bound = max_candidate_priority(policy, ws)
    return (1 << 63) if bound is None else bound


def _advantage_possible(node: QuotaNode, requests: dict[FR, int]) -> bool:
    """Could some candidate be taken as hierarchical reclaim: does the preemptor fit in the
    quota of a cohort below the root (`ClassicalPreemptor._cohort_sources`, which walks up the
    same way)? Asked of a preemptor that does not fit in its own quota (it borrows even with
    all its own candidates gone), whose parent is not the root."""
    remaining = fit_in_quota(node, requests)[1]
    for subtree in node.ancestors():
        if subtree.parent is None:
            return False  # the root's quota gives no advantage: nothing sits outside it
        fits, remaining = fit_in_quota(subtree, remaining)
        if fits:
            return True
    return False
