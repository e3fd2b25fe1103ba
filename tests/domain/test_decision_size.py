"""No decision is larger than the decision log takes: a larger one becomes a Rejected of its cause."""

from __future__ import annotations

import json

from domain import decisions, limits, reasons
from domain.decisions import Admitted, Rejected
from domain.engine import Engine

RESOURCE = "example.com/" + "r" * 520_000  # no limit on resource names here: the guard is the last word


def events(resource: str) -> list[bytes]:
    objects = [
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "f"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": [resource], "flavors": [
                {"name": "f", "resources": [{"name": resource, "nominalQuota": 4}]}]}]},
        },
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}},
    ]
    out = [json.dumps({"type": "ConfigApplied", "object": o}).encode() for o in objects]
    wl = {"metadata": {"name": "w"}, "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "requests": {resource: "1"}}]}}
    out.append(json.dumps({"type": "WorkloadSubmitted", "workload": wl}).encode())
    return out


def test_an_oversized_decision_is_replaced_by_a_rejected_of_its_cause() -> None:
    engine = Engine()
    made = [d for offset, e in enumerate(events(RESOURCE)) for d in engine.apply(e, offset)]
    assert all(len(decisions.encode(d)) <= limits.MAX_DECISION_BYTES for d in made)
    last = made[-1]
    assert isinstance(last, Rejected) and last.reason == reasons.LIMIT_EXCEEDED
    assert last.cause.offset == 3 and last.cause.index == 0 and "Admitted decision would be" in last.message


def test_the_limit_is_configurable_and_small_decisions_pass() -> None:
    engine = Engine()
    made = [d for offset, e in enumerate(events("cpu")) for d in engine.apply(e, offset)]
    assert isinstance(made[-1], Admitted)
    engine = Engine(max_decision_bytes=100)
    made = [d for offset, e in enumerate(events("cpu")) for d in engine.apply(e, offset)]
    assert isinstance(made[-1], Rejected) and "over the limit of 100 bytes" in made[-1].message
