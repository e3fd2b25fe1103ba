"""`quotaflow import yunikorn`: YuniKorn queue configurations -> contract events (streams/importers/yunikorn.py).

Expected objects are derived from the mapping in the module's docstring and YuniKorn's own rules
(seed 004; yunikorn-core pkg/common/configs/configvalidator.go checkQueueResource), then replayed
through the engine to check that the imported tree enforces YuniKorn's recursive max.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from domain.decisions import encode
from domain.engine import Engine
from domain.quantity import amount
from streams.cli.main import app
from streams.importers.yunikorn import (
    YuniKornConfigError,
    convert,
    convert_with_problems,
    parse_capacity,
)
from streams.log.event_files import read_events

SCENARIOS = Path(__file__).resolve().parents[1] / "conformance" / "scenarios"

SEED_004 = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: parent
            resources:
              max: {vcore: 900}
            queues:
              - name: child1
              - name: child2
                resources:
                  max: {vcore: 750}
              - name: child3
                resources:
                  max: {vcore: 750}
"""

# Seed 004's static queue definition ("静态队列定义").
SEED_004_STATIC = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: advertisement
            resources:
              guaranteed: {memory: 500G, vcore: 50}
              max: {memory: 800G, vcore: 80}
          - name: search
            resources:
              guaranteed: {memory: 400G, vcore: 40}
              max: {memory: 600G, vcore: 60}
          - name: sandbox
            resources:
              guaranteed: {memory: 100G, vcore: 10}
              max: {memory: 100G, vcore: 10}
"""

DEPT_TEAM = """
partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: dept
            resources:
              guaranteed: {vcore: 4}
              max: {vcore: 10}
            queues:
              - name: team
                resources:
                  guaranteed: {vcore: 4}
                  max: {vcore: 10}
          - name: other
            resources:
              guaranteed: {vcore: 2}
"""


def objects(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for e in events:
        assert e["type"] == "ConfigApplied"
        obj = e["object"]
        meta = obj["metadata"]
        key = f"{obj['kind']}/{meta.get('namespace', '')}/{meta['name']}".replace("//", "/")
        out[key] = obj
    return out


def quota_of(obj: dict[str, Any], resource: str = "cpu") -> dict[str, str]:
    (group,) = obj["spec"]["resourceGroups"]
    (flavor,) = group["flavors"]
    (item,) = [r for r in flavor["resources"] if r["name"] == resource]
    return {k: v for k, v in item.items() if k != "name"}


# -- the mapping ----------------------------------------------------------------------------------


def test_seed_004_example_maps_to_root_cohort_parent_cohort_and_three_cluster_queues() -> None:
    events = convert(SEED_004)
    objs = objects(events)
    assert list(objs) == [
        "ResourceFlavor/default-flavor",
        "Cohort/root",
        "Cohort/parent",
        "ClusterQueue/child1",
        "LocalQueue/child1/child1",
        "ClusterQueue/child2",
        "LocalQueue/child2/child2",
        "ClusterQueue/child3",
        "LocalQueue/child3/child3",
    ]
    assert quota_of(objs["Cohort/root"]) == {"nominalQuota": "900"}  # the sum of the top-level maxes
    assert "parentName" not in objs["Cohort/root"]["spec"]
    assert objs["Cohort/parent"]["spec"]["parentName"] == "root"
    assert quota_of(objs["Cohort/parent"]) == {"nominalQuota": "0", "borrowingLimit": "900"}
    assert quota_of(objs["ClusterQueue/child1"]) == {"nominalQuota": "0"}  # no max: bounded by parent
    assert quota_of(objs["ClusterQueue/child2"]) == {"nominalQuota": "0", "borrowingLimit": "750"}
    assert quota_of(objs["ClusterQueue/child3"]) == {"nominalQuota": "0", "borrowingLimit": "750"}
    for name in ("child1", "child2", "child3"):
        cq = objs[f"ClusterQueue/{name}"]["spec"]
        assert cq["cohortName"] == "parent" and cq["namespaceSelector"] == {}
        assert objs[f"LocalQueue/{name}/{name}"]["spec"] == {"clusterQueue": name}
    for obj in objs.values():
        assert obj["metadata"]["annotations"]["quotaflow.dev/quota-model"] == "YuniKorn"
    assert objs["ClusterQueue/child2"]["metadata"]["annotations"]["quotaflow.dev/yunikorn-queue"] == "root.parent.child2"


@pytest.mark.parametrize(
    ("scenario", "config", "capacity"),
    [
        ("yunikorn_seed_004_parent_900_children_unlimited_750_750", SEED_004, ""),
        ("yunikorn_child_max_equal_to_parent_max_with_guarantees_accepted", DEPT_TEAM, "cpu=12"),
    ],
)
def test_conformance_scenarios_start_with_exactly_the_imported_events(scenario: str, config: str, capacity: str) -> None:
    imported = convert(config, parse_capacity(capacity))
    events = list(read_events(next(SCENARIOS.rglob(f"{scenario}.yaml"))))
    assert events[: len(imported)] == imported
    assert all(e["type"] != "ConfigApplied" for e in events[len(imported):])  # type: ignore[index]


def test_units_vcore_is_cpu_memory_is_bytes_others_unchanged() -> None:
    objs = objects(convert("""
partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: a
            resources:
              guaranteed: {vcore: 250m, memory: 1Gi, nvidia.com/gpu: 1}
              max: {vcore: 10, memory: 500G, nvidia.com/gpu: 2}
""", parse_capacity("cpu=16,memory=1T,nvidia.com/gpu=4")))
    cq = objs["ClusterQueue/a"]
    group = cq["spec"]["resourceGroups"][0]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    assert quota_of(cq, "cpu") == {"nominalQuota": "250m", "borrowingLimit": "9750m"}  # 10 - 0.25 CPUs
    memory = quota_of(cq, "memory")
    assert memory["nominalQuota"] == "1Gi" and amount("memory", memory["borrowingLimit"]) == 500 * 10**9 - 2**30
    assert quota_of(cq, "nvidia.com/gpu") == {"nominalQuota": "1", "borrowingLimit": "1"}
    # The root holds the cluster: capacity minus the guarantees below it.
    root = objs["Cohort/root"]
    assert quota_of(root, "cpu") == {"nominalQuota": "15750m"}
    assert amount("memory", quota_of(root, "memory")["nominalQuota"]) == 10**12 - 2**30
    assert quota_of(root, "nvidia.com/gpu") == {"nominalQuota": "3"}
    for r, quantity in (("cpu", "250m"), ("memory", "1Gi")):
        assert amount(r, quota_of(cq, r)["nominalQuota"]) == amount(r, quantity)


def test_seed_004_static_queues_guaranteed_and_max() -> None:
    objs = objects(convert(SEED_004_STATIC))
    assert quota_of(objs["Cohort/root"], "cpu") == {"nominalQuota": "50"}  # 80 + 60 + 10 - (50 + 40 + 10)
    assert quota_of(objs["ClusterQueue/advertisement"], "cpu") == {"nominalQuota": "50", "borrowingLimit": "30"}
    assert quota_of(objs["ClusterQueue/advertisement"], "memory") == {"nominalQuota": "500G", "borrowingLimit": "300G"}
    assert quota_of(objs["ClusterQueue/sandbox"], "cpu") == {"nominalQuota": "10", "borrowingLimit": "0"}


def test_cohort_nominal_is_its_guarantee_beyond_its_childrens() -> None:
    objs = objects(convert("""
partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: org
            resources: {guaranteed: {vcore: 10}, max: {vcore: 20}}
            queues:
              - name: dept
                resources: {guaranteed: {vcore: 6}}
                queues:
                  - {name: t1, resources: {guaranteed: {vcore: 2}, max: {vcore: 5}}}
                  - {name: t2, resources: {guaranteed: {vcore: 1}}}
              - {name: ops, resources: {max: {vcore: 3}}}
""", parse_capacity("cpu=40")))
    assert quota_of(objs["ClusterQueue/t1"]) == {"nominalQuota": "2", "borrowingLimit": "3"}
    assert quota_of(objs["ClusterQueue/t2"]) == {"nominalQuota": "1"}
    assert quota_of(objs["Cohort/dept"]) == {"nominalQuota": "3"}  # 6 - (2 + 1), no max
    assert quota_of(objs["ClusterQueue/ops"]) == {"nominalQuota": "0", "borrowingLimit": "3"}
    assert quota_of(objs["Cohort/org"]) == {"nominalQuota": "4", "borrowingLimit": "10"}  # 10 - 6; 20 - 10
    assert quota_of(objs["Cohort/root"]) == {"nominalQuota": "30"}  # 40 - 10
    assert objs["Cohort/dept"]["spec"]["parentName"] == "org"


def test_implicit_root_names_and_partitions() -> None:
    # Without a root queue YuniKorn inserts one; several partitions get one tree each, names prefixed.
    events = convert("""
partitions:
  - name: default
    queues:
      - {name: Batch_Jobs, resources: {max: {vcore: 4}}}
  - name: gpu
    queues:
      - name: root
        queues:
          - {name: train, resources: {max: {nvidia.com/gpu: 8}}}
""")
    objs = objects(events)
    assert "Cohort/default" in objs and "Cohort/gpu" in objs
    assert objs["ClusterQueue/default-batch-jobs"]["spec"]["cohortName"] == "default"
    assert objs["LocalQueue/default-batch-jobs/default-batch-jobs"]["metadata"]["annotations"]["quotaflow.dev/yunikorn-queue"] == "root.batch_jobs"
    assert objs["ClusterQueue/gpu-train"]["spec"]["cohortName"] == "gpu"
    assert quota_of(objs["Cohort/gpu"], "nvidia.com/gpu") == {"nominalQuota": "8"}
    # A single partition not named default keeps unprefixed names, its root named after it.
    objs = objects(convert("partitions: [{name: research, queues: [{name: a, resources: {max: {vcore: 2}}}]}]"))
    assert set(objs) == {"ResourceFlavor/default-flavor", "Cohort/research", "ClusterQueue/a", "LocalQueue/a/a"}


def test_top_level_max_above_the_cluster_is_capped_at_the_cluster() -> None:
    objs = objects(convert(SEED_004, parse_capacity("cpu=500")))
    assert quota_of(objs["Cohort/root"]) == {"nominalQuota": "500"}
    assert quota_of(objs["Cohort/parent"]) == {"nominalQuota": "0", "borrowingLimit": "500"}
    assert quota_of(objs["ClusterQueue/child2"]) == {"nominalQuota": "0", "borrowingLimit": "500"}
    assert quota_of(objs["ClusterQueue/child1"]) == {"nominalQuota": "0"}


@pytest.mark.parametrize(
    ("config", "capacity", "problem"),
    [
        ("partitions: [{name: default, queues: [{name: p, resources: {max: {vcore: 9}}, queues: [{name: c, resources: {max: {vcore: 10}}}]}]}]",
         "", "root.p.c: max 10 cpu exceeds its parent's max 9"),
        ("partitions: [{name: default, queues: [{name: p, resources: {max: {vcore: 9}}, queues: [{name: m, queues: [{name: c, resources: {max: {vcore: 10}}}]}]}]}]",
         "", "root.p.m.c: max 10 cpu exceeds its parent's max 9"),
        ("partitions: [{name: default, queues: [{name: q, resources: {guaranteed: {vcore: 5}, max: {vcore: 4}}}]}]",
         "", "root.q: guaranteed 5 cpu is larger than its max (4)"),
        ("partitions: [{name: default, queues: [{name: p, resources: {guaranteed: {vcore: 2}, max: {vcore: 9}}, queues: [{name: c, resources: {guaranteed: {vcore: 3}}}]}]}]",
         "", "root.p: guaranteed 2 cpu is smaller than the sum of its children's guarantees (3)"),
        ("partitions: [{name: default, queues: [{name: p, resources: {max: {vcore: 2}}, queues: [{name: c, resources: {guaranteed: {vcore: 3}}}]}]}]",
         "", "root.p: max 2 cpu is smaller than the sum of its children's guarantees (3)"),
        ("partitions: [{name: default, queues: [{name: root, resources: {max: {vcore: 2}}, queues: [{name: a}]}]}]",
         "cpu=4", "the root queue cannot have a quota"),
        ("partitions: [{name: default, queues: [{name: a, resources: {max: {vcore: 2}}}, {name: b}]}]",
         "", "the cluster size for cpu is unknown (root.b has no max for it); give it with --capacity cpu=QUANTITY"),
        ("partitions: [{name: default, queues: [{name: a, resources: {max: {cpu: 2}}}]}]",
         "", "YuniKorn names CPU 'vcore'"),
        ("partitions: [{name: default, queues: [{name: a, resources: {max: {vcore: lots}}}]}]",
         "", "root.a: max.vcore"),
        ("partitions: [{name: default, queues: [{name: a.b}]}]", "cpu=1", "invalid queue name 'a.b'"),
        ("partitions: [{name: default, queues: [{name: x, queues: [{name: web}]}, {name: y, queues: [{name: web}]}]}]",
         "cpu=1", "queues root.x.web and root.y.web both map to the Kubernetes name 'web'"),
        ("partitions: [{name: default, queues: [{name: A}, {name: a}]}]", "cpu=1", "root.a: duplicate queue name below root"),
        ("queues: []", "", "'partitions' must be a non-empty list"),
        ("[1, 2]", "", "expected a mapping with 'partitions' at the top level"),
    ],
)
def test_configuration_errors_are_reported(config: str, capacity: str, problem: str) -> None:
    with pytest.raises(YuniKornConfigError) as info:
        convert(config, parse_capacity(capacity))
    assert any(problem in p for p in info.value.problems), info.value.problems


def test_non_strict_conversion_keeps_the_events_and_the_engine_rejects_the_child() -> None:
    config = "partitions: [{name: default, queues: [{name: p, resources: {max: {vcore: 9}}, queues: [{name: c, resources: {max: {vcore: 10}}}]}]}]"
    events, problems = convert_with_problems(config, {"cpu": 20_000})
    assert events is not None and problems
    assert events == convert(config, {"cpu": 20_000}, strict=False)
    decisions = replay_all(events)
    rejected = [d for d in decisions if d["type"] == "Rejected"]
    assert len(rejected) == 1 and "ClusterQueue c: max 10 of cpu" in rejected[0]["message"]


def test_capacity_parsing() -> None:
    assert parse_capacity("cpu=64,memory=256Gi") == {"cpu": 64000, "memory": 256 * 2**30}
    assert parse_capacity("vcore=500m") == {"cpu": 500}
    assert parse_capacity("") == {}
    for bad in ("cpu", "cpu=", "cpu=x", "cpu=1,cpu=2", "cpu=1,vcore=2"):
        with pytest.raises(YuniKornConfigError):
            parse_capacity(bad)


# -- replaying imported trees ---------------------------------------------------------------------


def replay_all(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    engine = Engine()
    out = []
    for offset, event in enumerate(events):
        out.extend(json.loads(encode(d)) for d in engine.apply(event, offset))
    return out


def submit(queue: str, name: str, cpu: int, count: int = 1) -> dict[str, Any]:
    return {"type": "WorkloadSubmitted", "workload": {"metadata": {"namespace": queue, "name": name},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": count, "requests": {"cpu": str(cpu)}}]}}}


def test_seed_004_static_queues_admit_up_to_each_max() -> None:
    events = convert(SEED_004_STATIC)  # a cluster of 150 CPUs: the three maxes
    stream = events + [
        submit("sandbox", "fill", 10),
        submit("sandbox", "over", 1),  # sandbox's max is 10
        submit("advertisement", "big", 80),  # 50 guaranteed + 30 more, its max
        submit("advertisement", "more", 1),
        submit("search", "max", 60),  # 40 guaranteed + 20: the cluster is now full
    ]
    decisions = replay_all(stream)
    assert not any(d["type"] == "Rejected" for d in decisions), decisions
    admitted = {d["workload"] for d in decisions if d["type"] == "Admitted"}
    assert admitted == {"sandbox/fill", "advertisement/big", "search/max"}
    pending = {d["workload"]: d["message"] for d in decisions if d["type"] == "Pending"}
    assert set(pending) == {"sandbox/over", "advertisement/more"}
    for message in pending.values():
        assert message.endswith("insufficient unused quota for cpu in flavor default-flavor, 1 more needed")


@st.composite
def yunikorn_trees(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, int | None]]:
    """Valid YuniKorn configurations (maxes only: no guarantees, so every queue's max is its
    borrowing limit) and each queue's effective max (the min up the path), in CPUs."""
    limits: dict[str, int | None] = {}

    def queue(path: str, depth: int, parent_max: int | None) -> dict[str, Any]:
        name = path.rsplit(".", 1)[1]
        q: dict[str, Any] = {"name": name}
        own = draw(st.none() | st.integers(1, parent_max if parent_max is not None else 12))
        if own is not None:
            q["resources"] = {"max": {"vcore": own}}
        effective = own if parent_max is None else (parent_max if own is None else min(own, parent_max))
        limits[path] = effective
        if depth < 3 and draw(st.booleans()):
            q["queues"] = [queue(f"{path}.{name}{i}", depth + 1, effective) for i in range(draw(st.integers(1, 3)))]
        return q

    top = [queue(f"root.q{i}", 1, None) for i in range(draw(st.integers(1, 3)))]
    return {"partitions": [{"name": "default", "queues": [{"name": "root", "queues": top}]}]}, limits


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=yunikorn_trees(), sizes=st.lists(st.tuples(st.integers(0, 50), st.integers(1, 4)), min_size=1, max_size=30),
       capacity=st.integers(4, 30))
def test_imported_trees_enforce_yunikorn_recursive_max(tree: tuple[dict[str, Any], dict[str, int | None]],
                                                       sizes: list[tuple[int, int]], capacity: int) -> None:
    config, limits = tree
    events = convert(yaml.safe_dump(config), {"cpu": capacity * 1000})
    objs = objects(events)
    leaves = sorted(k.split("/", 1)[1] for k in objs if k.startswith("ClusterQueue/"))
    paths = {obj["metadata"]["name"]: obj["metadata"]["annotations"]["quotaflow.dev/yunikorn-queue"]
             for obj in objs.values() if obj["kind"] in ("ClusterQueue", "Cohort")}
    stream = events + [submit(leaves[i % len(leaves)], f"w{n}", cpu) for n, (i, cpu) in enumerate(sizes)]
    decisions = replay_all(stream)
    assert not any(d["type"] == "Rejected" for d in decisions), decisions
    used: dict[str, int] = {}
    for d in decisions:
        if d["type"] == "Admitted":
            path = paths[d["clusterQueue"]]
            cpu = amount("cpu", d["podSetAssignments"][0]["resourceUsage"]["cpu"]) // 1000
            used[path] = used.get(path, 0) + cpu
    for path, limit in limits.items():
        below = sum(v for p, v in used.items() if p == path or p.startswith(path + "."))
        assert below <= min(capacity, limit if limit is not None else capacity), (path, below, limit, used)
    assert sum(used.values()) <= capacity


# -- the command line -------------------------------------------------------------------------------


def test_cli_prints_yaml_documents_that_replay_reads(tmp_path: Path) -> None:
    src = tmp_path / "queues.yaml"
    src.write_text(SEED_004)
    result = CliRunner().invoke(app, ["import", "yunikorn", str(src)])
    assert result.exit_code == 0, result.output
    out = tmp_path / "events.yaml"
    out.write_text(result.stdout)
    assert list(read_events(out)) == convert(SEED_004)


def test_cli_writes_jsonl_by_suffix_and_takes_capacity(tmp_path: Path) -> None:
    src = tmp_path / "queues.yaml"
    src.write_text(SEED_004)
    out = tmp_path / "events.jsonl"
    result = CliRunner().invoke(app, ["import", "yunikorn", str(src), "--capacity", "cpu=500", "-o", str(out)])
    assert result.exit_code == 0, result.output
    lines = out.read_text().splitlines()
    assert [json.loads(line) for line in lines] == convert(SEED_004, {"cpu": 500_000})


def test_cli_reports_configuration_errors_and_prints_nothing(tmp_path: Path) -> None:
    src = tmp_path / "queues.yaml"
    src.write_text("partitions: [{name: default, queues: [{name: p, resources: {max: {vcore: 9}}, queues: [{name: c, resources: {max: {vcore: 10}}}]}]}]")
    result = CliRunner().invoke(app, ["import", "yunikorn", str(src)])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "root.p.c: max 10 cpu exceeds its parent's max 9" in result.stderr
    forced = CliRunner().invoke(app, ["import", "yunikorn", str(src), "--allow-errors", "--format", "jsonl"])
    assert forced.exit_code == 0 and len(forced.stdout.splitlines()) == 5


def test_cli_unreadable_file_and_bad_capacity(tmp_path: Path) -> None:
    missing = CliRunner().invoke(app, ["import", "yunikorn", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2 and "cannot read" in missing.stderr
    src = tmp_path / "queues.yaml"
    src.write_text(SEED_004)
    bad = CliRunner().invoke(app, ["import", "yunikorn", str(src), "--capacity", "cpu"])
    assert bad.exit_code == 2 and "expected resource=quantity" in bad.stderr
