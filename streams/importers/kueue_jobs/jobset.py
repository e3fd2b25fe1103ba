"""JobSet (jobset.x-k8s.io/v1alpha2, Kueue's pkg/controller/jobs/jobset/jobset_controller.go
PodSets, PodsCountPerReplica).

One pod set per replicated job, named by it (lower case), count = replicas (default 1) × the pods
of one Job (parallelism, default 1, or completions when smaller).
"""

from __future__ import annotations

from typing import Any

from streams.importers.kueue_jobs.batch import job_pods_count
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


def convert_jobset(job: Manifest, naming: Naming) -> list[dict[str, Any]]:
    check_managed(job)
    replicated = sequence(job.spec.get("replicatedJobs"), "spec.replicatedJobs", job)
    if not replicated:
        raise job.refuse("spec.replicatedJobs", "Required value")
    pod_sets = []
    for where, rj, name in named_groups(job, replicated, "spec.replicatedJobs", "name"):
        replicas = non_negative(rj.get("replicas"), f"{where}.replicas", job, 1)
        template = mapping(rj.get("template"), f"{where}.template", job)
        job_spec = mapping(template.get("spec"), f"{where}.template.spec", job)
        count = replicas * job_pods_count(job_spec, job, f"{where}.template.spec")
        pod_sets.append(
            pod_set(job, PodSetSource(name.lower(), count, job_spec.get("template"), f"{where}.template.spec.template"))
        )
    return [new_workload(job, workload_name(job.name, job.uid, job.kind, job.group), pod_sets)]
