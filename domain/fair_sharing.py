"""Fair sharing: Kueue's dominant resource share (DRS) and the admission tournament.

A node's DRS is how much it borrows of its dominant resource, relative to what its parent could
lend, divided by its weight. Kueue computes it in float64; here every ratio is an exact
`Fraction`, so ties are ties on every machine.

Admission (Kueue's fairSharingIterator): within a cohort tree the next entry is the winner of a
tournament: at each cohort, the child not borrowing on the entry's requested resources beats one
that is, then the lower DRS (including the entry's own usage), then higher priority, then
earlier queue time. The tournament is re-run after each entry is processed.

Fair-sharing preemption, which compares these shares, is domain/preemption/fair_sharing_strategies.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

from domain.entry import Entry
from domain.quota import FR, QuotaNode

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
