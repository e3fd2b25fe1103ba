"""Kueue's cohort metrics and fair-sharing shares, read from the projection when scraped.

Kueue computes these on its quota tree (pkg/cache/scheduler: cohort_metrics.go, clusterqueue.go
reportWeightedShare, fair_sharing.go): a cohort's subtree quota counts what each child can lend
(its subtree quota less its lendingLimit's guarantee), a share is the largest ratio of borrowed
to lendable quota among resources, divided by the weight. So that no rule is repeated here, the
scrape builds the engine's own tree (domain/quota.py) from the configuration the projection
follows and each ClusterQueue's reservation, and asks the engine's functions
(domain/fair_sharing.py): O(queues + cohorts) per scrape, nothing in the fold.

- `kueue_cohort_info{cohort,parent_cohort,root_cohort}`, `kueue_cluster_queue_info{cluster_queue,
  parent_cohort,root_cohort}`: 1 each, for joins ("" where there is no cohort; a root names
  itself as its root);
- `kueue_cohort_subtree_quota` / `kueue_cohort_subtree_resource_reservations{cohort,flavor,
  resource}`: the subtree's quota, and the quota its ClusterQueues hold (reserved or admitted);
  positive values only (Kueue clears a series at 0);
- `kueue_cohort_subtree_admitted_active_workloads{cohort}`: admitted workloads below it;
- `kueue_cluster_queue_weighted_share{cluster_queue,cohort}` and `kueue_cohort_weighted_share
  {cohort}` (NaN for a zero weight while borrowing), with fair sharing on only, as Kueue.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from domain.fair_sharing import dominant_resource_share
from domain.objects import FAIR_SHARING
from domain.quota import FR, QuotaNode, recompute
from domain.topology import quota_maps
from projections.fold import Projection


def value(resource: str, amount: int) -> float:
    """Kueue reports quantities as floats: cpu in cores, everything else in its base unit."""
    return amount / 1000 if resource == "cpu" else float(amount)


class QuotaTree:
    """The engine's quota tree for the projection's configuration and reservations."""

    def __init__(self, p: Projection) -> None:
        self.cohorts: dict[str, QuotaNode] = {}
        self.queues: dict[str, QuotaNode] = {}
        for name in p.cohort_names():
            node = self.cohorts[name] = QuotaNode(name, is_cluster_queue=False)
            spec = p.cohorts.get(name)
            if spec is not None:
                node.set_quotas(*quota_maps(spec.quotas()))
                node.weight = spec.fair_weight
        for name, spec in p.cohorts.items():
            if spec.parent is not None:
                self._attach(self.cohorts[name], self.cohorts[spec.parent])
        for name in sorted(p.cluster_queues):
            cq = p.cluster_queues[name]
            node = self.queues[name] = QuotaNode(name, is_cluster_queue=True)
            # (the view's FR and the engine's are the same (flavor, resource) pairs)
            node.set_quotas(*quota_maps(cq.quotas))  # type: ignore[arg-type]
            node.weight = cq.spec.fair_weight
            node.usage = dict(cq.reservation)  # type: ignore[arg-type]
            if cq.spec.cohort is not None:
                self._attach(node, self.cohorts[cq.spec.cohort])
        for node in self.cohorts.values():
            if node.parent is None:
                recompute(node)

    @staticmethod
    def _attach(child: QuotaNode, parent: QuotaNode) -> None:
        child.parent = parent
        parent.children[child.name] = child


def _root(node: QuotaNode) -> str:
    return node.root().name


_SHARE_HELP = """Reports a value that representing the maximum of the ratios of usage above nominal
quota to the lendable resources in the {scope}, among all the resources provided by
the {kind}, and divided by the weight.
If zero, it means that the usage of the {kind} is below the nominal quota.
If the {kind} has a weight of zero and is borrowing, this will return NaN."""


def _share(node: QuotaNode) -> float:
    """The weighted share; NaN for a zero weight while borrowing (+Inf), as Kueue's help says
    and its ClusterQueue reporting does (clusterqueue.go reportWeightedShare)."""
    share = dominant_resource_share(node).share()
    return math.nan if share is None else float(share)


def cohort_families(p: Projection, role: str) -> Iterator[Metric]:
    tree = QuotaTree(p)
    info = GaugeMetricFamily("kueue_cohort_info", "Reports Cohort hierarchy information. The metric has value 1 and can be joined using labels.", labels=["cohort", "parent_cohort", "root_cohort", "replica_role"])
    cq_info = GaugeMetricFamily("kueue_cluster_queue_info", "Reports ClusterQueue hierarchy information. The metric has value 1 and can be joined using labels.", labels=["cluster_queue", "parent_cohort", "root_cohort", "replica_role"])
    sub_labels = ["cohort", "flavor", "resource", "replica_role"]
    quota = GaugeMetricFamily("kueue_cohort_subtree_quota", "Reports the cohort's nominal quota aggregated within the cohort's subtree. The values are reported per resource and flavor", labels=sub_labels)
    reservations = GaugeMetricFamily("kueue_cohort_subtree_resource_reservations", "Reports the cohort's resource reservations aggregated within the cohort's subtree. The values are reported per resource and flavor", labels=sub_labels)
    active = GaugeMetricFamily("kueue_cohort_subtree_admitted_active_workloads", "The number of admitted Workloads that are active, per cohort's subtree", labels=["cohort", "replica_role"])
    fair = p.configuration.preemption_policy == FAIR_SHARING
    cq_share = GaugeMetricFamily("kueue_cluster_queue_weighted_share", _SHARE_HELP.format(kind="ClusterQueue", scope="cohort"), labels=["cluster_queue", "cohort", "replica_role"])
    cohort_share = GaugeMetricFamily("kueue_cohort_weighted_share", _SHARE_HELP.format(kind="Cohort", scope="Cohort"), labels=["cohort", "replica_role"])

    held: dict[str, dict[FR, int]] = {}  # cohort -> what its subtree's ClusterQueues hold
    admitted: dict[str, int] = {}
    for name in sorted(tree.queues):
        node = tree.queues[name]
        parent = node.parent
        cq_info.add_metric([name, parent.name if parent else "", _root(node) if parent else "", role], 1)
        if fair:
            cq_share.add_metric([name, parent.name if parent else "", role], _share(node))
        count = p.cluster_queues[name].admitted
        for ancestor in node.ancestors():
            into = held.setdefault(ancestor.name, {})
            for fr, amount in node.usage.items():
                into[fr] = into.get(fr, 0) + amount
            admitted[ancestor.name] = admitted.get(ancestor.name, 0) + count
    for name in sorted(tree.cohorts):
        node = tree.cohorts[name]
        info.add_metric([name, node.parent.name if node.parent else "", _root(node), role], 1)
        for (flavor, res), amount in sorted(node.subtree.items()):
            if amount > 0:
                quota.add_metric([name, flavor, res, role], value(res, amount))
        for (flavor, res), amount in sorted(held.get(name, {}).items()):
            if amount > 0:
                reservations.add_metric([name, flavor, res, role], value(res, amount))
        active.add_metric([name, role], admitted.get(name, 0))
        if fair:
            cohort_share.add_metric([name, role], _share(node))
    yield from (info, cq_info, quota, reservations, active)
    if fair:
        yield cq_share
        yield cohort_share
