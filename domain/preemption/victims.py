"""Victims a search has taken, and where their usage is removed while it simulates.

A search removes each victim's usage from the quota tree as it takes it and puts it all back
when it ends (`add_back`), whatever it found. Where the removal is made (`removal_node`) is
chosen for speed, with the same effect on everything the search reads afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from domain.quota import FR, QuotaNode
from domain.state import ClusterQueueState, WorkloadState


@dataclass(slots=True)
class Candidate:
    """A workload a search may take, with the variant it would be preempted as."""

    ws: WorkloadState
    cq: ClusterQueueState
    variant: int
    lca: QuotaNode | None
    # Where a search removes the victim's usage (`removal_node`); None: at its ClusterQueue.
    at: QuotaNode | None = None


# Usage per node (by id; insertion-ordered): victims' usage a search has removed, or will
# remove, at a node other than their ClusterQueue's (see `removal_node`).
Pending = dict[int, tuple[QuotaNode, dict[FR, int]]]


def note(pending: Pending, node: QuotaNode, usage: dict[FR, int]) -> None:
    held = pending.get(id(node))
    if held is None:
        held = pending[id(node)] = (node, {})
    total = held[1]
    for fr, value in usage.items():
        total[fr] = total.get(fr, 0) + value


def apply_pending(pending: Pending, sign: int) -> None:
    for node, total in pending.values():
        node.add_usages(total, sign)
    pending.clear()


def add_back(victims: list[Candidate], sign: int) -> None:
    """Restore (1) or remove again (-1) these victims' usage where the search removed it, one
    addition per node."""
    if len(victims) == 1:
        c = victims[0]
        assert c.ws.admission is not None
        (c.at or c.cq.node).add_usages(c.ws.admission.usage, sign)
        return
    total: Pending = {}
    for c in victims:
        assert c.ws.admission is not None
        note(total, c.at or c.cq.node, c.ws.admission.usage)
    apply_pending(total, sign)


def removal_node(member: QuotaNode, lca: QuotaNode | None) -> QuotaNode:
    """Where a search removes the usage of a victim from this ClusterQueue: at the common
    ancestor with the preemptor when the queue hangs directly under it and lends all of its
    quota (no lendingLimit, localQuota 0), else at the queue.

    Speed-up of Kueue's simulated removal (always at the queue, walking up the tree). Exact:
    the same for everything the search reads afterwards: the ancestor's usage then changes by
    exactly the victim's usage either way (the queue's usage stays >= 0, all of it visible to
    its parent), so do the ancestors above it; `fits` reads only the preemptor's queue and its
    ancestors, `path_valid` only cohorts below a common ancestor. What differs is the queue's
    own usage (and its parent's over-nominal set, read only before a search), which
    `within_nominal_without` reads with `below`. A removal at the ancestor walks a shorter path
    and adds up across queues."""
    if lca is not None and member.parent is lca and not member.lending_limit:
        return lca
    return member
