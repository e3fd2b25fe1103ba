"""A bound on a fair-sharing preemption search: no victim it could take makes the preemptor fit.

A search (`FairSharingPreemptor.targets`, Kueue's fairPreemptions in
pkg/scheduler/preemption/preemption.go) takes candidates one by one, removing each one's usage,
until the preemptor fits; it finds nothing when even the last candidate it may take leaves it
short. With a deep backlog most searches end so: a woken head of a ClusterQueue above its
nominal quota whose share, once its request is added, is above every other ClusterQueue's, may
take only its own queue's (lower priority) workloads, and those are too few. `cannot_fit`
answers the same "nothing" before any candidate is read. It is a speed-up, exact: it says True
only when no victim set the search could reach fits, for these reasons:

- The search fits when every requested flavor-resource is available to the preemptor's
  ClusterQueue once its victims are gone (without its own simulated request). Removing usage
  anywhere in the tree raises what a queue has available by at most that usage (Kueue's
  available() is a sum of clamped differences and minima of terms, each moving by at most the
  change below it: domain/preemption/shortfall.py says the same of classical searches), so the
  victims must together hold at least the shortfall of each requested flavor-resource.
- Its own queue's victims are workloads of its queue up to the priority bound of
  `withinClusterQueue`; the candidate index sums their usage per priority (`used_upto`).
- Another queue's victims come only from the queues the search collects (`_candidates`:
  borrowing on a needed flavor-resource), up to the bound of `reclaimWithinCohort`. When the
  preemptor's queue, with its request, is within its nominal quota of every needed
  flavor-resource, they are taken without comparing shares (the first strategy's reclaim), so
  all of them count. Otherwise (flat cohorts only: every queue hangs directly under the root,
  so the almost-lowest-common-ancestors are the two queues themselves) each is taken only when
  the preemptor's share, with its request and without the victims taken from its own queue so
  far, is at most (LessThanOrEqualToFinalShare) or below (LessThanInitialShare) the target's
  share, after or before the victim goes. Shares only fall as usage is removed, so the
  preemptor's share is at least its share with every workload of its own queue it could take
  removed, and a target's is at most its share now: if the former is above every collected
  queue's share now, no other queue's victim passes either strategy (the zero-weight rule
  only moves candidates to the second strategy), and only its own queue's count.
"""

from __future__ import annotations

from collections.abc import Callable

from domain.fair_sharing import DRS, Lendable, compare, dominant_resource_share
from domain.objects import NEVER
from domain.preemption.policy import max_candidate_priority
from domain.preemption.shortfall import covered
from domain.quota import FR, QuotaNode
from domain.state import ClusterQueueState, WorkloadState

_ALL = 1 << 63  # a priority bound every workload is at or below


def cannot_fit(cq: ClusterQueueState, ws: WorkloadState, requests: dict[FR, int], frs: list[FR],
               others: list[ClusterQueueState], lendable: Lendable, share_of: Callable[[QuotaNode], DRS]) -> bool:
    """True when no fair-sharing search for these requests can find targets (module
    docstring); False when one might. `others`: the other ClusterQueues the search collects
    candidates from (`FairSharingPreemptor._candidates`), `lendable` its cache of what parents
    could lend, `share_of` a node's share now. The preemptor's request is not in its queue's
    usage."""
    node = cq.node
    spec = cq.spec.preemption
    index = cq.candidates
    own_bound: int | None = None
    if spec.within_cluster_queue != NEVER:
        bound = max_candidate_priority(spec.within_cluster_queue, ws)
        own_bound = _ALL if bound is None else bound
    short: dict[FR, int] = {}
    for fr, value in requests.items():
        available = node.available(fr)
        missing = value - (available if available > 0 else 0)
        if missing > 0 and own_bound is not None:
            missing -= index.used_upto(own_bound, fr)
        if missing > 0:
            short[fr] = missing
    if not short:
        return False  # it may fit with its own victims alone
    if not others:
        return True
    usage, nominal = node.usage, node.nominal
    within_nominal = not any(usage.get(fr, 0) + requests.get(fr, 0) > nominal.get(fr, 0) for fr in frs)
    if not within_nominal:
        root = node.parent
        if root is None or root.parent is not None or any(m.node.parent is not root for m in others):
            return False  # a hierarchy: the sides compared are cohorts, not these queues
        # The preemptor's least share: its request added, every workload of its own queue it
        # could take removed.
        extra: dict[FR, int] = {}
        for fr in node.subtree:
            delta = requests.get(fr, 0)
            if own_bound is not None:
                delta -= index.used_upto(own_bound, fr)
            if delta:
                extra[fr] = delta
        least = dominant_resource_share(node, lendable, extra)
        for member in others:
            if compare(least, share_of(member.node)) <= 0:
                return False  # a victim of this queue might pass
        return True
    bound = max_candidate_priority(spec.reclaim_within_cohort, ws)
    return not covered(short, others, _ALL if bound is None else bound)
