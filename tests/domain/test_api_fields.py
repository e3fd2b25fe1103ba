"""Strict decoding of Kueue objects (domain/api_fields.py) and how parse_object uses it."""

from __future__ import annotations

from typing import Any

import pytest

from domain import reasons
from domain.api_fields import KINDS, check_api_version, schema_for, strict_problems
from domain.fields import InvalidInput
from domain.objects import parse_object
from domain.workload import parse_workload


def cluster_queue(version: str = "v1beta2", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"kueue.x-k8s.io/{version}",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {}, **spec},
    }


def rejected(raw: object) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        parse_object(raw)
    return info.value


def test_unknown_fields_are_listed_with_their_paths_in_order() -> None:
    raw = cluster_queue(
        zeta=1,
        resourceGroups=[{"coveredResources": ["cpu"], "flavors": [
            {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1, "nominal": 2}]}]}],
    )
    raw["alpha"] = True
    unknown, refused = strict_problems(raw, schema_for("ClusterQueue", "v1beta2"))
    assert unknown == ["spec.zeta", "spec.resourceGroups[0].flavors[0].resources[0].nominal", "alpha"]
    assert refused == []
    error = rejected(raw)
    assert error.reason == reasons.INVALID_OBJECT
    assert error.message == (
        'ClusterQueue "cq": ClusterQueue in version "v1beta2" cannot be handled as a ClusterQueue: strict decoding '
        'error: unknown field "spec.zeta", unknown field "spec.resourceGroups[0].flavors[0].resources[0].nominal", '
        'unknown field "alpha"'
    )


def test_a_message_lists_at_most_ten_unknown_fields() -> None:
    error = rejected(cluster_queue(**{f"f{i:02}": i for i in range(25)}))
    assert error.message.count("unknown field") == 10
    assert error.message.endswith('unknown field "spec.f09" (and 15 more)')


def test_null_is_unset_even_for_an_unknown_field() -> None:
    assert strict_problems(cluster_queue(frobnicate=None), schema_for("ClusterQueue", "v1beta2")) == ([], [])


@pytest.mark.parametrize(
    ("version", "field", "known"),
    [
        ("v1beta1", "admissionChecks", True),
        ("v1beta2", "admissionChecks", False),
        ("", "admissionChecks", True),
        ("v1beta1", "concurrentAdmissionPolicy", False),
        ("v1beta2", "cohort", True),  # the contract's alias
        ("v1beta1", "cohortName", True),
    ],
)
def test_cluster_queue_fields_per_version(version: str, field: str, known: bool) -> None:
    unknown, _ = strict_problems({"spec": {field: ["x"]}}, schema_for("ClusterQueue", version))
    assert (unknown == []) == known


def test_workload_priority_fields_belong_to_their_version() -> None:
    v1 = schema_for("Workload", "v1beta1")
    v2 = schema_for("Workload", "v1beta2")
    assert strict_problems({"spec": {"priorityClassName": "a", "priorityClassSource": ""}}, v1) == ([], [])
    assert strict_problems({"spec": {"priorityClassName": "a"}}, v2)[0] == ["spec.priorityClassName"]
    assert strict_problems({"spec": {"priorityClassRef": {"name": "a"}}}, v1)[0] == ["spec.priorityClassRef"]
    assert strict_problems({"spec": {"priorityClassRef": {"name": "a", "grp": 1}}}, v2)[0] == ["spec.priorityClassRef.grp"]


def test_refused_fields_name_the_field() -> None:
    wait = {"timeout": "5m", "blockAdmission": True, "recoveryTimeout": "1m", "requeuingStrategy": {
        "timestamp": "Creation", "backoffLimitCount": 3, "backoffBaseSeconds": 10, "backoffMaxSeconds": 60}}
    v1, v2 = schema_for("Configuration", "v1beta1"), schema_for("Configuration", "v1beta2")
    assert strict_problems({"waitForPodsReady": {**wait, "enable": True}}, v1) == ([], [])
    assert strict_problems({"waitForPodsReady": wait}, v2) == ([], [])
    assert strict_problems({"waitForPodsReady": {"enable": False}}, v2)[0] == ["waitForPodsReady.enable"]
    error = rejected(cluster_queue(concurrentAdmissionPolicy={}))
    assert error.reason == reasons.NOT_SUPPORTED
    assert error.message.startswith('ClusterQueue "cq": spec.concurrentAdmissionPolicy: Unsupported:')


def test_unknown_fields_are_reported_before_refused_ones() -> None:
    error = rejected(cluster_queue(concurrentAdmissionPolicy={}, frobnicate=1))
    assert error.reason == reasons.INVALID_OBJECT
    assert 'unknown field "spec.frobnicate"' in error.message


@pytest.mark.parametrize(
    ("kind", "api", "served"),
    [
        ("ClusterQueue", "kueue.x-k8s.io/v1beta1", True),
        ("ClusterQueue", "kueue.x-k8s.io/v1beta2", True),
        ("ClusterQueue", "kueue.x-k8s.io/v1alpha1", False),
        ("ClusterQueue", "kueue.k8s.io/v1beta2", False),
        ("ClusterQueue", "v1beta2", False),
        ("Namespace", "v1", True),
        ("Namespace", "core/v1", False),
        ("PriorityClass", "scheduling.k8s.io/v1", True),
        ("PriorityClass", "v1", False),
        ("Configuration", "config.kueue.x-k8s.io/v1beta2", True),
        ("Configuration", "kueue.x-k8s.io/v1beta2", False),
        ("Workload", "kueue.x-k8s.io/v1beta1", True),
    ],
)
def test_served_versions(kind: str, api: str, served: bool) -> None:
    if served:
        assert check_api_version(kind, api) == api.rpartition("/")[2]
    else:
        with pytest.raises(InvalidInput) as info:
            check_api_version(kind, api)
        assert info.value.reason == reasons.UNKNOWN_KIND
        assert info.value.message == f'no matches for kind "{kind}" in version "{api}"'


def test_every_kind_accepts_full_object_metadata_and_status() -> None:
    meta = {
        "name": "x", "generateName": "x-", "uid": "u", "resourceVersion": "1", "generation": 2,
        "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"a": "b"}, "annotations": {"a": "b"},
        "ownerReferences": [], "finalizers": [], "managedFields": [], "selfLink": "",
        "deletionTimestamp": None, "deletionGracePeriodSeconds": None,
    }
    for kind in KINDS:
        if kind == "Configuration":
            continue  # Kueue's Configuration has TypeMeta only: no metadata, no status
        for version in ("v1beta1", "v1beta2", ""):
            raw = {"apiVersion": "x", "kind": kind, "metadata": meta}
            if "status" in schema_for(kind, version):
                raw["status"] = {"anything": True}
            assert strict_problems(raw, schema_for(kind, version)) == ([], []), (kind, version)


def test_workloads_are_decoded_strictly_too() -> None:
    raw = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"namespace": "ns", "name": "w"},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}, "imagePullPolicy": "Always"}],
            "volumes": [{"anything": {"goes": "here"}}],
        }}}]},
    }
    assert parse_workload(raw).pod_sets[0].per_pod == (("cpu", 1000),)
    raw["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    with pytest.raises(InvalidInput) as info:
        parse_workload(raw)
    assert info.value.reason == reasons.INVALID_WORKLOAD
    assert 'unknown field "spec.podSets[0].template.spec.containers[0].imagePullPolcy"' in info.value.message
    assert info.value.message.startswith('workload: Workload "ns/w": Workload in version "v1beta2"')


def test_a_configuration_has_no_metadata() -> None:
    unknown, _ = strict_problems({"metadata": {"name": "config"}}, schema_for("Configuration", "v1beta2"))
    assert unknown == ["metadata"]


def test_v1beta2_flavor_fungibility_has_no_old_names() -> None:
    old = {"flavorFungibility": {"whenCanBorrow": "Borrow"}}
    parse_object(cluster_queue("v1beta1", **old))
    error = rejected(cluster_queue("v1beta2", **old))
    assert error.message == (
        'ClusterQueue: object.spec.flavorFungibility.whenCanBorrow: Unsupported value: "Borrow": supported values: '
        '"MayStopSearch", "TryNextFlavor"'
    )
