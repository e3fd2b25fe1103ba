"""The Workload object Kueue creates for a job, around its pod sets (Kueue's
pkg/controller/jobframework/utils.go NewWorkload, reconciler.go ConstructWorkload and
ExtractPriority):

- `metadata`: the derived name, the job's namespace, the label `kueue.x-k8s.io/job-uid`, the
  job's `provreq.kueue.x-k8s.io/` annotations, the `kueue.x-k8s.io/resource-in-use` finalizer, and
  `ownerReferences` naming the job (apiVersion, kind, name, uid; `controller: true` and
  `blockOwnerDeletion: true` as controller-runtime's SetControllerReference writes them). Kueue
  copies no other job label by default (its `labelKeysToCopy` configuration is empty).
- `spec.queueName` from the `kueue.x-k8s.io/queue-name` label; `spec.priorityClassRef` naming the
  WorkloadPriorityClass of the `kueue.x-k8s.io/priority-class` label. Kueue also writes the
  class's value into `spec.priority` at creation; the shell does not know it, so the engine
  resolves it from the class, as it does for any Workload that names one. Without the label the
  pod templates' `priorityClassName` stays in the templates, where the engine reads it.

Kueue's Workload API is v1beta2 (the version its controllers write).
"""

from __future__ import annotations

from typing import Any, Final

from domain.names import invalid, label_value_problem, subdomain_problem
from streams.importers.kueue_jobs.manifest import (
    ELASTIC_JOB_ANNOTATION,
    JOB_UID_LABEL,
    MAX_EXEC_TIME_LABEL,
    PREBUILT_WORKLOAD_ANNOTATION,
    PREBUILT_WORKLOAD_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_LABEL,
    RESOURCE_IN_USE_FINALIZER,
    Manifest,
)

WORKLOAD_API_VERSION: Final = "kueue.x-k8s.io/v1beta2"
_PROVREQ_PREFIX: Final = "provreq.kueue.x-k8s.io/"
# Kueue's pkg/constants AdmissionGatedByAnnotation (AdmissionGatedBy gate, beta, on): copied to
# the Workload, which is not admitted while it is set.
ADMISSION_GATED_BY_ANNOTATION: Final = "kueue.x-k8s.io/admission-gated-by"


def check_managed(job: Manifest) -> None:
    """What Kueue's webhooks check on every job (jobframework ValidateJobOnCreate), and the
    features of a job quotaflow cannot convert."""
    if not job.queue_name:
        raise job.refuse(
            f"metadata.labels[{QUEUE_LABEL}]",
            "Required value: without a queue name Kueue does not manage this job (it would run at once, "
            "outside any quota; Kueue's manageJobsWithoutQueueName is off by default and defaulting to a "
            "LocalQueue named \"default\" is not modelled)",
        )
    # jobframework ValidateLabelAsCRDName: the names of Kueue objects the labels point to.
    for label in (QUEUE_LABEL, PRIORITY_CLASS_LABEL):
        value = job.labels.get(label)
        problem = subdomain_problem(value) if value else None
        if value and problem is not None:
            raise job.refuse(f"metadata.labels[{label}]", invalid(value, problem))
    max_exec = job.labels.get(MAX_EXEC_TIME_LABEL)
    if max_exec is not None:
        try:
            seconds = int(max_exec)
        except ValueError:
            raise job.refuse(f"metadata.labels[{MAX_EXEC_TIME_LABEL}]", f'Invalid value: "{max_exec}": not an integer') from None
        if seconds <= 0:
            raise job.refuse(f"metadata.labels[{MAX_EXEC_TIME_LABEL}]", f"Invalid value: {seconds}: should be greater than 0")
    if job.labels.get(PREBUILT_WORKLOAD_LABEL) or job.annotations.get(PREBUILT_WORKLOAD_ANNOTATION):
        raise job.refuse(
            f"metadata.labels[{PREBUILT_WORKLOAD_LABEL}]",
            "Unsupported: a prebuilt workload is not converted; submit the Workload itself",
        )
    if ADMISSION_GATED_BY_ANNOTATION in job.annotations:
        raise job.refuse(
            f"metadata.annotations[{ADMISSION_GATED_BY_ANNOTATION}]",
            "Unsupported: admission gates are not supported (the Workload would wait for a controller to lift them)",
        )
    if job.annotations.get(ELASTIC_JOB_ANNOTATION) == "true":
        raise job.refuse(
            f"metadata.annotations[{ELASTIC_JOB_ANNOTATION}]",
            "Unsupported: elastic jobs (workload slices) are not supported",
        )


def owner_reference(job: Manifest, *, controller: bool = True) -> dict[str, Any]:
    ref: dict[str, Any] = {"apiVersion": job.api_version, "kind": job.kind, "name": job.name, "uid": job.uid}
    if controller:
        ref["controller"] = True
        ref["blockOwnerDeletion"] = True
    return ref


def new_workload(
    job: Manifest,
    name: str,
    pod_sets: list[dict[str, Any]],
    *,
    owners: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    job_uid_label: bool = True,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": job.namespace}
    labels: dict[str, str] = {}
    if job_uid_label and label_value_problem(job.uid) is None:
        labels[JOB_UID_LABEL] = job.uid
    if labels:
        meta["labels"] = labels
    kept = {k: v for k, v in sorted(job.annotations.items()) if k.startswith(_PROVREQ_PREFIX)}
    kept.update(annotations or {})
    if kept:
        meta["annotations"] = kept
    meta["finalizers"] = [RESOURCE_IN_USE_FINALIZER]
    meta["ownerReferences"] = owners if owners is not None else [owner_reference(job)]
    spec: dict[str, Any] = {"queueName": job.queue_name, "podSets": pod_sets}
    max_exec = job.labels.get(MAX_EXEC_TIME_LABEL)
    if max_exec:  # checked by check_managed; Kueue's jobframework copies it to the Workload
        spec["maximumExecutionTimeSeconds"] = int(max_exec)
    priority_class = job.labels.get(PRIORITY_CLASS_LABEL)
    if priority_class:
        spec["priorityClassRef"] = {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": priority_class,
        }
    return {"apiVersion": WORKLOAD_API_VERSION, "kind": "Workload", "metadata": meta, "spec": spec}
