"""Kueue's waitForPodsReady metrics (pkg/metrics/metrics.go; recorded by
pkg/controller/jobframework/reconciler.go and pkg/workload/evict/evict.go) after a small
scenario through the engine and the fold, checked by value and labels: ready_wait_time_seconds,
admitted_until_ready_wait_time_seconds (and their local_queue_ variants),
pods_ready_to_evicted_time_seconds and evicted_workloads_once_total."""

from __future__ import annotations

import math
from typing import Any

import msgspec
from projection_harness import (
    T0,
    applied,
    cluster_queue,
    flavor,
    iso,
    local_queue,
    workload,
)
from test_projection_fold import samples

from domain.decisions import encode
from domain.engine import Engine
from projections.fold import Projection
from projections.follower import decode_decision
from projections.metrics import exposition, registry_for

ROLE = ("replica_role", "standalone")
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
CONFIG = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
    "quotaflow": {"evictionRelease": "Immediate"},
    "waitForPodsReady": {"timeout": "5m", "recoveryTimeout": "2m"},
}


def at(event: dict[str, Any], second: int) -> bytes:
    event["time"] = iso(T0 + second)
    return msgspec.json.encode(event)


def ready(name: str, second: int, is_ready: bool = True) -> bytes:
    return at({"type": "WorkloadPodsReady", "namespace": "ns", "name": name, "ready": is_ready}, second)


def scenario(config: bool = True) -> list[bytes]:
    """cq holds one workload (2 cpu). low (second 10) is ready at 40, loses a pod at 100 and
    recovers at 130; high (200) preempts it; high's pods never start: evicted at the Tick of
    510 (WaitForStart), low is admitted again then, ready at 540; high's backoff (60 s) ends at
    570 and it preempts low again at the Tick of 600; ready at 610, it loses a pod at 620 and
    the recovery timeout (2m) evicts it at the Tick of 800 (WaitForRecovery)."""
    objs = [flavor("default"), cluster_queue("cq", {"default": 2}, preemption={"withinClusterQueue": "LowerPriority"}),
            local_queue("ns", "q", "cq")]
    if config:
        objs.insert(0, CONFIG)
    events = [at(applied(o), 0) for o in objs]
    events += [
        at({"type": "WorkloadSubmitted", "workload": workload("ns", "low", "q", 2, priority=1)}, 10),
        ready("low", 40), ready("low", 100, False), ready("low", 130),
        at({"type": "WorkloadSubmitted", "workload": workload("ns", "high", "q", 2, priority=9)}, 200),
        at({"type": "Tick"}, 510), ready("low", 540), at({"type": "Tick"}, 600),
        ready("high", 610), ready("high", 620, False), at({"type": "Tick"}, 800),
    ]
    return events


def scrape(events: list[bytes]) -> Samples:
    """The engine's decisions folded (not fold_lockstep: the fold does not follow a
    PodsReadyTimeout's requeuing backoff, so its pending order differs from the engine's
    until the backoff ends; no metric here reads it)."""
    engine, proj, doff = Engine(), Projection(), 0
    for i, raw in enumerate(events):
        recs = []
        for d in engine.apply(raw, i, (T0 + i) * 1_000_000):
            recs.append(decode_decision(doff, encode(d)))
            doff += 1
        proj.apply(i, raw, recs, timestamp_ms=(T0 + i) * 1000)
    assert not proj.anomalies
    return samples(exposition(registry_for(proj)))


def family(got: Samples, metric: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels - {ROLE}: value for (name, labels), value in got.items() if name == metric}


def key(**labels: str) -> frozenset[tuple[str, str]]:
    return frozenset(labels.items())


CQ = {"cluster_queue": "cq", "priority_class": ""}
LQ = {"name": "q", "namespace": "ns", "priority_class": ""}


def test_ready_wait_times_count_each_start_since_admission_not_a_recovery() -> None:
    got = scrape(scenario())
    # low: created at 10, ready at 40 (30 s after its admission); requeued at 200, admitted at
    # 510, ready at 540. high: requeued at 510, admitted at 600, ready at 610. low's recovery
    # at 130 counts in neither.
    for prefix, labels in (("kueue_", CQ), ("kueue_local_queue_", LQ)):
        assert family(got, f"{prefix}ready_wait_time_seconds_count") == {key(**labels): 3}
        assert family(got, f"{prefix}ready_wait_time_seconds_sum") == {key(**labels): 30.0 + 340.0 + 100.0}
        assert family(got, f"{prefix}admitted_until_ready_wait_time_seconds_count") == {key(**labels): 3}
        assert family(got, f"{prefix}admitted_until_ready_wait_time_seconds_sum") == {key(**labels): 30.0 + 30.0 + 10.0}
    buckets = family(got, "kueue_ready_wait_time_seconds_bucket")
    assert buckets[key(**CQ, le="20.0")] == 0
    assert buckets[key(**CQ, le="40.0")] == 1
    assert buckets[key(**CQ, le="160.0")] == 2
    assert buckets[key(**CQ, le="640.0")] == 3


def test_pods_ready_to_evicted_time_and_evictions_once() -> None:
    got = scrape(scenario())
    preempted = key(cluster_queue="cq", reason="Preempted", underlying_cause="")
    # low was ready from 130 (its recovery) until preempted at 200, and from 540 until 600;
    # high was never ready when evicted (WaitForStart, then WaitForRecovery)
    assert family(got, "kueue_pods_ready_to_evicted_time_seconds_count") == {preempted: 2}
    assert family(got, "kueue_pods_ready_to_evicted_time_seconds_sum") == {preempted: 70.0 + 60.0}
    evicted = {
        key(**CQ, reason="Preempted", underlying_cause=""): 2,
        key(**CQ, reason="PodsReadyTimeout", underlying_cause="WaitForStart"): 1,
        key(**CQ, reason="PodsReadyTimeout", underlying_cause="WaitForRecovery"): 1,
    }
    assert family(got, "kueue_evicted_workloads_total") == evicted
    # low's second preemption is not its first eviction for that reason
    assert family(got, "kueue_evicted_workloads_once_total") == {**evicted, key(**CQ, reason="Preempted", underlying_cause=""): 1}
    lq_evicted = family(got, "kueue_local_queue_evicted_workloads_total")
    assert lq_evicted[key(**LQ, reason="PodsReadyTimeout", underlying_cause="WaitForRecovery")] == 1


def test_buckets_are_kueues() -> None:
    got = scrape(scenario())
    fourteen = sorted([1.0, *(2.5 * 2**i for i in range(13)), math.inf])
    for metric in ("kueue_ready_wait_time_seconds", "kueue_local_queue_ready_wait_time_seconds",
                   "kueue_admitted_until_ready_wait_time_seconds", "kueue_local_queue_admitted_until_ready_wait_time_seconds",
                   "kueue_pods_ready_to_evicted_time_seconds"):
        assert sorted({float(dict(labels)["le"]) for name, labels in got if name == metric + "_bucket"}) == fourteen, metric


def test_without_wait_for_pods_ready_no_pods_ready_times() -> None:
    """Kueue keeps the PodsReady condition only while waitForPodsReady is on: reports still
    apply (the engine accepts them) but time nothing; evictions still count once."""
    events = scenario(config=False)[:-3]  # (no timeout evicts anything)
    got = scrape(events)
    for metric in ("kueue_ready_wait_time_seconds_count", "kueue_admitted_until_ready_wait_time_seconds_count",
                   "kueue_pods_ready_to_evicted_time_seconds_count"):
        assert family(got, metric) == {}, metric
    assert family(got, "kueue_evicted_workloads_once_total") == {key(**CQ, reason="Preempted", underlying_cause=""): 1}


def test_deactivation_by_the_maximum_execution_time_names_its_cause() -> None:
    """Admitted at 10, ready at 20, its maximum execution time (30 s) ends at 40: Kueue labels
    the eviction Deactivated / MaximumExecutionTimeExceeded, its pods ready 20 s before."""
    objs = [CONFIG, flavor("default"), cluster_queue("cq", {"default": 2}), local_queue("ns", "q", "cq")]
    wl = workload("ns", "w", "q", 1)
    wl["spec"]["maximumExecutionTimeSeconds"] = 30
    events = [at(applied(o), 0) for o in objs]
    events += [at({"type": "WorkloadSubmitted", "workload": wl}, 10), ready("w", 20), at({"type": "Tick"}, 40)]
    got = scrape(events)
    cause = {"reason": "Deactivated", "underlying_cause": "MaximumExecutionTimeExceeded"}
    assert family(got, "kueue_evicted_workloads_total") == {key(**CQ, **cause): 1}
    assert family(got, "kueue_evicted_workloads_once_total") == {key(**CQ, **cause): 1}
    assert family(got, "kueue_pods_ready_to_evicted_time_seconds_sum") == {key(cluster_queue="cq", **cause): 20.0}
