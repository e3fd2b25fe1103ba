"""The Kubeflow family: PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob (kubeflow.org/v1, Kueue's
pkg/controller/jobs/kubeflow/kubeflowjob/kubeflowjob_controller.go PodSets and each kind's
OrderedReplicaTypes under pkg/controller/jobs/kubeflow/jobs/), and MPIJob (kubeflow.org/v2beta1,
pkg/controller/jobs/mpijob/mpijob_controller.go).

One pod set per replica type present, in the kind's fixed order, named by the replica type in
lower case (Kueue's NewPodSetReference); count = `replicas` (default 1). A replica type the kind
does not have is refused, as the training operator's validation refuses it (Kueue would not count
it). The workload is named for the job as for any job (GetWorkloadNameForOwnerWithGVK).
"""

from __future__ import annotations

from typing import Any, Final

from streams.importers.kueue_jobs.manifest import (
    Manifest,
    Naming,
    mapping,
    non_negative,
)
from streams.importers.kueue_jobs.pod_sets import PodSetSource, pod_set
from streams.importers.kueue_jobs.workload_names import workload_name
from streams.importers.kueue_jobs.workload_object import check_managed, new_workload

# kind -> (the field holding the replica specs, replica types in Kueue's order)
REPLICA_TYPES: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "PyTorchJob": ("pytorchReplicaSpecs", ("Master", "Worker")),
    "TFJob": ("tfReplicaSpecs", ("Chief", "Master", "PS", "Worker", "Evaluator")),
    "XGBoostJob": ("xgbReplicaSpecs", ("Master", "Worker")),
    "PaddleJob": ("paddleReplicaSpecs", ("Master", "Worker")),
    "JAXJob": ("jaxReplicaSpecs", ("Worker",)),
    "MPIJob": ("mpiReplicaSpecs", ("Launcher", "Worker")),
}


def convert_kubeflow_job(job: Manifest, naming: Naming) -> list[dict[str, Any]]:
    check_managed(job)
    field, order = REPLICA_TYPES[job.kind]
    specs = mapping(job.spec.get(field), f"spec.{field}", job)
    for replica_type in specs:
        if replica_type not in order:
            raise job.refuse(
                f"spec.{field}.{replica_type}",
                f'Unsupported value: "{replica_type}": supported values: {", ".join(repr(t) for t in order)}',
            )
    pod_sets = []
    for replica_type in order:
        if specs.get(replica_type) is None:
            continue
        where = f"spec.{field}.{replica_type}"
        spec = mapping(specs[replica_type], where, job)
        count = non_negative(spec.get("replicas"), f"{where}.replicas", job, 1)
        pod_sets.append(pod_set(job, PodSetSource(replica_type.lower(), count, spec.get("template"), f"{where}.template")))
    if not pod_sets:
        raise job.refuse(f"spec.{field}", "Required value: at least one replica spec")
    return [new_workload(job, workload_name(job.name, job.uid, job.kind, job.group), pod_sets)]
