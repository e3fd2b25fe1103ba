"""The workloads holding quota in one ClusterQueue, kept in Kueue's preemption-candidate order.

Kueue orders preemption candidates (pkg/scheduler/preemption/common CandidatesOrdering): already
evicted first, then lower priority first, then admitted more recently first. The rule "other
ClusterQueues before the preemptor's own" spans queues, so the preemptors apply it when they
merge queues. Keeping each queue's workloads in this order as they are admitted, evicted,
released or re-prioritised lets a preemption attempt read candidates lazily and stop where its
search stops: it costs what it examines, not what the cohort holds.

Workloads are filed in buckets by (evicted, priority). Inside a bucket they are ordered by their
admission sequence (input offset, decision index). Every admission gets a larger sequence than
any before it, so filing a new admission appends, and "most recently admitted first" is the
bucket read backwards. Sequences are unique (each names one decision), so no two entries tie.

A workload preempted by an input event and admitted again by that same event is shielded from
being a victim until the next event (`policy.preemptible_now`): the index counts such shielded
admissions per offset, so a search can tell at once whether a queue holds one.

Each bucket also keeps the usage its workloads hold, summed per flavor-resource: how much any
set of candidates up to a priority could give back, in a few additions (`used_upto`), which is
what bounds a preemption search before it reads a candidate (preemption/shortfall.py).

Each flavor-resource also has a count of the changes to the workloads here that hold some of it
(`changes`): a search reads of a queue only the workloads holding some of the flavor-resources
it asks for, and their usage, so an answer kept while those counts stay is still the answer
(preemption/classical.py, answers kept across events).

Derived state: rebuilt from the workloads when a snapshot is restored, never serialized. It is
given plain values (key, evicted flag, priority, admission sequence, the admission's usage), not
workloads: the state holds the index, so the index knows nothing of the state.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator

BucketKey = tuple[int, int]  # (0 evicted / 1 holding, priority)
Filed = tuple[int, int, str]  # (admission offset, decision index, workload key)
Usage = dict[tuple[str, ...], int]  # an admission's usage by flavor-resource (domain.quota.FR); never changed

EVICTED = 0
HOLDING = 1


class CandidateIndex:
    __slots__ = ("_buckets", "_order", "_filed", "_offsets", "_shielded", "_used", "_changes")

    def __init__(self) -> None:
        self._buckets: dict[BucketKey, list[Filed]] = {}
        self._order: list[BucketKey] = []  # bucket keys, ascending
        self._filed: dict[str, tuple[BucketKey, Filed, Usage]] = {}
        self._used: dict[BucketKey, Usage] = {}  # bucket -> the usage its workloads hold, summed
        self._offsets: dict[int, int] = {}  # admission offset -> how many shielded admissions hold quota here
        self._shielded: dict[str, int] = {}  # shielded workload -> the offset it is shielded in
        # flavor-resource -> how many times a workload holding some of it was filed or taken out
        # (only ever grows, so a sum of counts stays only while each of them does)
        self._changes: dict[tuple[str, ...], int] = {}

    def __len__(self) -> int:
        return len(self._filed)

    def add(self, key: str, evicted: bool, priority: int, sequence: tuple[int, int], usage: Usage,
            shielded: bool = False) -> None:
        """File a workload holding `usage` here, admitted at `sequence` (input offset, decision
        index); `shielded`: re-admitted by the event that preempted it (no victim within it)."""
        assert key not in self._filed
        where = (EVICTED if evicted else HOLDING, priority)
        entry = (sequence[0], sequence[1], key)
        bucket = self._buckets.get(where)
        if bucket is None:
            bucket = self._buckets[where] = []
            self._used[where] = {}
            insort(self._order, where)
        if not bucket or bucket[-1] < entry:
            bucket.append(entry)
        else:  # re-filed after an eviction or a priority change: an older admission
            insort(bucket, entry)
        used = self._used[where]
        changes = self._changes
        for fr, value in usage.items():
            used[fr] = used.get(fr, 0) + value
            if value:
                changes[fr] = changes.get(fr, 0) + 1
        self._filed[key] = (where, entry, usage)
        if shielded:
            self._shielded[key] = entry[0]
            self._offsets[entry[0]] = self._offsets.get(entry[0], 0) + 1

    def discard(self, key: str) -> None:
        filed = self._filed.pop(key, None)
        if filed is None:
            return
        where, entry, usage = filed
        if self._shielded.pop(key, None) is not None:
            left = self._offsets[entry[0]] - 1
            if left:
                self._offsets[entry[0]] = left
            else:
                del self._offsets[entry[0]]
        changes = self._changes
        for fr, value in usage.items():
            if value:
                changes[fr] = changes.get(fr, 0) + 1
        bucket = self._buckets[where]
        del bucket[bisect_left(bucket, entry)]
        if not bucket:
            del self._buckets[where]
            del self._used[where]
            del self._order[bisect_left(self._order, where)]
            return
        used = self._used[where]
        for fr, value in usage.items():
            used[fr] -= value

    def refile(self, key: str, evicted: bool, priority: int, sequence: tuple[int, int]) -> None:
        """Its evicted flag or priority changed."""
        filed = self._filed.get(key)
        assert filed is not None
        shielded = key in self._shielded
        self.discard(key)
        self.add(key, evicted, priority, sequence, filed[2], shielded)

    def ordered(self, evicted: bool, max_priority: int | None = None,
                skip_offset: int | None = None) -> Iterator[tuple[int, int, int, str]]:
        """(priority, -offset, -index, key) of the evicted (or the still holding) workloads, in
        candidate order, up to priority `max_priority` (None: all), leaving out those shielded
        at input offset `skip_offset`. The index must not change while this is read."""
        rank = EVICTED if evicted else HOLDING
        buckets = self._buckets
        shielded = self._shielded if skip_offset is not None and skip_offset in self._offsets else None
        for where in self._order[bisect_left(self._order, (rank,)):]:
            rank_of, priority = where
            if rank_of != rank or (max_priority is not None and priority > max_priority):
                return
            for offset, index, key in reversed(buckets[where]):
                if shielded is not None and shielded.get(key) == skip_offset:
                    continue
                yield priority, -offset, -index, key

    def holds(self, evicted: bool, max_priority: int | None = None) -> bool:
        """Is there any evicted (or still holding) workload up to priority `max_priority`?"""
        order = self._order
        i = bisect_left(order, (EVICTED if evicted else HOLDING,))
        if i == len(order):
            return False
        rank_of, priority = order[i]
        return rank_of == (EVICTED if evicted else HOLDING) and (max_priority is None or priority <= max_priority)

    def used_upto(self, max_priority: int, fr: tuple[str, ...]) -> int:
        """The usage of `fr` held by the workloads here (evicted or not, shielded or not) of
        priority at most `max_priority`: what any candidates of this queue under that bound
        could give back together."""
        total = 0
        used = self._used
        for where in self._order:
            if where[1] <= max_priority:
                total += used[where].get(fr, 0)
        return total

    def changes(self, frs: list[tuple[str, ...]]) -> int:
        """How many times, summed over `frs`, a workload holding some of one of them was filed
        here or taken out (evicted, re-prioritised, released) since the index was made."""
        changes = self._changes
        return sum([changes.get(fr, 0) for fr in frs])

    def shields_at(self, offset: int) -> bool:
        """Does some workload here hold an admission decided at this input offset that shields
        it from preemption within that offset (it was preempted by the same offset)?"""
        return offset in self._offsets
