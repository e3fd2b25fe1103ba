"""A workload's priority, as Kueue derives it (pkg/util/priority, and the job framework's
ExtractPriority in pkg/controller/jobframework/reconciler.go), and the default
WorkloadPriorityClass (pkg/controller/jobframework/defaults.go,
ApplyDefaultWorkloadPriorityClass, gate WorkloadPriorityClassDefaulting: beta, on since 0.20).

In order: the workload's own `spec.priority`; else the WorkloadPriorityClass it names (the
`default` one when it names none and that class exists); else the Kubernetes PriorityClass it
names (`priorityClassSource: scheduling.k8s.io/priorityclass`, or a v1beta2 `priorityClassRef`
of group scheduling.k8s.io), else the first `priorityClassName` of its pod templates; else the
PriorityClass marked `globalDefault` (the lowest value, should there be several); else 0. A named
class that does not exist refuses the workload, as Kueue creates no workload for such a job.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from domain import reasons
from domain.fields import InvalidInput
from domain.objects import SYSTEM_PRIORITY_CLASSES, PodPriorityClass
from domain.workload import WorkloadSpec

DEFAULT_WORKLOAD_PRIORITY_CLASS = "default"  # Kueue's DefaultWorkloadPriorityClassName


def defaulted(spec: WorkloadSpec, workload_classes: Mapping[str, int], enabled: bool) -> WorkloadSpec:
    """`spec` with the `default` WorkloadPriorityClass when it has no priority of its own, names
    no class, and that class exists (as Kueue's webhook labels such a job)."""
    if (
        not enabled
        or spec.priority is not None
        or spec.priority_class is not None
        or spec.pod_priority_class is not None
        or DEFAULT_WORKLOAD_PRIORITY_CLASS not in workload_classes
    ):
        return spec
    return msgspec.structs.replace(spec, priority_class=DEFAULT_WORKLOAD_PRIORITY_CLASS)


def template_priority_class(spec: WorkloadSpec) -> str | None:
    """The first pod template's `priorityClassName`, as Kueue's extractPriorityFromPodSets."""
    for ps in spec.pod_sets:
        if ps.priority_class:
            return ps.priority_class
    return None


def priority_of(
    spec: WorkloadSpec, workload_classes: Mapping[str, int], pod_classes: Mapping[str, PodPriorityClass]
) -> int:
    if spec.priority is not None:
        return spec.priority
    if spec.priority_class is not None:
        value = workload_classes.get(spec.priority_class)
        if value is None:
            raise InvalidInput(
                reasons.NOT_FOUND,
                f'spec.priorityClassName: WorkloadPriorityClass "{spec.priority_class}" not found',
            )
        return value
    explicit = spec.pod_priority_class
    name = explicit if explicit is not None else template_priority_class(spec)
    if name is not None:
        pc = pod_classes.get(name)
        if pc is not None:
            return pc.value
        system = SYSTEM_PRIORITY_CLASSES.get(name)
        if system is not None:
            return system
        field = "spec.priorityClassName" if explicit is not None else "spec.podSets[].template.spec.priorityClassName"
        raise InvalidInput(reasons.NOT_FOUND, f'{field}: PriorityClass "{name}" not found')
    default = global_default(pod_classes)
    return 0 if default is None else default.value


def global_default(pod_classes: Mapping[str, PodPriorityClass]) -> PodPriorityClass | None:
    """The PriorityClass marked globalDefault; of several, the lowest value (then name), as
    Kueue's getDefaultPriorityClass picks."""
    best: PodPriorityClass | None = None
    for pc in pod_classes.values():
        if pc.global_default and (best is None or (pc.value, pc.name) < (best.value, best.name)):
            best = pc
    return best




def apply_pod_priority_class(classes: dict[str, PodPriorityClass], pc: PodPriorityClass) -> None:
    """Create or replace a PriorityClass as Kubernetes' API server allows (`check_pod_priority_class`).
    Refuses before changing anything."""
    check_pod_priority_class(classes, pc)
    classes[pc.name] = pc


def check_pod_priority_class(classes: Mapping[str, PodPriorityClass], pc: PodPriorityClass) -> None:
    """Raise `InvalidInput` where Kubernetes' API server refuses the PriorityClass: its value cannot
    change (ValidatePriorityClassUpdate), and only one may be the global default (the Priority
    admission plugin)."""
    old = classes.get(pc.name)
    if old is not None and old.value != pc.value:
        raise InvalidInput(
            reasons.IMMUTABLE_FIELD, f'PriorityClass "{pc.name}": value: Forbidden: may not be changed in an update.'
        )
    if pc.global_default:
        for other in classes.values():
            if other.global_default and other.name != pc.name:
                raise InvalidInput(
                    reasons.INVALID_OBJECT,
                    f'PriorityClass "{pc.name}": Forbidden: PriorityClass {other.name} is already marked as '
                    "default. Only one default can exist",
                )


__all__ = [
    "DEFAULT_WORKLOAD_PRIORITY_CLASS",
    "apply_pod_priority_class",
    "check_pod_priority_class",
    "defaulted",
    "global_default",
    "priority_of",
    "template_priority_class",
]
