"""The fold, without a log: against the engine's own state after every event, hand-checked queue
positions (Kueue's order), ClusterQueue/LocalQueue/cohort status, metrics, and explain's
read-only "why"."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from projection_harness import (
    Generator,
    applied,
    check_against_engine,
    cluster_queue,
    decide,
    flavor,
    fold_lockstep,
    local_queue,
    priority_class,
    workload,
)
from prometheus_client.parser import text_string_to_metric_families

from domain.snapshot import dump
from projections import views
from projections.explain import why_pending
from projections.fold import Projection
from projections.metrics import exposition, registry_for

_encode = msgspec.json.Encoder().encode
T = "2026-01-01T00:00:{:02d}Z"


def at(event: dict[str, Any], second: int | None) -> bytes:
    if second is not None:
        event["time"] = T.format(second)
    return _encode(event)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_fold_matches_the_engine_after_every_event(seed: int) -> None:
    """Positions, quota held, who is queued where, priorities and queue times equal the engine's
    own state after every single event of a randomized stream (Batches, rejections, duplicate
    ids, evictions and releases, admission checks, config churn)."""
    events = list(Generator(seed).events(1200))
    proj, _ = fold_lockstep(events)
    kinds = proj.counters.decisions
    for kind in ("Admitted", "QuotaReserved", "Preempted", "Evicted", "QuotaReleased", "Rejected", "Pending", "Finished"):
        assert kinds.get(kind, 0) > 0, f"the stream should exercise {kind}: {kinds}"


def positions(summary: dict[str, Any] | None) -> list[tuple[str, int, int]]:
    assert summary is not None
    return [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in summary["items"]]


def scenario_positions() -> list[bytes]:
    """One ClusterQueue (1 cpu, full), two LocalQueues; every workload asks for 1 cpu."""
    cq = cluster_queue("cq", {"default": 1})
    return [
        at(applied(flavor("default")), 0),
        at(applied(cq), 0),
        at(applied(local_queue("ns-a", "q1", "cq")), 0),
        at(applied(local_queue("ns-b", "q2", "cq")), 0),
        at(applied(priority_class("high", 100)), 0),
        at({"type": "WorkloadSubmitted", "workload": workload("ns-a", "blocker", "q1", 1)}, 1),  # 5: admitted
        at({"type": "WorkloadSubmitted", "workload": workload("ns-a", "w1", "q1", 1)}, 10),  # 6
        at({"type": "WorkloadSubmitted", "workload": workload("ns-b", "w2", "q2", 1, created=T.format(5))}, 11),  # 7
        at({"type": "WorkloadSubmitted", "workload": workload("ns-a", "w3", "q1", 1, priority_class="high")}, 20),  # 8
        at({"type": "WorkloadSubmitted", "workload": workload("ns-b", "w4", "q2", 1, created=T.format(10))}, 21),  # 9
        at({"type": "WorkloadSubmitted", "workload": workload("ns-a", "w5", "q1", 1)}, None),  # 10: no time at all
        at({"type": "Batch", "events": [  # 11
            {"type": "WorkloadSubmitted", "workload": workload("ns-b", "w6", "q2", 1, priority=5)},
            {"type": "WorkloadSubmitted", "workload": workload("ns-a", "w7", "q1", 1, priority=5)},
        ]}, 30),
        at(applied(priority_class("high", 1)), 31),  # 12: w3 drops to priority 1
        at({"type": "WorkloadUpdated", "workload": workload("ns-a", "w5", "q1", 1, priority=7)}, 32),  # 13
        at({"type": "WorkloadFinished", "namespace": "ns-a", "name": "blocker"}, 33),  # 14: w5 admitted
        at({"type": "ConfigDeleted", "kind": "LocalQueue", "namespace": "ns-b", "name": "q2"}, 34),  # 15
    ]


def test_positions_follow_kueue_order_hand_checked() -> None:
    """Kueue's order: higher priority first, then earlier creationTimestamp (else the event time,
    else the latest event time in the log), then log position. Hand-checked at each stage."""
    events = scenario_positions()
    stages = {
        11: [("w3", 0, 0), ("w6", 1, 0), ("w7", 2, 1), ("w2", 3, 1), ("w1", 4, 2), ("w4", 5, 2), ("w5", 6, 3)],
        12: [("w6", 0, 0), ("w7", 1, 0), ("w3", 2, 1), ("w2", 3, 1), ("w1", 4, 2), ("w4", 5, 2), ("w5", 6, 3)],
        13: [("w5", 0, 0), ("w6", 1, 0), ("w7", 2, 1), ("w3", 3, 2), ("w2", 4, 1), ("w1", 5, 3), ("w4", 6, 2)],
        14: [("w6", 0, 0), ("w7", 1, 0), ("w3", 2, 1), ("w2", 3, 1), ("w1", 4, 2), ("w4", 5, 2)],
        15: [("w7", 0, 0), ("w3", 1, 1), ("w1", 2, 2)],
    }
    lq1 = {
        11: [("w3", 0, 0), ("w7", 2, 1), ("w1", 4, 2), ("w5", 6, 3)],
        14: [("w7", 1, 0), ("w3", 2, 1), ("w1", 4, 2)],
        15: [("w7", 0, 0), ("w3", 1, 1), ("w1", 2, 2)],
    }
    for upto in stages:
        proj, engine = fold_lockstep(events[: upto + 1])
        assert positions(views.pending_in_cluster_queue(proj, "cq")) == stages[upto], f"after offset {upto}"
        if upto in lq1:
            assert positions(views.pending_in_local_queue(proj, "ns-a", "q1")) == lq1[upto], f"after offset {upto}"
        # paging keeps the positions of the whole queue (Kueue's visibility API)
        page = positions(views.pending_in_cluster_queue(proj, "cq", offset=1, limit=2))
        assert page == stages[upto][1:3]
        for name, in_cq, in_lq in stages[upto]:
            ns = "ns-a" if name in ("w1", "w3", "w5", "w7") else "ns-b"
            assert proj.position_of(f"{ns}/{name}") == (in_cq, in_lq)
    proj, _ = fold_lockstep(events)
    assert proj.workloads["ns-a/w5"].admitted
    assert views.pending_in_local_queue(proj, "ns-b", "q2") is None  # deleted
    state = views.workload_state(proj, "ns-b/w2")
    assert state is not None and state["queued"] is False and state["phase"] == "Pending"


def scenario_borrowing() -> list[bytes]:
    """Kueue's borrowing: cq-a (4 cpu) borrows from cq-b (6 cpu) in cohort pool; cq-c has an
    admission check, so its workload first only reserves quota."""
    objs = [
        flavor("default"),
        cluster_queue("cq-a", {"default": 4}, cohort="pool"),
        cluster_queue("cq-b", {"default": 6}, cohort="pool"),
        cluster_queue("cq-c", {"default": 2}, checks=["prov"]),
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "AdmissionCheck", "metadata": {"name": "prov"}, "spec": {"controllerName": "x"}},
        local_queue("team-a", "q", "cq-a"),
        local_queue("team-b", "q", "cq-b"),
        local_queue("team-c", "q", "cq-c"),
    ]
    events = [at(applied(o), 0) for o in objs]
    for i in range(4):  # 3 + 3 + 3 admitted (the last two borrow), the fourth waits
        events.append(at({"type": "WorkloadSubmitted", "workload": workload("team-a", f"a{i}", "q", 3)}, 10 + i))
    events.append(at({"type": "WorkloadSubmitted", "workload": workload("team-c", "c0", "q", 2)}, 20))
    return events


def test_cluster_queue_local_queue_and_cohort_status() -> None:
    events = scenario_borrowing()
    proj, _ = fold_lockstep(events)
    a = views.cluster_queue(proj, "cq-a")
    assert a is not None
    st = a["status"]
    assert (st["pendingWorkloads"], st["reservingWorkloads"], st["admittedWorkloads"]) == (1, 3, 3)
    assert st["flavorsReservation"] == [{"name": "default", "resources": [
        {"name": "cpu", "total": "9", "borrowed": "5"}, {"name": "memory", "total": "3Gi", "borrowed": "0"}]}]
    assert st["flavorsUsage"] == st["flavorsReservation"]
    assert st["conditions"][0]["status"] == "True"
    c = views.cluster_queue(proj, "cq-c")
    assert c is not None
    cst = c["status"]
    assert (cst["reservingWorkloads"], cst["admittedWorkloads"]) == (1, 0)
    assert cst["flavorsReservation"][0]["resources"][0] == {"name": "cpu", "total": "2", "borrowed": "0"}
    assert cst["flavorsUsage"][0]["resources"][0] == {"name": "cpu", "total": "0", "borrowed": "0"}
    lq = views.local_queue(proj, "team-a", "q")
    assert lq is not None
    assert (lq["status"]["pendingWorkloads"], lq["status"]["reservingWorkloads"], lq["status"]["admittedWorkloads"]) == (1, 3, 3)
    assert lq["status"]["flavorUsage"][0] == {"name": "default", "resources": [{"name": "cpu", "total": "9"}, {"name": "memory", "total": "3Gi"}]}
    pool = views.cohort(proj, "pool")
    assert pool is not None
    assert pool["status"]["clusterQueues"] == ["cq-a", "cq-b"]
    cpu = next(r for r in pool["status"]["resources"] if r["resource"] == "cpu")
    assert (cpu["nominalQuota"], cpu["reservation"], cpu["borrowed"]) == ("10", "9", "5")
    assert cpu["borrowers"] == {"cq-a": "5"} and cpu["lenders"] == {"cq-b": "5"}
    assert {"from": "cq-b", "to": "cq-a", "flavor": "default", "resource": "cpu", "amount": "5"} in pool["status"]["lending"]
    # the admission check turns Ready: now admitted, and usage counts it
    events.append(at({"type": "AdmissionCheckStateChanged", "namespace": "team-c", "name": "c0", "check": "prov", "state": "Ready"}, 30))
    proj, _ = fold_lockstep(events)
    c = views.cluster_queue(proj, "cq-c")
    assert c is not None and c["status"]["admittedWorkloads"] == 1
    assert c["status"]["flavorsUsage"][0]["resources"][0] == {"name": "cpu", "total": "2", "borrowed": "0"}


def samples(text: bytes) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def test_metrics_use_kueue_names_and_labels() -> None:
    events = scenario_borrowing()
    proj, _ = fold_lockstep(events)
    registry = registry_for(proj)
    got = samples(exposition(registry))
    role = ("replica_role", "standalone")

    def v(metric: str, **labels: str) -> float:
        return got[(metric, frozenset({*labels.items(), role}))]

    assert v("kueue_cluster_queue_resource_reservation", cohort="pool", cluster_queue="cq-a", flavor="default", resource="cpu") == 9.0
    assert v("kueue_cluster_queue_resource_usage", cohort="pool", cluster_queue="cq-a", flavor="default", resource="memory") == 3 * 2**30
    assert v("kueue_cluster_queue_nominal_quota", cohort="pool", cluster_queue="cq-b", flavor="default", resource="cpu") == 6.0
    assert v("kueue_cluster_queue_resource_usage", cohort="", cluster_queue="cq-c", flavor="default", resource="cpu") == 0.0
    assert v("kueue_cluster_queue_resource_reservation", cohort="", cluster_queue="cq-c", flavor="default", resource="cpu") == 2.0
    assert v("kueue_pending_workloads", cluster_queue="cq-a", status="inadmissible") == 1
    assert v("kueue_pending_workloads", cluster_queue="cq-a", status="active") == 0
    assert v("kueue_admitted_workloads_total", cluster_queue="cq-a", priority_class="") == 3
    assert v("kueue_quota_reserved_workloads_total", cluster_queue="cq-c", priority_class="") == 1
    assert v("kueue_reserving_active_workloads", cluster_queue="cq-c") == 1
    assert v("kueue_admitted_active_workloads", cluster_queue="cq-c") == 0
    assert v("kueue_cluster_queue_status", cluster_queue="cq-a", status="active") == 1
    assert v("kueue_admission_wait_time_seconds_count", cluster_queue="cq-a", priority_class="") == 3
    assert v("kueue_local_queue_admitted_active_workloads", name="q", namespace="team-a") == 3
    # registries are per projection: a second one does not see the first one's queues
    other, _ = fold_lockstep(scenario_positions())
    assert not any(k[0] == "kueue_cluster_queue_nominal_quota" and ("cluster_queue", "cq-a") in k[1]
                   for k in samples(exposition(registry_for(other))))


def test_preemption_and_eviction_metrics() -> None:
    cq = cluster_queue("cq", {"default": 2}, preemption={"withinClusterQueue": "LowerPriority"})
    events = [at(applied(o), 0) for o in (flavor("default"), cq, local_queue("ns", "q", "cq"))]
    events.append(at({"type": "WorkloadSubmitted", "workload": workload("ns", "low", "q", 2, priority=1)}, 1))
    events.append(at({"type": "WorkloadSubmitted", "workload": workload("ns", "high", "q", 2, priority=9)}, 5))
    events.append(at({"type": "WorkloadReleased", "namespace": "ns", "name": "low"}, 7))
    proj, _ = fold_lockstep(events)
    got = samples(exposition(registry_for(proj)))
    role = ("replica_role", "standalone")
    assert got[("kueue_preempted_workloads_total", frozenset({("preempting_cluster_queue", "cq"), ("reason", "InClusterQueue"), role}))] == 1
    assert got[("kueue_evicted_workloads_total", frozenset({("cluster_queue", "cq"), ("reason", "Preempted"), ("underlying_cause", ""), ("priority_class", ""), role}))] == 1
    # low was admitted at once; high waited from its submission (second 5) until the release (second 7)
    assert got[("kueue_admission_wait_time_seconds_sum", frozenset({("cluster_queue", "cq"), ("priority_class", ""), role}))] == 0.0 + 2.0
    assert proj.workloads["ns/high"].admitted and proj.position_of("ns/low") == (0, 0)


def test_why_pending_reads_the_engine_without_changing_it() -> None:
    events = scenario_borrowing()
    proj, engine = fold_lockstep(events)
    before = dump(engine)
    why = why_pending(engine.state, "team-a/a3")
    assert dump(engine) == before, "explain must not change the engine"
    assert why is not None
    assert why["reason"] == "WaitingForQuota"
    assert why["assignment"]["fitsWithoutPreemption"] is False
    assert why["podSets"][0]["modes"]["cpu"] == "NoCandidates"  # within nominal: only preemption could help
    assert why["podSets"][0]["flavorsTried"] == {"cpu": ["default"], "memory": ["default"]}
    cpu = next(q for q in why["quota"] if q["resource"] == "cpu")
    assert (cpu["requested"], cpu["available"], cpu["short"], cpu["nominalQuota"]) == ("3", "1", "2", "4")
    assert sorted(h["workload"] for h in why["heldBy"]) == ["team-a/a0", "team-a/a1", "team-a/a2"]
    assert why_pending(engine.state, "team-a/a0") is None  # admitted
    check_against_engine(proj, engine, len(events) - 1)


def test_memoized_parse_equals_parse_workload() -> None:
    """The fold parses accepted submissions once per template; the result is parse_workload's."""
    from devtools.cluster_stream import generate, render
    from domain.workload import parse_workload
    from projections.workload_decoding import parse_accepted, parse_accepted_json

    raws = []
    for e in Generator(3).events(800):
        try:
            raws.append(msgspec.json.decode(e))
        except msgspec.DecodeError:
            continue
    raws += [render(r) for r in generate(200, seed=2).records]
    subs = [r["workload"] for r in raws if isinstance(r, dict) and r.get("type") == "WorkloadSubmitted"]
    subs.append(workload("ns", "w", "q", 1, created="2026-01-01T00:00:07Z") | {"metadata": {"namespace": "ns", "name": "w", "uid": "u-1"}})
    checked = 0
    for wl in subs:
        try:
            expected = parse_workload(wl)
        except Exception:
            continue
        assert parse_accepted(wl) == expected
        # the fold's path from the event's bytes: templates keyed by the JSON text, twice to hit
        assert parse_accepted_json(msgspec.json.encode(wl)) == expected
        assert parse_accepted_json(msgspec.json.encode(wl)) == expected
        checked += 1
    assert checked > 300


def test_fold_reads_decisions_as_the_engine_decodes_them() -> None:
    """The fold's own decision types accept exactly what the engine's decoder accepts, carry the
    same fields, and give the quota an assignment holds; a record the engine cannot decode is
    'Unknown' to the fold too (it changes nothing)."""
    from domain.decisions import Admitted, QuotaReserved
    from domain.decisions import decode as engine_decode
    from projections.follower import decode_decision
    from projections.records import assignment_usage, decode_records
    from streams.log import Record

    values = [v for group in decide(list(Generator(2).events(600))) for v in group]
    held = 0
    for i, value in enumerate(values):
        engine = engine_decode(value)
        rec = decode_decision(i, value)
        assert rec.decision is not None and type(rec.decision).__name__ == type(engine).__name__
        assert (rec.offset, rec.cause_offset, rec.cause_index, rec.value) == (i, engine.cause.offset, engine.cause.index, value)
        # (the engine's encoding omits an optional field that is absent; the fold's shows null)
        mine = {k: v for k, v in msgspec.json.decode(msgspec.json.encode(rec.decision)).items() if v is not None}
        theirs = msgspec.json.decode(msgspec.json.encode(engine))
        if isinstance(engine, (Admitted, QuotaReserved)):
            assert rec.usage == assignment_usage(engine.podSetAssignments)
            held += 1
        else:
            assert rec.usage is None
        assert mine == theirs
    assert held > 50
    # The Follower's batch decoding gives the same records (a bad one included).
    bad_first = b'{"type":"Admitted","cause":{"offset":1,"index":0},"clusterQueue":"cq","podSetAssignments":[7]}'
    records = [Record("d", i, v) for i, v in enumerate([bad_first, *values])]
    assert decode_records(records) == [decode_decision(r.offset, r.value) for r in records]
    assert decode_records(records)[0].decision is None
    # An assignment the engine's decoder refuses (count is not an integer): no decision, same cause.
    bad = (b'{"type":"Admitted","workload":"ns/w","cause":{"offset":7,"index":1},"clusterQueue":"cq",'
           b'"podSetAssignments":[{"name":"main","flavors":{"cpu":"f"},"resourceUsage":{"cpu":"1"},"count":"x"}]}')
    with pytest.raises(msgspec.DecodeError):
        engine_decode(bad)
    rec = decode_decision(3, bad)
    assert (rec.decision, rec.cause_offset, rec.cause_index, rec.usage) == (None, 7, 1, None)
    proj = Projection()
    proj.apply(0, b"{}", [rec])
    assert proj.counters.decisions == {"Unknown": 1}


def test_histogram_settles_as_if_bucketed_at_once() -> None:
    """Wait times are bucketed when read (and every few thousand): the same buckets, count and
    floating-point sum as bucketing each observation when it comes."""
    import bisect
    import random

    from projections.fold import WAIT_BUCKETS, Histogram

    rng = random.Random(7)
    h = Histogram()
    buckets = [0] * len(WAIT_BUCKETS)
    total = 0.0
    for n in range(10_000):
        value = rng.choice((0.0, 1.0, 2.5, rng.expovariate(0.01), rng.uniform(0, 1e6)))
        h.observe(value)
        i = bisect.bisect_left(WAIT_BUCKETS, value)
        if i < len(buckets):
            buckets[i] += 1
        total += value
        if n in (0, 4095, 4096, 7000):  # reading in between changes nothing
            assert (h.count, h.buckets, h.sum) == (n + 1, buckets, total)
    assert (h.count, h.buckets, h.sum) == (10_000, buckets, total)


@pytest.mark.parametrize(
    "scenario",
    [
        "priority/default_workload_priority_class_applies_to_workloads_without_one",
        "priority/priority_class_source_reads_kubernetes_priority_classes",
        "flavor_assignment/required_node_affinity_matches_flavor_node_labels",
        "validation/strict_decoding_refuses_unknown_fields_naming_the_object",
        "validation/topology_flavor_makes_cluster_queue_inactive_topology_not_found",
    ],
)
def test_fold_matches_the_engine_on_priority_classes_defaulting_and_strict_decoding(scenario: str) -> None:
    """Priorities from PriorityClasses and the default WorkloadPriorityClass, and refused objects,
    are folded as the engine applies them (the same spec, priority and queue after every event)."""
    from pathlib import Path

    import yaml

    path = Path(__file__).parents[1] / "conformance" / "scenarios" / f"{scenario}.yaml"
    events = [_encode(doc) for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    proj, engine = fold_lockstep(events)
    assert engine.state.workloads, "the scenario should leave workloads to compare"
    assert set(proj.workloads) == set(engine.state.workloads)
