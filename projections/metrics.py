"""Prometheus metrics with Kueue's names and labels (pkg/metrics/metrics.go), so that Kueue's
dashboards and queries work on quotaflow.

One `CollectorRegistry` per projection (never the global one): `registry_for(projection)`. The
collector reads the projection when scraped; nothing is updated in the fold except the plain
counters and histograms in `Projection.counters`, so a scrape costs O(queues + workloads) and the
fold stays cheap.

Labels follow Kueue's current metrics: `replica_role` is `standalone` (a projection is a reader of
the logs, not one of several leader-elected replicas), `priority_class` is the workload's
`priorityClassName` ("" when it has none). Gauges:

- `kueue_pending_workloads{cluster_queue,status}`: queued workloads. In a BestEffortFIFO queue
  `inadmissible` when the workload was tried and could not be admitted (a Pending reason since
  it was queued, other than `Queued`), else `active`; in a StrictFIFO queue `active` (Kueue puts
  a failed head back into the heap) unless its namespace is not selected (`Misconfigured`);
- `kueue_reserving_active_workloads`, `kueue_admitted_active_workloads{cluster_queue}`;
- `kueue_cluster_queue_resource_reservation` / `_resource_usage` / `_nominal_quota` /
  `_borrowing_limit` / `_lending_limit{cohort,cluster_queue,flavor,resource}` (cpu in cores,
  everything else in its base unit, as Kueue reports them; an unset limit is +Inf);
- `kueue_cluster_queue_status{cluster_queue,status}` (pending, active, terminating);
- the `kueue_local_queue_*` equivalents, and `kueue_local_queue_admission_fair_sharing_usage{name,
  namespace,cluster_queue}` while the Configuration has `admissionFairSharing` (each LocalQueue's
  usage as the engine orders by it, as of the log's latest time: projections/local_queue_usage.py);

Counters and histograms (from decisions): `kueue_admitted_workloads_total`,
`kueue_quota_reserved_workloads_total`, `kueue_finished_workloads_total`,
`kueue_evicted_workloads_total{cluster_queue,reason,underlying_cause,priority_class}` (a
preemption counts as reason `Preempted`), `kueue_preempted_workloads_total{preempting_cluster_queue,reason}`,
`kueue_admission_wait_time_seconds` and `kueue_quota_reserved_wait_time_seconds` (event time;
see projections/fold.py), and their `kueue_local_queue_*` equivalents.

Also (added): `kueue_finished_workloads` / `kueue_local_queue_finished_workloads` (gauges: finished,
not deleted), `kueue_cohort_subtree_admitted_workloads_total`, `kueue_admission_checks_wait_time_seconds`,
`kueue_execution_time_seconds`, `kueue_local_queue_quota_reserved_wait_time_seconds` (and the
LocalQueue equivalents), `kueue_workload_eviction_latency_seconds` (see decision_handlers.py),
the waitForPodsReady families `kueue_ready_wait_time_seconds`,
`kueue_admitted_until_ready_wait_time_seconds` (and their LocalQueue equivalents),
`kueue_pods_ready_to_evicted_time_seconds{cluster_queue,reason,underlying_cause}`, and
`kueue_evicted_workloads_once_total{cluster_queue,reason,underlying_cause,priority_class}`,
each histogram with Kueue's buckets for it (16 or 14 of generateExponentialBuckets); the cohort
tree and fair-sharing families (cohort_metrics.py); pending resources and unadmitted workloads
(workload_metrics.py); `kueue_build_info` (streams/build_info.py). The admission attempt
families are the agent's (streams/agent/admission_attempts.py).

quotaflow's own: `quotaflow_projection_input_offset`, `quotaflow_projection_decisions`,
`quotaflow_projection_undecided_events`, `quotaflow_rejected_events_total{reason}`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from domain import reasons
from domain.objects import STRICT_FIFO
from projections.cohort_metrics import cohort_families
from projections.fold import FR, WAIT_BUCKETS, Histogram, Projection, QueueKey
from projections.views import (
    cluster_queue_active,
    local_queue_active,
    local_queue_counts,
)
from projections.workload_metrics import (
    build_info,
    pending_resources,
    unadmitted_families,
)

ROLE = "standalone"
CQ_STATUSES = ("pending", "active", "terminating")


def value(resource: str, amount: int) -> float:
    """Kueue reports quantities as floats: cpu in cores, everything else in its base unit."""
    return amount / 1000 if resource == "cpu" else float(amount)


def _pending_status(reason: str | None, strict: bool) -> str:
    """Kueue's split: `inadmissible` workloads were tried and set aside until something changes;
    `active` ones wait in the heap. StrictFIFO puts a failed head back into the heap (only a
    namespace the ClusterQueue does not select sets a workload aside), BestEffortFIFO sets every
    workload that could not be admitted aside."""
    if strict:
        return "inadmissible" if reason == reasons.MISCONFIGURED else "active"
    return "active" if reason is None or reason == reasons.QUEUED else "inadmissible"


def _sum(data: dict[Any, int], project: Callable[[Any], Any]) -> dict[Any, int]:
    out: dict[Any, int] = {}
    for key, n in data.items():
        k = project(key)
        out[k] = out.get(k, 0) + n
    return out


def _merge(data: dict[Any, Histogram], project: Callable[[Any], Any]) -> dict[Any, Histogram]:
    out: dict[Any, Histogram] = {}
    for key, h in data.items():
        k = project(key)
        into = out.get(k)
        if into is None:
            into = out[k] = Histogram()
        into.buckets = [a + b for a, b in zip(into.buckets, h.buckets, strict=True)]
        into.count += h.count
        into.sum += h.sum
    return out


def _histogram(name: str, doc: str, labels: list[str], data: dict[Any, Histogram], buckets: int = 16) -> HistogramMetricFamily:
    """`buckets`: Kueue's generateExponentialBuckets(n) for this family, the first n of
    WAIT_BUCKETS (observations above the last bound count in +Inf only)."""
    family = HistogramMetricFamily(name, doc, labels=labels)
    bounds = WAIT_BUCKETS[:buckets]
    for key, h in sorted(data.items()):
        cumulative = 0
        buckets_out = []
        for bound, count in zip(bounds, h.buckets[:buckets], strict=True):
            cumulative += count
            buckets_out.append((repr(float(bound)), cumulative))
        buckets_out.append(("+Inf", h.count))
        family.add_metric([*key, ROLE], buckets_out, h.sum)
    return family


class ProjectionCollector(Collector):
    def __init__(self, projection: Callable[[], Projection], undecided: Callable[[], int] = lambda: 0) -> None:
        self._projection = projection
        self._undecided = undecided

    def collect(self) -> Iterator[Metric]:
        p = self._projection()
        c = p.counters
        cq_labels = ["cluster_queue", "replica_role"]
        res_labels = ["cohort", "cluster_queue", "flavor", "resource", "replica_role"]

        pending = GaugeMetricFamily("kueue_pending_workloads", "The number of pending workloads, per 'cluster_queue' and 'status'.", labels=["cluster_queue", "status", "replica_role"])
        reserving = GaugeMetricFamily("kueue_reserving_active_workloads", "The number of Workloads that are reserving quota, per 'cluster_queue'", labels=cq_labels)
        admitted = GaugeMetricFamily("kueue_admitted_active_workloads", "The number of admitted Workloads that are active, per 'cluster_queue'", labels=cq_labels)
        status = GaugeMetricFamily("kueue_cluster_queue_status", "Reports 'cluster_queue' with its 'status' (with possible values 'pending', 'active' or 'terminated').", labels=["cluster_queue", "status", "replica_role"])
        reservation = GaugeMetricFamily("kueue_cluster_queue_resource_reservation", "Reports the cluster_queue's total resource reservation within all the flavors", labels=res_labels)
        usage = GaugeMetricFamily("kueue_cluster_queue_resource_usage", "Reports the cluster_queue's total resource usage within all the flavors", labels=res_labels)
        nominal = GaugeMetricFamily("kueue_cluster_queue_nominal_quota", "Reports the cluster_queue's resource nominal quota within all the flavors", labels=res_labels)
        borrowing = GaugeMetricFamily("kueue_cluster_queue_borrowing_limit", "Reports the cluster_queue's resource borrowing limit within all the flavors. If borrowingLimit is unset, this metric reports +Inf.", labels=res_labels)
        lending = GaugeMetricFamily("kueue_cluster_queue_lending_limit", "Reports the cluster_queue's resource lending limit within all the flavors. If lendingLimit is unset, this metric reports +Inf.", labels=res_labels)
        resource_pending = GaugeMetricFamily("kueue_cluster_queue_resource_pending", "Reports the cluster_queue's total pending resource requests. Unlike resource_reservation, pending workloads have not yet been assigned to flavors.", labels=["cluster_queue", "resource", "replica_role"])
        for name in sorted(p.cluster_queues):
            cq = p.cluster_queues[name]
            counts = {"active": 0, "inadmissible": 0}
            strict = cq.spec.queueing_strategy == STRICT_FIFO
            for order in cq.pending:
                counts[_pending_status(p.workloads[order[3]].reason, strict)] += 1
            for st, n in counts.items():
                pending.add_metric([name, st, ROLE], n)
            reserving.add_metric([name, ROLE], len(cq.holders))
            admitted.add_metric([name, ROLE], cq.admitted)
            state = "terminating" if cq.terminating else ("active" if cluster_queue_active(p, cq)[0] else "pending")
            for st in CQ_STATUSES:
                status.add_metric([name, st, ROLE], 1 if st == state else 0)
            cohort = cq.spec.cohort or ""
            frs: list[FR] = list(cq.quotas)
            frs += sorted(fr for fr in cq.reservation if fr not in cq.quotas)
            for fr in frs:
                flavor, res = fr
                labels = [cohort, name, flavor, res, ROLE]
                reservation.add_metric(labels, value(res, cq.reservation.get(fr, 0)))
                usage.add_metric(labels, value(res, cq.usage.get(fr, 0)))
                q = cq.quotas.get(fr)
                if q is not None:
                    # An unset limit is +Inf, as Kueue's reportResourceMetrics reports it.
                    nominal.add_metric(labels, value(res, q.nominal))
                    borrowing.add_metric(labels, math.inf if q.borrowing_limit is None else value(res, q.borrowing_limit))
                    lending.add_metric(labels, math.inf if q.lending_limit is None else value(res, q.lending_limit))
            for res, amount in pending_resources(p, cq):
                resource_pending.add_metric([name, res, ROLE], value(res, amount))
        yield from (pending, reserving, admitted, status, reservation, resource_pending, usage, nominal, borrowing, lending)
        yield from unadmitted_families(p)
        yield from cohort_families(p, ROLE)

        lq_labels = ["name", "namespace", "replica_role"]
        lq_pending = GaugeMetricFamily("kueue_local_queue_pending_workloads", "The number of pending workloads, per 'local_queue' and 'status'.", labels=["name", "namespace", "status", "replica_role"])
        lq_reserving = GaugeMetricFamily("kueue_local_queue_reserving_active_workloads", "The number of Workloads that are reserving quota, per 'localQueue'", labels=lq_labels)
        lq_admitted = GaugeMetricFamily("kueue_local_queue_admitted_active_workloads", "The number of admitted Workloads that are active, per 'localQueue'", labels=lq_labels)
        lq_status = GaugeMetricFamily("kueue_local_queue_status", "Reports 'localQueue' with its 'active' status (with possible values 'True', 'False', or 'Unknown').", labels=["name", "namespace", "active", "replica_role"])
        lq_res_labels = ["name", "namespace", "flavor", "resource", "replica_role"]
        lq_reservation = GaugeMetricFamily("kueue_local_queue_resource_reservation", "Reports the localQueue's total resource reservation within all the flavors", labels=lq_res_labels)
        lq_usage = GaugeMetricFamily("kueue_local_queue_resource_usage", "Reports the localQueue's total resource usage within all the flavors", labels=lq_res_labels)
        lq_afs = GaugeMetricFamily("kueue_local_queue_admission_fair_sharing_usage", "Reports a value representing the LocalQueue's Admission Fair Sharing usage, calculated from the resource-weighted sum of consumed resources and pending admission penalties, divided by the LocalQueue's fair sharing weight", labels=["name", "namespace", "cluster_queue", "replica_role"])
        for key in sorted(p.local_queues):
            ns, name = key
            counts_lq = local_queue_counts(p, key)
            queued = {"active": 0, "inadmissible": 0}
            lq_cq = p.cluster_queues.get(p.local_queues[key].cluster_queue)
            strict = lq_cq is not None and lq_cq.spec.queueing_strategy == STRICT_FIFO
            for order in p.lq_pending.get(key, ()):
                queued[_pending_status(p.workloads[order[3]].reason, strict)] += 1
            queued["active"] += counts_lq["pending"] - sum(queued.values())  # waiting, not queued
            for st, n in queued.items():
                lq_pending.add_metric([name, ns, st, ROLE], n)
            lq_reserving.add_metric([name, ns, ROLE], counts_lq["reserving"])
            lq_admitted.add_metric([name, ns, ROLE], counts_lq["admitted"])
            active = local_queue_active(p, key)[0]
            for st in ("True", "False", "Unknown"):
                lq_status.add_metric([name, ns, st, ROLE], 1 if st == ("True" if active else "False") else 0)
            for (flavor, res), v in sorted(counts_lq["reservation"].items()):
                lq_reservation.add_metric([name, ns, flavor, res, ROLE], value(res, v))
            for (flavor, res), v in sorted(counts_lq["usage"].items()):
                lq_usage.add_metric([name, ns, flavor, res, ROLE], value(res, v))
            if p.lq_usage.enabled:  # Kueue reports it for every LocalQueue while it is configured
                spec = p.local_queues[key]
                lq_afs.add_metric([name, ns, spec.cluster_queue, ROLE], p.lq_usage.usage(key, spec.fair_weight, p.clock))
        # Kueue's finished_workloads gauges: finished workloads not deleted, by their LocalQueue,
        # and a ClusterQueue's the sum over the LocalQueues pointing at it (pkg/cache/queue manager.go)
        finished_cq = GaugeMetricFamily("kueue_finished_workloads", "The number of finished workloads per 'cluster_queue'.", labels=cq_labels)
        finished_lq = GaugeMetricFamily("kueue_local_queue_finished_workloads", "The number of finished workloads, per 'local_queue'.", labels=lq_labels)
        per_cq = dict.fromkeys(p.cluster_queues, 0)
        for key in sorted(p.local_queues):
            n = p.finished_by_lq.get(key, 0)
            finished_lq.add_metric([key[1], key[0], ROLE], n)
            target = p.local_queues[key].cluster_queue
            if target in per_cq:
                per_cq[target] += n
        for name, n in sorted(per_cq.items()):
            finished_cq.add_metric([name, ROLE], n)
        yield from (lq_pending, lq_reserving, lq_admitted, lq_status, lq_reservation, lq_usage, finished_cq, finished_lq)
        if p.lq_usage.enabled:
            yield lq_afs

        def counter(name: str, doc: str, labels: list[str], data: dict[Any, int]) -> CounterMetricFamily:
            family = CounterMetricFamily(name, doc, labels=[*labels, "replica_role"])
            for key, n in sorted(data.items()):
                family.add_metric([*key, ROLE], n)
            return family

        # The fold counts per (ClusterQueue, LocalQueue, priority class); Kueue's families are sums.
        def by_cq(data: dict[QueueKey, int]) -> dict[tuple[str, str], int]:
            return _sum(data, lambda k: (k[0], k[3]))

        def by_lq(data: dict[QueueKey, int]) -> dict[tuple[str, str, str], int]:
            return _sum(data, lambda k: (k[2], k[1], k[3]))

        evicted_cq = _sum(c.evicted, lambda k: (k[0][0], k[1], k[2], k[0][3]))
        evicted_lq = _sum(c.evicted, lambda k: (k[0][2], k[0][1], k[1], k[2], k[0][3]))
        pc = ["cluster_queue", "priority_class"]
        lpc = ["name", "namespace", "priority_class"]
        yield counter("kueue_admitted_workloads", "The total number of admitted workloads per 'cluster_queue'", pc, by_cq(c.admitted))
        yield counter("kueue_quota_reserved_workloads", "The total number of quota reserved workloads per 'cluster_queue'", pc, by_cq(c.quota_reserved))
        yield counter("kueue_finished_workloads", "The total number of finished workloads per 'cluster_queue'", pc, by_cq(c.finished))
        yield counter("kueue_evicted_workloads", "The number of evicted workloads per 'cluster_queue'", ["cluster_queue", "reason", "underlying_cause", "priority_class"], evicted_cq)
        yield counter("kueue_preempted_workloads", "The number of preempted workloads per 'preempting_cluster_queue'", ["preempting_cluster_queue", "reason"], c.preempted)
        yield counter("kueue_local_queue_admitted_workloads", "The total number of admitted workloads per 'local_queue'", lpc, by_lq(c.admitted))
        yield counter("kueue_local_queue_quota_reserved_workloads", "The total number of quota reserved workloads per 'local_queue'", lpc, by_lq(c.quota_reserved))
        yield counter("kueue_local_queue_finished_workloads", "The total number of finished workloads per 'local_queue'", lpc, by_lq(c.finished))
        yield counter("kueue_local_queue_evicted_workloads", "The number of evicted workloads per 'local_queue'", ["name", "namespace", "reason", "underlying_cause", "priority_class"], evicted_lq)
        yield counter("kueue_cohort_subtree_admitted_workloads", "The total number of admitted workloads per cohort's subtree", ["cohort", "priority_class"], c.cohort_admitted)
        yield counter("kueue_evicted_workloads_once", "The number of unique workload evictions per 'cluster_queue'", ["cluster_queue", "reason", "underlying_cause", "priority_class"], c.evicted_once)

        def cq_key(k: QueueKey) -> tuple[str, str]:
            return (k[0], k[3])

        def lq_key(k: QueueKey) -> tuple[str, str, str]:
            return (k[2], k[1], k[3])

        cql, lql = [*pc, "replica_role"], [*lpc, "replica_role"]
        for family, doc, data, cq_buckets, lq_buckets in (
            ("admission_wait_time_seconds", "The time between a workload was created or requeued until admission, per '{}'", c.admission_wait, 16, 14),
            ("quota_reserved_wait_time_seconds", "The time between a workload was created or requeued until it got quota reservation, per '{}'", c.quota_reserved_wait, 14, 14),
            ("admission_checks_wait_time_seconds", "The time from when a workload got the quota reservation until admission, per '{}'", c.admission_checks_wait, 14, 14),
            ("execution_time_seconds", "The total execution time of a finished admitted workload (from first admission to completion, including time across evict/readmit cycles), per '{}'", c.execution_time, 16, 16),
            ("ready_wait_time_seconds", "The time between a workload was created or requeued until ready, per '{}'", c.ready_wait, 14, 14),
            ("admitted_until_ready_wait_time_seconds", "The time between a workload was admitted until ready, per '{}'", c.admitted_until_ready, 14, 14),
        ):
            yield _histogram(f"kueue_{family}", doc.format("cluster_queue"), cql, _merge(data, cq_key), cq_buckets)
            yield _histogram(f"kueue_local_queue_{family}", doc.format("local_queue"), lql, _merge(data, lq_key), lq_buckets)
        yield _histogram("kueue_workload_eviction_latency_seconds", "The time from workload eviction (WorkloadEvicted condition becomes True) until the workload returns to Pending (quota released).", ["cluster_queue", "reason", "replica_role"], c.eviction_latency, 14)
        yield _histogram("kueue_pods_ready_to_evicted_time_seconds", "The number of seconds between a workload's pods being ready and eviction workloads per 'cluster_queue'", ["cluster_queue", "reason", "underlying_cause", "replica_role"], c.pods_ready_to_evicted, 14)
        yield build_info()

        own = GaugeMetricFamily("quotaflow_projection_input_offset", "The last input log offset folded into the views")
        own.add_metric([], p.position)
        yield own
        dec = GaugeMetricFamily("quotaflow_projection_decisions", "Decisions folded into the views")
        dec.add_metric([], p.decisions)
        yield dec
        und = GaugeMetricFamily("quotaflow_projection_undecided_events", "Input events read but not yet decided by the agent")
        und.add_metric([], self._undecided())
        yield und
        rej = CounterMetricFamily("quotaflow_rejected_events", "Rejected decisions, by reason", labels=["reason"])
        for reason, n in sorted(c.rejected.items()):
            rej.add_metric([reason], n)
        yield rej


def registry_for(projection: Projection | Callable[[], Projection], undecided: Callable[[], int] = lambda: 0) -> CollectorRegistry:
    """A registry of its own (tests stay isolated; no process-global state)."""
    registry = CollectorRegistry(auto_describe=False)
    get = projection if callable(projection) else (lambda: projection)
    registry.register(ProjectionCollector(get, undecided))
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
