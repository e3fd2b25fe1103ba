"""The objects and arrival schedule of Kueue's performance generator, as contract events.

What Kueue's generator (test/performance/scheduler/runner/generator) creates, and when:

- one ResourceFlavor (`rf` unless the config names one);
- for each cohort set, `count` cohorts named `<className>-<i>`; in each, for each queue set
  (index `qs`), `count` ClusterQueues named `<className>-<qs>-<i>-<cohort>` with one resource
  group covering cpu in that flavor (nominalQuota, borrowingLimit), the two preemption policies,
  an empty namespace selector, BestEffortFIFO, whenCanBorrow MayStopSearch / whenCanPreempt
  TryNextFlavor; a Namespace and a LocalQueue, both named like the ClusterQueue;
- per ClusterQueue, every workloads set (index `ws`) runs concurrently with the others: it sleeps
  `creationIntervalMs`, creates one workload, and so on, `count` times over its templates, so the
  k-th workload of a set (k from 0) is created at (k+1) x creationIntervalMs. A workload is named
  `<className>-<ws>-<k>-<templateIndex>`, asks for `request` cpu in one pod of pod set `main`,
  has `priority`, and carries its class and run time as labels.

All arrival times are relative to the moment the queues exist (t = 0). Kueue's goroutines give
simultaneous arrivals no order; here they come in generation order (cohort, queue set, queue,
workloads set), which makes a run reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devtools.kueue_perf.config import Config
from domain.quantity import amount

V1BETA1 = "kueue.x-k8s.io/v1beta1"
# The `ce_source` header of the records the runner appends (streams/log/envelope.py).
SOURCE = "/quotaflow/bench/kueue-perf"
# Kueue's label names (runner/generator), kept so the objects look like the ones Kueue creates.
RUNNING_TIME_LABEL = "kueue.x-k8s.io/performance-scheduler-running-ms"
CLASS_LABEL = "kueue.x-k8s.io/performance-scheduler-class"
POD_SET = "main"


@dataclass(frozen=True, slots=True)
class Queue:
    name: str  # also its namespace and LocalQueue
    cohort: str
    class_name: str
    nominal_mcpu: int


@dataclass(frozen=True, slots=True)
class Arrival:
    at_ms: int
    namespace: str  # = the ClusterQueue's name
    name: str
    class_name: str
    priority: int
    request: str
    request_mcpu: int
    runtime_ms: int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Scenario:
    flavor: str
    queues: list[Queue]
    setup: list[dict[str, Any]]  # ConfigApplied events, in order
    arrivals: list[Arrival]  # by time, then generation order

    @property
    def last_arrival_ms(self) -> int:
        return self.arrivals[-1].at_ms if self.arrivals else 0


def _quantity(value: str | int) -> str:
    return value if isinstance(value, str) else str(value)


def cluster_queue(name: str, cohort: str, class_name: str, flavor: str, nominal: str | int,
                  borrowing_limit: str | int | None, reclaim: str, within: str) -> dict[str, Any]:
    resource: dict[str, Any] = {"name": "cpu", "nominalQuota": _quantity(nominal)}
    if borrowing_limit is not None:
        resource["borrowingLimit"] = _quantity(borrowing_limit)
    return {
        "apiVersion": V1BETA1,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {CLASS_LABEL: class_name}},
        "spec": {
            "cohort": cohort,
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
            "preemption": {"reclaimWithinCohort": reclaim, "withinClusterQueue": within},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": flavor, "resources": [resource]}]}],
        },
    }


def generate(config: Config) -> Scenario:
    flavor = config.flavor
    setup: list[dict[str, Any]] = [
        {"type": "ConfigApplied", "object": {"apiVersion": V1BETA1, "kind": "ResourceFlavor", "metadata": {"name": flavor}}}
    ]
    queues: list[Queue] = []
    ordered: list[tuple[int, int, Arrival]] = []
    for cohort_set in config.cohorts:
        for c in range(cohort_set.count):
            cohort = f"{cohort_set.class_name}-{c}"
            for qs_index, qs in enumerate(cohort_set.queues_sets):
                for q in range(qs.count):
                    name = f"{qs.class_name}-{qs_index}-{q}-{cohort}"
                    queues.append(Queue(name, cohort, qs.class_name, amount("cpu", qs.nominal_quota)))
                    setup.append({"type": "ConfigApplied", "object": cluster_queue(
                        name, cohort, qs.class_name, flavor, qs.nominal_quota, qs.borrowing_limit,
                        qs.reclaim_within_cohort, qs.within_cluster_queue)})
                    setup.append({"type": "ConfigApplied", "object": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}})
                    setup.append({"type": "ConfigApplied", "object": {
                        "apiVersion": V1BETA1, "kind": "LocalQueue",
                        "metadata": {"namespace": name, "name": name}, "spec": {"clusterQueue": name}}})
                    for ws_index, ws in enumerate(qs.workloads_sets):
                        k = 0
                        for si in range(ws.count):
                            for ti, t in enumerate(ws.workloads):
                                k += 1
                                request = _quantity(t.request)
                                arrival = Arrival(k * ws.creation_interval_ms, name, f"{t.class_name}-{ws_index}-{si}-{ti}",
                                                  t.class_name, t.priority, request, amount("cpu", request), t.runtime_ms)
                                ordered.append((arrival.at_ms, len(ordered), arrival))
    ordered.sort(key=lambda x: (x[0], x[1]))
    return Scenario(flavor, queues, setup, [a for _, _, a in ordered])


def workload(arrival: Arrival, created: str) -> dict[str, Any]:
    """The Workload Kueue's generator creates (one pod, one container asking for the request)."""
    return {
        "metadata": {
            "namespace": arrival.namespace,
            "name": arrival.name,
            "labels": {RUNNING_TIME_LABEL: str(arrival.runtime_ms), CLASS_LABEL: arrival.class_name},
            "creationTimestamp": created,
        },
        "spec": {
            "queueName": arrival.namespace,
            "priority": arrival.priority,
            "podSets": [{
                "name": POD_SET,
                "count": 1,
                "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "resources": {"requests": {"cpu": arrival.request}}}]}},
            }],
        },
    }


def submitted(arrival: Arrival, created: str) -> dict[str, Any]:
    return {"type": "WorkloadSubmitted", "workload": workload(arrival, created)}
