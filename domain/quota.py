"""The quota tree: ClusterQueues are leaves, Cohorts inner nodes; Kueue's resource-node formulas.

Every node keeps, per (flavor, resource): its nominal quota, optional borrowing and lending limits,
its subtree quota, and its usage as seen by its parent. Usage changes bubble up the path to the
root, so one admission costs O(depth × resources it uses), independent of the cluster's size.

The formulas (Kueue pkg/cache/scheduler/resource_node.go):
  SubtreeQuota(CQ) = Nominal;  SubtreeQuota(C) = Nominal(C) + Σ children (SubtreeQuota(c) − localQuota(c))
  localQuota(n)    = max(0, SubtreeQuota(n) − LendingLimit(n)) when a lending limit is set, else 0
  Usage(C)         = Σ children max(0, Usage(c) − localQuota(c))
  available(n)     = LocalAvailable(n) + min(available(parent), borrowing headroom of n)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# (flavor, resource), one object per pair (fr_key). Variable-length in the annotation on purpose:
# under mypyc a tuple[str, str] is a C struct, boxed into a new tuple at every dict operation.
FR = tuple[str, ...]

# One tuple object per (flavor, resource): the quota tree's dicts are keyed by these, and a dict
# finds a key it holds by identity before comparing. Equal tuples built apart are compared element
# by element on every lookup (a tenth of the engine's instructions on the large-scale run). Kept
# as nested dicts of names, whose str hashes are cached. Bounded by the configured names; order
# never read.
_FRS: dict[str, dict[str, FR]] = {}


def fr_key(flavor: str, resource: str) -> FR:
    """The one (flavor, resource) tuple for these names."""
    by_resource = _FRS.get(flavor)
    if by_resource is None:
        by_resource = _FRS[flavor] = {}
    key = by_resource.get(resource)
    if key is None:
        key = by_resource[resource] = (flavor, resource)
    return key


class QuotaNode:
    __slots__ = (
        "name",
        "is_cluster_queue",
        "parent",
        "children",
        "nominal",
        "borrowing_limit",
        "lending_limit",
        "subtree",
        "usage",
        "tree_height",
        "weight",
        "leaf_nodes",
        "leaf_owners",
        "over",
        "changes",
    )

    def __init__(self, name: str, is_cluster_queue: bool) -> None:
        self.name = name
        self.is_cluster_queue = is_cluster_queue
        self.parent: QuotaNode | None = None
        self.children: dict[str, QuotaNode] = {}
        self.nominal: dict[FR, int] = {}
        self.borrowing_limit: dict[FR, int] = {}
        self.lending_limit: dict[FR, int] = {}
        self.subtree: dict[FR, int] = {}
        self.usage: dict[FR, int] = {}
        self.tree_height = 0  # longest distance to a leaf; kept by recompute()
        self.weight = 1000  # fairSharing.weight in milli-units (default 1)
        # leaves(), kept by recompute(): every change of the tree's shape ends with a recompute of
        # the roots it touched, and wakes/releases ask for a cohort's leaves on every event.
        self.leaf_nodes: list[QuotaNode] | None = None
        # The state that owns each of leaves() (lifecycle.tree_members), cleared with leaf_nodes.
        self.leaf_owners: list[Any] | None = None
        # Per flavor-resource, the children using more than their subtree quota of it (the ones
        # a reclaiming search may take from), kept by add_usage() and recompute(): a search
        # visits these instead of looking at every child of a wide cohort.
        self.over: dict[FR, dict[str, None]] = {}
        # Counts the usage changes in this node's subtree (its own included): a reader may keep
        # what it computed from the usage of nodes of a subtree for as long as the subtree's
        # root keeps this count (fair sharing's shares and tournament winners within a cycle).
        self.changes = 0

    # -- structure --------------------------------------------------------------------------
    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def ancestors(self) -> Iterator[QuotaNode]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def leaves(self) -> list[QuotaNode]:
        """The ClusterQueues of this subtree, in name order at each level (do not mutate)."""
        if self.is_cluster_queue:
            return [self]
        cached = self.leaf_nodes
        if cached is None:
            cached = self.leaf_nodes = self._collect_leaves()
        return cached

    def _collect_leaves(self) -> list[QuotaNode]:
        out: list[QuotaNode] = []
        stack = [self]
        while stack:
            current = stack.pop()
            if current.is_cluster_queue:
                out.append(current)
            else:
                stack.extend(current.children[n] for n in sorted(current.children, reverse=True))
        return out

    def height(self) -> int:
        return self.tree_height

    def set_quotas(
        self,
        nominal: dict[FR, int],
        borrowing_limit: dict[FR, int],
        lending_limit: dict[FR, int],
    ) -> None:
        self.nominal = nominal
        self.borrowing_limit = borrowing_limit
        self.lending_limit = lending_limit

    # -- formulas ---------------------------------------------------------------------------
    # Most nodes set no lending limit (then localQuota is 0) and no borrowing limit: the checks
    # on the dicts' emptiness skip their lookups on the hot paths; the formulas are unchanged.
    def local_quota(self, fr: FR) -> int:
        if not self.lending_limit:
            return 0
        ll = self.lending_limit.get(fr)
        if ll is None:
            return 0
        local = self.subtree.get(fr, 0) - ll
        return local if local > 0 else 0

    def local_available(self, fr: FR) -> int:
        free = self.local_quota(fr) - self.usage.get(fr, 0)
        return free if free > 0 else 0

    def available(self, fr: FR) -> int:
        """Kueue's available(): what this node could still take, through its ancestors."""
        parent = self.parent
        if parent is None:
            return self.subtree.get(fr, 0) - self.usage.get(fr, 0)
        if parent.parent is None:
            headroom = parent.subtree.get(fr, 0) - parent.usage.get(fr, 0)
        else:
            headroom = parent.available(fr)
        if self.lending_limit or self.borrowing_limit:
            return self.available_below(fr, headroom)
        usage = self.usage.get(fr, 0)  # available_below with localQuota 0 and no borrowing limit
        return headroom - usage if usage < 0 else headroom

    def available_below(self, fr: FR, headroom: int) -> int:
        """available() given what the parent has available (`headroom`)."""
        usage = self.usage.get(fr, 0)
        local = self.local_quota(fr) if self.lending_limit else 0
        if self.borrowing_limit:
            bl = self.borrowing_limit.get(fr)
            if bl is not None:
                lendable = self.subtree.get(fr, 0) - local
                over = usage - local
                limit = lendable - (over if over > 0 else 0) + bl
                if limit < headroom:
                    headroom = limit
        own = local - usage
        return own + headroom if own > 0 else headroom

    def potential_available(self, fr: FR) -> int:
        """What this node could take if the whole tree were idle (Kueue's potentialAvailable)."""
        parent = self.parent
        if parent is None:
            return self.subtree.get(fr, 0)
        value = self.local_quota(fr) + parent.potential_available(fr)
        bl = self.borrowing_limit.get(fr)
        if bl is not None:
            value = min(value, self.subtree.get(fr, 0) + bl)
        return value

    def borrowing_with(self, fr: FR, extra: int) -> bool:
        return self.usage.get(fr, 0) + extra > self.subtree.get(fr, 0)

    # -- usage ------------------------------------------------------------------------------
    def add_usage(self, fr: FR, delta: int) -> None:
        """Add (or, negative, remove) usage; the parent sees only what exceeds localQuota."""
        if delta == 0:
            return
        node: QuotaNode | None = self
        while node is not None and delta != 0:
            usage = node.usage
            before = usage.get(fr, 0)
            after = before + delta
            if after:
                usage[fr] = after
            else:
                del usage[fr]  # after == 0 with delta != 0: before was a stored, nonzero value
            parent = node.parent
            if parent is not None:
                quota = node.subtree.get(fr, 0)
                if (before > quota) != (after > quota):
                    _mark_over(parent, node.name, fr, after > quota)
            node.changes += 1
            if node.lending_limit:
                local = node.local_quota(fr)
                delta = (after - local if after > local else 0) - (before - local if before > local else 0)
            elif before < 0 or after < 0:
                delta = (after if after > 0 else 0) - (before if before > 0 else 0)
            # else: with localQuota 0 and neither side negative, the parent sees all of delta
            node = parent
        while node is not None:  # the part kept within a localQuota: usage changed below these
            node.changes += 1
            node = node.parent

    def add_usages(self, usage: dict[FR, int], sign: int = 1) -> None:
        for fr, value in usage.items():
            self.add_usage(fr, sign * value)  # a native call; a bound method would go through Python's


def recompute(root: QuotaNode) -> None:
    """Rebuild subtree quotas and cohort usages bottom-up after a configuration change."""
    _recompute(root)


def _recompute(node: QuotaNode) -> None:
    node.leaf_nodes = None
    node.leaf_owners = None
    node.changes += 1
    if node.is_cluster_queue:
        node.subtree = dict(node.nominal)
        node.tree_height = 0
        return
    subtree = dict(node.nominal)
    usage: dict[FR, int] = {}
    for name in sorted(node.children):
        child = node.children[name]
        _recompute(child)
        for fr, value in child.subtree.items():
            # Zeros are kept too, as Kueue accumulates them: a cohort then "has" every
            # flavor-resource of its subtree, which fair sharing's shares iterate over.
            subtree[fr] = subtree.get(fr, 0) + value - child.local_quota(fr)
        for fr, value in child.usage.items():
            visible = max(0, value - child.local_quota(fr))
            if visible:
                usage[fr] = usage.get(fr, 0) + visible
    node.subtree = subtree
    node.usage = usage
    over: dict[FR, dict[str, None]] = {}
    for name in sorted(node.children):
        child = node.children[name]
        for fr, value in child.usage.items():
            if value > child.subtree.get(fr, 0):
                over.setdefault(fr, {})[name] = None
    node.over = over
    node.tree_height = 1 + max((c.tree_height for c in node.children.values()), default=-1)


def _mark_over(parent: QuotaNode, name: str, fr: FR, over: bool) -> None:
    children = parent.over.get(fr)
    if over:
        if children is None:
            children = parent.over[fr] = {}
        children[name] = None
    elif children is not None:
        children.pop(name, None)
        if not children:
            del parent.over[fr]


def over_nominal(node: QuotaNode, frs: list[FR]) -> list[str]:
    """The children of `node` using more than their subtree quota of some of `frs`, by name."""
    over = node.over
    if len(frs) == 1:
        only = over.get(frs[0])
        return sorted(only) if only else []
    names: set[str] = set()
    for fr in frs:
        names.update(over.get(fr, ()))
    return sorted(names)


def borrowing_level(cq: QuotaNode, fr: FR, value: int) -> tuple[int, bool]:
    """Kueue's FindHeightOfLowestSubtreeThatFits: 0 when no borrowing is needed.

    The second value says whether quota could be reclaimed inside the hierarchy.
    """
    parent = cq.parent
    if parent is None:
        return 0, False
    if cq.usage.get(fr, 0) + value <= cq.subtree.get(fr, 0):
        return 0, True
    remaining = value - cq.local_available(fr)
    node: QuotaNode | None = parent
    while node is not None:
        if node.usage.get(fr, 0) + remaining <= node.subtree.get(fr, 0):
            return node.tree_height, node.parent is not None
        remaining -= node.local_available(fr)
        node = node.parent
    return cq.root().tree_height, False
