"""Random but reproducible input streams for engine tests: cohorts, queues, workloads, churn."""

from __future__ import annotations

import copy
import random
from typing import Any

FLAVORS = ("on-demand", "spot")


def cluster_queue(name: str, cohort: str | None, rng: random.Random, strict: bool = False) -> dict[str, Any]:
    flavors = []
    for flavor in FLAVORS[: rng.randint(1, 2)]:
        cpu: dict[str, Any] = {"name": "cpu", "nominalQuota": rng.randint(0, 12)}
        mem: dict[str, Any] = {"name": "memory", "nominalQuota": f"{rng.randint(0, 48)}Gi"}
        if cohort is not None and rng.random() < 0.4:
            cpu["borrowingLimit"] = rng.randint(0, 6)
        if cohort is not None and rng.random() < 0.3:
            cpu["lendingLimit"] = rng.randint(0, cpu["nominalQuota"])
        flavors.append({"name": flavor, "resources": [cpu, mem]})
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "queueingStrategy": "StrictFIFO" if strict else "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": flavors}],
    }
    if cohort is not None:
        spec["cohort"] = cohort
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def applied(obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": "ConfigApplied", "object": obj}


def random_stream(seed: int, events: int = 300, cohorts: int = 2, queues_per_cohort: int = 3) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for flavor in FLAVORS:
        out.append(applied({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": flavor}}))
    queues: list[str] = []
    for c in range(cohorts):
        for q in range(queues_per_cohort):
            name = f"cq-{c}-{q}"
            queues.append(name)
            out.append(applied(cluster_queue(name, f"cohort-{c}" if c else None, rng, strict=rng.random() < 0.25)))
            out.append(applied({
                "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                "metadata": {"namespace": f"ns-{name}", "name": "lq"}, "spec": {"clusterQueue": name},
            }))
    live: list[tuple[str, str]] = []
    serial = 0
    while len(out) < events:
        roll = rng.random()
        if roll < 0.55 or not live:
            cq = rng.choice(queues)
            serial += 1
            ns, name = f"ns-{cq}", f"wl-{serial}"
            pod_sets = [{"name": "main", "count": rng.randint(1, 3),
                         "requests": {"cpu": str(rng.randint(1, 4)), "memory": f"{rng.randint(1, 8)}Gi"}}]
            out.append({"type": "WorkloadSubmitted", "workload": {
                "metadata": {"namespace": ns, "name": name},
                "spec": {"queueName": "lq", "priority": rng.choice((0, 0, 50, 100)), "podSets": pod_sets}}})
            live.append((ns, name))
        elif roll < 0.85:
            ns, name = live.pop(rng.randrange(len(live)))
            out.append({"type": rng.choice(("WorkloadFinished", "WorkloadFinished", "WorkloadDeleted")),
                        "namespace": ns, "name": name})
        elif roll < 0.95:
            name = rng.choice(queues)
            cohort_index = int(name.split("-")[1])
            out.append(applied(cluster_queue(name, f"cohort-{cohort_index}" if cohort_index else None, rng,
                                             strict=rng.random() < 0.25)))
        else:
            name = rng.choice(queues)
            out.append(applied({**cluster_queue(name, None, rng), "spec": {
                **cluster_queue(name, None, rng)["spec"], "stopPolicy": rng.choice(("None", "Hold", "HoldAndDrain"))}}))
    return out


POLICIES = (
    {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"},
    {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"},
    {"withinClusterQueue": "Never", "reclaimWithinCohort": "Any"},
    {"withinClusterQueue": "LowerOrNewerEqualPriority", "reclaimWithinCohort": "LowerPriority",
     "borrowWithinCohort": {"policy": "LowerPriority"}},
)


def mixed_stream(seed: int, **shape: int) -> list[dict[str, Any]]:
    """random_stream with a random preemption policy on every ClusterQueue (half of them none)."""
    rng = random.Random(seed)
    out = []
    for event in random_stream(seed, **{"events": 400, **shape}):
        obj = event.get("object")
        if isinstance(obj, dict) and obj.get("kind") == "ClusterQueue":
            event = copy.deepcopy(event)
            if rng.random() < 0.5:
                event["object"]["spec"]["preemption"] = dict(rng.choice(POLICIES))
        out.append(event)
    return out


def batched(stream: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """The stream's workload events in Batches of 1 to 30, configuration in between; in each
    Batch the submissions first, then the finishes and deletions, so that they make runs."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(stream):
        if not stream[i]["type"].startswith("Workload"):
            out.append(stream[i])
            i += 1
            continue
        j, size = i, rng.randint(1, 30)
        while j < len(stream) and j - i < size and stream[j]["type"].startswith("Workload"):
            j += 1
        chunk = stream[i:j]
        ends = [e for e in chunk if e["type"] != "WorkloadSubmitted"]
        out.append({"type": "Batch", "events": [e for e in chunk if e["type"] == "WorkloadSubmitted"] + ends})
        i = j
    return out
