"""RayCluster and RayJob (ray.io/v1; Kueue's pkg/controller/jobs/raycluster/common.go BuildPodSets,
ValidateCreate; raycluster_webhook.go; pkg/controller/jobs/rayjob/rayjob_controller.go PodSets,
rayjob_webhook.go validateCreate).

Pod sets: `head` (count 1) from `headGroupSpec.template`, then one per worker group named by its
`groupName` in lower case, count = replicas (default 1) × numOfHosts when above 1. With GCS fault
tolerance (`ray.io/ft-enabled: "true"` or `gcsFaultToleranceOptions`) the head's Ray container
requests at least the Redis cleanup Job's 200m CPU and 256Mi memory (Kueue's
accountForRedisCleanupInHeadPodSet). A RayJob adds, in `K8sJobMode` (the default), a `submitter`
pod set (count 1) from `submitterPodTemplate` or Kueue's default (one `ray-job-submitter`
container with the head's image, requests 500m/200Mi, limits 1/1Gi); in `SidecarMode` that
container joins the head pod set instead.

Refused as Kueue's webhooks refuse: in-tree autoscaling (Kueue allows it only for elastic jobs,
which quotaflow does not model), a worker group named `head`, more than 8 pod sets worth of worker
groups (18 pod sets in all), a RayJob with both `clusterSelector` and `rayClusterSpec`, without
`rayClusterSpec`, or with `shutdownAfterJobFinishes` false.
"""

from __future__ import annotations

from typing import Any, Final

from domain.quantity import QuantityError, parse_quantity
from streams.importers.kueue_jobs.manifest import (
    Manifest,
    Naming,
    mapping,
    non_negative,
    sequence,
)
from streams.importers.kueue_jobs.pod_sets import PodSetSource, named_groups, pod_set
from streams.importers.kueue_jobs.workload_names import workload_name
from streams.importers.kueue_jobs.workload_object import check_managed, new_workload

HEAD: Final = "head"
SUBMITTER: Final = "submitter"
SUBMITTER_CONTAINER: Final = "ray-job-submitter"
MAX_POD_SETS: Final = 18
_FT_ANNOTATION: Final = "ray.io/ft-enabled"
_REDIS_CLEANUP: Final = {"cpu": "200m", "memory": "256Mi"}
_AUTOSCALING_CLUSTER: Final = (
    'a kueue-managed RayCluster can use autoscaling only as an elastic job: enable the '
    'ElasticJobsViaWorkloadSlices feature gate and set the "kueue.x-k8s.io/elastic-job": "true" annotation'
)
_AUTOSCALING_JOB: Final = "a kueue managed job should only use autoscaling when workload slicing is enabled"


def convert_ray_cluster(job: Manifest, naming: Naming) -> list[dict[str, Any]]:
    check_managed(job)
    pod_sets = cluster_pod_sets(job, job.spec, "spec", _AUTOSCALING_CLUSTER)
    return [new_workload(job, workload_name(job.name, job.uid, job.kind, job.group), pod_sets)]


def convert_ray_job(job: Manifest, naming: Naming) -> list[dict[str, Any]]:
    check_managed(job)
    spec = job.spec
    has_selector = bool(spec.get("clusterSelector"))
    cluster = spec.get("rayClusterSpec")
    if has_selector and cluster is not None:
        raise job.refuse("spec.clusterSelector", "Invalid value: a kueue managed job should not use an existing cluster")
    if has_selector:
        raise job.refuse(
            "spec.clusterSelector",
            "Unsupported: a RayJob on an existing RayCluster has no pods of its own to admit; "
            "quotaflow converts only RayJobs that bring their rayClusterSpec",
        )
    if cluster is None:
        raise job.refuse("spec.rayClusterSpec", "Required value: rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector")
    if not spec.get("shutdownAfterJobFinishes"):
        raise job.refuse("spec.shutdownAfterJobFinishes", "Invalid value: false: a kueue managed job should delete the cluster after finishing")
    cluster = mapping(cluster, "spec.rayClusterSpec", job)
    pod_sets = cluster_pod_sets(job, cluster, "spec.rayClusterSpec", _AUTOSCALING_JOB)
    mode = spec.get("submissionMode") or "K8sJobMode"
    head_image = _head_image(cluster)
    if mode == "K8sJobMode":
        template = spec.get("submitterPodTemplate")
        path = "spec.submitterPodTemplate"
        if template is None:
            template = {"spec": {"containers": [_submitter_container(head_image)], "restartPolicy": "Never"}}
            path = "spec.rayClusterSpec.headGroupSpec.template"
        pod_sets.append(pod_set(job, PodSetSource(SUBMITTER, 1, template, path)))
    elif mode == "SidecarMode":
        containers = pod_sets[0]["template"]["spec"]["containers"]
        containers.append({"name": SUBMITTER_CONTAINER, "resources": _submitter_resources()})
    return [new_workload(job, workload_name(job.name, job.uid, job.kind, job.group), pod_sets)]


def cluster_pod_sets(job: Manifest, cluster: Any, where: str, autoscaling: str) -> list[dict[str, Any]]:
    if cluster.get("enableInTreeAutoscaling"):
        raise job.refuse(f"{where}.enableInTreeAutoscaling", f"Invalid value: true: {autoscaling}")
    groups = sequence(cluster.get("workerGroupSpecs"), f"{where}.workerGroupSpecs", job)
    if len(groups) + 1 > MAX_POD_SETS:
        raise job.refuse(f"{where}.workerGroupSpecs", f"Too many: {len(groups) + 1}: must have at most {MAX_POD_SETS} items")
    head = mapping(cluster.get("headGroupSpec"), f"{where}.headGroupSpec", job)
    head_set = pod_set(job, PodSetSource(HEAD, 1, head.get("template"), f"{where}.headGroupSpec.template"))
    if job.annotations.get(_FT_ANNOTATION, "").lower() == "true" or cluster.get("gcsFaultToleranceOptions") is not None:
        _add_redis_cleanup(job, head_set, where)
    pod_sets = [head_set]
    for here, group, name in named_groups(job, groups, f"{where}.workerGroupSpecs", "groupName"):
        if name == HEAD:
            raise job.refuse(f"{here}.groupName", f'Forbidden: "{HEAD}" is reserved for the head group')
        count = non_negative(group.get("replicas"), f"{here}.replicas", job, 1)
        hosts = non_negative(group.get("numOfHosts"), f"{here}.numOfHosts", job, 1)
        if hosts > 1:
            count *= hosts
        pod_sets.append(pod_set(job, PodSetSource(name.lower(), count, group.get("template"), f"{here}.template")))
    return pod_sets


def _add_redis_cleanup(job: Manifest, head: dict[str, Any], where: str) -> None:
    """MergeResourceListKeepMax of the Ray container's (the first) requests with the cleanup Job's."""
    container = head["template"]["spec"]["containers"][0]
    resources = container.setdefault("resources", {})
    requests = dict(resources.get("requests") or {})
    for name, value in _REDIS_CLEANUP.items():
        try:
            mine = parse_quantity(requests[name]) if name in requests else None
        except QuantityError:
            raise job.refuse(f"{where}.headGroupSpec.template.spec.containers[0].resources.requests.{name}", "invalid quantity") from None
        if mine is None or mine < parse_quantity(value):
            requests[name] = value
    resources["requests"] = requests


def _head_image(cluster: Any) -> Any:
    try:
        return cluster["headGroupSpec"]["template"]["spec"]["containers"][0].get("image")
    except (KeyError, IndexError, TypeError, AttributeError):
        return None


def _submitter_resources() -> dict[str, Any]:
    return {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}


def _submitter_container(image: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": SUBMITTER_CONTAINER}
    if image is not None:
        container["image"] = image
    container["resources"] = _submitter_resources()
    return container
