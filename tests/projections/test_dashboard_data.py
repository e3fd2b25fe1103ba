"""The dashboard's data: usage numbers per ClusterQueue and cohort, and pages of workloads that
agree with the visibility API's positions, on a cohort where one queue borrows from another."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from projection_harness import (
    applied,
    cluster_queue,
    flavor,
    fold_lockstep,
    local_queue,
    workload,
)

from projections import views
from projections.dashboard import data
from projections.fold import Projection


def _fold(events: list[dict[str, Any]]) -> Projection:
    return fold_lockstep([msgspec.json.encode(e) for e in events])[0]


def borrowing_cluster() -> Projection:
    submit = [
        ("team-a", "a1", 3), ("team-a", "a2", 3),  # cq-a holds 6 on a nominal 4: borrows 2 from cq-b
        ("team-b", "b1", 5),  # 4 left in the cohort: waits
        ("team-a", "a3", 5), ("team-a", "a4", 5), ("team-b", "b2", 9),
    ]
    return _fold([
        applied(flavor("default")),
        applied(cluster_queue("cq-a", {"default": 4}, cohort="pool")),
        applied(cluster_queue("cq-b", {"default": 6}, cohort="pool")),
        applied(local_queue("team-a", "q", "cq-a")),
        applied(local_queue("team-b", "q", "cq-b")),
        *({"type": "WorkloadSubmitted", "workload": workload(ns, name, "q", cpu)} for ns, name, cpu in submit),
    ])


def _cpu(row: dict[str, Any], field: str) -> str:
    return str(row[field]["text"])


def test_overview_shows_borrowed_and_lent_quota() -> None:
    overview = data.overview(borrowing_cluster())
    cqs = {c["name"]: c for c in overview["clusterQueues"]}
    a_cpu = next(r for r in cqs["cq-a"]["resources"] if r["resource"] == "cpu")
    b_cpu = next(r for r in cqs["cq-b"]["resources"] if r["resource"] == "cpu")
    assert [_cpu(a_cpu, f) for f in ("nominal", "reservation", "usage", "borrowed", "lent")] == ["4", "6", "6", "2", "0"]
    assert [_cpu(b_cpu, f) for f in ("nominal", "reservation", "borrowed", "lent")] == ["6", "0", "0", "2"]
    assert a_cpu["reservation"]["value"] == 3 * a_cpu["nominal"]["value"] // 2
    assert (cqs["cq-a"]["pending"], cqs["cq-a"]["admitted"], cqs["cq-b"]["pending"]) == (2, 2, 2)
    assert {c["status"] for c in cqs.values()} == {"active"}
    pool = next(c for c in overview["cohorts"] if c["name"] == "pool")
    assert pool["clusterQueues"] == ["cq-a", "cq-b"]
    pool_cpu = next(r for r in pool["resources"] if r["resource"] == "cpu")
    assert (pool_cpu["nominalQuota"]["text"], pool_cpu["reservation"]["text"], pool_cpu["borrowed"]["text"]) == ("10", "6", "2")
    assert overview["totals"] == {"clusterQueues": 2, "localQueues": 2, "pending": 4, "admitted": 2, "reserving": 2}
    default = next(f for f in overview["flavors"] if f["name"] == "default")
    assert default["clusterQueues"] == ["cq-a", "cq-b"] and default["reservation"]["cpu"]["text"] == "6"


def test_pending_pages_follow_the_visibility_api_positions() -> None:
    p = borrowing_cluster()
    expected = [(i["metadata"]["name"], i["positionInClusterQueue"]) for name in sorted(p.cluster_queues)
                for i in views.pending_in_cluster_queue(p, name)["items"]]  # type: ignore[index]
    assert [n for n, _ in expected] == ["a3", "a4", "b1", "b2"]
    got = []
    for offset in range(0, 4, 3):  # pages that cut across ClusterQueues
        page = data.workloads(p, "pending", offset=offset, limit=3)
        assert page is not None and page["total"] == 4
        got += [(i["name"], i["position"]) for i in page["items"]]
    assert got == expected
    only_b = data.workloads(p, "pending", cluster_queue="cq-b", offset=1, limit=10)
    assert only_b is not None and [(i["name"], i["position"]) for i in only_b["items"]] == [("b2", 1)]
    assert only_b["items"][0]["reason"] == p.workloads["team-b/b2"].reason is not None


def test_admitted_pages_list_the_holders() -> None:
    p = borrowing_cluster()
    page = data.workloads(p, "admitted", limit=1, offset=1)
    assert page is not None and page["total"] == 2
    assert [(i["name"], i["state"], i["clusterQueue"]) for i in page["items"]] == [("a2", "Admitted", "cq-a")]
    assert data.workloads(p, "admitted", cluster_queue="cq-b") == {
        "state": "admitted", "clusterQueue": "cq-b", "offset": 0, "limit": 100, "total": 0, "items": []}


def test_unknown_queue_and_state() -> None:
    p = borrowing_cluster()
    assert data.workloads(p, "pending", cluster_queue="nope") is None
    with pytest.raises(ValueError, match="state must be one of pending, admitted"):
        data.workloads(p, "finished")
