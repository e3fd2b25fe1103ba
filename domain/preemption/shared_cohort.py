"""Speed-up: the searches of one nomination phase share their reading of a flat cohort.

While a cycle nominates its heads nothing changes, and the heads of one flat cohort would each
collect the same reclaimable queues and read and merge the same candidates (less their own
queue's). `SharedCohort` (switched on by the scheduler around nomination) does that once; why
each search then reads exactly what it would have read alone is said at each class.
"""

from __future__ import annotations

from collections.abc import Iterator

from domain.preemption.reading import Stream, read_group
from domain.preemption.victims import Candidate, Pending, note
from domain.quota import FR, QuotaNode
from domain.state import ClusterQueueState


class Merged:
    """`read_group` of one group, kept as a list for every search that reads it alike (`SharedCohort`).

    Every candidate it yields is taken (as a search of a flat cohort takes every one `read_group`
    gives it), so its removal is noted in `below` before the next is read: the queue leaves the
    merge once it is within nominal, as in each search. `before`, the evicted group of the
    same attempt, is read to its end first (a search reads it whole before this one anyway; the
    merge does not rely on that)."""

    __slots__ = ("items", "_source", "_below", "_before", "_totals")

    def __init__(self, group: list[Stream], allow_borrowing: bool, frs: list[FR], below: Pending,
                 before: Merged | None) -> None:
        self.items: list[Candidate] = []
        self._source = read_group(group, allow_borrowing, frs, below)
        self._below = below
        self._before = before
        # Once read to the end: the usage of all items per node where each is removed, and the
        # ClusterQueues they come from (by id); None if some item is removed at its own queue.
        self._totals: tuple[Pending, dict[int, None]] | None | bool = False

    def all_of_others(self, cq: ClusterQueueState) -> tuple[list[Candidate], Pending] | None:
        """When no item is of `cq` and none is removed at its own queue: every item, and their
        usage per node where each is removed (not to be changed). Else None."""
        self.at(1 << 62)
        totals = self._totals
        if totals is False:
            totals = self._totals = self._sum()
        if totals is None or isinstance(totals, bool) or id(cq) in totals[1]:
            return None
        return self.items, totals[0]

    def _sum(self) -> tuple[Pending, dict[int, None]] | None:
        everything: Pending = {}
        members: dict[int, None] = {}
        for c in self.items:
            at = c.at
            if at is None or at is c.cq.node:
                return None
            assert c.ws.admission is not None
            note(everything, at, c.ws.admission.usage)
            members[id(c.cq)] = None
        return everything, members

    def at(self, i: int) -> Candidate | None:
        items = self.items
        while len(items) <= i:
            before = self._before
            if before is not None:
                self._before = None
                before.at(1 << 62)
            c = next(self._source, None)
            if c is None:
                return None
            assert c.ws.admission is not None
            note(self._below, c.cq.node, c.ws.admission.usage)
            items.append(c)
        return items[i]


class SharedGroups:
    """The candidates of a flat cohort's reclaimable queues, classified for one kind of
    preemptor: its two groups (evicted, then not) of each attempt, merged once."""

    __slots__ = ("frs", "evicted", "holding", "_merged")

    def __init__(self, evicted: list[Stream], holding: list[Stream], frs: list[FR]) -> None:
        self.frs = frs
        self.evicted = evicted
        self.holding = holding
        self._merged: dict[bool, tuple[Merged, Merged]] = {}

    def any_besides(self, cq: ClusterQueueState) -> bool:
        return any(s.member is not cq and s.at(0) is not None for group in (self.evicted, self.holding) for s in group)

    def _group(self, evicted: bool, allow_borrowing: bool) -> Merged:
        merged = self._merged.get(allow_borrowing)
        if merged is None:
            below: Pending = {}
            first = Merged(self.evicted, allow_borrowing, self.frs, below, None)
            holding = Merged(self.holding, allow_borrowing, self.frs, below, first)
            merged = self._merged[allow_borrowing] = (first, holding)
        return merged[0] if evicted else merged[1]

    def taken_by(self, evicted: bool, allow_borrowing: bool,
                 cq: ClusterQueueState) -> tuple[list[Candidate], Pending] | None:
        """All of `read` and their usage per node where each is removed, when the group holds
        none of `cq`'s candidates (`Merged.all_of_others`); else None."""
        return self._group(evicted, allow_borrowing).all_of_others(cq)

    def read(self, evicted: bool, allow_borrowing: bool, cq: ClusterQueueState) -> Iterator[Candidate]:
        """The group as `read_group` would give it to this preemptor: its own queue is no source."""
        group = self._group(evicted, allow_borrowing)
        i = 0
        while True:
            c = group.at(i)
            if c is None:
                return
            i += 1
            if c.cq is not cq:
                yield c


class SharedCohort:
    """A flat cohort (a root whose ClusterQueues over nominal all hang directly under it and
    lend all their quota) while nothing changes: the queues every search of a head in it
    collects (all of them but the head's own), those holding admissions of this event, and
    their candidates per kind of preemptor (`SharedGroups`).

    Why one merge serves every head: each such queue's candidates are removed at the root
    (`removal_node`), `path_valid` is true for all of them, and whether a queue still yields a valid
    candidate depends only on what the search took from that queue itself; so the candidates
    a search reads are the merge of all queues, each up to where it leaves, less its own
    queue's (leaving them out changes no other queue's place or end)."""

    __slots__ = ("root", "members", "admitted_now", "groups")

    def __init__(self, root: QuotaNode, members: list[ClusterQueueState], offset: int) -> None:
        self.root = root
        self.members = members
        self.admitted_now = [m for m in members if m.candidates.shields_at(offset)]
        self.groups: dict[tuple[object, ...], SharedGroups] = {}
