"""`quotaflow list`: kueuectl's columns from the projection, filters, and -o json."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

from cli_harness import Live, workload

from streams.cli.render import human_duration


def test_list_workloads_queues_and_flavors(live: Live) -> None:
    wls = [workload("fits", cpu="3"), workload("waits", cpu="3"), workload("elsewhere", namespace="other")]
    assert live.cli("submit", "-f", str(live.write("wl.yaml", *wls)), "--wait").returncode in (0, 1)

    table = live.cli("list", "workloads", "-n", "team-a")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "LOCALQUEUE", "CLUSTERQUEUE", "STATUS", "POSITION", "IN", "QUEUE", "AGE"]
    rows = {line.split()[1]: line.split() for line in lines[2:] if line.strip()}
    assert rows["fits"][2:5] == ["team-a", "team-a-cq", "Admitted"]
    assert rows["waits"][2:6] == ["team-a", "team-a-cq", "Pending", "0"]
    assert re.fullmatch(r"\d+s", rows["waits"][6]), "just submitted: an age in seconds"
    assert "elsewhere" not in table.stdout

    admitted = live.cli("list", "wl", "-A", "--admitted", "-o", "json")
    assert admitted.returncode == 0, admitted.stderr
    assert [i["metadata"]["name"] for i in json.loads(admitted.stdout)["items"]] == ["fits"]
    pending = live.cli("list", "workloads", "-n", "team-a", "--pending", "-o", "wide")
    assert "waits" in pending.stdout and "fits" not in pending.stdout and "PRIORITY" in pending.stdout

    cqs = live.cli("list", "clusterqueues")
    assert cqs.returncode == 0, cqs.stderr
    assert cqs.stdout.splitlines()[0].split() == ["NAME", "COHORT", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS", "ACTIVE", "AGE"]
    assert cqs.stdout.splitlines()[2].split()[:4] == ["team-a-cq", "1", "1", "True"]
    lqs = live.cli("list", "lq", "-n", "team-a", "-o", "yaml")
    assert lqs.returncode == 0 and "kind: LocalQueue" in lqs.stdout and "clusterQueue: team-a-cq" in lqs.stdout
    rfs = live.cli("list", "resourceflavors")
    assert rfs.returncode == 0 and "default-flavor" in rfs.stdout


def test_a_workloads_age_is_the_clock_less_its_creation_time(live: Live) -> None:
    created = datetime.now(timezone.utc) - timedelta(hours=3, minutes=30, seconds=1)
    old = workload("old")
    old["metadata"]["creationTimestamp"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert live.cli("submit", "-f", str(live.write("old.yaml", old)), "--wait").returncode == 0

    table = live.cli("list", "workloads", "-n", "team-a")
    assert table.returncode == 0, table.stderr
    row = next(line.split() for line in table.stdout.splitlines() if line.split()[1:2] == ["old"])
    assert row[-1] == "3h30m"  # kubectl's form; stable for the 58 s this test may take
    listed = json.loads(live.cli("list", "workloads", "-n", "team-a", "-o", "json").stdout)["items"]
    item = next(i for i in listed if i["metadata"]["name"] == "old")
    assert item["metadata"]["creationTimestamp"] == created.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_ages_read_as_kubectl_prints_them() -> None:
    cases = {
        -5: "<invalid>", -1: "0s", 0: "0s", 119: "119s", 120: "2m", 125: "2m5s", 599: "9m59s", 600: "10m",
        179 * 60 + 59: "179m", 3 * 3600: "3h", 3 * 3600 + 30 * 60 + 59: "3h30m", 8 * 3600: "8h", 47 * 3600: "47h",
        48 * 3600: "2d", 50 * 3600: "2d2h", 8 * 86400: "8d", 729 * 86400: "729d", 730 * 86400: "2y",
        731 * 86400: "2y1d", 8 * 365 * 86400 + 3 * 86400: "8y",
    }
    assert {s: human_duration(s) for s in cases} == cases
