"""Fair-sharing admission order (Kueue's fairSharingIterator): within a cohort tree the next
entry is the winner of a tournament: at each cohort, the child not borrowing on the entry's
requested resources beats one that is, then the lower DRS (including the entry's own usage,
domain/fair_sharing.py), then higher priority, then earlier queue time. The tournament is re-run
after each entry is processed.
"""

from __future__ import annotations

from collections.abc import Iterator

from domain.entry import Entry
from domain.fair_sharing import (
    DRS,
    Lendable,
    compare,
    dominant_resource_share,
    usage_seen_above,
)
from domain.quota import QuotaNode


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
