"""A workload's priority (domain/priority.py): Kueue's order of sources, the default
WorkloadPriorityClass, and Kubernetes PriorityClasses as the API server keeps them."""

from __future__ import annotations

from typing import Any

import pytest

from domain import reasons
from domain.fields import InvalidInput
from domain.objects import PodPriorityClass
from domain.priority import (
    apply_pod_priority_class,
    defaulted,
    global_default,
    priority_of,
)
from domain.workload import WorkloadSpec, parse_workload


def spec(template_class: str | None = None, version: str = "v1beta1", **fields: Any) -> WorkloadSpec:
    pod_spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    if template_class is not None:
        pod_spec["priorityClassName"] = template_class
    return parse_workload({
        "apiVersion": f"kueue.x-k8s.io/{version}",
        "kind": "Workload",
        "metadata": {"namespace": "ns", "name": "w"},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": pod_spec}}], **fields},
    })


WPC = {"high": 100, "default": 7}
PC = {
    "batch": PodPriorityClass("batch", 1000),
    "floor": PodPriorityClass("floor", 3, global_default=True),
}


@pytest.mark.parametrize(
    ("workload", "expected"),
    [
        (spec(priority=5, priorityClassName="high"), 5),  # its own priority first
        (spec(priorityClassName="high"), 100),
        (spec(priorityClassName="high", priorityClassSource="kueue.x-k8s.io/workloadpriorityclass"), 100),
        (spec(priorityClassName="batch", priorityClassSource="scheduling.k8s.io/priorityclass"), 1000),
        (spec(version="v1beta2", priorityClassRef={"name": "high"}), 100),
        (spec(version="v1beta2", priorityClassRef={"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                                   "name": "batch"}), 1000),
        (spec(version="v1beta2", priorityClassRef={"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                                   "name": "system-cluster-critical"}), 2000000000),
        (spec("batch"), 1000),  # the pod template's class
        (spec("batch", priorityClassName="high"), 100),  # a named WorkloadPriorityClass first
        (spec(), 3),  # the global default
    ],
)
def test_priority_sources_in_kueues_order(workload: WorkloadSpec, expected: int) -> None:
    assert priority_of(workload, WPC, PC) == expected


def test_no_class_and_no_default_is_zero() -> None:
    assert priority_of(spec(), {}, {}) == 0


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        (spec(priorityClassName="nope"), 'spec.priorityClassName: WorkloadPriorityClass "nope" not found'),
        (spec(priorityClassName="nope", priorityClassSource="scheduling.k8s.io/priorityclass"),
         'spec.priorityClassName: PriorityClass "nope" not found'),
        (spec("nope"), 'spec.podSets[].template.spec.priorityClassName: PriorityClass "nope" not found'),
    ],
)
def test_a_missing_class_refuses_the_workload(workload: WorkloadSpec, message: str) -> None:
    with pytest.raises(InvalidInput) as info:
        priority_of(workload, WPC, PC)
    assert (info.value.reason, info.value.message) == (reasons.NOT_FOUND, message)


def test_the_default_workload_priority_class_applies_only_to_workloads_naming_none() -> None:
    assert defaulted(spec(), WPC, True).priority_class == "default"
    assert defaulted(spec("batch"), WPC, True).priority_class == "default"  # as Kueue labels such a job
    assert defaulted(spec(), WPC, False).priority_class is None
    assert defaulted(spec(), {"high": 1}, True).priority_class is None
    assert defaulted(spec(priority=1), WPC, True).priority_class is None
    assert defaulted(spec(priorityClassName="high"), WPC, True).priority_class == "high"
    pc_named = spec(priorityClassName="batch", priorityClassSource="scheduling.k8s.io/priorityclass")
    assert defaulted(pc_named, WPC, True).priority_class is None


def test_the_global_default_of_several_is_the_lowest() -> None:
    classes = {
        "b": PodPriorityClass("b", 5, True),
        "a": PodPriorityClass("a", 5, True),
        "c": PodPriorityClass("c", 9, True),
        "d": PodPriorityClass("d", 1, False),
    }
    found = global_default(classes)
    assert found is not None and found.name == "a"


def test_a_priority_class_keeps_its_value_and_there_is_one_global_default() -> None:
    classes: dict[str, PodPriorityClass] = {}
    apply_pod_priority_class(classes, PodPriorityClass("a", 1, True))
    apply_pod_priority_class(classes, PodPriorityClass("a", 1, True))  # re-applied unchanged
    with pytest.raises(InvalidInput) as info:
        apply_pod_priority_class(classes, PodPriorityClass("a", 2, True))
    assert info.value.reason == reasons.IMMUTABLE_FIELD
    with pytest.raises(InvalidInput) as info:
        apply_pod_priority_class(classes, PodPriorityClass("b", 2, True))
    assert "PriorityClass a is already marked as default. Only one default can exist" in info.value.message
    apply_pod_priority_class(classes, PodPriorityClass("a", 1, False))
    apply_pod_priority_class(classes, PodPriorityClass("b", 2, True))
    assert sorted(classes) == ["a", "b"] and classes["b"].global_default
