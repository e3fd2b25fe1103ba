"""Reading candidates: each ClusterQueue's, lazily in Kueue's order, merged across queues.

Each ClusterQueue keeps its workloads in candidate order (domain/candidate_index.py); a search merges the
queues it may take from and reads only as many candidates as it examines: k·log q for k
candidates from q queues, whatever the number of workloads the cohort holds.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from domain.preemption.fit import within_nominal
from domain.preemption.policy import RECLAIM_WITHOUT_BORROWING
from domain.preemption.victims import Candidate, Pending
from domain.quota import FR, QuotaNode
from domain.state import ClusterQueueState

Key = tuple[int, int, int, str]  # a candidate's place in Kueue's order (see domain/candidate_index.py)

# A ClusterQueue whose workloads may be candidates: (queue, hierarchical advantage, lowest
# common ancestor with the preemptor for the validity check).
Source = tuple[ClusterQueueState, bool, "QuotaNode | None"]


class Stream:
    """One ClusterQueue's candidates (evicted or not), read lazily in Kueue's order and kept
    for the next attempt of the same search."""

    __slots__ = ("member", "own", "taken", "_source")

    def __init__(self, member: ClusterQueueState, own: bool, source: Iterator[tuple[Key, Candidate]]) -> None:
        self.member = member
        self.own = own
        self.taken: list[tuple[Key, Candidate]] = []
        self._source = source

    def at(self, i: int) -> tuple[Key, Candidate] | None:
        taken = self.taken
        while len(taken) <= i:
            item = next(self._source, None)
            if item is None:
                return None
            taken.append(item)
        return taken[i]


def any_candidate(group: list[Stream]) -> bool:
    """Does some queue of the group hold a candidate (which attempts to make)?"""
    return any(stream.at(0) is not None for stream in group)


def within_nominal_without(node: QuotaNode, below: Pending, frs: list[FR]) -> bool:
    """Is the queue within its nominal quota once the victims taken from it are gone, also
    those removed at its parent instead (`below`)? A ClusterQueue is a leaf: removing usage
    from it lowers its own usage by exactly that much."""
    held = below.get(id(node)) if below else None
    if held is None:
        return within_nominal(node, frs)
    usage, subtree, less = node.usage, node.subtree, held[1]
    return all(usage.get(fr, 0) - less.get(fr, 0) <= subtree.get(fr, 0) for fr in frs)


def read_group(group: list[Stream], allow_borrowing: bool, frs: list[FR], below: Pending) -> Iterator[Candidate]:
    """The candidates of a group, merged across its queues in Kueue's order, skipping every
    queue that can no longer yield a valid candidate in this attempt.

    Speed-up of Kueue's validity check of each candidate. Exact: only removals happen while an
    attempt reads (usage only goes down until it ends), and a
    queue's candidates come in ascending priority; so once another queue is within its nominal
    quota, or (borrowing allowed) shows a candidate that may only be reclaimed without
    borrowing, every later candidate of it is invalid too (Kueue's validity check: another
    queue's candidate is valid while that queue and every cohort up to the common ancestor is
    above nominal; `path_valid` checks the cohorts): dropping the queue skips exactly
    candidates the search would have examined and rejected."""
    heap: list[tuple[Key, int, int]] = []
    for s, stream in enumerate(group):
        first = stream.at(0)
        if first is not None:
            heap.append((first[0], s, 0))
    heapq.heapify(heap)
    while heap:
        _, s, pos = heap[0]
        stream = group[s]
        candidate = stream.taken[pos][1]
        if not stream.own and (
            (allow_borrowing and candidate.variant == RECLAIM_WITHOUT_BORROWING)
            or within_nominal_without(stream.member.node, below, frs)
        ):
            heapq.heappop(heap)
            continue
        following = stream.at(pos + 1)
        if following is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (following[0], s, pos + 1))
        yield candidate


def path_valid(c: Candidate, frs: list[FR]) -> bool:
    """No cohort between the candidate's ClusterQueue and the common ancestor is within nominal."""
    for node in c.cq.node.ancestors():
        if node is c.lca:
            return True
        if within_nominal(node, frs):
            return False
    return True
