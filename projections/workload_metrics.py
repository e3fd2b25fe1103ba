"""Kueue's gauges that look at each waiting workload, and `kueue_build_info`; read from the
projection when scraped (O(workloads), nothing in the fold). `kueue_build_info` is
streams/build_info.py's (the agent serves it too).

- `kueue_cluster_queue_resource_pending{cluster_queue,resource}`: the requests of the workloads
  queued in the ClusterQueue (count × per-pod requests, after the Configuration's resource
  transformations, as Kueue's `TotalRequests`), with a 0 for every resource the ClusterQueue
  covers (pkg/cache/queue: pending_workloads.go `pendingResourcesTotal`, metrics.go).
- `kueue_unadmitted_workloads{cluster_queue,reason,underlying_cause}` and
  `kueue_local_queue_unadmitted_workloads{name,namespace,cluster_queue,reason,underlying_cause}`:
  workloads not admitted and not finished, by the reason of their Admitted condition and the
  reason their quota is not reserved, as Kueue's unadmitted_workloads.go reads them with its
  defaults (UnadmittedWorkloadsObservability on, UnadmittedWorkloadsExplicitStatus off):
  waiting for quota -> `NoReservation` and the latest Pending reason (`PendingEvaluation` before
  the first attempt, and after a requeue); quota reserved, admission checks not all Ready ->
  `UnsatisfiedAdmissionChecks` and "". A workload whose LocalQueue does not exist is left out
  (Kueue cannot tell its ClusterQueue). An evicted workload that still holds quota is left out.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from domain.retransform import apply_to_spec
from projections.fold import ClusterQueueView, Projection
from streams.build_info import build_info as build_info  # (re-exported for metrics)

ROLE = "standalone"
NO_RESERVATION = "NoReservation"  # kueue.WorkloadAdmittedReasonNoReservation
UNSATISFIED_CHECKS = "UnsatisfiedAdmissionChecks"  # kueue.WorkloadAdmittedReasonUnsatisfiedAdmissionChecks
PENDING_EVALUATION = "PendingEvaluation"  # kueue.WorkloadQuotaReservedReasonPendingEvaluation


def pending_resources(p: Projection, cq: ClusterQueueView) -> list[tuple[str, int]]:
    """(resource, total requested) of the workloads queued in `cq`, resource name order."""
    totals = {res: 0 for _, res in cq.quotas}
    config = p.configuration.resources
    workloads = p.workloads
    for order in cq.pending:
        # the template's pod sets: reading `spec` would build (and keep) the whole spec
        spec = apply_to_spec(workloads[order[3]].template, config)
        for ps in spec.pod_sets:
            for res, amount in ps.per_pod:
                totals[res] = totals.get(res, 0) + amount * ps.count
    return sorted(totals.items())


def unadmitted_families(p: Projection) -> Iterator[Metric]:
    per_cq: dict[tuple[str, str, str], int] = {}
    per_lq: dict[tuple[str, str, str, str, str], int] = {}
    local_queues = p.local_queues
    for wv in p.workloads.values():
        if wv.admitted or wv.evicted:
            continue
        lq = local_queues.get(wv.lq)
        if lq is None:
            continue
        if wv.cluster_queue is not None:
            reason, cause = UNSATISFIED_CHECKS, ""
        else:
            reason, cause = NO_RESERVATION, wv.reason or PENDING_EVALUATION
        key = (lq.cluster_queue, reason, cause)
        per_cq[key] = per_cq.get(key, 0) + 1
        lq_key = (wv.lq[1], wv.lq[0], lq.cluster_queue, reason, cause)
        per_lq[lq_key] = per_lq.get(lq_key, 0) + 1
    cq_family = GaugeMetricFamily("kueue_unadmitted_workloads", "The number of unadmitted workloads, per 'cluster_queue', 'reason', and 'underlying_cause'. This metric is only emitted when UnadmittedWorkloadsObservability feature gate is enabled.", labels=["cluster_queue", "reason", "underlying_cause", "replica_role"])
    for labels, n in sorted(per_cq.items()):
        cq_family.add_metric([*labels, ROLE], n)
    lq_family = GaugeMetricFamily("kueue_local_queue_unadmitted_workloads", "The number of unadmitted workloads, per 'name', 'namespace', 'cluster_queue', 'reason', and 'underlying_cause'. This metric is only emitted when UnadmittedWorkloadsObservability feature gate is enabled.", labels=["name", "namespace", "cluster_queue", "reason", "underlying_cause", "replica_role"])
    for lq_labels, n in sorted(per_lq.items()):
        lq_family.add_metric([*lq_labels, ROLE], n)
    yield cq_family
    yield lq_family
