"""Kueue's visibility API over HTTP at both versions Kueue serves (v1beta2, preferred, and
v1beta1): same positions, the version asked for in `apiVersion`, the API server's NotFound, and
the discovery documents kubectl reads first; and /metrics served from the same app."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from projection_harness import fold_lockstep
from test_projection_fold import scenario_positions

from projections.server import ProjectionServer
from streams.log import Topics
from streams.log.sqlite import SqliteLog

GROUP = "visibility.kueue.x-k8s.io"


@pytest.fixture
async def client(tmp_path: Path) -> Any:
    server = ProjectionServer(SqliteLog(tmp_path / "log.db"), Topics("in", "out", "snap"))
    events = scenario_positions()
    server.projection, _ = fold_lockstep(events[:12])  # seven queued in cq (positions hand-checked there)
    async with TestClient(TestServer(server.app())) as c:
        yield c


async def get(client: TestClient[Any, Any], path: str, status: int = 200) -> Any:
    resp = await client.get(path)
    assert resp.status == status, (path, resp.status, await resp.text())
    return await resp.json()


def names(summary: dict[str, Any]) -> list[tuple[str, int, int]]:
    return [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in summary["items"]]


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
async def test_pending_workloads_at_each_version(client: TestClient[Any, Any], version: str) -> None:
    base = f"/apis/{GROUP}/{version}"
    cq = await get(client, f"{base}/clusterqueues/cq/pendingworkloads")
    assert (cq["apiVersion"], cq["kind"]) == (f"{GROUP}/{version}", "PendingWorkloadsSummary")
    assert names(cq) == [("w3", 0, 0), ("w6", 1, 0), ("w7", 2, 1), ("w2", 3, 1), ("w1", 4, 2), ("w4", 5, 2), ("w5", 6, 3)]
    page = await get(client, f"{base}/clusterqueues/cq/pendingworkloads?offset=5&limit=1")
    assert names(page) == [("w4", 5, 2)]
    lq = await get(client, f"{base}/namespaces/ns-b/localqueues/q2/pendingworkloads")
    assert lq["apiVersion"] == f"{GROUP}/{version}"
    assert [(i["metadata"]["name"], i["localQueueName"], i["positionInLocalQueue"]) for i in lq["items"]] == [
        ("w6", "q2", 0), ("w2", "q2", 1), ("w4", "q2", 2)]
    missing = await get(client, f"{base}/clusterqueues/nope/pendingworkloads", 404)
    assert (missing["reason"], missing["message"]) == ("NotFound", f'clusterqueue.{GROUP} "nope" not found')
    missing = await get(client, f"{base}/namespaces/ns-b/localqueues/nope/pendingworkloads", 404)
    assert missing["message"] == f'localqueue.{GROUP} "nope" not found'


async def test_discovery_prefers_v1beta2(client: TestClient[Any, Any]) -> None:
    group = await get(client, f"/apis/{GROUP}")
    assert group["preferredVersion"] == {"groupVersion": f"{GROUP}/v1beta2", "version": "v1beta2"}
    assert [v["version"] for v in group["versions"]] == ["v1beta2", "v1beta1"]
    resources = await get(client, f"/apis/{GROUP}/v1beta2")
    assert resources["groupVersion"] == f"{GROUP}/v1beta2"
    served = {r["name"]: (r["namespaced"], r["verbs"]) for r in resources["resources"]}
    assert served["clusterqueues/pendingworkloads"] == (False, ["get"])
    assert served["localqueues/pendingworkloads"] == (True, ["get"])
    assert (await client.get(f"/apis/{GROUP}/v1alpha1/clusterqueues/cq/pendingworkloads")).status == 404


async def test_quotaflow_paths_are_unchanged(client: TestClient[Any, Any]) -> None:
    summary = await get(client, "/clusterqueues/cq/pendingworkloads?limit=2")
    assert summary["apiVersion"] == f"{GROUP}/v1beta1" and len(summary["items"]) == 2
    assert (await get(client, "/clusterqueues/nope/pendingworkloads", 404))["message"] == "ClusterQueue nope not found"


async def test_metrics_are_served(client: TestClient[Any, Any]) -> None:
    resp = await client.get("/metrics")
    assert resp.status == 200
    text = await resp.text()
    assert 'kueue_pending_workloads{cluster_queue="cq",replica_role="standalone",status="inadmissible"} 7.0' in text
    assert 'kueue_cluster_queue_resource_pending{cluster_queue="cq",replica_role="standalone",resource="cpu"} 7.0' in text
    assert "kueue_build_info{" in text
