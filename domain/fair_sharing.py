"""Fair sharing: Kueue's dominant resource share (DRS), the admission tournament, and
fair-sharing preemption.

A node's DRS is how much it borrows of its dominant resource, relative to what its parent could
lend, divided by its weight. Kueue computes it in float64; here every ratio is an exact
`Fraction`, so ties are ties on every machine.

Admission (Kueue's fairSharingIterator): within a cohort tree the next entry is the winner of a
tournament: at each cohort, the child not borrowing on the entry's requested resources beats one
that is, then the lower DRS (including the entry's own usage), then higher priority, then
earlier queue time. The tournament is re-run after each entry is processed.

Preemption (Kueue's fairPreemptions): candidates are the preemptor's own ClusterQueue's per
`withinClusterQueue`, plus, per `reclaimWithinCohort`, those of every borrowing ClusterQueue in
the tree. Target ClusterQueues are chosen by descending the tree towards the highest DRS, and a
candidate is taken if the configured strategy holds between the almost-lowest-common-ancestors
of preemptor and target.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

from domain import reasons
from domain.entry import Entry
from domain.objects import NEVER
from domain.preemption import Target, max_candidate_priority, never_preempts, preemptible_now, satisfies_policy, uses
from domain.quota import FR, QuotaNode
from domain.state import ClusterQueueState, State, WorkloadState

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
_ZERO = Fraction(0)


@dataclass(frozen=True, slots=True)
class DRS:
    # The unweighted ratio num/den: 1000 × borrowed / lendable, of the dominant resource. Kept
    # as two integers (not reduced) so that shares are compared by cross-multiplying, exactly,
    # without building Fractions on the scheduling path.
    num: int
    den: int  # > 0
    weight: int  # milli-units
    dominant: str = ""
    borrowed: tuple[FR, ...] = ()

    @property
    def ratio(self) -> Fraction:
        return Fraction(self.num, self.den)

    @property
    def borrowing(self) -> bool:
        return bool(self.borrowed)

    def borrowing_on(self, requested: dict[FR, int]) -> bool:
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed)

    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and self.num != 0

    def share(self) -> Fraction | None:
        """The weighted share; None stands for +infinity (weight 0 while borrowing)."""
        if self.num == 0:
            return _ZERO
        if self.weight == 0:
            return None
        return Fraction(self.num * 1000, self.den * self.weight)

    def weighted_share(self) -> int:
        """Kueue's status.fairSharing.weightedShare: the share rounded up (MaxInt64 for +inf)."""
        share = self.share()
        if share is None:
            return 2**63 - 1
        return -((-share.numerator) // share.denominator)


NEGATIVE = DRS(-1, 1, 1000)


def compare(a: DRS, b: DRS) -> int:
    """Order two shares; +infinity (weight 0 while borrowing) above every finite share. Exact:
    the weighted shares num·1000/(den·weight) are compared by cross-multiplying."""
    an, bn = a.num, b.num
    a_inf = a.weight == 0 and an != 0
    b_inf = b.weight == 0 and bn != 0
    if a_inf and b_inf:
        left, right = an * b.den, bn * a.den
    elif a_inf:
        return 1
    elif b_inf:
        return -1
    elif not an or not bn:
        # A zero share is zero whatever the weight; the other's sign decides.
        return ((an > 0) - (an < 0)) - ((bn > 0) - (bn < 0))
    else:
        left, right = an * b.den * b.weight, bn * a.den * a.weight  # both weights positive here
    return (left > right) - (left < right)


Lendable = dict[int, dict[str, int]]  # id(parent) -> resource -> what the parent could lend


def _lendable(parent: QuotaNode, cache: Lendable | None) -> dict[str, int]:
    """What `parent` could lend, per resource, if the whole tree were idle: it depends on the
    configuration only, so a cycle computes it once per cohort."""
    if cache is not None:
        known = cache.get(id(parent))
        if known is not None:
            return known
    lendable: dict[str, int] = {}
    for fr in parent.root().subtree:
        lendable[fr[1]] = lendable.get(fr[1], 0) + parent.potential_available(fr)
    if cache is not None:
        cache[id(parent)] = lendable
    return lendable


def dominant_resource_share(node: QuotaNode, cache: Lendable | None = None,
                            extra: dict[FR, int] | None = None) -> DRS:
    """`cache` may carry what parents could lend between calls that see the same configuration;
    `extra` is usage to count as if it were added to the node's (see `usage_seen_above`)."""
    parent = node.parent
    if parent is None:
        return DRS(0, 1, node.weight)
    borrowed_by_resource: dict[str, int] = {}
    borrowed: list[FR] = []
    usage = node.usage
    for fr, quota in node.subtree.items():
        amount = usage.get(fr, 0) - quota
        if extra:
            amount += extra.get(fr, 0)
        if amount > 0:
            borrowed_by_resource[fr[1]] = borrowed_by_resource.get(fr[1], 0) + amount
            borrowed.append(fr)
    if not borrowed:
        return DRS(0, 1, node.weight)
    lendable = _lendable(parent, cache)
    # The largest borrowed/lendable, first in resource-name order on ties; compared as integer
    # cross-products, one Fraction built for the winner.
    best_num, best_den = 0, 1
    dominant = ""
    for resource in sorted(borrowed_by_resource):
        total = lendable.get(resource, 0)
        if total > 0:
            num = borrowed_by_resource[resource] * 1000
            if num * best_den > best_num * total:
                best_num, best_den, dominant = num, total, resource
    if not best_num:
        return DRS(0, 1, node.weight, "", tuple(sorted(borrowed)))
    return DRS(best_num, best_den, node.weight, dominant, tuple(sorted(borrowed)))


def usage_seen_above(node: QuotaNode, usage: dict[FR, int]) -> dict[FR, int]:
    """What `node`'s parent would add to its usage if `usage` were added to `node`'s (as
    QuotaNode.add_usage propagates it: the part within the node's localQuota stays below)."""
    out: dict[FR, int] = {}
    for fr, delta in usage.items():
        local = node.local_quota(fr)
        before = node.usage.get(fr, 0)
        seen = max(0, before + delta - local) - max(0, before - local)
        if seen:
            out[fr] = seen
    return out


# --- admission order ------------------------------------------------------------------------
class Tournament:
    """Yields the cycle's entries in fair-sharing order, re-deciding after each is processed.

    Kueue computes, before every round, each entry's share at every level of its tree. A round
    only compares entries where their paths meet, so here a share is computed when a comparison
    first needs it; a tree with one entry left needs no comparison. Both a share at a cohort and
    the winner below a cohort read only the usage of nodes below that cohort (the rest is
    configuration, fixed within a cycle, and the entries' own fields), so they are kept for later
    rounds for as long as the subtree's change count (QuotaNode.changes) stays the same and, for
    a winner, no entry below it has gone: processing an entry changes usage along its own path,
    so every other subtree's result carries over to the next round as it is."""

    def __init__(self, entries: list[Entry], preemptors: frozenset[str] = frozenset()) -> None:
        self.remaining: dict[str, Entry] = {e.cq.name: e for e in entries}
        # ClusterQueues whose entry is their waiting preemptor, ranked first at every level
        # (feature gate PrioritizePreemptorWorkloads; empty when it is off).
        self._preemptors = preemptors
        self._left: dict[int, int] = {}  # id(cohort) -> entries left below it
        for e in entries:
            for ancestor in e.cq.node.ancestors():
                self._left[id(ancestor)] = self._left.get(id(ancestor), 0) + 1
        self._lendable: Lendable = {}  # the configuration does not change within a cycle
        self._children: dict[int, list[QuotaNode]] = {}
        # (id(cohort), ClusterQueue) -> (the entry's share at the cohort, whether it borrows on
        # the entry's resources, the cohort's child it is the share of, that child's changes).
        self._shares: dict[tuple[int, str], tuple[DRS, bool, QuotaNode, int]] = {}
        # id(cohort) -> (the winner below it, the cohort's changes); dropped when an entry below
        # the cohort leaves the tournament.
        self._winners: dict[int, tuple[Entry | None, int]] = {}

    def __iter__(self) -> Iterator[Entry]:
        while self.remaining:
            # Trees share no quota, so which tree goes first does not matter; pick by name.
            first = self.remaining[min(self.remaining)]
            node = first.cq.node
            winner: Entry | None = first
            if node.parent is not None:
                root = node.root()
                if self._left[id(root)] > 1:
                    winner = self._run(root)
            assert winner is not None
            del self.remaining[winner.cq.name]
            for ancestor in winner.cq.node.ancestors():
                self._left[id(ancestor)] -= 1
                self._winners.pop(id(ancestor), None)
            yield winner

    def _share(self, entry: Entry, cohort: QuotaNode) -> tuple[DRS, bool]:
        """The share, with the entry's usage, of the child of `cohort` on the entry's path, and
        whether that child borrows on a resource the entry requests. The usage is carried up the
        path on paper, not added to the tree and taken back."""
        key = (id(cohort), entry.cq.name)
        cached = self._shares.get(key)
        if cached is not None and cached[2].changes == cached[3]:
            return cached[0], cached[1]
        node = entry.cq.node
        extra = entry.assignment.usage
        while node.parent is not cohort:
            extra = usage_seen_above(node, extra)
            assert node.parent is not None
            node = node.parent
        share = dominant_resource_share(node, self._lendable, extra)
        borrowing = share.borrowing_on(entry.assignment.usage)
        self._shares[key] = (share, borrowing, node, node.changes)
        return share, borrowing

    def _run(self, cohort: QuotaNode) -> Entry | None:
        cached = self._winners.get(id(cohort))
        if cached is not None and cached[1] == cohort.changes:
            return cached[0]
        children = self._children.get(id(cohort))
        if children is None:
            children = self._children[id(cohort)] = [cohort.children[n] for n in sorted(cohort.children)]
        candidates: list[Entry] = []
        for child in children:
            if not child.is_cluster_queue and self._left.get(id(child)):
                winner = self._run(child)
                if winner is not None:
                    candidates.append(winner)
        for child in children:
            if child.is_cluster_queue and child.name in self.remaining:
                candidates.append(self.remaining[child.name])
        best: Entry | None = None
        if candidates:
            best = candidates[0]
            for current in candidates[1:]:
                if self._less(current, best, cohort):
                    best = current
        self._winners[id(cohort)] = (best, cohort.changes)
        return best

    def _less(self, a: Entry, b: Entry, parent: QuotaNode) -> bool:
        wa, wb = a.ws, b.ws
        if self._preemptors:
            pa, pb = a.cq.name in self._preemptors, b.cq.name in self._preemptors
            if pa != pb:
                return pa
        da, ba = self._share(a, parent)
        db, bb = self._share(b, parent)
        if ba != bb:
            return not ba
        c = compare(da, db)
        if c != 0:
            return c < 0
        if wa.priority != wb.priority:
            return wa.priority > wb.priority
        return (wa.queue_time, wa.seq) < (wb.queue_time, wb.seq)


# --- preemption -----------------------------------------------------------------------------
class FairSharingPreemptor:
    def __init__(self, state: State) -> None:
        self.state = state
        self._lendable: Lendable = {}

    def targets(self, cq: ClusterQueueState, ws: WorkloadState, requests: dict[FR, int],
                frs: list[FR]) -> list[Target]:
        if never_preempts(cq):
            return []  # a non-preemptive queue: no candidate can exist
        self._lendable = {}  # one attempt sees one configuration
        candidates = self._candidates(cq, ws, frs)
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
            if cq.candidates.admitted_at(offset):
                self.state.deferred[cq.name] = None
            out[cq.name] = _Queue(cq, self._walk(cq, ws, policy.within_cluster_queue, frs))
        if cq.node.parent is not None and policy.reclaim_within_cohort != NEVER:
            for node in cq.node.root().leaves():
                member = self.state.cluster_queues.get(node.name)
                if member is None or member is cq:
                    continue
                if not any(node.usage.get(fr, 0) > node.subtree.get(fr, 0) for fr in frs):
                    continue
                if member.candidates.admitted_at(offset):
                    self.state.deferred[cq.name] = None
                out[member.name] = _Queue(member, self._walk(member, ws, policy.reclaim_within_cohort, frs))
        return out

    def _walk(self, member: ClusterQueueState, preemptor: WorkloadState, policy: str,
              frs: list[FR]) -> Iterator[WorkloadState]:
        workloads = self.state.workloads
        offset = self.state.offset
        bound = max_candidate_priority(policy, preemptor)
        for evicted in (True, False):
            for _, _, _, key in member.candidates.ordered(evicted, bound):
                c = workloads[key]
                if preemptible_now(c, offset) and satisfies_policy(preemptor, c, policy) and uses(c, frs):
                    yield c

    def _first_strategy(self, cq: ClusterQueueState, requests: dict[FR, int], frs: list[FR],
                        candidates: dict[str, _Queue], strategy: str,
                        taken: list[Target]) -> tuple[bool, list[tuple[WorkloadState, ClusterQueueState]]]:
        ordering = _TargetOrdering(cq, candidates, self._lendable)
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
            preemptor_share, target_old = _shares(cq, target, self._lendable)
            if preemptor_share.zero_weight_borrows() and not target_old.zero_weight_borrows():
                while ordering.has(target):
                    retry.append((ordering.pop(target), target))
                continue
            while ordering.has(target):
                victim = ordering.pop(target)
                target_new = _share_after_removal(cq, target, victim, self._lendable)
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
        ordering = _TargetOrdering(cq, queues, self._lendable)
        for target in ordering:
            preemptor_share, target_old = _shares(cq, target, self._lendable)
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

    def __init__(self, cq: ClusterQueueState, queues: dict[str, _Queue], lendable: Lendable) -> None:
        self.cq = cq
        self.lendable = lendable
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
            drs = dominant_resource_share(child, self.lendable)
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
            drs = dominant_resource_share(child, self.lendable)
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


def _shares(cq: ClusterQueueState, target: ClusterQueueState, lendable: Lendable) -> tuple[DRS, DRS]:
    p, t = _almost_lcas(cq, target)
    return dominant_resource_share(p, lendable), dominant_resource_share(t, lendable)


def _share_after_removal(cq: ClusterQueueState, target: ClusterQueueState, victim: WorkloadState,
                         lendable: Lendable) -> DRS:
    admission = victim.admission
    assert admission is not None
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
