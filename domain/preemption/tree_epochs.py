"""How many times a scheduling pass changed each cohort tree: what is kept for a tree within
the pass (preemption answers, the scheduler's entries) holds while its count stays.

Within a pass a tree's usage and workloads change only by the workloads the scheduler admits,
evicts or releases in it (and the usage it moves for the while, which it names beside the
epoch where that matters). The scheduler counts each such change (`changed`); either preemptor
and the scheduler read the same counts.
"""

from __future__ import annotations

from domain.preemption.policy import Target
from domain.quota import QuotaNode

# A preemption answer kept within a pass: the epoch of the preemptor's cohort tree it was found
# in, and the targets.
Kept = tuple[int, tuple[Target, ...]]


class TreeEpochs:
    """Per cohort tree, by the id of its root, the count of changes so far (0: none).

    `by_root` is read directly on the hot paths (`by_root.get(id(root), 0)`, the cost of a
    plain dict lookup) and is never replaced, so a reader may hold it."""

    __slots__ = ("by_root",)

    def __init__(self) -> None:
        self.by_root: dict[int, int] = {}

    def changed(self, node: QuotaNode) -> None:
        """A workload was admitted, evicted or released in node's cohort tree: what was kept
        for that tree no longer holds."""
        by_root = self.by_root
        root = id(node.root())
        by_root[root] = by_root.get(root, 0) + 1

    def of(self, node: QuotaNode) -> int:
        """The epoch of node's cohort tree: what a reader keeps for that tree holds while this
        stays."""
        return self.by_root.get(id(node.root()), 0)
