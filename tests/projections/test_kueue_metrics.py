"""Kueue's metrics (pkg/metrics/metrics.go) after small scenarios, checked by value and labels:
cohort hierarchy and subtree metrics, fair-sharing shares, pending resources, unadmitted
workloads, admission-check wait, execution time, eviction latency, buckets, build_info; and the
queries of Kueue's Grafana guide find what they read."""

from __future__ import annotations

import math
from typing import Any

import pytest
from projection_harness import (
    applied,
    cluster_queue,
    flavor,
    fold_lockstep,
    local_queue,
    workload,
)
from test_projection_fold import at, samples

from projections.metrics import exposition, registry_for

ROLE = ("replica_role", "standalone")
GIB = 2**30


def cohort(name: str, parent: str | None = None) -> dict[str, Any]:
    spec = {"parentName": parent} if parent else {}
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def scenario_tree() -> list[bytes]:
    """Cohort team under root; cq-a (4 cpu, lends at most 1) in team, cq-b (6 cpu) in root, cq-c
    (2 cpu, an admission check) alone. cq-a holds 3 + 3 cpu (borrowing 2), a third workload
    (5 pods of 1 cpu) waits; cq-c's workload reserves quota at second 20, its check is Ready at 35."""
    cq_a = cluster_queue("cq-a", {"default": (4, None, 1)}, cohort="team")
    objs = [
        {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration", "fairSharing": {"enable": True}},
        flavor("default"), cohort("root"), cohort("team", "root"),
        cq_a,
        cluster_queue("cq-b", {"default": 6}, cohort="root"),
        cluster_queue("cq-c", {"default": 2}, checks=["prov"]),
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "AdmissionCheck", "metadata": {"name": "prov"}, "spec": {"controllerName": "x"}},
        local_queue("team-a", "q", "cq-a"), local_queue("team-b", "q", "cq-b"), local_queue("team-c", "q", "cq-c"),
    ]
    events = [at(applied(o), 0) for o in objs]
    events.append(at({"type": "WorkloadSubmitted", "workload": workload("team-a", "a0", "q", 3)}, 10))
    events.append(at({"type": "WorkloadSubmitted", "workload": workload("team-a", "a1", "q", 3)}, 11))
    events.append(at({"type": "WorkloadSubmitted", "workload": workload("team-a", "a2", "q", 1, 5)}, 12))
    events.append(at({"type": "WorkloadSubmitted", "workload": workload("team-c", "c0", "q", 2)}, 20))
    events.append(at({"type": "AdmissionCheckStateChanged", "namespace": "team-c", "name": "c0", "check": "prov", "state": "Ready"}, 35))
    return events


def scrape(events: list[bytes]) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    proj, _ = fold_lockstep(events)
    assert not proj.anomalies
    return samples(exposition(registry_for(proj)))


def v(got: dict[tuple[str, frozenset[tuple[str, str]]], float], metric: str, **labels: str) -> float:
    return got[(metric, frozenset({*labels.items(), ROLE}))]


def family(got: dict[tuple[str, frozenset[tuple[str, str]]], float], metric: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels - {ROLE}: value for (name, labels), value in got.items() if name == metric}


def test_cohort_hierarchy_and_subtree_metrics() -> None:
    got = scrape(scenario_tree())
    assert family(got, "kueue_cohort_info") == {
        frozenset({("cohort", "root"), ("parent_cohort", ""), ("root_cohort", "root")}): 1,
        frozenset({("cohort", "team"), ("parent_cohort", "root"), ("root_cohort", "root")}): 1,
    }
    assert v(got, "kueue_cluster_queue_info", cluster_queue="cq-a", parent_cohort="team", root_cohort="root") == 1
    assert v(got, "kueue_cluster_queue_info", cluster_queue="cq-b", parent_cohort="root", root_cohort="root") == 1
    assert v(got, "kueue_cluster_queue_info", cluster_queue="cq-c", parent_cohort="", root_cohort="") == 1
    # team can lend what cq-a lends (1 cpu of 4); root adds cq-b's 6
    assert v(got, "kueue_cohort_subtree_quota", cohort="team", flavor="default", resource="cpu") == 1.0
    assert v(got, "kueue_cohort_subtree_quota", cohort="root", flavor="default", resource="cpu") == 7.0
    assert v(got, "kueue_cohort_subtree_quota", cohort="team", flavor="default", resource="memory") == 2**40
    assert v(got, "kueue_cohort_subtree_resource_reservations", cohort="team", flavor="default", resource="cpu") == 6.0
    assert v(got, "kueue_cohort_subtree_resource_reservations", cohort="root", flavor="default", resource="memory") == 2 * GIB
    assert v(got, "kueue_cohort_subtree_admitted_active_workloads", cohort="team") == 2
    assert v(got, "kueue_cohort_subtree_admitted_active_workloads", cohort="root") == 2
    assert family(got, "kueue_cohort_subtree_admitted_workloads_total") == {
        frozenset({("cohort", "team"), ("priority_class", "")}): 2,
        frozenset({("cohort", "root"), ("priority_class", "")}): 2,
    }


def test_weighted_shares_with_fair_sharing() -> None:
    got = scrape(scenario_tree())
    # cq-a borrows 2 cpu; what its parent could lend it is root's 7 (team guarantees nothing)
    assert v(got, "kueue_cluster_queue_weighted_share", cluster_queue="cq-a", cohort="team") == pytest.approx(2000 / 7)
    assert v(got, "kueue_cluster_queue_weighted_share", cluster_queue="cq-b", cohort="root") == 0
    assert v(got, "kueue_cluster_queue_weighted_share", cluster_queue="cq-c", cohort="") == 0
    # team shows cq-a's usage above its guarantee (6 - 3) against its subtree quota 1: 2 borrowed
    assert v(got, "kueue_cohort_weighted_share", cohort="team") == pytest.approx(2000 / 7)
    assert v(got, "kueue_cohort_weighted_share", cohort="root") == 0
    # without fair sharing Kueue does not report shares
    classical = scrape(scenario_tree()[1:])
    assert not family(classical, "kueue_cluster_queue_weighted_share")
    assert not family(classical, "kueue_cohort_weighted_share")


def test_quota_limits_pending_resources_and_unadmitted_workloads() -> None:
    events = scenario_tree()
    got = scrape(events[:-1])  # c0's check not Ready yet
    labels = {"cohort": "team", "cluster_queue": "cq-a", "flavor": "default"}
    assert v(got, "kueue_cluster_queue_lending_limit", **labels, resource="cpu") == 1.0
    assert v(got, "kueue_cluster_queue_lending_limit", **labels, resource="memory") == math.inf
    assert v(got, "kueue_cluster_queue_borrowing_limit", **labels, resource="cpu") == math.inf
    assert v(got, "kueue_cluster_queue_resource_pending", cluster_queue="cq-a", resource="cpu") == 5.0
    assert v(got, "kueue_cluster_queue_resource_pending", cluster_queue="cq-a", resource="memory") == 5 * GIB
    assert v(got, "kueue_cluster_queue_resource_pending", cluster_queue="cq-b", resource="cpu") == 0.0
    assert family(got, "kueue_unadmitted_workloads") == {
        frozenset({("cluster_queue", "cq-a"), ("reason", "NoReservation"), ("underlying_cause", "WaitingForQuota")}): 1,
        frozenset({("cluster_queue", "cq-c"), ("reason", "UnsatisfiedAdmissionChecks"), ("underlying_cause", "")}): 1,
    }
    assert v(got, "kueue_local_queue_unadmitted_workloads", name="q", namespace="team-a", cluster_queue="cq-a",
             reason="NoReservation", underlying_cause="WaitingForQuota") == 1
    after = scrape(events)
    assert set(family(after, "kueue_unadmitted_workloads")) == {
        frozenset({("cluster_queue", "cq-a"), ("reason", "NoReservation"), ("underlying_cause", "WaitingForQuota")})}
    # from the quota reservation (second 20) to admission (35)
    assert v(after, "kueue_admission_checks_wait_time_seconds_count", cluster_queue="cq-c", priority_class="") == 1
    assert v(after, "kueue_admission_checks_wait_time_seconds_sum", cluster_queue="cq-c", priority_class="") == 15.0
    assert v(after, "kueue_local_queue_admission_checks_wait_time_seconds_sum", name="q", namespace="team-c", priority_class="") == 15.0
    assert v(after, "kueue_admission_checks_wait_time_seconds_bucket", cluster_queue="cq-c", priority_class="", le="10.0") == 0
    assert v(after, "kueue_admission_checks_wait_time_seconds_bucket", cluster_queue="cq-c", priority_class="", le="20.0") == 1


def scenario_preemption() -> list[bytes]:
    """low (second 1) is preempted by high (5) and gives its quota back at 7; high finishes at
    17, low is admitted again then and finishes at 20."""
    cq = cluster_queue("cq", {"default": 2}, preemption={"withinClusterQueue": "LowerPriority"})
    events = [at(applied(o), 0) for o in (flavor("default"), cq, local_queue("ns", "q", "cq"))]
    events.append(at({"type": "WorkloadSubmitted", "workload": workload("ns", "low", "q", 2, priority=1)}, 1))
    events.append(at({"type": "WorkloadSubmitted", "workload": workload("ns", "high", "q", 2, priority=9)}, 5))
    events.append(at({"type": "WorkloadReleased", "namespace": "ns", "name": "low"}, 7))
    events.append(at({"type": "WorkloadFinished", "namespace": "ns", "name": "high"}, 17))
    events.append(at({"type": "WorkloadFinished", "namespace": "ns", "name": "low"}, 20))
    return events


def test_execution_time_and_eviction_latency() -> None:
    got = scrape(scenario_preemption())
    cq = {"cluster_queue": "cq", "priority_class": ""}
    # high ran 7..17; low ran 1..5 and 17..20 (earlier admissions count, as Kueue's accumulated time)
    assert v(got, "kueue_execution_time_seconds_count", **cq) == 2
    assert v(got, "kueue_execution_time_seconds_sum", **cq) == 10.0 + 7.0
    assert v(got, "kueue_execution_time_seconds_bucket", **cq, le="5.0") == 0
    assert v(got, "kueue_execution_time_seconds_bucket", **cq, le="10.0") == 2
    assert v(got, "kueue_local_queue_execution_time_seconds_sum", name="q", namespace="ns", priority_class="") == 17.0
    # low was evicted (preempted) at 5 and back to pending at 7
    assert family(got, "kueue_workload_eviction_latency_seconds_sum") == {frozenset({("cluster_queue", "cq"), ("reason", "Preempted")}): 2.0}
    assert v(got, "kueue_workload_eviction_latency_seconds_count", cluster_queue="cq", reason="Preempted") == 1


def bounds(got: dict[tuple[str, frozenset[tuple[str, str]]], float], metric: str) -> list[float]:
    return sorted({float(dict(labels)["le"]) for name, labels in got if name == metric + "_bucket"})


def test_buckets_are_kueues() -> None:
    got = scrape(scenario_preemption())
    sixteen = [1.0, *(2.5 * 2**i for i in range(15)), math.inf]
    fourteen = [1.0, *(2.5 * 2**i for i in range(13)), math.inf]
    assert bounds(got, "kueue_admission_wait_time_seconds") == sixteen
    assert bounds(got, "kueue_execution_time_seconds") == sixteen
    assert bounds(got, "kueue_quota_reserved_wait_time_seconds") == fourteen
    assert bounds(got, "kueue_local_queue_admission_wait_time_seconds") == fourteen
    assert bounds(got, "kueue_local_queue_quota_reserved_wait_time_seconds") == fourteen
    assert bounds(got, "kueue_workload_eviction_latency_seconds") == fourteen


def test_build_info() -> None:
    info = family(scrape(scenario_preemption()), "kueue_build_info")
    assert list(info.values()) == [1]
    labels = dict(next(iter(info)))
    assert set(labels) == {"git_version", "git_commit", "build_date", "go_version", "compiler", "platform"}
    assert labels["git_version"].startswith("v") and labels["go_version"].startswith("python")


# Metric selectors and `by` labels of the queries in Kueue's "Common Grafana Queries" guide
# (site/content/en/docs/tasks/manage/observability/common_grafana_queries.md) and its metrics
# reference: each must find a series carrying those labels.
GRAFANA_QUERIES = [
    ("kueue_cluster_queue_resource_usage", {"resource": "cpu"}, ("cluster_queue",)),
    ("kueue_cluster_queue_nominal_quota", {"resource": "cpu"}, ("cluster_queue", "resource")),
    ("kueue_pending_workloads", {"status": "active"}, ("cluster_queue", "status")),
    ("kueue_admission_wait_time_seconds_bucket", {}, ("le", "cluster_queue")),
    ("kueue_admitted_workloads_total", {}, ("cluster_queue",)),
    ("kueue_finished_workloads_total", {}, ("cluster_queue",)),
    ("kueue_evicted_workloads_total", {}, ("cluster_queue", "reason")),
    ("kueue_workload_eviction_latency_seconds_bucket", {}, ("le", "cluster_queue", "reason")),
    ("kueue_cohort_subtree_quota", {"resource": "cpu"}, ("cohort",)),
    ("kueue_cluster_queue_info", {}, ("cluster_queue", "root_cohort")),
]


@pytest.fixture(scope="module")
def both() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return scrape(scenario_tree() + scenario_preemption())


@pytest.mark.parametrize(("metric", "selector", "by"), GRAFANA_QUERIES)
def test_grafana_queries_find_their_series(both: dict[tuple[str, frozenset[tuple[str, str]]], float],
                                           metric: str, selector: dict[str, str], by: tuple[str, ...]) -> None:
    got = both
    series = [dict(labels) for name, labels in got if name == metric]
    matching = [s for s in series if all(s.get(k) == val for k, val in selector.items())]
    assert matching, f"{metric}{selector}: no series"
    assert all(set(by) <= set(s) for s in matching)


def test_finished_workloads_gauges_count_until_deleted() -> None:
    events = scenario_preemption()
    got = scrape(events)
    assert v(got, "kueue_finished_workloads", cluster_queue="cq") == 2
    assert v(got, "kueue_local_queue_finished_workloads", name="q", namespace="ns") == 2
    assert v(got, "kueue_finished_workloads_total", cluster_queue="cq", priority_class="") == 2
    events.append(at({"type": "WorkloadDeleted", "namespace": "ns", "name": "low"}, 21))
    got = scrape(events)
    assert v(got, "kueue_finished_workloads", cluster_queue="cq") == 1
    assert v(got, "kueue_finished_workloads_total", cluster_queue="cq", priority_class="") == 2
