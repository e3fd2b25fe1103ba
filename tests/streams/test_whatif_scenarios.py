"""What-if scenarios whose answer is known by hand."""

from __future__ import annotations

from typing import Any

import msgspec
from whatif_helpers import FLAVOR, applied, cq, finished, lq, submitted

from devtools.timed_stream import API, stamp
from domain.timestamps import parse_time
from streams.whatif.changes import At, Change, ops_from_documents, sweep
from streams.whatif.run import run
from streams.whatif.simulation import record, simulate
from streams.whatif.source import timed

T0 = parse_time(stamp(0))


def _records(events: list[dict[str, Any]]) -> list:
    return timed([msgspec.json.encode(e) for e in events])


def _admitted_at(measure: Any, w: str) -> float | None:
    t = measure.workloads[w].first_admitted
    return None if t is None else (t - T0) / 1e6


def one_queue_log() -> list[dict[str, Any]]:
    """team-a has 4 cpu; w1 (4 cpu) runs 100 s from t=0; w2 (4 cpu) arrives at t=10 and waits for it."""
    return [
        applied(FLAVOR), applied(cq("team-a", 4)), applied(lq("team-a", "team-a")),
        submitted(0, "team-a", "w1", 4),
        submitted(10, "team-a", "w2", 4),
        finished(100, "team-a", "w1"),
        finished(150, "team-a", "w2"),
    ]


def test_doubling_a_quota_removes_the_wait() -> None:
    records = _records(one_queue_log())
    rec = record(records)
    assert _admitted_at(rec.measure, "team-a/w2") == 100  # it waited 90 s
    sim = simulate(records, rec, sweep([], ["clusterqueue/team-a.nominal=cpu:x2"], At())[0], keep_log=True)
    assert _admitted_at(sim.measure, "team-a/w2") == 10  # no wait at all
    assert _admitted_at(sim.measure, "team-a/w1") == 0
    # w2 keeps its recorded runtime (50 s): it now finishes at 60, not 150.
    finishes = {(e["name"], parse_time(e["time"])) for e in (msgspec.json.decode(x) if isinstance(x, bytes) else x for x in sim.log)
                if e.get("type") == "WorkloadFinished"}
    assert finishes == {("w1", parse_time(stamp(100))), ("w2", parse_time(stamp(60)))}
    # The held quota: 4 cpu for 100 s + 4 cpu for 50 s in both worlds, over a window of 150 s.
    report = run(records, [sweep([], ["clusterqueue/team-a.nominal=cpu:x2"], At())[0]])
    a_rec = report["recorded"]["groups"]["ClusterQueue"]["team-a"]
    a_new = report["whatIf"][0]["groups"]["ClusterQueue"]["team-a"]
    assert a_rec["usage"]["cpu"]["meanAmount"] == a_new["usage"]["cpu"]["meanAmount"] == 4000
    assert a_rec["timeToAdmission"]["max"] == 90 and a_new["timeToAdmission"]["max"] == 0
    assert a_new["usage"]["cpu"]["ofNominal"] == 0.5
    assert report["whatIf"][0]["moved"]["earlier"][0]["workload"] == "team-a/w2"
    assert report["whatIf"][0]["moved"]["earlier"][0]["moved"] == -90


def test_a_change_from_a_later_time_leaves_the_past_alone() -> None:
    records = _records(one_queue_log())
    rec = record(records)
    # From t=20 on team-a has 8 cpu: w2, waiting since 10, is admitted at 20.
    sim = simulate(records, rec, sweep([], ["clusterqueue/team-a.nominal=cpu:8"], At(time=parse_time(stamp(20))))[0])
    assert _admitted_at(sim.measure, "team-a/w2") == 20
    # At offset 4 (w2's submission) it is admitted as it arrives.
    sim = simulate(records, rec, sweep([], ["clusterqueue/team-a.nominal=cpu:8"], At(offset=4))[0])
    assert _admitted_at(sim.measure, "team-a/w2") == 10


def test_a_preempted_run_restarts_and_its_finish_moves() -> None:
    """A low-priority run preempted in the changed world starts over when admitted again."""
    wpc = {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 100}
    high = submitted(30, "team-a", "urgent", 4)
    high["workload"]["spec"]["priorityClassName"] = "high"
    events = [
        applied(FLAVOR), applied(wpc), applied(cq("team-a", 8)), applied(lq("team-a", "team-a")),
        submitted(0, "team-a", "batch", 4),  # runs 100 s
        high,  # runs 20 s
        finished(50, "team-a", "urgent"),
        finished(100, "team-a", "batch"),
    ]
    records = _records(events)
    rec = record(records)
    preempting = {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": "team-a"},
                  "spec": {**cq("team-a", 4)["spec"], "preemption": {"withinClusterQueue": "LowerPriority"}}}
    change = Change("preempt", tuple(ops_from_documents([preempting], "test")))
    sim = simulate(records, rec, change, keep_log=True)
    # urgent preempts batch at 30, runs to 50; batch is released at once (no recorded release:
    # no recorded delay), readmitted at 50 and runs its whole 100 s again: it finishes at 150.
    assert sim.measure.workloads["team-a/batch"].preemptions == 1
    assert sim.measure.workloads["team-a/batch"].admissions == 2
    log = [msgspec.json.decode(x) if isinstance(x, bytes) else x for x in sim.log]
    times = {(e["type"], e.get("name")): parse_time(e["time"]) for e in log if e.get("type") in ("WorkloadFinished", "WorkloadReleased")}
    assert times[("WorkloadReleased", "batch")] == parse_time(stamp(30))
    assert times[("WorkloadFinished", "batch")] == parse_time(stamp(150))
    assert times[("WorkloadFinished", "urgent")] == parse_time(stamp(50))


def fair_sharing_log() -> list[dict[str, Any]]:
    """A cohort holds 8 cpu; both teams' ClusterQueues have none of their own, so both borrow.
    team-a fills the cohort at t=0 (a1 runs 100 s, a2-a4 1000 s); a5 arrives at t=1, b1 at t=2.
    At t=100 a1 finishes and 2 cpu are free for one of them."""
    cohort = {"apiVersion": API, "kind": "Cohort", "metadata": {"name": "pool"},
              "spec": {"resourceGroups": [{"coveredResources": ["cpu"],
                                           "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 8}]}]}]}}
    events = [applied(FLAVOR), applied(cohort), applied(cq("team-a", 0, "pool")), applied(cq("team-b", 0, "pool")),
              applied(lq("team-a", "team-a")), applied(lq("team-b", "team-b"))]
    events += [submitted(0, "team-a", f"a{i}", 2) for i in range(1, 5)]
    events += [submitted(1, "team-a", "a5", 2), submitted(2, "team-b", "b1", 2)]
    # Classical (recorded): both borrow, same priority, so the older a5 goes first (Kueue's
    # FIFO within the cohort), and b1 only after a5 has run its 50 s.
    events += [finished(100, "team-a", "a1"), finished(150, "team-a", "a5"), finished(200, "team-b", "b1")]
    events += [finished(1000, "team-a", f"a{i}") for i in range(2, 5)]
    return events


def test_fair_sharing_moves_the_admission_to_the_team_with_the_lower_share() -> None:
    records = _records(fair_sharing_log())
    rec = record(records)
    assert _admitted_at(rec.measure, "team-a/a5") == 100
    assert _admitted_at(rec.measure, "team-b/b1") == 150
    report = run(records, sweep([], ["configuration.fairSharing=on"], At()))
    v = report["whatIf"][0]
    # Fair sharing: team-a already uses all 6 remaining cpu of the cohort, team-b nothing: its
    # dominant resource share is lower, so b1 wins the tournament at t=100, and a5 follows when
    # b1 has run its 50 s.
    moved = {r["workload"]: r for r in v["moved"]["earlier"] + v["moved"]["later"]}
    assert moved["team-b/b1"]["moved"] == -50 and moved["team-b/b1"]["whatIfWait"] == 98
    assert moved["team-a/a5"]["moved"] == 50 and moved["team-a/a5"]["whatIfWait"] == 149
    groups = v["groups"]["ClusterQueue"]
    assert groups["team-b"]["timeToAdmission"]["mean"] == 98
    assert report["recorded"]["groups"]["ClusterQueue"]["team-b"]["timeToAdmission"]["mean"] == 148


def test_a_sweep_runs_every_value_and_the_product_of_axes() -> None:
    records = _records(one_queue_log())
    changes = sweep([], ["clusterqueue/team-a.nominal=cpu:x1,x1.5,x2"], At())
    assert [c.name for c in changes] == ["clusterqueue/team-a.nominal=cpu:x1", "clusterqueue/team-a.nominal=cpu:x1.5",
                                         "clusterqueue/team-a.nominal=cpu:x2"]
    report = run(records, changes)
    waits = [v["totals"]["timeToAdmission"]["max"] for v in report["whatIf"]]
    assert waits == [90, 90, 0]  # 6 cpu still cannot hold both 4-cpu workloads
    both = sweep([], ["clusterqueue/team-a.nominal=cpu:x1,x2", "configuration.fairSharing=on,off"], At())
    assert len(both) == 4


def test_immediate_eviction_release_admits_the_preemptor_without_waiting_for_the_launcher() -> None:
    wpc = {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 100}
    preempting = cq("team-a", 4, preemption={"withinClusterQueue": "LowerPriority"})
    urgent = submitted(30, "team-a", "urgent", 4)
    urgent["workload"]["spec"]["priorityClassName"] = "high"
    events = [
        applied(FLAVOR), applied(wpc), applied(preempting), applied(lq("team-a", "team-a")),
        submitted(0, "team-a", "batch", 4),
        urgent,
        {"type": "WorkloadReleased", "namespace": "team-a", "name": "batch", "time": stamp(32)},  # the launcher took 2 s
        finished(52, "team-a", "urgent"),  # runs 20 s
        finished(152, "team-a", "batch"),  # readmitted at 52, runs 100 s
    ]
    records = _records(events)
    rec = record(records)
    assert _admitted_at(rec.measure, "team-a/urgent") == 32
    changes = sweep([], ["configuration.quotaflow.evictionRelease=Immediate"], At())
    sim = simulate(records, rec, changes[0], keep_log=True)
    assert _admitted_at(sim.measure, "team-a/urgent") == 30  # no launcher round trip
    log = [msgspec.json.decode(x) if isinstance(x, bytes) else x for x in sim.log]
    assert not any(e.get("type") == "WorkloadReleased" for e in log)  # the engine released it itself
    finishes = {e["name"]: parse_time(e["time"]) for e in log if e.get("type") == "WorkloadFinished"}
    assert finishes == {"urgent": parse_time(stamp(50)), "batch": parse_time(stamp(150))}
