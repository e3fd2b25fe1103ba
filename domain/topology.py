"""The shape of the quota tree: which ClusterQueue belongs to which cohort, and cohort parents.

A cohort named by a ClusterQueue exists implicitly (no quota of its own) until a Cohort object
gives it one, as in Kueue; it disappears when nothing names it any more.
"""

from __future__ import annotations

from domain.objects import CohortSpec, ResourceQuota
from domain.quantity import format_amount
from domain.quota import FR, QuotaNode, recompute
from domain.state import ClusterQueueState, CohortState, State


def quota_maps(quotas: dict[FR, ResourceQuota]) -> tuple[dict[FR, int], dict[FR, int], dict[FR, int]]:
    nominal: dict[FR, int] = {}
    borrowing: dict[FR, int] = {}
    lending: dict[FR, int] = {}
    for fr, q in quotas.items():
        nominal[fr] = q.nominal
        if q.borrowing_limit is not None:
            borrowing[fr] = q.borrowing_limit
        if q.lending_limit is not None:
            lending[fr] = q.lending_limit
    return nominal, borrowing, lending


def ensure_cohort(state: State, name: str) -> CohortState:
    cohort = state.cohorts.get(name)
    if cohort is None:
        cohort = CohortState(QuotaNode(name, is_cluster_queue=False))
        state.cohorts[name] = cohort
    return cohort


def set_parent(state: State, node: QuotaNode, parent_name: str | None) -> None:
    state.config_epoch += 1  # the tree's shape may change (also when a deleted queue leaves it)
    old = node.parent
    if old is not None and (parent_name is None or old.name != parent_name):
        del old.children[node.name]
        node.parent = None
        _recompute_from(old)
        _drop_if_unused(state, old)
    if parent_name is not None and node.parent is None:
        parent = ensure_cohort(state, parent_name).node
        parent.children[node.name] = node
        node.parent = parent
    recompute(node.root())


def would_cycle(state: State, name: str, parent_name: str | None) -> bool:
    seen = {name}
    current = parent_name
    while current is not None:
        if current in seen:
            return True
        seen.add(current)
        cohort = state.cohorts.get(current)
        if cohort is None or cohort.spec is None:
            return False
        current = cohort.spec.parent
    return False


def apply_cohort(state: State, spec: CohortSpec) -> CohortState:
    cohort = ensure_cohort(state, spec.name)
    cohort.spec = spec
    cohort.node.weight = spec.fair_weight
    cohort.node.set_quotas(*quota_maps(spec.quotas()))
    set_parent(state, cohort.node, spec.parent)
    return cohort


def delete_cohort(state: State, name: str) -> None:
    cohort = state.cohorts.get(name)
    if cohort is None:
        return
    cohort.spec = None
    cohort.node.weight = 1000
    cohort.node.set_quotas({}, {}, {})
    set_parent(state, cohort.node, None)
    _drop_if_unused(state, cohort.node)


def remove_cluster_queue(state: State, cq: ClusterQueueState) -> None:
    set_parent(state, cq.node, None)
    state.cluster_queues.pop(cq.name, None)
    state.objects.pop(f"ClusterQueue/{cq.name}", None)
    state.ready.pop(cq.name, None)


def _recompute_from(node: QuotaNode) -> None:
    recompute(node.root())


def _drop_if_unused(state: State, node: QuotaNode) -> None:
    """Forget an implicit cohort that nothing names any more, and its implicit ancestors."""
    while node is not None and not node.is_cluster_queue:
        cohort = state.cohorts.get(node.name)
        if cohort is None or cohort.spec is not None or node.children:
            return
        parent = node.parent
        if parent is not None:
            del parent.children[node.name]
            node.parent = None
        del state.cohorts[node.name]
        if parent is None:
            return
        recompute(parent.root())
        node = parent


def yunikorn_max_violations(state: State, node: QuotaNode | None, name: str, is_cluster_queue: bool,
                            quotas: dict[FR, ResourceQuota], parent: str | None) -> list[str]:
    """YuniKorn: a queue's max (its subtree quota plus borrowing limit) may not exceed its
    parent's max, the most the parent's subtree could ever use (its potential availability).

    Both are judged on the tree as it would be with this object applied: the object's own quota
    counts in its parent's subtree. The tree is changed for the check and put back exactly.
    """
    cohort = state.cohorts.get(parent) if parent is not None else None
    if cohort is None or not any(q.borrowing_limit is not None for q in quotas.values()):
        return []
    probe = node if node is not None else QuotaNode(name, is_cluster_queue)
    saved = (probe.nominal, probe.borrowing_limit, probe.lending_limit, probe.parent)
    old_parent = probe.parent
    new_parent = cohort.node
    probe.set_quotas(*quota_maps(quotas))
    if old_parent is not new_parent:
        if old_parent is not None:
            del old_parent.children[probe.name]
        new_parent.children[probe.name] = probe
        probe.parent = new_parent
    recompute(new_parent.root())
    problems = []
    try:
        for fr in sorted(quotas):
            limit = quotas[fr].borrowing_limit
            if limit is None:
                continue
            child_max = probe.subtree.get(fr, 0) + limit
            parent_max = new_parent.potential_available(fr)
            if child_max > parent_max:
                flavor, resource = fr
                problems.append(
                    f"max {format_amount(resource, child_max)} of {resource} in flavor {flavor} (quota + "
                    f"borrowingLimit) exceeds the max {format_amount(resource, parent_max)} of its parent {parent}"
                )
    finally:
        probe.set_quotas(*saved[:3])
        if old_parent is not new_parent:
            del new_parent.children[probe.name]
            probe.parent = old_parent
            if old_parent is not None:
                old_parent.children[probe.name] = probe
                recompute(old_parent.root())
        recompute(new_parent.root())
    return problems
