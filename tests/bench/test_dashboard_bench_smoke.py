"""Smoke test of bench/dashboard_bench.py on a small cluster: the stream builds the backlog it
claims, and every endpoint it times answers."""

from __future__ import annotations

import json

import pytest

from bench import dashboard_bench


def test_small_cluster_reports_every_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    assert dashboard_bench.main(["--cohorts", "2", "--pending-per-cq", "3", "--pages", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["clusterQueues"], result["pending"]) == (20, 60)
    assert set(result["endpointsMs"]) == {
        "overview", "pending, first page", "pending, middle page", "pending, last page",
        "pending in one ClusterQueue, last page", "admitted, middle page"}
    assert all(ms > 0 for ms in result["endpointsMs"].values()) and result["livePerDecisionUs"] > 0
