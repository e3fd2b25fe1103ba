"""batch/v1 Job, and the Job a CronJob starts (Kueue's pkg/controller/jobs/job/job_controller.go
PodSets, podsCount, minPodsCount; job_webhook.go validatePartialAdmissionCreate).

One pod set `main`: count = parallelism (default 1), or completions when smaller; minCount from
the `kueue.x-k8s.io/job-min-parallelism` annotation (partial admission, on by default), which
must be between 1 and count - 1. The template keeps the `batch.kubernetes.io/job-name` label the
Job controller adds (Kueue's cleanLabels drops the other managed labels). A Job written with
`suspend: false` is accepted: Kueue's defaulting webhook suspends every Job it manages until the
Workload is admitted (jobframework ApplyDefaultForSuspend), so the field changes nothing here.

A CronJob is not an integration of its own in Kueue: each Job it starts from `spec.jobTemplate`
is, so the queue label belongs on `spec.jobTemplate.metadata.labels`. quotaflow converts the Job
the CronJob would start now, named `<cronjob>-<minutes since the epoch>` as Kubernetes' CronJob
controller names it (getJobName, from the scheduled time; here the current minute).
"""

from __future__ import annotations

from typing import Any, Final

from streams.importers.kueue_jobs.manifest import (
    JOB_MIN_PARALLELISM_ANNOTATION,
    QUEUE_LABEL,
    JobRefused,
    Manifest,
    Naming,
    integer,
    mapping,
    non_negative,
    read_manifest,
)
from streams.importers.kueue_jobs.pod_sets import DEFAULT_POD_SET, PodSetSource, pod_set
from streams.importers.kueue_jobs.workload_names import workload_name
from streams.importers.kueue_jobs.workload_object import check_managed, new_workload

JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"


def job_pods_count(spec: Any, job: Manifest, where: str) -> int:
    parallelism = non_negative(spec.get("parallelism"), f"{where}.parallelism", job, 1)
    completions = spec.get("completions")
    if completions is not None:
        completions = non_negative(completions, f"{where}.completions", job, 1)
        return min(parallelism, completions)
    return parallelism


def convert_job(job: Manifest, naming: Naming) -> list[dict[str, Any]]:
    check_managed(job)
    spec = job.spec
    count = job_pods_count(spec, job, "spec")
    min_count = _min_count(job, count)
    template = dict(mapping(spec.get("template"), "spec.template", job))
    if not spec.get("manualSelector"):
        meta = dict(mapping(template.get("metadata"), "spec.template.metadata", job))
        meta["labels"] = {**mapping(meta.get("labels"), "spec.template.metadata.labels", job), JOB_NAME_LABEL: job.name}
        template["metadata"] = meta
    ps = pod_set(job, PodSetSource(DEFAULT_POD_SET, count, template, "spec.template", min_count))
    return [new_workload(job, workload_name(job.name, job.uid, job.kind, job.group), [ps])]


def _min_count(job: Manifest, count: int) -> int | None:
    raw = job.annotations.get(JOB_MIN_PARALLELISM_ANNOTATION)
    if raw is None:
        return None
    where = f"metadata.annotations[{JOB_MIN_PARALLELISM_ANNOTATION}]"
    try:
        value = int(raw.strip()) if raw.strip() == raw else int("x")
    except ValueError:
        raise job.refuse(where, f'Invalid value: "{raw}": strconv.Atoi: parsing "{raw}": invalid syntax') from None
    if value >= count or value <= 0:
        raise job.refuse(where, f"Invalid value: {value}: should be between 0 and {count - 1}")
    return value


def convert_cron_job(cron: Manifest, naming: Naming) -> list[dict[str, Any]]:
    spec = cron.spec
    template = mapping(spec.get("jobTemplate"), "spec.jobTemplate", cron)
    if not template:
        raise cron.refuse("spec.jobTemplate", "Required value")
    meta = mapping(template.get("metadata"), "spec.jobTemplate.metadata", cron)
    labels = mapping(meta.get("labels"), "spec.jobTemplate.metadata.labels", cron)
    if QUEUE_LABEL not in labels:
        where = "on the CronJob's own metadata" if QUEUE_LABEL in cron.labels else "missing"
        raise cron.refuse(
            f"spec.jobTemplate.metadata.labels[{QUEUE_LABEL}]",
            f"Required value: the label is {where}; Kueue manages the Jobs a CronJob starts, and they "
            "carry only the job template's labels, so without it Kueue does not manage them",
        )
    minute = int(naming.now() // 60)
    job_raw: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{cron.name}-{minute}",
            "namespace": cron.namespace,
            "labels": dict(labels),
            "annotations": dict(mapping(meta.get("annotations"), "spec.jobTemplate.metadata.annotations", cron)),
        },
        "spec": dict(mapping(template.get("spec"), "spec.jobTemplate.spec", cron)),
    }
    integer(spec.get("startingDeadlineSeconds"), "spec.startingDeadlineSeconds", cron, 0)
    try:
        return convert_job(read_manifest(job_raw, naming), naming)
    except JobRefused as exc:
        # The Job's fields are the CronJob's job template's.
        field = f"spec.jobTemplate.{exc.field}" if exc.field.startswith(("spec", "metadata")) else exc.field
        raise cron.refuse(field, exc.reason) from None
