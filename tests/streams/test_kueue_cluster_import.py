"""`quotaflow import kueue-cluster`: a Kueue-shaped dump (objects as `kubectl get ... -A -o yaml`
prints them, Workloads with Kueue's status conditions) becomes an input log whose replay admits
what Kueue admitted, when Kueue did, where Kueue's rules allow; and what-if runs over it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from devtools.timed_stream import stamp
from domain.timestamps import parse_time as t
from streams.cli.main import app
from streams.importers.kueue_cluster import convert

API = "kueue.x-k8s.io/v1beta1"


def condition(kind: str, t: float, reason: str, status: str = "True") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": "", "lastTransitionTime": stamp(t),
            "observedGeneration": 1}


def workload(name: str, cpu: int, created: float, admitted: float | None = None, finished: float | None = None) -> dict[str, Any]:
    """A Workload as Kueue's API server returns it (apis/kueue/v1beta1 Workload, WorkloadStatus)."""
    conditions = []
    status: dict[str, Any] = {}
    if admitted is not None:
        conditions += [condition("QuotaReserved", admitted, "QuotaReserved"), condition("Admitted", admitted, "Admitted")]
        status["admission"] = {"clusterQueue": "team-a", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": str(cpu)}, "count": 1}]}
    else:
        conditions.append(condition("QuotaReserved", created, "Pending", "False"))
    if finished is not None:
        conditions.append(condition("Finished", finished, "Succeeded"))
    status["conditions"] = conditions
    return {
        "apiVersion": API, "kind": "Workload",
        "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}", "creationTimestamp": stamp(created),
                     "resourceVersion": "42", "generation": 1, "managedFields": [{"manager": "kueue"}],
                     "labels": {"kueue.x-k8s.io/queue-name": "main"}},
        "spec": {"queueName": "main", "active": True, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": str(cpu)}}}],
            "restartPolicy": "Never"}}}]},
        "status": status,
    }


def dump() -> dict[str, Any]:
    cq = {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": "team-a", "resourceVersion": "7",
          "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
          "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
              {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]},
          "status": {"admittedWorkloads": 1, "pendingWorkloads": 1}}
    items = [
        cq,
        {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": "main", "namespace": "team-a"},
         "spec": {"clusterQueue": "team-a"}, "status": {}},
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}, "spec": {}},
        workload("w1", 4, 0, admitted=0, finished=100),
        workload("w2", 4, 10, admitted=100, finished=150),  # waited for w1
        workload("w3", 4, 120, admitted=150),  # still running
        workload("w4", 8, 130),  # can never fit: pending
    ]
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}


def test_the_replay_of_an_imported_dump_admits_what_kueue_admitted_when_it_did(tmp_path: Path) -> None:
    src = tmp_path / "dump.yaml"
    src.write_text(yaml.safe_dump(dump()))
    out = tmp_path / "events.jsonl"
    result = CliRunner().invoke(app, ["import", "kueue-cluster", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert [e["type"] for e in events[:3]] == ["ConfigApplied"] * 3
    assert [e["object"]["kind"] for e in events[:3]] == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]
    assert "status" not in events[1]["object"] and "annotations" not in events[1]["object"]["metadata"]
    replayed = CliRunner().invoke(app, ["replay", str(out)])
    decisions = [json.loads(line) for line in replayed.stdout.splitlines()]
    admitted = {d["workload"]: t(events[d["cause"]["offset"]]["time"]) for d in decisions if d["type"] == "Admitted"}
    assert admitted == {"team-a/w1": t(stamp(0)), "team-a/w2": t(stamp(100)), "team-a/w3": t(stamp(150))}
    finished = [(e["name"], t(e["time"])) for e in events if e["type"] == "WorkloadFinished"]
    assert finished == [("w1", t(stamp(100))), ("w2", t(stamp(150)))]  # w3 never finished in Kueue: it keeps running
    assert not any(d["type"] == "Rejected" for d in decisions)
    # What if team-a had twice the quota: w2 no longer waits.
    result = CliRunner().invoke(app, ["whatif", str(out), "--set", "clusterqueue/team-a.nominal=cpu:x2", "--json"])
    assert result.exit_code == 0, result.output
    moved = json.loads(result.stdout)["whatIf"][0]["moved"]
    assert [(r["workload"], r["moved"]) for r in moved["earlier"]] == [("team-a/w2", -90.0), ("team-a/w3", -30.0)]


def test_a_dump_without_kueue_objects_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "pods.yaml"
    src.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "p"}}]}))
    result = CliRunner().invoke(app, ["import", "kueue-cluster", str(src)])
    assert result.exit_code == 2 and "holds no Kueue object" in result.stderr
    events, notes = convert([dump()])
    assert notes == [] and len(events) == 3 + 4 + 2


def _imported(tmp_path: Path) -> Path:
    src = tmp_path / "dump.yaml"
    src.write_text(yaml.safe_dump(dump()))
    out = tmp_path / "events.jsonl"
    result = CliRunner().invoke(app, ["import", "kueue-cluster", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_whatif_with_no_change_over_an_imported_dump_admits_what_kueue_admitted(tmp_path: Path) -> None:
    from streams.whatif.changes import Change
    from streams.whatif.simulation import record, simulate
    from streams.whatif.source import read_file

    records = read_file(_imported(tmp_path))
    sim = simulate(records, record(records), Change("no change"))
    # The dump's Admitted conditions: w1 at 0, w2 at 100, w3 at 150; w4 (8 cpu in a 4-cpu queue) never.
    kueue = {"team-a/w1": t(stamp(0)), "team-a/w2": t(stamp(100)), "team-a/w3": t(stamp(150)), "team-a/w4": None}
    assert {w: r.first_admitted for w, r in sim.measure.workloads.items()} == kueue


def test_estimate_over_an_imported_dump_says_a_workload_that_cannot_fit_is_never_admitted(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["estimate", "team-a/w4", str(_imported(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["admissible"] is False and "request (8) > maximum capacity (4)" in r["reason"]
    assert r["runs"] == 2  # w1's and w2's Kueue runtimes
