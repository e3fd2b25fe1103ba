"""Quota questions a preemption search asks: does the preemptor fit, does it borrow, is a node
within its nominal quota."""

from __future__ import annotations

from domain.quota import FR, QuotaNode
from domain.state import ClusterQueueState


def within_nominal(node: QuotaNode, frs: list[FR]) -> bool:
    """Does the node use no more than its subtree's nominal quota of any of these?"""
    return all(node.usage.get(fr, 0) <= node.subtree.get(fr, 0) for fr in frs)


def within_quota(node: QuotaNode, requests: dict[FR, int]) -> bool:
    """Do the requests fit in the node's own subtree quota (Kueue's fitInQuota)? Alone on the
    per-search hot path; `fit_in_quota` adds what remains beyond the node's local quota."""
    subtree, usage = node.subtree, node.usage
    for fr, value in requests.items():
        if subtree.get(fr, 0) < usage.get(fr, 0) + value:
            return False
    return True


def fit_in_quota(node: QuotaNode, requests: dict[FR, int]) -> tuple[bool, dict[FR, int]]:
    """`within_quota`, and what of the requests the node's local quota leaves to its parent
    (how a search walks up the tree for the hierarchical advantage)."""
    remaining = {fr: max(0, value - node.local_available(fr)) for fr, value in requests.items()}
    return within_quota(node, requests), remaining


def under_nominal(cq: ClusterQueueState, frs: list[FR]) -> bool:
    """Does the ClusterQueue use less than its nominal quota of every one of these?"""
    return all(cq.node.usage.get(fr, 0) < cq.node.nominal.get(fr, 0) for fr in frs)


def borrows(cq: ClusterQueueState, requests: dict[FR, int]) -> bool:
    """Would admitting the requests make the ClusterQueue borrow?"""
    node = cq.node
    return any(node.borrowing_with(fr, value) for fr, value in requests.items())


def fits(cq: ClusterQueueState, requests: dict[FR, int], allow_borrowing: bool) -> bool:
    """Does the preemptor fit now (with the victims taken so far removed), borrowing only if
    allowed?"""
    node = cq.node
    for fr, value in requests.items():
        if not allow_borrowing and node.borrowing_with(fr, value):
            return False
        if value > max(0, node.available(fr)):
            return False
    return True
