"""Serving workloads: Deployment, StatefulSet (apps/v1) and LeaderWorkerSet
(leaderworkerset.x-k8s.io/v1).

- Deployment (Kueue's pkg/controller/jobs/deployment/deployment_webhook.go): Kueue does not build
  a workload for the Deployment; its webhook copies the queue and priority-class labels into the
  pod template, and each pod is then a plain Pod of its own (see pods.py). quotaflow converts the
  `replicas` pods (default 1) the Deployment would create, named
  `<deployment>-<10 characters>-<5 characters>` as a ReplicaSet names them; the middle part is
  the pod-template hash, opaque from outside, so both parts are generated like a generateName.
- StatefulSet (pkg/controller/jobs/statefulset/statefulset_reconciler.go constructWorkload): one
  group workload named for the StatefulSet (GetWorkloadNameForOwnerWithGVK), one pod set `main`,
  count = replicas (default 1), template = the pod template's spec; labelled with the job UID,
  annotated as a group workload with the owner's GVK and name, owned (not controlled) by the
  StatefulSet.
- LeaderWorkerSet (pkg/controller/jobs/leaderworkerset/leaderworkerset_reconciler.go
  constructWorkload, podSets; leaderworkerset_webhook.go GetWorkloadName): one workload per
  replica i (default 1 replica), named for `<name>-<i>`; pod sets `leader` (1) and `worker`
  (size - 1) with a leader template, else `main` (size, default 1); the templates lose their
  `leaderworkerset.sigs.k8s.io/` labels and annotations except the name label.

A Deployment or StatefulSet with 0 replicas has no pods, so no workload: the conversion says so.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from streams.importers.kueue_jobs.manifest import (
    COMPONENT_WORKLOAD_INDEX_ANNOTATION,
    IS_GROUP_WORKLOAD_ANNOTATION,
    JOB_OWNER_GVK_ANNOTATION,
    JOB_OWNER_NAME_ANNOTATION,
    PRIORITY_CLASS_LABEL,
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
from streams.importers.kueue_jobs.pods import convert_pod
from streams.importers.kueue_jobs.workload_names import workload_name
from streams.importers.kueue_jobs.workload_object import (
    check_managed,
    new_workload,
    owner_reference,
)

MANAGED_LABEL: Final = "kueue.x-k8s.io/managed"
MAX_LWS_REPLICAS: Final = 1_000_000
SUSPENDED_BY_PARENT: Final = "kueue.x-k8s.io/pod-suspending-parent"
_LWS_PREFIX: Final = "leaderworkerset.sigs.k8s.io"
_LWS_NAME_LABEL: Final = "leaderworkerset.sigs.k8s.io/name"


def _gvk(job: Manifest) -> str:
    """schema.GroupVersionKind.String(): "apps/v1, Kind=StatefulSet"."""
    return f"{job.api_version}, Kind={job.kind}"


def convert_deployment(dep: Manifest, naming: Naming) -> list[dict[str, Any]]:
    check_managed(dep)
    spec = dep.spec
    replicas = non_negative(spec.get("replicas"), "spec.replicas", dep, 1)
    template = mapping(spec.get("template"), "spec.template", dep)
    meta = mapping(template.get("metadata"), "spec.template.metadata", dep)
    labels = {**mapping(meta.get("labels"), "spec.template.metadata.labels", dep), MANAGED_LABEL: "true",
              QUEUE_LABEL: dep.queue_name}
    if dep.labels.get(PRIORITY_CLASS_LABEL):
        labels[PRIORITY_CLASS_LABEL] = dep.labels[PRIORITY_CLASS_LABEL]
    annotations = {**mapping(meta.get("annotations"), "spec.template.metadata.annotations", dep),
                   SUSPENDED_BY_PARENT: "deployment"}  # Kueue: deployment.FrameworkName
    template_hash = naming.suffix() + naming.suffix()
    workloads = []
    for _ in range(replicas):
        pod_raw = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{dep.name}-{template_hash}-{naming.suffix()}",
                "namespace": dep.namespace,
                "labels": dict(labels),
                "annotations": dict(annotations),
            },
            "spec": copy.deepcopy(mapping(template.get("spec"), "spec.template.spec", dep)),
        }
        try:
            workloads.extend(convert_pod(read_manifest(pod_raw, naming), naming))
        except JobRefused as exc:
            # The pod's fields are the Deployment's pod template's.
            raise dep.refuse(f"spec.template.{exc.field}" if exc.field else "spec.template", exc.reason) from None
    return workloads


def convert_stateful_set(sts: Manifest, naming: Naming) -> list[dict[str, Any]]:
    check_managed(sts)
    spec = sts.spec
    replicas = non_negative(spec.get("replicas"), "spec.replicas", sts, 1)
    if replicas == 0:
        return []
    template = mapping(spec.get("template"), "spec.template", sts)
    ps = pod_set(sts, PodSetSource(DEFAULT_POD_SET, replicas, {"spec": template.get("spec")}, "spec.template"))
    annotations = {
        IS_GROUP_WORKLOAD_ANNOTATION: "true",
        JOB_OWNER_GVK_ANNOTATION: _gvk(sts),
        JOB_OWNER_NAME_ANNOTATION: sts.name,
    }
    return [new_workload(sts, workload_name(sts.name, sts.uid, sts.kind, sts.group), [ps],
                         owners=[owner_reference(sts, controller=False)], annotations=annotations)]


def convert_leader_worker_set(lws: Manifest, naming: Naming) -> list[dict[str, Any]]:
    check_managed(lws)
    spec = lws.spec
    replicas = integer(spec.get("replicas"), "spec.replicas", lws, 1)
    if not 0 <= replicas <= MAX_LWS_REPLICAS:  # leaderworkerset_webhook.go validateReplicasField
        bound = "must be >= 0" if replicas < 0 else f"must be <= {MAX_LWS_REPLICAS}"
        raise lws.refuse("spec.replicas", f"Invalid value: {replicas}: invalid LeaderWorkerSet replicas: {bound}, got {replicas}")
    lwt = mapping(spec.get("leaderWorkerTemplate"), "spec.leaderWorkerTemplate", lws)
    size = non_negative(lwt.get("size"), "spec.leaderWorkerTemplate.size", lws, 1)
    pod_sets = []
    worker_name, worker_count = DEFAULT_POD_SET, size
    if lwt.get("leaderTemplate") is not None:
        worker_name, worker_count = "worker", size - 1
        pod_sets.append(_lws_pod_set(lws, "leader", 1, lwt["leaderTemplate"], "spec.leaderWorkerTemplate.leaderTemplate"))
    pod_sets.append(_lws_pod_set(lws, worker_name, worker_count, lwt.get("workerTemplate"),
                                 "spec.leaderWorkerTemplate.workerTemplate"))
    workloads = []
    for i in range(replicas):
        annotations = {
            IS_GROUP_WORKLOAD_ANNOTATION: "true",
            JOB_OWNER_GVK_ANNOTATION: _gvk(lws),
            JOB_OWNER_NAME_ANNOTATION: lws.name,
            COMPONENT_WORKLOAD_INDEX_ANNOTATION: str(i),
        }
        workloads.append(new_workload(
            lws, workload_name(f"{lws.name}-{i}", lws.uid, lws.kind, lws.group), copy.deepcopy(pod_sets),
            owners=[owner_reference(lws, controller=False)], annotations=annotations,
        ))
    return workloads


def _lws_pod_set(lws: Manifest, name: str, count: int, template: Any, path: str) -> dict[str, Any]:
    ps = pod_set(lws, PodSetSource(name, count, template, path))
    meta = ps["template"].get("metadata")
    if isinstance(meta, dict):
        for key in ("labels", "annotations"):
            values = meta.get(key)
            if isinstance(values, dict):
                meta[key] = {k: v for k, v in values.items() if not k.startswith(_LWS_PREFIX) or k == _LWS_NAME_LABEL}
    return ps
