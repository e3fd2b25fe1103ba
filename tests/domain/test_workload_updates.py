"""A `WorkloadUpdated` changes what it may change and keeps the rest of the submission: the pod
sets, what they were found to be (requests above limits) and the UID."""

from __future__ import annotations

import json
from typing import Any

from domain import reasons
from domain.decisions import Admitted, Decision, Pending, Preempted
from domain.engine import Engine

V1B2 = "kueue.x-k8s.io/v1beta2"


def config() -> list[dict[str, Any]]:
    return [
        {"type": "ConfigApplied", "object": {"apiVersion": V1B2, "kind": "ResourceFlavor", "metadata": {"name": "default"}}},
        {
            "type": "ConfigApplied",
            "object": {
                "apiVersion": V1B2,
                "kind": "ClusterQueue",
                "metadata": {"name": "cq"},
                "spec": {
                    "namespaceSelector": {},
                    "preemption": {"withinClusterQueue": "LowerPriority"},
                    "resourceGroups": [
                        {"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}
                    ],
                },
            },
        },
        {"type": "ConfigApplied", "object": {"apiVersion": V1B2, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "default"}, "spec": {"clusterQueue": "cq"}}},
    ]


def replay(events: list[dict[str, Any]]) -> list[Decision]:
    engine = Engine()
    out: list[Decision] = []
    for offset, event in enumerate(config() + events):
        out.extend(engine.apply(json.dumps(event).encode(), offset))
    return out


def workload(name: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **meta}, "spec": {"queueName": "q", **spec}}


def test_an_update_keeps_a_workload_whose_requests_exceed_its_limits_misconfigured() -> None:
    spec = {
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]}},
            }
        ]
    }
    out = replay(
        [
            {"type": "WorkloadSubmitted", "workload": workload("w", spec)},
            {"type": "WorkloadUpdated", "workload": workload("w", spec, labels={"team": "a"})},
        ]
    )
    assert not any(isinstance(d, Admitted) for d in out)
    pending = [d for d in out if isinstance(d, Pending)]
    assert pending and pending[-1].reason == reasons.MISCONFIGURED


def test_an_update_keeps_the_uid_preemption_messages_name() -> None:
    low = {"priority": 0, "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "2"}}]}
    high = {"priority": 10, "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "4"}}]}
    out = replay(
        [
            {"type": "WorkloadSubmitted", "workload": workload("low", low)},
            {"type": "WorkloadSubmitted", "workload": workload("high", {**high, "active": False}, uid="uid-123")},
            {"type": "WorkloadUpdated", "workload": workload("high", high, uid="uid-123")},
        ]
    )
    preempted = [d for d in out if isinstance(d, Preempted)]
    assert preempted and all("(UID: uid-123," in d.message for d in preempted)
