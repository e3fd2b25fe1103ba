"""`quotaflow list`: kueuectl's columns from the projection, filters, and -o json."""

from __future__ import annotations

import json

from cli_harness import Live, workload


def test_list_workloads_queues_and_flavors(live: Live) -> None:
    wls = [workload("fits", cpu="3"), workload("waits", cpu="3"), workload("elsewhere", namespace="other")]
    assert live.cli("submit", "-f", str(live.write("wl.yaml", *wls)), "--wait").returncode in (0, 1)

    table = live.cli("list", "workloads", "-n", "team-a")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "LOCALQUEUE", "CLUSTERQUEUE", "STATUS", "POSITION", "IN", "QUEUE"]
    rows = {line.split()[1]: line.split() for line in lines[2:] if line.strip()}
    assert rows["fits"][2:5] == ["team-a", "team-a-cq", "Admitted"]
    assert rows["waits"][2:] == ["team-a", "team-a-cq", "Pending", "0"]
    assert "elsewhere" not in table.stdout

    admitted = live.cli("list", "wl", "-A", "--admitted", "-o", "json")
    assert admitted.returncode == 0, admitted.stderr
    assert [i["name"] for i in json.loads(admitted.stdout)["items"]] == ["fits"]
    pending = live.cli("list", "workloads", "-n", "team-a", "--pending", "-o", "wide")
    assert "waits" in pending.stdout and "fits" not in pending.stdout and "PRIORITY" in pending.stdout

    cqs = live.cli("list", "clusterqueues")
    assert cqs.returncode == 0, cqs.stderr
    assert cqs.stdout.splitlines()[0].split() == ["NAME", "COHORT", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS", "ACTIVE"]
    assert cqs.stdout.splitlines()[2].split() == ["team-a-cq", "1", "1", "True"]
    lqs = live.cli("list", "lq", "-n", "team-a", "-o", "yaml")
    assert lqs.returncode == 0 and "kind: LocalQueue" in lqs.stdout and "clusterQueue: team-a-cq" in lqs.stdout
    rfs = live.cli("list", "resourceflavors")
    assert rfs.returncode == 0 and "default-flavor" in rfs.stdout
