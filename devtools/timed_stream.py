"""A recorded input log with times, preemptions and releases, for the what-if tests and bench.

`recorded_log(n_workloads, seed)` plays a small cluster forward in simulated time and returns the
input log its producers and launcher would have written: a Kueue configuration (two
ClusterQueues in one cohort that preempt within the queue and reclaim lent quota, two priority
classes), workloads submitted at random times to both teams, and a launcher that finishes each
admitted workload after its runtime (a preempted one starts over when admitted again), releases
a preempted workload a little later (`release_delay_s`), and deletes finished workloads after a
while. Every event carries its `time`. Deterministic for a seed.
"""

from __future__ import annotations

import heapq
import random
from datetime import datetime, timedelta, timezone
from typing import Any

from domain.decisions import Admitted, Evicted, Preempted
from domain.engine import Engine

EPOCH = datetime(2025, 1, 1, tzinfo=timezone.utc)
API = "kueue.x-k8s.io/v1beta1"


def stamp(seconds: float) -> str:
    return (EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def cluster_queue(name: str, cpu: int, *, cohort: str = "pool", borrowing: int | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {"name": "cpu", "nominalQuota": cpu}
    if borrowing is not None:
        res["borrowingLimit"] = borrowing
    return {
        "apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {}, "cohort": cohort,
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [res]}]}],
        },
    }


def config(cpu_a: int = 8, cpu_b: int = 8) -> list[dict[str, Any]]:
    objects = [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 100},
        {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": "low"}, "value": 10},
        cluster_queue("team-a", cpu_a),
        cluster_queue("team-b", cpu_b),
    ]
    for team in ("team-a", "team-b"):
        objects.append({"apiVersion": API, "kind": "LocalQueue", "metadata": {"namespace": team, "name": "main"},
                        "spec": {"clusterQueue": team}})
    return [{"type": "ConfigApplied", "object": o, "time": stamp(0)} for o in objects]


def workload(ns: str, name: str, cpu: int, priority: str) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name},
            "spec": {"queueName": "main", "priorityClassName": priority,
                     "podSets": [{"name": "main", "count": 1, "requests": {"cpu": str(cpu)}}]}}


def recorded_log(n_workloads: int, seed: int = 0, *, mean_gap_s: float = 20.0, release_delay_s: float = 2.0,
                 delete_after_s: float = 30.0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    engine = Engine()
    log: list[dict[str, Any]] = []
    heap: list[tuple[float, int, dict[str, Any]]] = []
    seq = 0
    runtime: dict[str, float] = {}
    run_token: dict[str, int] = {}

    def push(at: float, event: dict[str, Any]) -> None:
        nonlocal seq
        heapq.heappush(heap, (at, seq, event))
        seq += 1

    t = 0.0
    for i in range(n_workloads):
        t += rng.expovariate(1 / mean_gap_s)
        ns = rng.choice(("team-a", "team-b"))
        name = f"job-{i}"
        runtime[f"{ns}/{name}"] = round(rng.uniform(30, 300), 3)
        push(round(t, 3), {"type": "WorkloadSubmitted",
                           "workload": workload(ns, name, rng.choice((2, 4, 6)), "high" if rng.random() < 0.3 else "low")})
    for event in config():
        log.append(event)
        engine.apply(event, len(log) - 1)
    while heap:
        at, _, event = heapq.heappop(heap)
        if "_token" in event:
            w, token = event.pop("_token")
            if run_token.get(w) != token:
                continue  # the run it would end was preempted
        event["time"] = stamp(at)
        log.append(event)
        for d in engine.apply(event, len(log) - 1):
            w = d.workload
            if w is None:
                continue
            ns, _, name = w.partition("/")
            if isinstance(d, Admitted):
                run_token[w] = run_token.get(w, 0) + 1
                push(at + runtime[w], {"type": "WorkloadFinished", "namespace": ns, "name": name,
                                       "_token": (w, run_token[w])})
            elif isinstance(d, (Preempted, Evicted)):
                run_token[w] = run_token.get(w, 0) + 1
                push(at + release_delay_s, {"type": "WorkloadReleased", "namespace": ns, "name": name})
            elif type(d).__name__ == "Finished":
                push(at + delete_after_s, {"type": "WorkloadDeleted", "namespace": ns, "name": name})
    return log
