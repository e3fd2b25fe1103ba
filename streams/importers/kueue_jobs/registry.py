"""Which job kinds convert, by API group and kind, with the versions each integration serves; the
kinds Kueue integrates that quotaflow does not convert; and the kubectl-style names a user may give
a kind on the command line (`job/NAME`, `pytorchjob/NAME`, `deploy/NAME`, ...)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from streams.importers.kueue_jobs.appwrapper import convert_appwrapper
from streams.importers.kueue_jobs.batch import convert_cron_job, convert_job
from streams.importers.kueue_jobs.jobset import convert_jobset
from streams.importers.kueue_jobs.kubeflow import convert_kubeflow_job
from streams.importers.kueue_jobs.manifest import Manifest, Naming
from streams.importers.kueue_jobs.pods import convert_pod
from streams.importers.kueue_jobs.ray import convert_ray_cluster, convert_ray_job
from streams.importers.kueue_jobs.serving import (
    convert_deployment,
    convert_leader_worker_set,
    convert_stateful_set,
)

Converter = Callable[[Manifest, Naming], list[dict[str, Any]]]


@dataclass(frozen=True)
class JobKind:
    group: str
    versions: tuple[str, ...]
    kind: str
    convert: Converter
    aliases: tuple[str, ...] = ()


KINDS: Final[tuple[JobKind, ...]] = (
    JobKind("batch", ("v1",), "Job", convert_job, ("job", "jobs", "job.batch")),
    JobKind("batch", ("v1",), "CronJob", convert_cron_job, ("cronjob", "cronjobs", "cj")),
    JobKind("", ("v1",), "Pod", convert_pod, ("pod", "pods", "po")),
    JobKind("jobset.x-k8s.io", ("v1alpha2",), "JobSet", convert_jobset, ("jobset", "jobsets", "js")),
    JobKind("kubeflow.org", ("v1",), "PyTorchJob", convert_kubeflow_job, ("pytorchjob", "pytorchjobs")),
    JobKind("kubeflow.org", ("v1",), "TFJob", convert_kubeflow_job, ("tfjob", "tfjobs")),
    JobKind("kubeflow.org", ("v1",), "XGBoostJob", convert_kubeflow_job, ("xgboostjob", "xgboostjobs")),
    JobKind("kubeflow.org", ("v1",), "PaddleJob", convert_kubeflow_job, ("paddlejob", "paddlejobs")),
    JobKind("kubeflow.org", ("v1",), "JAXJob", convert_kubeflow_job, ("jaxjob", "jaxjobs")),
    JobKind("kubeflow.org", ("v2beta1",), "MPIJob", convert_kubeflow_job, ("mpijob", "mpijobs")),
    JobKind("ray.io", ("v1",), "RayJob", convert_ray_job, ("rayjob", "rayjobs")),
    JobKind("ray.io", ("v1",), "RayCluster", convert_ray_cluster, ("raycluster", "rayclusters")),
    JobKind("apps", ("v1",), "Deployment", convert_deployment, ("deployment", "deployments", "deploy")),
    JobKind("apps", ("v1",), "StatefulSet", convert_stateful_set, ("statefulset", "statefulsets", "sts")),
    JobKind("leaderworkerset.x-k8s.io", ("v1",), "LeaderWorkerSet", convert_leader_worker_set,
            ("leaderworkerset", "leaderworkersets", "lws")),
    JobKind("workload.codeflare.dev", ("v1beta2",), "AppWrapper", convert_appwrapper,
            ("appwrapper", "appwrappers", "aw")),
)
_BY_GROUP_KIND: Final = {(k.group, k.kind): k for k in KINDS}

# Integrations Kueue has (pkg/controller/jobs/) that quotaflow does not convert, by kind.
NOT_CONVERTED: Final[dict[str, str]] = {
    "RayService": "ray.io",
    "SparkApplication": "sparkoperator.k8s.io",
    "TrainJob": "trainer.kubeflow.org",
}
# Frameworks Kueue admits pod by pod (site/.../tasks/run/plain_pods: Tekton, Argo Workflows,
# agent sandboxes): their own objects are not jobs to Kueue.
POD_BASED: Final = frozenset({"PipelineRun", "TaskRun", "Pipeline", "Task", "Workflow", "Sandbox"})
# Kueue's own objects: configuration, applied rather than submitted.
CONFIGURATION_KINDS: Final = frozenset({
    "ClusterQueue", "LocalQueue", "ResourceFlavor", "Cohort", "WorkloadPriorityClass", "AdmissionCheck",
    "Namespace", "Configuration", "PriorityClass", "Topology", "ProvisioningRequestConfig",
    "MultiKueueConfig", "MultiKueueCluster",
})

ALIASES: Final[dict[str, str]] = {alias: k.kind for k in KINDS for alias in (k.kind.lower(), *k.aliases)}


def job_kind(api_version: str, kind: str) -> JobKind | None:
    group, slash, _ = api_version.rpartition("/")
    return _BY_GROUP_KIND.get((group if slash else "", kind))


def canonical_job_kind(name: str) -> str | None:
    """The Kind a command-line name means (`job`, `jobs`, `Job`, `deploy`, ...), or None."""
    return ALIASES.get(name.lower())
