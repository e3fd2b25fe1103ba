"""Plain Pods and pod groups (Kueue's pkg/controller/jobs/pod/pod_controller.go constructPodSet,
constructGroupPodSets, constructGroupPodSetsFast, ConstructComposableWorkload, workloadName,
validatePodGroupMetadata; pod_webhook.go validatePodGroupMetadata).

A single Pod: one pod set `main` (count 1) whose template is the pod's spec, with the
`kueue.x-k8s.io/admission` scheduling gate Kueue's webhook adds; the workload is named for the
Pod (GetWorkloadNameForOwnerWithGVK, core group) and owned by it.

A pod group (label `kueue.x-k8s.io/pod-group-name`, annotation
`kueue.x-k8s.io/pod-group-total-count`): one workload named as the group, created once all its
pods exist, so every pod of the group must be in the same submission. Pods are grouped by their
role hash (see workload_names.role_hash, or the `kueue.x-k8s.io/role-hash` annotation), one pod
set per role named by the hash, sorted by name, count = pods of that role; with
`kueue.x-k8s.io/pod-group-fast-admission: "true"` one pod set from the first pod, count = the
total. Every pod owns the workload (ownerReferences without `controller`), and the workload is
annotated `kueue.x-k8s.io/is-group-workload: "true"`. Refused as Kueue refuses a group: fewer pods
than the total count, pods that disagree on the queue or the total count; more pods than the total
count are refused (Kueue would delete the extra ones).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Final

from domain.names import invalid, subdomain_problem
from streams.importers.kueue_jobs.manifest import (
    IS_GROUP_WORKLOAD_ANNOTATION,
    JobRefused,
    Manifest,
    Naming,
)
from streams.importers.kueue_jobs.pod_sets import (
    DEFAULT_POD_SET,
    TAS_ANNOTATIONS,
    PodSetSource,
    pod_set,
)
from streams.importers.kueue_jobs.workload_names import role_hash, workload_name
from streams.importers.kueue_jobs.workload_object import (
    check_managed,
    new_workload,
    owner_reference,
)

GROUP_NAME: Final = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL_COUNT: Final = "kueue.x-k8s.io/pod-group-total-count"
FAST_ADMISSION: Final = "kueue.x-k8s.io/pod-group-fast-admission"
ROLE_HASH: Final = "kueue.x-k8s.io/role-hash"
SCHEDULING_GATE: Final = "kueue.x-k8s.io/admission"
# Kueue's default podOptions.namespaceSelector leaves these namespaces' pods alone.
_UNMANAGED_NAMESPACES: Final = ("kube-system", "kueue-system")


def group_name(pod: Manifest) -> str:
    return pod.labels.get(GROUP_NAME) or pod.annotations.get(GROUP_NAME, "")


def check_pod(pod: Manifest) -> int | None:
    """What Kueue's pod webhook checks; the group's total count for a grouped pod."""
    if pod.namespace in _UNMANAGED_NAMESPACES:
        raise pod.refuse(
            "metadata.namespace",
            f"Kueue's pod integration does not manage pods in {pod.namespace} (podOptions.namespaceSelector)",
        )
    check_managed(pod)
    for key in TAS_ANNOTATIONS:
        if key in pod.annotations:
            raise pod.refuse(f"metadata.annotations[{key}]", "Unsupported: topology-aware scheduling (TAS) is not supported by quotaflow")
    group = group_name(pod)
    total = pod.annotations.get(GROUP_TOTAL_COUNT)
    detail = f"both the '{GROUP_TOTAL_COUNT}' annotation and the '{GROUP_NAME}' label should be set"
    if not group:
        if total is not None:
            raise pod.refuse(f"metadata.labels[{GROUP_NAME}]", f"Required value: {detail}")
        return None
    problem = subdomain_problem(group)
    if problem is not None:
        raise pod.refuse(f"metadata.labels[{GROUP_NAME}]", invalid(group, problem))
    if total is None:
        raise pod.refuse(f"metadata.annotations[{GROUP_TOTAL_COUNT}]", f"Required value: {detail}")
    try:
        count = int(total)
    except ValueError:
        raise pod.refuse(
            f"metadata.annotations[{GROUP_TOTAL_COUNT}]",
            f'Invalid value: "{total}": strconv.Atoi: parsing "{total}": invalid syntax',
        ) from None
    if count < 1:
        raise pod.refuse(
            f"metadata.annotations[{GROUP_TOTAL_COUNT}]",
            f"Invalid value: \"{total}\": incorrect annotation value '{GROUP_TOTAL_COUNT}={total}': "
            "group total count should be greater than zero",
        )
    return count


def _pod_template(pod: Manifest) -> dict[str, Any]:
    spec = copy.deepcopy(dict(pod.spec))
    gates = list(spec.get("schedulingGates") or [])
    if not any(isinstance(g, dict) and g.get("name") == SCHEDULING_GATE for g in gates):
        gates.append({"name": SCHEDULING_GATE})
    spec["schedulingGates"] = gates
    return {"spec": spec}


def convert_pod(pod: Manifest, naming: Naming) -> list[dict[str, Any]]:
    """A Pod that is not in a group (a grouped pod goes through convert_pod_group)."""
    if check_pod(pod) is not None:
        raise pod.refuse(f"metadata.labels[{GROUP_NAME}]", "a grouped pod is converted with its group")
    ps = pod_set(pod, PodSetSource(DEFAULT_POD_SET, 1, _pod_template(pod), ""))
    return [new_workload(pod, workload_name(pod.name, pod.uid, pod.kind, pod.group), [ps])]


def convert_pod_group(pods: Sequence[Manifest]) -> list[dict[str, Any]]:
    """The workload of one pod group: `pods` are all the submitted pods with that group name in
    one namespace, in submission order."""
    first = pods[0]
    group = group_name(first)
    total = check_pod(first)
    assert total is not None
    queue = first.queue_name
    for pod in pods[1:]:
        other = check_pod(pod)
        if pod.queue_name != queue:
            raise pod.refuse(
                f"metadata.labels[{GROUP_NAME}]",
                f"pods '{first.name}' and '{pod.name}' has different queue names: {queue}!={pod.queue_name}",
            )
        if other != total:
            raise pod.refuse(
                f"metadata.annotations[{GROUP_TOTAL_COUNT}]",
                f"pods '{first.name}' and '{pod.name}' has different '{GROUP_TOTAL_COUNT}' values: {total}!={other}",
            )
    ref = f"pod-group/{first.namespace}/{group}"
    if len(pods) > total:
        raise JobRefused(ref, f"metadata.annotations[{GROUP_TOTAL_COUNT}]",
                         f"{len(pods)} pods in the group but a total count of {total}: Kueue would delete the extra pods")
    fast = first.annotations.get(FAST_ADMISSION) == "true"
    if len(pods) < total and not fast:
        raise JobRefused(ref, "", f"'{group}' group has fewer runnable pods than expected ({len(pods)} of {total}): "
                         "Kueue creates the group's workload once all its pods exist; submit them together")
    roles: dict[str, dict[str, Any]] = {}
    for pod in pods:
        template = _pod_template(pod)
        role = pod.annotations.get(ROLE_HASH) or role_hash(template["spec"])
        if role in roles:
            roles[role]["count"] += 1
            continue
        ps = pod_set(pod, PodSetSource(role.lower(), 1, template, ""))
        if fast:
            ps["count"] = total
            roles[role] = ps
            break
        roles[role] = ps
    pod_sets = [roles[name] for name in sorted(roles)]
    owners = [owner_reference(p, controller=False) for p in pods]
    return [new_workload(first, group, pod_sets, owners=owners,
                         annotations={IS_GROUP_WORKLOAD_ANNOTATION: "true"}, job_uid_label=False)]
