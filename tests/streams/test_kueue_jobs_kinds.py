"""Per job kind: the Workload matches what Kueue's integration for that kind builds (pod sets and
their names, counts, minCount, per-pod requests, the workload's name and owner). The manifests
are written here in the shape of Kueue's example files (site/static/examples/)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from domain.pod_requests import pod_set_requests
from domain.workload import parse_workload
from streams.importers.kueue_jobs import Naming, convert_documents, workloads_for
from streams.importers.kueue_jobs.workload_names import role_hash, workload_name

NAMING = Naming(suffix=lambda: "x7k2p", now=lambda: 1_800_000_000.0)
QUEUE = {"kueue.x-k8s.io/queue-name": "user-queue"}


def container(name: str, cpu: str, memory: str = "100Mi", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "registry.example/busybox:1.36", "command": ["sh", "-c"], "args": ["sleep 5"],
            "resources": {"requests": {"cpu": cpu, "memory": memory}}, **extra}


def template(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": list(containers), "restartPolicy": "Never", **spec}}


def meta(name: str, uid: str = "", **labels: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "namespace": "team-a", "labels": {**QUEUE, **labels}}
    if uid:
        out["uid"] = uid
    return out


def convert(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    workloads = workloads_for(manifest, naming=NAMING)
    for wl in workloads:
        parse_workload(wl)  # what the engine reads
    return workloads


def shape(wl: dict[str, Any]) -> list[tuple[str, int, int | None]]:
    return [(ps["name"], ps["count"], ps.get("minCount")) for ps in wl["spec"]["podSets"]]


def requests(wl: dict[str, Any], i: int = 0) -> dict[str, int]:
    return pod_set_requests(wl["spec"]["podSets"][i])


# --- batch/v1 Job and CronJob -----------------------------------------------------------------
def job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"generateName": "sample-job-", "namespace": "team-a", "labels": dict(QUEUE)},
        "spec": {"parallelism": 3, "completions": 3, "suspend": True,
                 "template": template(container("dummy-job", "1", "200Mi")), **spec},
    }


def test_job_is_one_main_pod_set_of_parallelism_pods_named_for_the_job() -> None:
    [wl] = convert(job())
    name = "sample-job-x7k2p"
    assert wl["metadata"]["name"] == workload_name(name, wl["metadata"]["ownerReferences"][0]["uid"], "Job", "batch")
    assert wl["metadata"]["name"].startswith("job-sample-job-x7k2p-")
    assert wl["metadata"]["namespace"] == "team-a"
    assert wl["metadata"]["ownerReferences"] == [{
        "apiVersion": "batch/v1", "kind": "Job", "name": name,
        "uid": wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"], "controller": True, "blockOwnerDeletion": True,
    }]
    assert wl["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert wl["spec"]["queueName"] == "user-queue"
    assert shape(wl) == [("main", 3, None)]
    assert requests(wl) == {"cpu": 1000, "memory": 200 * 2**20}
    pod = wl["spec"]["podSets"][0]["template"]
    assert pod["spec"]["containers"][0]["command"] == ["sh", "-c"] and pod["spec"]["containers"][0]["args"] == ["sleep 5"]
    assert pod["metadata"]["labels"] == {"batch.kubernetes.io/job-name": name}


def test_job_count_is_completions_when_smaller_and_min_parallelism_is_min_count() -> None:
    [wl] = convert(job(parallelism=5, completions=2))
    assert shape(wl) == [("main", 2, None)]
    partial = job(parallelism=20, completions=20)
    partial["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "5"}
    [wl] = convert(partial)
    assert shape(wl) == [("main", 20, 5)]
    [wl] = convert({**job(), "spec": {"template": job()["spec"]["template"]}})  # parallelism defaults to 1
    assert shape(wl) == [("main", 1, None)]


def test_job_requests_count_init_containers_sidecars_limits_and_overhead() -> None:
    spec = template(
        container("main", "1", "1Gi"),
        initContainers=[
            container("setup", "3", "100Mi"),                              # runs alone before the others
            {**container("proxy", "500m", "64Mi"), "restartPolicy": "Always"},  # a sidecar: runs alongside
        ],
        overhead={"cpu": "250m", "memory": "10Mi"},
    )
    spec["spec"]["containers"].append({"name": "limits-only", "resources": {"limits": {"cpu": "2"}}})
    [wl] = convert(job(template=spec))
    # regular 1 + 2 (limit as request) + sidecar 0.5 = 3.5 cpu > init 3: 3.5; + overhead 0.25
    assert requests(wl) == {"cpu": 3750, "memory": (1024 + 64 + 10) * 2**20}


def test_job_with_suspend_false_is_taken_as_kueue_suspends_it() -> None:
    [wl] = convert(job(suspend=False))
    assert shape(wl) == [("main", 3, None)]


def test_job_priority_class_label_names_the_workload_priority_class() -> None:
    manifest = job()
    manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    [wl] = convert(manifest)
    assert wl["spec"]["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
    assert parse_workload(wl).priority_class == "high"


def test_job_max_exec_time_label_sets_the_workloads_maximum_execution_time() -> None:
    manifest = job()
    manifest["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "600"
    [wl] = convert(manifest)
    assert wl["spec"]["maximumExecutionTimeSeconds"] == 600
    assert parse_workload(wl).max_exec_seconds == 600


def test_job_environment_is_deduplicated_last_value_first_place() -> None:
    c = container("c", "1", env=[{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "A", "value": "3"}])
    [wl] = convert(job(template=template(c)))
    assert wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "A", "value": "3"}, {"name": "B", "value": "2"}]


def test_cron_job_starts_a_job_named_for_the_current_minute() -> None:
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "team-a"},
        "spec": {"schedule": "*/1 * * * *", "jobTemplate": {
            "metadata": {"labels": dict(QUEUE)},
            "spec": {"parallelism": 2, "template": template(container("c", "500m"))},
        }},
    }
    [wl] = convert(cron)
    job_name = f"nightly-{1_800_000_000 // 60}"
    assert wl["metadata"]["ownerReferences"][0]["name"] == job_name
    assert wl["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert wl["metadata"]["name"].startswith(f"job-{job_name}-")
    assert shape(wl) == [("main", 2, None)]


# --- JobSet -------------------------------------------------------------------------------------
def test_jobset_has_a_pod_set_per_replicated_job_of_replicas_times_job_pods() -> None:
    js = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta("sleep-job", uid="js-uid"),
        "spec": {"replicatedJobs": [
            {"name": "Workers", "replicas": 2, "template": {"spec": {"parallelism": 4, "completions": 3,
                                                                      "template": template(container("w", "250m"))}}},
            {"name": "driver", "template": {"spec": {"template": template(container("d", "1"))}}},
        ]},
    }
    [wl] = convert(js)
    assert wl["metadata"]["name"] == workload_name("sleep-job", "js-uid", "JobSet", "jobset.x-k8s.io")
    assert shape(wl) == [("workers", 6, None), ("driver", 1, None)]
    assert requests(wl, 0)["cpu"] == 250 and requests(wl, 1)["cpu"] == 1000


# --- Kubeflow -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "api_version,kind,field,replicas,expected",
    [
        ("kubeflow.org/v1", "PyTorchJob", "pytorchReplicaSpecs", {"Worker": 2, "Master": 1}, [("master", 1), ("worker", 2)]),
        ("kubeflow.org/v1", "TFJob", "tfReplicaSpecs", {"Worker": 2, "PS": 1, "Chief": 1, "Evaluator": None},
         [("chief", 1), ("ps", 1), ("worker", 2), ("evaluator", 1)]),
        ("kubeflow.org/v1", "XGBoostJob", "xgbReplicaSpecs", {"Master": 1, "Worker": 3}, [("master", 1), ("worker", 3)]),
        ("kubeflow.org/v1", "PaddleJob", "paddleReplicaSpecs", {"Worker": 2}, [("worker", 2)]),
        ("kubeflow.org/v1", "JAXJob", "jaxReplicaSpecs", {"Worker": 4}, [("worker", 4)]),
        ("kubeflow.org/v2beta1", "MPIJob", "mpiReplicaSpecs", {"Worker": 2, "Launcher": 1}, [("launcher", 1), ("worker", 2)]),
    ],
)
def test_kubeflow_jobs_have_a_pod_set_per_replica_type_in_kueues_order(
    api_version: str, kind: str, field: str, replicas: dict[str, int | None], expected: list[tuple[str, int]]
) -> None:
    specs = {}
    for replica_type, count in replicas.items():
        spec: dict[str, Any] = {"restartPolicy": "OnFailure", "template": template(container(replica_type.lower(), "1"))}
        if count is not None:
            spec["replicas"] = count
        specs[replica_type] = spec
    manifest = {"apiVersion": api_version, "kind": kind, "metadata": meta("train", uid="u-1"), "spec": {field: specs}}
    [wl] = convert(manifest)
    assert wl["metadata"]["name"] == workload_name("train", "u-1", kind, "kubeflow.org")
    assert wl["metadata"]["name"].startswith(f"{kind.lower()}-train-")
    assert [(n, c) for n, c, _ in shape(wl)] == expected
    assert wl["metadata"]["ownerReferences"][0]["apiVersion"] == api_version


# --- Ray ----------------------------------------------------------------------------------------
def ray_cluster_spec(**extra: Any) -> dict[str, Any]:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": template(container("ray-head", "1", "2Gi", image="rayproject/ray:2.9.0"))},
        "workerGroupSpecs": [
            {"groupName": "Small-Group", "replicas": 2, "minReplicas": 1, "maxReplicas": 5, "rayStartParams": {},
             "template": template(container("ray-worker", "1", "1Gi"))},
            {"groupName": "tpu", "replicas": 2, "numOfHosts": 4, "rayStartParams": {},
             "template": template(container("ray-worker", "2", "1Gi"))},
        ],
        **extra,
    }


def test_ray_cluster_has_head_and_a_pod_set_per_worker_group_times_hosts() -> None:
    rc = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta("rc", uid="rc-uid"), "spec": ray_cluster_spec()}
    [wl] = convert(rc)
    assert wl["metadata"]["name"] == workload_name("rc", "rc-uid", "RayCluster", "ray.io")
    assert shape(wl) == [("head", 1, None), ("small-group", 2, None), ("tpu", 8, None)]


def test_ray_cluster_with_gcs_fault_tolerance_counts_the_redis_cleanup_in_the_head() -> None:
    rc = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta("rc"),
          "spec": ray_cluster_spec(gcsFaultToleranceOptions={"redisAddress": "redis:6379"})}
    rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "100m", "memory": "1Gi"}
    [wl] = convert(rc)
    assert requests(wl, 0) == {"cpu": 200, "memory": 2**30}


def test_ray_job_adds_the_default_submitter_pod_set_in_k8s_job_mode() -> None:
    rj = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta("rayjob-sample", uid="rj"),
          "spec": {"entrypoint": "python /home/ray/samples/sample_code.py", "shutdownAfterJobFinishes": True,
                   "rayClusterSpec": ray_cluster_spec()}}
    [wl] = convert(rj)
    assert wl["metadata"]["name"] == workload_name("rayjob-sample", "rj", "RayJob", "ray.io")
    assert shape(wl) == [("head", 1, None), ("small-group", 2, None), ("tpu", 8, None), ("submitter", 1, None)]
    submitter = wl["spec"]["podSets"][3]["template"]["spec"]["containers"][0]
    assert submitter["name"] == "ray-job-submitter" and submitter["image"] == "rayproject/ray:2.9.0"
    assert requests(wl, 3) == {"cpu": 500, "memory": 200 * 2**20}


def test_ray_job_in_sidecar_mode_adds_the_submitter_to_the_head() -> None:
    rj = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta("rj"),
          "spec": {"submissionMode": "SidecarMode", "shutdownAfterJobFinishes": True, "rayClusterSpec": ray_cluster_spec()}}
    [wl] = convert(rj)
    assert [n for n, _, _ in shape(wl)] == ["head", "small-group", "tpu"]
    assert requests(wl, 0) == {"cpu": 1500, "memory": 2 * 2**30 + 200 * 2**20}


# --- Pods and pod groups ------------------------------------------------------------------------
def pod(name: str, cpu: str = "1", **annotations: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "labels": dict(QUEUE), "annotations": annotations},
            "spec": {"containers": [container("c", cpu)], "restartPolicy": "Never"}}


def test_plain_pod_is_a_main_pod_set_of_one_gated_by_kueue() -> None:
    [wl] = convert({**pod("kueue-sleep"), "metadata": {**pod("kueue-sleep")["metadata"], "uid": "p-uid"}})
    assert wl["metadata"]["name"] == workload_name("kueue-sleep", "p-uid", "Pod", "")
    assert wl["metadata"]["name"].startswith("pod-kueue-sleep-")
    assert shape(wl) == [("main", 1, None)]
    assert wl["spec"]["podSets"][0]["template"]["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]


def grouped(name: str, cpu: str, total: int = 3, group: str = "sample-group") -> dict[str, Any]:
    p = pod(name, cpu, **{"kueue.x-k8s.io/pod-group-total-count": str(total)})
    p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = group
    return p


def test_pod_group_is_one_workload_named_as_the_group_with_a_pod_set_per_role() -> None:
    docs = [("a#1", grouped("leader", "2")), ("a#2", grouped("w-1", "1")), ("b#1", grouped("w-2", "1"))]
    result = convert_documents(docs, naming=NAMING)
    assert not result.refused, result.refused
    [wl] = result.workloads
    assert wl["metadata"]["name"] == "sample-group"
    assert wl["metadata"]["annotations"] == {"kueue.x-k8s.io/is-group-workload": "true"}
    owners = wl["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"]) for o in owners] == [("Pod", "leader"), ("Pod", "w-1"), ("Pod", "w-2")]
    assert all("controller" not in o for o in owners)
    worker_role = role_hash(docs[1][1]["spec"] | {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]})
    leader_role = role_hash(docs[0][1]["spec"] | {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]})
    assert shape(wl) == sorted([(worker_role, 2, None), (leader_role, 1, None)])
    parse_workload(wl)


def test_pod_group_fast_admission_counts_the_total_from_one_pod() -> None:
    p = grouped("only", "1", total=4)
    p["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-fast-admission"] = "true"
    [wl] = convert_documents([("f", p)], naming=NAMING).workloads
    assert [c for _, c, _ in shape(wl)] == [4]


# --- Serving: Deployment, StatefulSet, LeaderWorkerSet -------------------------------------------
def test_deployment_pods_are_plain_pod_workloads_with_the_queue_label_propagated() -> None:
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("web"),
           "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [container("nginx", "100m")]}}}}
    suffixes = iter(["bcdfg", "hjklm", "npqrs", "tvwxz", "24567"])
    workloads = workloads_for(dep, naming=Naming(suffix=lambda: next(suffixes), now=NAMING.now))
    # One ReplicaSet hash (10 characters) for all pods, then a suffix per pod.
    assert [wl["metadata"]["ownerReferences"][0]["name"] for wl in workloads] == [
        "web-bcdfghjklm-npqrs", "web-bcdfghjklm-tvwxz", "web-bcdfghjklm-24567"]
    for wl in workloads:
        owner = wl["metadata"]["ownerReferences"][0]
        assert owner["kind"] == "Pod" and owner["controller"] is True
        assert wl["metadata"]["name"] == workload_name(owner["name"], owner["uid"], "Pod", "")
        assert shape(wl) == [("main", 1, None)]
        assert wl["spec"]["queueName"] == "user-queue"


def test_stateful_set_is_one_group_workload_of_replicas_pods() -> None:
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta("db", uid="s-uid"),
           "spec": {"replicas": 3, "serviceName": "db", "template": {"metadata": {"labels": {"app": "db"}},
                                                                       "spec": {"containers": [container("pg", "500m")]}}}}
    [wl] = convert(sts)
    assert wl["metadata"]["name"] == workload_name("db", "s-uid", "StatefulSet", "apps")
    assert shape(wl) == [("main", 3, None)]
    assert wl["metadata"]["annotations"] == {
        "kueue.x-k8s.io/is-group-workload": "true",
        "kueue.x-k8s.io/job-owner-gvk": "apps/v1, Kind=StatefulSet",
        "kueue.x-k8s.io/job-owner-name": "db",
    }
    assert wl["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "s-uid"}]
    assert "metadata" not in wl["spec"]["podSets"][0]["template"]


def test_leader_worker_set_is_a_workload_per_replica_with_leader_and_workers() -> None:
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta("nginx", uid="l-uid"),
           "spec": {"replicas": 2, "leaderWorkerTemplate": {
               "size": 3,
               "leaderTemplate": {"metadata": {"labels": {"leaderworkerset.sigs.k8s.io/name": "nginx",
                                                          "leaderworkerset.sigs.k8s.io/worker-index": "0", "app": "x"}},
                                  "spec": {"containers": [container("leader", "100m")]}},
               "workerTemplate": {"spec": {"containers": [container("worker", "200m")]}},
           }}}
    workloads = convert(lws)
    assert [wl["metadata"]["name"] for wl in workloads] == [
        workload_name("nginx-0", "l-uid", "LeaderWorkerSet", "leaderworkerset.x-k8s.io"),
        workload_name("nginx-1", "l-uid", "LeaderWorkerSet", "leaderworkerset.x-k8s.io"),
    ]
    assert all(shape(wl) == [("leader", 1, None), ("worker", 2, None)] for wl in workloads)
    assert workloads[1]["metadata"]["annotations"]["kueue.x-k8s.io/component-workload-index"] == "1"
    assert workloads[0]["spec"]["podSets"][0]["template"]["metadata"]["labels"] == {
        "leaderworkerset.sigs.k8s.io/name": "nginx", "app": "x"}
    no_leader = copy.deepcopy(lws)
    del no_leader["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    assert shape(convert(no_leader)[0]) == [("main", 3, None)]


# --- AppWrapper ---------------------------------------------------------------------------------
def test_appwrapper_infers_pod_sets_of_wrapped_kinds_and_numbers_them() -> None:
    aw = {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper", "metadata": meta("wrapped", uid="aw"),
          "spec": {"components": [
              {"template": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt"},
                            "spec": {"pytorchReplicaSpecs": {
                                "Master": {"replicas": 1, "template": template(container("m", "1"))},
                                "Worker": {"replicas": 3, "template": template(container("w", "0.0001"))}}}}},
              {"template": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                            "spec": {"replicas": 2, "template": template(container("d", "100m"))}}},
              {"podSets": [{"path": "template.spec.template", "replicas": 5}],
               "template": {"apiVersion": "example.com/v1", "kind": "Custom", "spec": {"template": template(container("x", "1"))}}},
          ]}}
    [wl] = convert(aw)
    assert wl["metadata"]["name"] == workload_name("wrapped", "aw", "AppWrapper", "workload.codeflare.dev")
    assert shape(wl) == [("wrapped-0", 1, None), ("wrapped-1", 3, None), ("wrapped-2", 2, None), ("wrapped-3", 5, None)]
    # The AppWrapper library rounds requests up to milli-units and defaults the pull policy.
    worker = wl["spec"]["podSets"][1]["template"]["spec"]["containers"][0]
    assert worker["resources"]["requests"]["cpu"] == "1m" and worker["imagePullPolicy"] == "IfNotPresent"
    assert worker["command"] == ["sh", "-c"]
