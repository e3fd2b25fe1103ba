"""Shared by the what-if tests: hand-written timed logs, and an engine that keeps its decisions."""

from __future__ import annotations

from typing import Any

from devtools.timed_stream import API, stamp
from domain.decisions import Decision, encode
from domain.engine import Engine


class KeepingEngine(Engine):
    """An engine that appends every decision it makes, encoded, to `out`."""

    def __init__(self, out: list[bytes]) -> None:
        super().__init__()
        self.out = out

    def apply(self, event: Any, offset: int, log_time: int | None = None) -> list[Decision]:
        decisions = super().apply(event, offset, log_time)
        self.out.extend(encode(d) for d in decisions)
        return decisions


def cq(name: str, cpu: int | str, cohort: str | None = None, **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}],
        **spec,
    }
    if cohort:
        s["cohort"] = cohort
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": s}


def lq(ns: str, cluster_queue: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "LocalQueue", "metadata": {"namespace": ns, "name": "main"}, "spec": {"clusterQueue": cluster_queue}}


FLAVOR = {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}}


def at(seconds: float, event: dict[str, Any]) -> dict[str, Any]:
    return {**event, "time": stamp(seconds)}


def applied(obj: dict[str, Any], t: float = 0) -> dict[str, Any]:
    return at(t, {"type": "ConfigApplied", "object": obj})


def submitted(t: float, ns: str, name: str, cpu: int) -> dict[str, Any]:
    return at(t, {"type": "WorkloadSubmitted", "workload": {
        "metadata": {"namespace": ns, "name": name},
        "spec": {"queueName": "main", "podSets": [{"name": "main", "count": 1, "requests": {"cpu": str(cpu)}}]}}})


def finished(t: float, ns: str, name: str) -> dict[str, Any]:
    return at(t, {"type": "WorkloadFinished", "namespace": ns, "name": name})
