"""What Kueue (or the API server) would refuse for a job is refused with its reason; what
quotaflow cannot convert is refused naming the kind and the field. Never a silent drop."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from streams.importers.kueue_jobs import (
    JobRefused,
    Naming,
    convert_documents,
    workloads_for,
)

NAMING = Naming(suffix=lambda: "x7k2p", now=lambda: 0.0)


def job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"parallelism": 2, "template": {"spec": {"containers": [
            {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}], "restartPolicy": "Never"}}, **spec},
    }


def refused(manifest: Any) -> JobRefused:
    with pytest.raises(JobRefused) as info:
        workloads_for(manifest, naming=NAMING)
    return info.value


def test_a_job_without_a_queue_name_is_not_managed_by_kueue() -> None:
    manifest = job()
    del manifest["metadata"]["labels"]
    err = refused(manifest)
    assert err.ref == "job/ns/j"
    assert "metadata.labels[kueue.x-k8s.io/queue-name]" in str(err) and "Kueue does not manage this job" in str(err)


def test_a_cron_job_needs_the_queue_label_on_its_job_template() -> None:
    cron = {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "c", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": job()["spec"]}}}
    err = refused(cron)
    assert "spec.jobTemplate.metadata.labels[kueue.x-k8s.io/queue-name]" in str(err)
    assert "on the CronJob's own metadata" in str(err)


def test_requests_above_limits_are_refused_as_the_api_server_refuses_the_job() -> None:
    manifest = job()
    manifest["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "500m"}
    err = refused(manifest)
    assert str(err) == (
        'job/ns/j: spec.template.spec.containers[0].resources.requests[cpu]: Invalid value: "1": '
        "must be less than or equal to cpu limit of 500m"
    )


@pytest.mark.parametrize(
    "value,message",
    [
        ("2", "Invalid value: 2: should be between 0 and 1"),
        ("0", "Invalid value: 0: should be between 0 and 1"),
        ("x", 'Invalid value: "x": strconv.Atoi: parsing "x": invalid syntax'),
    ],
)
def test_min_parallelism_outside_the_job_is_refused_with_kueues_message(value: str, message: str) -> None:
    manifest = job()
    manifest["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": value}
    assert str(refused(manifest)) == f"job/ns/j: metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: {message}"


@pytest.mark.parametrize(
    "change,field,words",
    [
        (lambda m: m.update(kind="Frobnicator", apiVersion="example.com/v1"), "", 'kind "Frobnicator" (example.com/v1) is not a job kind Kueue integrates'),
        (lambda m: m.update(apiVersion="batch/v2"), "apiVersion", 'no matches for kind "Job" in version "batch/v2"'),
        (lambda m: m.update(kind="ClusterQueue", apiVersion="kueue.x-k8s.io/v1beta1"), "", "is not a Workload or a job"),
        (lambda m: m.update(kind="SparkApplication", apiVersion="sparkoperator.k8s.io/v1beta2"), "", "quotaflow does not convert it"),
        (lambda m: m.pop("metadata"), "metadata", "Required value"),
        (lambda m: m["metadata"].pop("name"), "metadata.name", "name or generateName is required"),
        (lambda m: m["spec"].update(parallelism="three"), "spec.parallelism", "must be an integer"),
        (lambda m: m["spec"]["template"]["spec"].update(containers=[]), "spec.template.spec.containers", "Required value"),
        (lambda m: m["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"].update(cpu="lots"),
         "spec.template.spec.containers[0].resources.requests.cpu", "invalid"),
        (lambda m: m["metadata"]["labels"].update({"kueue.x-k8s.io/queue-name": "Team_Q"}),
         "metadata.labels[kueue.x-k8s.io/queue-name]", 'Invalid value: "Team_Q": a lowercase RFC 1123 subdomain'),
        (lambda m: m["metadata"]["labels"].update({"kueue.x-k8s.io/max-exec-time-seconds": "0"}),
         "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]", "should be greater than 0"),
        (lambda m: m["spec"]["template"].update(metadata={"annotations": {"kueue.x-k8s.io/podset-required-topology": "rack"}}),
         "spec.template.metadata.annotations[kueue.x-k8s.io/podset-required-topology]", "topology-aware scheduling"),
        (lambda m: m["spec"]["template"]["spec"].update(resourceClaims=[{"name": "gpu"}]),
         "spec.template.spec.resourceClaims", "dynamic resource allocation"),
        (lambda m: m["metadata"].update(annotations={"kueue.x-k8s.io/admission-gated-by": "my-controller"}),
         "metadata.annotations[kueue.x-k8s.io/admission-gated-by]", "admission gates are not supported"),
        (lambda m: m["metadata"].update(annotations={"kueue.x-k8s.io/elastic-job": "true"}),
         "metadata.annotations[kueue.x-k8s.io/elastic-job]", "elastic jobs"),
    ],
)
def test_what_cannot_be_converted_is_refused_naming_the_field(change: Any, field: str, words: str) -> None:
    manifest = job()
    change(manifest)
    err = refused(manifest)
    assert err.field == field or (not err.field and field == ""), str(err)
    assert words in str(err)


def test_a_pod_set_name_the_engine_would_reject_is_refused_before_publishing() -> None:
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
          "metadata": {"name": "js", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
          "spec": {"replicatedJobs": [{"name": "under_score", "template": {"spec": job()["spec"]}}]}}
    err = refused(js)
    assert "its Workload would be rejected" in str(err) and "must be a DNS label" in str(err)


def test_kubeflow_replica_types_the_kind_does_not_have_are_refused() -> None:
    pt = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
          "metadata": {"name": "p", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
          "spec": {"pytorchReplicaSpecs": {"worker": {"replicas": 1, "template": job()["spec"]["template"]}}}}
    err = refused(pt)
    assert err.field == "spec.pytorchReplicaSpecs.worker" and "supported values: 'Master', 'Worker'" in str(err)


def test_ray_jobs_kueue_refuses() -> None:
    cluster = {"headGroupSpec": {"template": job()["spec"]["template"]}, "workerGroupSpecs": []}
    base = {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "r", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"shutdownAfterJobFinishes": True, "rayClusterSpec": cluster}}
    selector = copy.deepcopy(base)
    selector["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    assert "should not use an existing cluster" in str(refused(selector))
    keep = copy.deepcopy(base)
    keep["spec"]["shutdownAfterJobFinishes"] = False
    assert "should delete the cluster after finishing" in str(refused(keep))
    autoscale = copy.deepcopy(base)
    autoscale["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    assert "autoscaling when workload slicing is enabled" in str(refused(autoscale))
    head = copy.deepcopy(base)
    head["spec"]["rayClusterSpec"]["workerGroupSpecs"] = [{"groupName": "head", "template": job()["spec"]["template"]}]
    assert '"head" is reserved for the head group' in str(refused(head))


def grouped(name: str, total: str, queue: str = "q") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue, "kueue.x-k8s.io/pod-group-name": "g"},
                         "annotations": {"kueue.x-k8s.io/pod-group-total-count": total}},
            "spec": job()["spec"]["template"]["spec"]}


def test_pod_groups_kueue_would_not_build_a_workload_for() -> None:
    short = convert_documents([("f#1", grouped("a", "2"))], naming=NAMING)
    assert not short.workloads
    assert "'g' group has fewer runnable pods than expected (1 of 2)" in str(short.refused[0])
    mixed = convert_documents([("f#1", grouped("a", "2")), ("f#2", grouped("b", "2", queue="other"))], naming=NAMING)
    assert "pods 'a' and 'b' has different queue names: q!=other" in str(mixed.refused[0])
    count = convert_documents([("f#1", grouped("a", "2")), ("f#2", grouped("b", "3"))], naming=NAMING)
    assert "has different 'kueue.x-k8s.io/pod-group-total-count' values: 2!=3" in str(count.refused[0])
    too_many = convert_documents([("f#1", grouped("a", "1")), ("f#2", grouped("b", "1"))], naming=NAMING)
    assert "Kueue would delete the extra pods" in str(too_many.refused[0])
    no_total = grouped("a", "1")
    del no_total["metadata"]["annotations"]
    assert "both the 'kueue.x-k8s.io/pod-group-total-count' annotation and the 'kueue.x-k8s.io/pod-group-name' label should be set" in str(refused(no_total))


def test_every_document_gets_an_outcome() -> None:
    docs = [("f#1", job()), ("f#2", {"kind": "Nope"}), ("f#3", "not an object"), ("f#4", job(parallelism=1))]
    result = convert_documents(docs, naming=NAMING)
    assert [c.source for c in result.converted] == ["f#1", "f#4"]
    assert [r.source for r in result.refused] == ["f#2", "f#3"]


def test_shapes_no_check_foresaw_are_refused_not_crashed_on() -> None:
    aw = {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
          "metadata": {"name": "aw", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
          "spec": {"components": [{"template": {"apiVersion": "v1", "kind": "Pod",
                                                "spec": {"containers": [{"name": "c"}], "overhead": ["not", "a", "map"]}}}]}}
    result = convert_documents([("f#1", aw), ("f#2", job())], naming=NAMING)
    assert [r.source for r in result.refused] == ["f#1"] and len(result.workloads) == 1
    assert "quotaflow cannot convert this object" in str(result.refused[0])
