"""Pending workloads share what they repeat: one namespace, queue name, label set, pod-set
shape and status object for all of them, whether decoded by the typed path or the general one,
so a deep backlog costs what each workload holds of its own."""

from __future__ import annotations

import json
from typing import Any

import pytest

from domain.engine import Engine
from domain.lifecycle import equivalence_class


def _setup() -> list[dict[str, Any]]:
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
          "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
              {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]}}
    return [
        {"type": "ConfigApplied", "object": {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
                                             "metadata": {"name": "default"}}},
        {"type": "ConfigApplied", "object": cq},
        {"type": "ConfigApplied", "object": {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                                             "metadata": {"namespace": "team", "name": "jobs"},
                                             "spec": {"clusterQueue": "cq"}}},
    ]


def _submit(name: str) -> dict[str, Any]:
    return {"type": "WorkloadSubmitted", "id": f"submit/{name}", "workload": {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"namespace": "team", "name": name, "labels": {"kueue.x-k8s.io/queue-name": "jobs", "app": "x"}},
        "spec": {"queueName": "jobs", "priority": 100, "podSets": [{"name": "main", "count": 1, "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}}]}}}


@pytest.mark.parametrize("typed", (True, False))
def test_pending_workloads_decoded_apart_share_their_repeated_values(typed: bool) -> None:
    """Bytes take the engine's typed path; an event already decoded, the general one."""
    engine = Engine()
    for offset, event in enumerate(_setup()):
        engine.apply(json.dumps(event).encode(), offset)
    for i in range(3):
        event = _submit(f"wl-{i}")
        engine.apply(json.dumps(event).encode() if typed else event, 10 + i)
    workloads = [engine.state.workloads[f"team/wl-{i}"] for i in range(3)]
    assert all(ws.admission is None and ws.last_status is not None for ws in workloads)  # all pending
    first, *rest = workloads
    for ws in rest:
        assert ws.spec.namespace is first.spec.namespace
        assert ws.spec.queue_name is first.spec.queue_name
        assert ws.spec.labels is first.spec.labels
        # -100, beyond CPython's small ints: one object, in both engine forms (the compiled
        # engine keeps these tuples typed variable-length, so it does not box them again)
        assert ws.order_key[0] is first.order_key[0]
        assert ws.last_status is first.last_status
        if typed:  # the typed path decodes equal pod sets once
            assert equivalence_class(ws)[2] is equivalence_class(first)[2]
    # A workload's queue holds the order key its state holds, not a copy; its parked class the
    # status its workloads hold.
    queue = engine.state.cluster_queues["cq"].queue
    for ws in workloads:
        members = queue.classes[queue.class_id(ws.key)]
        assert any(key is ws.order_key for key in members)
        assert ws.order_key is ws.order_key
        assert queue.parked_status(ws.key) is ws.last_status
