"""`quotaflow get KIND NAME`, `-o wide|json|yaml` on every view, and AGE of configuration
objects, on both logs (in-process: CliRunner against logs an in-process agent decided)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml
from cli_decided import Decided, decided  # noqa: F401
from cli_harness import CLUSTER_QUEUE, FLAVOR, LOCAL_QUEUE, workload

pytestmark = pytest.mark.timeout(120, func_only=True)

def five_hours_ago() -> datetime:
    """5h10m ago: kubectl's AGE reads "5h10m" for the next minute, long enough for a test."""
    return datetime.now(UTC) - timedelta(hours=5, minutes=10)


def at(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def applied(obj: dict[str, Any], time: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "ConfigApplied", "object": obj}
    if time:
        event["time"] = time
    return event


def submitted(wl: dict[str, Any]) -> dict[str, Any]:
    return {"type": "WorkloadSubmitted", "workload": wl}


COHORT = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Cohort", "metadata": {"name": "research"}, "spec": {}}
IN_COHORT = {**CLUSTER_QUEUE, "spec": {**CLUSTER_QUEUE["spec"], "cohort": "research"}}
LABELLED_FLAVOR = {**FLAVOR, "spec": {"nodeLabels": {"pool": "a100"}}}


@pytest.fixture
def cluster(decided: Decided) -> Decided:  # noqa: F811
    """Configuration applied 5h10m ago (the events' `time`), one workload admitted, one pending."""
    decided.created = ago = at(five_hours_ago())
    decided.decide(
        applied(LABELLED_FLAVOR, ago), applied(COHORT, ago), applied(IN_COHORT, ago), applied(LOCAL_QUEUE, ago),
        submitted(workload("runs", cpu="3")), submitted(workload("waits", cpu="3")),
    )
    return decided


def test_get_shows_each_kind_with_its_spec_and_status(cluster: Decided) -> None:
    cq = cluster.cli("get", "clusterqueue", "team-a-cq")
    assert cq.exit_code == 0, cq.output
    lines = cq.output.splitlines()
    assert lines[0].split() == ["NAME", "COHORT", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS", "ACTIVE", "AGE"]
    assert lines[2].split() == ["team-a-cq", "research", "1", "1", "True", "5h10m"]
    assert "Spec:" in cq.output and "nominalQuota: 4" in cq.output  # the spec as applied
    assert "Workloads: 1 pending, 1 reserving quota, 1 admitted" in cq.output
    assert "Active=True  Ready: Can admit new workloads" in cq.output
    usage = next(line.split() for line in lines if line.split()[:2] == ["default-flavor", "cpu"])
    assert usage == ["default-flavor", "cpu", "3", "3", "0"]  # reserved, admitted, borrowed

    lq = cluster.cli("get", "lq", "team-a/team-a", "-o", "wide")
    assert lq.exit_code == 0, lq.output
    assert lq.output.splitlines()[2].split() == ["team-a", "team-a", "team-a-cq", "1", "1", "5h10m", "1", "True", "None"]
    assert cluster.cli("get", "localqueue", "team-a", "-n", "team-a").output.splitlines()[2].split()[:3] == ["team-a", "team-a", "team-a-cq"]

    rf = cluster.cli("get", "resourceflavor", "default-flavor")
    assert rf.exit_code == 0 and rf.output.splitlines()[2].split() == ["default-flavor", "pool=a100", "5h10m"]
    assert "Used by ClusterQueues: team-a-cq" in rf.output

    cohort = cluster.cli("get", "cohort", "research")
    assert cohort.exit_code == 0, cohort.output
    assert cohort.output.splitlines()[2].split() == ["research", "team-a-cq", "5h10m"]
    assert next(line.split() for line in cohort.output.splitlines() if line.startswith("default-flavor"))[:5] == [
        "default-flavor", "cpu", "4", "3", "3"]

    pending = cluster.cli("get", "workload", "team-a/waits")
    assert pending.exit_code == 0, pending.output
    assert pending.output.splitlines()[2].split()[:6] == ["team-a", "waits", "team-a", "team-a-cq", "Pending", "0"]
    assert "phase=Pending" in pending.output and "WaitingForQuota: couldn't assign flavors to pod set main" in pending.output
    running = cluster.cli("get", "wl", "runs", "-n", "team-a")
    assert "Admission:" in running.output and "team-a-cq: cpu=3[default-flavor]" in running.output
    assert "WorkloadSubmitted" in running.output and "Admitted" in running.output  # its history


def test_get_prints_the_object_as_json_and_yaml(cluster: Decided) -> None:
    as_json = json.loads(cluster.cli("get", "clusterqueue", "team-a-cq", "-o", "json").output)
    as_yaml = yaml.safe_load(cluster.cli("get", "clusterqueue", "team-a-cq", "-o", "yaml").output)
    assert as_json == as_yaml
    assert as_json["kind"] == "ClusterQueue" and as_json["spec"] == IN_COHORT["spec"]
    assert as_json["metadata"] == {"name": "team-a-cq", "creationTimestamp": cluster.created}
    assert as_json["status"]["admittedWorkloads"] == 1 and as_json["status"]["pendingWorkloads"] == 1

    wl = json.loads(cluster.cli("get", "workload", "team-a/runs", "-o", "json").output)
    assert wl["kind"] == "Workload" and wl["spec"]["queueName"] == "team-a"
    assert wl["spec"]["podSets"] == [{"name": "main", "count": 1, "requests": {"cpu": "3"}}]
    assert wl["status"]["phase"] == "Admitted" and wl["status"]["clusterQueue"] == "team-a-cq"
    assert [h["decision"]["type"] for h in wl["history"]] == ["Admitted"]
    assert yaml.safe_load(cluster.cli("get", "workload", "team-a/runs", "-o", "yaml").output) == wl

    rf = json.loads(cluster.cli("get", "rf", "default-flavor", "-o", "json").output)
    assert rf["spec"] == {"nodeLabels": {"pool": "a100"}} and rf["status"] == {"clusterQueues": ["team-a-cq"]}


def test_get_of_something_missing_fails_naming_it(cluster: Decided) -> None:
    for args, message in (
        (["clusterqueue", "nope"], "ClusterQueue nope not found"),
        (["localqueue", "team-a/nope"], "LocalQueue team-a/nope not found"),
        (["workload", "team-a/nope"], "workload team-a/nope not found"),
        (["resourceflavor", "nope"], "ResourceFlavor nope not found"),
        (["cohort", "nope"], "cohort nope not found"),
    ):
        result = cluster.cli("get", *args)
        assert result.exit_code == 1 and message in result.output, (args, result.output)


def test_lists_show_the_age_of_configuration(cluster: Decided) -> None:
    for kind, first_row in (
        ("clusterqueues", ["team-a-cq", "research", "1", "1", "True", "5h10m"]),
        ("resourceflavors", ["default-flavor", "pool=a100", "5h10m"]),
        ("cohorts", ["research", "team-a-cq", "5h10m"]),
    ):
        listed = cluster.cli("list", kind)
        assert listed.exit_code == 0, listed.output
        assert listed.output.splitlines()[0].split()[-1] == "AGE"
        assert listed.output.splitlines()[2].split() == first_row, kind
    lqs = cluster.cli("list", "localqueues", "-A")
    assert lqs.output.splitlines()[2].split() == ["team-a", "team-a", "team-a-cq", "1", "1", "5h10m"]
    items = json.loads(cluster.cli("list", "localqueues", "-A", "-o", "json").output)["items"]
    assert items[0]["metadata"]["creationTimestamp"] == cluster.created


def test_age_is_from_the_creation_not_a_later_update(decided: Decided) -> None:  # noqa: F811
    """Applying an object again changes it but not its age; deleting it and applying it anew
    makes a new object, as in Kubernetes."""
    first, later = datetime.now(UTC) - timedelta(days=3), datetime.now(UTC) - timedelta(hours=4, minutes=10)
    decided.decide(applied(FLAVOR, at(first)), applied(LABELLED_FLAVOR, at(later)))
    assert decided.cli("list", "rf").output.splitlines()[2].split() == ["default-flavor", "pool=a100", "3d"]
    decided.decide(
        {"type": "ConfigDeleted", "kind": "ResourceFlavor", "name": "default-flavor", "time": at(later)},
        applied(FLAVOR, at(later)),
    )
    assert decided.cli("list", "rf").output.splitlines()[2].split() == ["default-flavor", "4h10m"]


# Formats do not depend on the log (the other tests read both): on the embedded log only.
@pytest.mark.parametrize("decided", ["sqlite"], indirect=True)
def test_every_view_takes_o_json_and_yaml_with_the_same_document(cluster: Decided) -> None:
    views = [
        ["status"], ["pending", "team-a-cq"], ["pending", "team-a/team-a"], ["history", "team-a/runs"],
        ["explain", "team-a/waits"], ["list", "workloads", "-A"], ["list", "clusterqueues"], ["list", "localqueues", "-A"],
        ["list", "resourceflavors"], ["list", "cohorts"], ["get", "cq", "team-a-cq"], ["get", "wl", "team-a/waits"],
    ]
    for view in views:
        as_json = cluster.cli(*view, "-o", "json")
        as_yaml = cluster.cli(*view, "-o", "yaml")
        assert as_json.exit_code == 0 and as_yaml.exit_code == 0, (view, as_json.output, as_yaml.output)
        assert json.loads(as_json.output) == yaml.safe_load(as_yaml.output), view
        wide = cluster.cli(*view, "-o", "wide")
        assert wide.exit_code == 0 and wide.output.strip(), (view, wide.output)
    for view, more in ((["status"], "STOP POLICY"), (["pending", "team-a-cq"], "AGE"), (["history", "team-a/runs"], "DECISION OFFSET"),
                       (["list", "workloads", "-A"], "PRIORITY"), (["list", "cohorts"], "EXPLICIT")):
        assert more in cluster.cli(*view, "-o", "wide").output and more not in cluster.cli(*view).output, view
    audited = json.loads(cluster.cli("audit", "-o", "json").output)
    assert audited["ok"] and audited["verified"] == 6 and audited["divergence"] is None
    assert {**yaml.safe_load(cluster.cli("audit", "-o", "yaml").output), "seconds": 0} == {**audited, "seconds": 0}
    # --json, from before -o, is -o json
    assert json.loads(cluster.cli("status", "--json").output) == json.loads(cluster.cli("status", "-o", "json").output)


def test_list_workloads_as_objects(cluster: Decided) -> None:
    items = json.loads(cluster.cli("list", "workloads", "-n", "team-a", "-o", "json").output)["items"]
    assert [(i["metadata"]["name"], i["status"]["phase"]) for i in items] == [("runs", "Admitted"), ("waits", "Pending")]
    assert items[1]["status"]["positionInClusterQueue"] == 0


def test_get_and_wide_views_are_never_cut_when_piped_even_at_80_columns(cluster: Decided) -> None:
    long = "a-workload-name-long-enough-to-overflow-an-eighty-column-terminal-line-on-its-own"
    cluster.decide(submitted(workload(long, cpu="100m")))
    for view in (["get", "workload", f"team-a/{long}"], ["get", "workload", f"team-a/{long}", "-o", "wide"],
                 ["list", "workloads", "-A", "-o", "wide"]):
        shown = cluster.cli(*view, env={"COLUMNS": "80"})
        assert shown.exit_code == 0, shown.output
        assert any(long in line.split() for line in shown.output.splitlines()), (view, shown.output)
    got = cluster.cli("get", "workload", f"team-a/{long}", env={"COLUMNS": "80"}).output
    assert "team-a-cq: cpu=100m[default-flavor]" in got
    history = cluster.cli("history", f"team-a/{long}", "-o", "wide", env={"COLUMNS": "80"}).output
    assert "→ team-a-cq: main×1 cpu=100m[default-flavor]" in history


def test_get_a_finished_or_deleted_workload_shows_what_is_left(cluster: Decided) -> None:
    cluster.decide({"type": "WorkloadFinished", "namespace": "team-a", "name": "runs"},
                   {"type": "WorkloadDeleted", "namespace": "team-a", "name": "waits"})
    finished = json.loads(cluster.cli("get", "workload", "team-a/runs", "-o", "json").output)
    assert finished["status"]["phase"] == "Finished"
    assert [h["decision"]["type"] for h in finished["history"]] == ["Admitted", "Finished"]
    deleted = cluster.cli("get", "workload", "team-a/waits")
    assert deleted.exit_code == 0, deleted.output
    assert deleted.output.splitlines()[2].split()[:2] == ["team-a", "waits"] and "Deleted" in deleted.output
    # the freed quota lets nothing else in: the ClusterQueue is empty again
    cq = json.loads(cluster.cli("get", "cq", "team-a-cq", "-o", "json").output)["status"]
    assert (cq["pendingWorkloads"], cq["reservingWorkloads"], cq["admittedWorkloads"]) == (0, 0, 0)
