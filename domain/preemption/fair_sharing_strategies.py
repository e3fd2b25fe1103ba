"""Fair-sharing preemption (Kueue's fairPreemptions): which workloads a pending one may evict
when the cohort shares by dominant resource share.

Candidates are the preemptor's own ClusterQueue's per `withinClusterQueue`, plus, per
`reclaimWithinCohort`, those of every borrowing ClusterQueue in the tree. Target ClusterQueues
are chosen by descending the tree towards the highest DRS (`domain/fair_sharing.py` computes
it), and a candidate is taken if the configured strategy holds between the
almost-lowest-common-ancestors of preemptor and target: the first strategy, then, for what it
left, the second.
"""

from __future__ import annotations

from collections.abc import Iterator

from domain import reasons
from domain.fair_sharing import (
    DRS,
    NEGATIVE,
    Lendable,
    compare,
    dominant_resource_share,
    usage_seen_above,
)
from domain.local_queue_usage import by_usage, wants_fair
from domain.objects import NEVER
from domain.preemption.fair_shortfall import cannot_fit
from domain.preemption.policy import (
    Target,
    max_candidate_priority,
    never_preempts,
    preemptible_now,
    preemptor_reads,
    satisfies_policy,
    uses,
)
from domain.preemption.tree_epochs import Kept, TreeEpochs
from domain.quota import FR, QuotaNode
from domain.state import ClusterQueueState, State, WorkloadState

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"

# Switch of the answers kept across one scheduling pass's nominations (`FairSharingPreemptor.targets`).
KEEP_ANSWERS = True

# Switch of the bound that answers a search no victim could satisfy before reading a candidate
# (domain/preemption/fair_shortfall.py).
BOUND_SEARCHES = True

# Switch of the shares kept within a pass while their node's usage stays (`_Shares`).
CACHE_SHARES = True


class FairSharingPreemptor:
    """One scheduling pass's fair-sharing searches (the scheduler makes one per pass)."""

    def __init__(self, state: State) -> None:
        self.state = state
        self._shares = _Shares()
        # Answers of searches made while nominating, by what the search reads of the preemptor
        # (its priority, its queue time where a policy is LowerOrNewerEqual), its queue, the
        # requests and flavor-resources, each under its cohort tree's epoch (`epochs`, counted
        # by the scheduler; read here through its dict, `_epochs`). As the classical
        # preemptor's (domain/preemption/classical.py).
        self._kept: dict[tuple[object, ...], Kept] | None = {} if KEEP_ANSWERS else None
        self.epochs = TreeEpochs()
        self._epochs = self.epochs.by_root
        self._nominating = False

    def share_while_unchanged(self) -> None:
        """From now until `stop_sharing`, nothing but these searches touches the quota or the
        workloads (a nomination phase): answers may be kept."""
        self._nominating = True

    def stop_sharing(self) -> None:
        self._nominating = False

    def targets(self, cq: ClusterQueueState, ws: WorkloadState, requests: dict[FR, int],
                frs: list[FR]) -> list[Target]:
        """The victims that make room for these requests (none if nothing can).

        Speed-up, exact: while nominating, an answer found in an earlier nomination of the same
        scheduling pass is given again when nothing has been admitted, evicted or released in
        the preemptor's cohort tree since (its epoch). A search reads only that tree's usage,
        configuration and workloads (shares, candidates, the LocalQueue usage admission fair
        sharing orders them by), the input offset, and of the preemptor its priority and, where
        a policy is LowerOrNewerEqual, its queue time (`max_candidate_priority`,
        `satisfies_policy`); within a pass the tree changes only by its admissions, evictions
        and releases, and what a cycle holds for its preemptors is given back before the next
        one nominates. The search's one side effect, deferring the ClusterQueue, was made the
        first time and lasts for the whole pass. Heads woken by a release come up one per
        ClusterQueue per cycle, most cycles change nothing in their tree, and a waiting
        preemptor is nominated in every cycle of its tree: their searches are asked again."""
        kept = self._kept
        if kept is None or not self._nominating:
            return self._targets(cq, ws, requests, frs)
        key = (preemptor_reads(cq, ws), id(cq), tuple(requests.items()), tuple(frs))
        epoch = self._epochs.get(id(cq.node.root()), 0)
        found = kept.get(key)
        if found is not None and found[0] == epoch:
            return list(found[1])
        answer = self._targets(cq, ws, requests, frs)
        kept[key] = (epoch, tuple(answer))
        return answer

    def _targets(self, cq: ClusterQueueState, ws: WorkloadState, requests: dict[FR, int],
                 frs: list[FR]) -> list[Target]:
        if never_preempts(cq):
            return []  # a non-preemptive queue: no candidate can exist
        candidates = self._candidates(cq, ws, frs)
        if BOUND_SEARCHES and cannot_fit(cq, ws, requests, frs,
                                         [q.member for q in candidates.values() if q.member is not cq],
                                         self._shares.lendable, self._shares.of):
            # Speed-up, exact (fair_shortfall.py): no victim it could take makes it fit; the
            # search's one side effect, deferring the ClusterQueue, `_candidates` has made.
            return []
        if all(q.peek() is None for q in candidates.values()):
            return []
        strategies = self.state.configuration.fair_sharing_strategies
        cq.node.add_usages(requests)  # shares include the incoming workload
        taken: list[Target] = []
        try:
            fits, retry = self._first_strategy(cq, requests, frs, candidates, strategies[0], taken)
            if not fits and len(strategies) > 1:
                fits = self._second_strategy(cq, requests, frs, retry, taken)
        finally:
            cq.node.add_usages(requests, -1)
        if not fits:
            for t in taken:
                _restore(t)
            return []
        # Give back victims the preemptor can do without, last to first, as in classical.
        for i in range(len(taken) - 2, -1, -1):
            _restore(taken[i])
            if _fits(cq, requests):
                taken[i] = taken[-1]
                taken.pop()
            else:
                _remove(taken[i])
        for t in taken:
            _restore(t)
        return taken

    def _candidates(self, cq: ClusterQueueState, ws: WorkloadState, frs: list[FR]) -> dict[str, _Queue]:
        """The queues to take victims from, each read lazily in candidate order."""
        out: dict[str, _Queue] = {}
        policy = cq.spec.preemption
        offset = self.state.offset
        if policy.within_cluster_queue != NEVER:
            if cq.candidates.shields_at(offset):
                self.state.deferred[cq.name] = None
            out[cq.name] = _Queue(cq, self._walk(cq, ws, policy.within_cluster_queue, frs))
        if cq.node.parent is not None and policy.reclaim_within_cohort != NEVER:
            for node in cq.node.root().leaves():
                member = self.state.cluster_queues.get(node.name)
                if member is None or member is cq or not member.active:
                    continue  # an inactive queue is not in Kueue's snapshot (classical.py)
                if not any(node.usage.get(fr, 0) > node.subtree.get(fr, 0) for fr in frs):
                    continue
                if member.candidates.shields_at(offset):
                    self.state.deferred[cq.name] = None
                out[member.name] = _Queue(member, self._walk(member, ws, policy.reclaim_within_cohort, frs))
        return out

    def _walk(self, member: ClusterQueueState, preemptor: WorkloadState, policy: str,
              frs: list[FR]) -> Iterator[WorkloadState]:
        workloads = self.state.workloads
        offset = self.state.offset
        bound = max_candidate_priority(policy, preemptor)
        fair = wants_fair(self.state, member)
        for evicted in (True, False):
            places = member.candidates.ordered(evicted, bound)
            if fair:
                places = by_usage(self.state, places)
            for _, _, _, key in places:
                c = workloads[key]
                if preemptible_now(c, offset) and satisfies_policy(preemptor, c, policy) and uses(c, frs):
                    yield c

    def _first_strategy(self, cq: ClusterQueueState, requests: dict[FR, int], frs: list[FR],
                        candidates: dict[str, _Queue], strategy: str,
                        taken: list[Target]) -> tuple[bool, list[tuple[WorkloadState, ClusterQueueState]]]:
        ordering = _TargetOrdering(cq, candidates, self._shares)
        retry: list[tuple[WorkloadState, ClusterQueueState]] = []
        within_nominal = not any(cq.node.usage.get(fr, 0) > cq.node.nominal.get(fr, 0) for fr in frs)
        for target in ordering:
            if target is cq:
                victim = ordering.pop(target)
                if self._take(cq, requests, victim, target, reasons.IN_CLUSTER_QUEUE, taken):
                    return True, []
                continue
            if within_nominal:
                victim = ordering.pop(target)
                if self._take(cq, requests, victim, target, reasons.IN_COHORT_RECLAMATION, taken):
                    return True, []
                continue
            preemptor_share, target_old = _shares(cq, target, self._shares)
            if preemptor_share.zero_weight_borrows() and not target_old.zero_weight_borrows():
                while ordering.has(target):
                    retry.append((ordering.pop(target), target))
                continue
            while ordering.has(target):
                victim = ordering.pop(target)
                target_new = _share_after_removal(cq, target, victim, self._shares.lendable)
                if strategy == LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
                    passed = compare(preemptor_share, target_new) <= 0
                else:
                    passed = compare(preemptor_share, target_old) < 0
                if passed:
                    if self._take(cq, requests, victim, target, reasons.IN_COHORT_FAIR_SHARING, taken):
                        return True, []
                    break  # shares changed: choose the target again
                retry.append((victim, target))
        return False, retry

    def _second_strategy(self, cq: ClusterQueueState, requests: dict[FR, int], frs: list[FR],
                         retry: list[tuple[WorkloadState, ClusterQueueState]], taken: list[Target]) -> bool:
        by_queue: dict[str, list[WorkloadState]] = {}
        members: dict[str, ClusterQueueState] = {}
        for victim, member in retry:
            by_queue.setdefault(member.name, []).append(victim)
            members[member.name] = member
        queues = {name: _Queue(members[name], iter(v)) for name, v in by_queue.items()}
        ordering = _TargetOrdering(cq, queues, self._shares)
        for target in ordering:
            preemptor_share, target_old = _shares(cq, target, self._shares)
            victim = ordering.pop(target)
            if compare(preemptor_share, target_old) < 0:
                if self._take(cq, requests, victim, target, reasons.IN_COHORT_FAIR_SHARING, taken):
                    return True
            ordering.drop(target)
        return False

    @staticmethod
    def _take(cq: ClusterQueueState, requests: dict[FR, int], victim: WorkloadState,
              target: ClusterQueueState, reason: str, taken: list[Target]) -> bool:
        t = Target(victim, reason, target)
        _remove(t)
        taken.append(t)
        # The fit test runs without the preemptor's own (simulated) usage.
        cq.node.add_usages(requests, -1)
        fits = _fits(cq, requests)
        cq.node.add_usages(requests)
        return fits


class _Shares:
    """The dominant resource shares a pass's searches read, each kept while its node's usage
    stays: a share reads only the node's usage (counted by `QuotaNode.changes`, which every
    usage change in its subtree moves) and the configuration (its quota, weight and what its
    parent could lend), which a pass does not change. Taking a victim, or simulating the
    preemptor's request, moves only the nodes on one path: the other queues' shares, read again
    at each choice of a target and by the next search, are kept."""

    __slots__ = ("lendable", "_known")

    def __init__(self) -> None:
        self.lendable: Lendable = {}  # what each parent could lend: configuration only
        self._known: dict[int, tuple[int, DRS]] = {}  # id(node) -> (its changes, its share)

    def of(self, node: QuotaNode) -> DRS:
        if not CACHE_SHARES:
            return dominant_resource_share(node, self.lendable)
        known = self._known.get(id(node))
        if known is not None and known[0] == node.changes:
            return known[1]
        share = dominant_resource_share(node, self.lendable)
        self._known[id(node)] = (node.changes, share)
        return share


class _Queue:
    """One ClusterQueue's candidates, read one at a time, with a look at the next."""

    __slots__ = ("member", "_source", "_head", "_peeked", "popped")

    def __init__(self, member: ClusterQueueState, source: Iterator[WorkloadState]) -> None:
        self.member = member
        self._source = source
        self._head: WorkloadState | None = None
        self._peeked = False
        self.popped = 0

    def peek(self) -> WorkloadState | None:
        if not self._peeked:
            self._head = next(self._source, None)
            self._peeked = True
        return self._head

    def pop(self) -> WorkloadState:
        head = self.peek()
        assert head is not None
        self._peeked = False
        self.popped += 1
        return head


class _TargetOrdering:
    """Kueue's TargetClusterQueueOrdering: which ClusterQueue to take the next victim from."""

    def __init__(self, cq: ClusterQueueState, queues: dict[str, _Queue], shares: _Shares) -> None:
        self.cq = cq
        self.shares = shares
        self.by_queue = queues
        self.ancestors = {id(n) for n in cq.node.ancestors()}
        self.pruned_queues: set[str] = set()
        self.pruned_cohorts: set[int] = set()

    def has(self, target: ClusterQueueState) -> bool:
        queue = self.by_queue.get(target.name)
        return queue is not None and queue.peek() is not None

    def pop(self, target: ClusterQueueState) -> WorkloadState:
        return self.by_queue[target.name].pop()

    def drop(self, target: ClusterQueueState) -> None:
        self.pruned_queues.add(target.name)

    def __iter__(self) -> Iterator[ClusterQueueState]:
        node = self.cq.node
        root = node.root()
        while id(root) not in self.pruned_cohorts:
            target = self.cq if node.parent is None else self._next(root)
            if target is None:
                continue
            if target.name in self.pruned_queues or not self.has(target):
                if node.parent is None:
                    return
                self.pruned_queues.add(target.name)
                continue
            queue = self.by_queue[target.name]
            left = queue.popped
            yield target
            # A target the consumer took nothing from is not offered again: every turn of this
            # loop then removes a candidate or a queue, so it ends.
            if queue.popped == left:
                self.pruned_queues.add(target.name)

    def _next(self, cohort: QuotaNode) -> ClusterQueueState | None:
        best_cq: ClusterQueueState | None = None
        best_cq_drs = NEGATIVE
        children = [cohort.children[n] for n in sorted(cohort.children)]
        for child in children:
            if not child.is_cluster_queue or child.name in self.pruned_queues:
                continue
            drs = self.shares.of(child)
            queue = self.by_queue.get(child.name)
            member = queue.member if queue is not None else None
            if (not drs.borrowing and child is not self.cq.node) or member is None or not self.has(member):
                self.pruned_queues.add(child.name)
                continue
            c = compare(drs, best_cq_drs)
            if c == 0 and best_cq is not None:
                new_first = self.by_queue[member.name].peek()
                cur_first = self.by_queue[best_cq.name].peek()
                assert new_first is not None and cur_first is not None
                if _order_key((new_first, member), self.cq.name) < _order_key((cur_first, best_cq), self.cq.name):
                    best_cq = member
            elif c > 0:
                best_cq, best_cq_drs = member, drs
        best_cohort: QuotaNode | None = None
        best_cohort_drs = NEGATIVE
        for child in children:
            if child.is_cluster_queue or id(child) in self.pruned_cohorts:
                continue
            drs = self.shares.of(child)
            if not drs.borrowing and id(child) not in self.ancestors:
                self.pruned_cohorts.add(id(child))
            elif compare(drs, best_cohort_drs) >= 0:
                best_cohort, best_cohort_drs = child, drs
        if best_cohort is None and best_cq is None:
            self.pruned_cohorts.add(id(cohort))
            return None
        if best_cohort is not None and compare(best_cohort_drs, best_cq_drs) >= 0:
            return self._next(best_cohort)
        return best_cq


def _order_key(c: tuple[WorkloadState, ClusterQueueState], own: str) -> tuple[bool, bool, int, int, int, str]:
    ws, member = c
    admission = ws.admission
    assert admission is not None
    offset, index = admission.sequence
    return (not ws.evicted, member.name == own, ws.priority, -offset, -index, ws.key)


def _almost_lcas(cq: ClusterQueueState, target: ClusterQueueState) -> tuple[QuotaNode, QuotaNode]:
    preemptor_path = [cq.node, *cq.node.ancestors()]
    on_path = {id(n) for n in preemptor_path}
    target_side = target.node
    lca: QuotaNode | None = None
    for ancestor in target.node.ancestors():
        if id(ancestor) in on_path:
            lca = ancestor
            break
        target_side = ancestor
    assert lca is not None, "preemptor and target share no ancestor"
    preemptor_side = cq.node
    for ancestor in cq.node.ancestors():
        if ancestor is lca:
            break
        preemptor_side = ancestor
    return preemptor_side, target_side


def _shares(cq: ClusterQueueState, target: ClusterQueueState, shares: _Shares) -> tuple[DRS, DRS]:
    p, t = _almost_lcas(cq, target)
    return shares.of(p), shares.of(t)


def _share_after_removal(cq: ClusterQueueState, target: ClusterQueueState, victim: WorkloadState,
                         lendable: Lendable) -> DRS:
    admission = victim.admission
    assert admission is not None
    if CACHE_SHARES:
        # The victim's usage taken away on paper, carried up to the target's side as
        # QuotaNode.add_usage would carry it (`usage_seen_above`): the same share, and the tree
        # (with the change counts that keep the other shares) is not touched.
        _, t = _almost_lcas(cq, target)
        node = target.node
        removed = {fr: -value for fr, value in admission.usage.items()}
        while node is not t:
            removed = usage_seen_above(node, removed)
            assert node.parent is not None
            node = node.parent
        return dominant_resource_share(t, lendable, removed)
    target.node.add_usages(admission.usage, -1)
    _, t = _almost_lcas(cq, target)
    share = dominant_resource_share(t, lendable)
    target.node.add_usages(admission.usage)
    return share


def _fits(cq: ClusterQueueState, requests: dict[FR, int]) -> bool:
    node = cq.node
    return all(value <= max(0, node.available(fr)) for fr, value in requests.items())


def _remove(t: Target) -> None:
    assert t.ws.admission is not None
    t.cq.node.add_usages(t.ws.admission.usage, -1)


def _restore(t: Target) -> None:
    assert t.ws.admission is not None
    t.cq.node.add_usages(t.ws.admission.usage)
