"""Per-pod requests of a pod set, as Kueue computes them.

Expected values follow k8s component-helpers PodRequests after Kueue's
UseLimitsAsMissingRequestsInPod (cross-checked against v0.37 on random specs).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.pod_requests import PodSetError, pod_set_requests
from domain.quantity import amount, parse_quantity, to_amount


def templated(spec: dict[str, Any], count: int = 1) -> dict[str, Any]:
    return {"name": "main", "count": count, "template": {"spec": spec}}


def container(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None,
              **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "image": "i", "resources": resources, **extra}


def sidecar(requests: dict[str, Any]) -> dict[str, Any]:
    return container(requests, restartPolicy="Always")


def test_compact_form_is_per_pod_requests() -> None:
    assert pod_set_requests({"name": "main", "count": 3, "requests": {"memory": "4Gi", "cpu": "2"}}) == {
        "cpu": 2000,
        "memory": 4 * 2**30,
    }


def test_compact_form_without_requests_requests_nothing() -> None:
    assert pod_set_requests({"name": "main", "count": 1}) == {}
    assert pod_set_requests({"name": "main", "count": 1, "requests": {}}) == {}


def test_keys_are_sorted_and_zero_amounts_kept() -> None:
    result = pod_set_requests({"name": "m", "count": 1, "requests": {"nvidia.com/gpu": 0, "cpu": "0", "a": 1}})
    assert list(result) == ["a", "cpu", "nvidia.com/gpu"]
    assert result == {"a": 1, "cpu": 0, "nvidia.com/gpu": 0}


def test_conformance_example_sidecar_init_and_overhead() -> None:
    spec = {
        "overhead": {"cpu": "100m", "memory": "64Mi"},
        "initContainers": [
            sidecar({"cpu": "250m", "memory": "128Mi"}),
            container({"cpu": "2", "memory": "256Mi"}),
        ],
        "containers": [
            container({"cpu": "1", "memory": "1Gi"}),
            container(limits={"cpu": "500m", "memory": "512Mi"}),
        ],
    }
    assert pod_set_requests(templated(spec, count=2)) == {"cpu": 2350, "memory": 1728 * 2**20}


def test_missing_request_defaults_to_limit_per_resource() -> None:
    spec = {"containers": [container({"cpu": "1"}, {"cpu": "4", "memory": "1Gi", "example.com/gpu": 2})]}
    assert pod_set_requests(templated(spec)) == {"cpu": 1000, "example.com/gpu": 2, "memory": 2**30}


def test_regular_containers_add_up() -> None:
    spec = {"containers": [container({"cpu": "1"}), container({"cpu": "500m", "memory": "1"}), container()]}
    assert pod_set_requests(templated(spec)) == {"cpu": 1500, "memory": 1}


def test_init_container_larger_than_containers_wins() -> None:
    spec = {
        "initContainers": [container({"cpu": "3", "memory": "1Gi"}), container({"cpu": "1", "memory": "3Gi"})],
        "containers": [container({"cpu": "2", "memory": "2Gi"})],
    }
    assert pod_set_requests(templated(spec)) == {"cpu": 3000, "memory": 3 * 2**30}


def test_resource_only_in_an_init_container_is_requested() -> None:
    spec = {"initContainers": [container({"example.com/fpga": 1})], "containers": [container({"cpu": "1"})]}
    assert pod_set_requests(templated(spec)) == {"cpu": 1000, "example.com/fpga": 1}


def test_init_container_only_counts_sidecars_started_before_it() -> None:
    spec = {
        "initContainers": [
            sidecar({"cpu": "1"}),
            container({"cpu": "3"}),  # needs 3 + 1
            sidecar({"cpu": "2"}),  # runs with the app: sums into S
        ],
        "containers": [container({"cpu": "500m"})],
    }
    # S = 500m + 1 + 2 = 3500m; init[1] needs 4; sidecars up to init[2] need 3.
    assert pod_set_requests(templated(spec)) == {"cpu": 4000}


def test_sidecars_alone_sum_with_containers() -> None:
    spec = {
        "initContainers": [sidecar({"cpu": "1", "memory": "1Gi"}), sidecar({"cpu": "1"})],
        "containers": [container({"cpu": "1"})],
    }
    assert pod_set_requests(templated(spec)) == {"cpu": 3000, "memory": 2**30}


@pytest.mark.parametrize("policy", ["Never", "OnFailure", "always"])
def test_only_restart_policy_always_makes_a_sidecar(policy: str) -> None:
    spec = {
        "initContainers": [container({"cpu": "1"}, restartPolicy=policy)],
        "containers": [container({"cpu": "1"})],
    }
    assert pod_set_requests(templated(spec)) == {"cpu": 1000}


def test_pod_level_requests_replace_supported_resources_only() -> None:
    spec = {
        "resources": {"requests": {"cpu": "2", "example.com/gpu": 5}, "limits": {"memory": "3Gi", "hugepages-2Mi": "4Mi"}},
        "containers": [container({"cpu": "1", "memory": "1Gi", "example.com/gpu": 1})],
    }
    assert pod_set_requests(templated(spec)) == {
        "cpu": 2000,  # pod-level request
        "example.com/gpu": 1,  # not a pod-level resource: containers decide
        "hugepages-2Mi": 4 * 2**20,  # pod-level limit standing in for the request
        "memory": 3 * 2**30,
    }


def test_pod_level_request_may_be_below_the_container_sum() -> None:
    spec = {"resources": {"requests": {"cpu": "1"}}, "containers": [container({"cpu": "2"}), container({"cpu": "2"})]}
    assert pod_set_requests(templated(spec)) == {"cpu": 1000}


def test_overhead_is_added_last() -> None:
    spec = {
        "resources": {"requests": {"cpu": "1"}},
        "overhead": {"cpu": "250m", "example.com/x": 1},
        "containers": [container({"cpu": "3"})],
    }
    assert pod_set_requests(templated(spec)) == {"cpu": 1250, "example.com/x": 1}


def test_rounding_happens_once_per_pod() -> None:
    # 3 x 0.4 milli-cpu is 1.2m -> 2m; rounding each container first would give 3m.
    spec = {"containers": [container({"cpu": "400u", "memory": "0.4"}) for _ in range(3)]}
    assert pod_set_requests(templated(spec)) == {"cpu": 2, "memory": 2}


def test_empty_template_requests_nothing() -> None:
    assert pod_set_requests(templated({})) == {}
    assert pod_set_requests({"name": "m", "count": 1, "template": {}}) == {}
    assert pod_set_requests(templated({"containers": [{"name": "c"}]})) == {}


@pytest.mark.parametrize(
    ("pod_set", "field"),
    [
        ({"name": "m", "count": 1, "requests": {"cpu": "1", "pods": "1"}}, "requests.pods"),
        (templated({"containers": [container({"cpu": "1", "pods": "1"})]}),
         "template.spec.containers[0].resources.requests.pods"),
        (templated({"containers": [container(), container(limits={"pods": 1})]}),
         "template.spec.containers[1].resources.limits.pods"),
        (templated({"initContainers": [container({"pods": 1})]}),
         "template.spec.initContainers[0].resources.requests.pods"),
        (templated({"resources": {"limits": {"pods": 1}}}), "template.spec.resources.limits.pods"),
        (templated({"overhead": {"pods": 1}}), "template.spec.overhead.pods"),
    ],
)
def test_pods_is_reserved(pod_set: dict[str, Any], field: str) -> None:
    with pytest.raises(PodSetError) as excinfo:
        pod_set_requests(pod_set)
    assert excinfo.value.field == field
    assert str(excinfo.value) == f"{field}: the key is reserved for internal kueue use"


def test_invalid_quantity_names_the_path() -> None:
    pod_set = templated({"containers": [container({"cpu": "12Zi"})]})
    with pytest.raises(PodSetError) as excinfo:
        pod_set_requests(pod_set, path="podSets[0]")
    assert str(excinfo.value) == 'podSets[0].template.spec.containers[0].resources.requests.cpu: invalid quantity "12Zi"'
    assert excinfo.value.field == "podSets[0].template.spec.containers[0].resources.requests.cpu"
    assert excinfo.value.detail == 'invalid quantity "12Zi"'


@pytest.mark.parametrize("value", ["-1", -1, "-500m", -0.5, "-1Ki"])
def test_negative_quantities_are_rejected(value: object) -> None:
    with pytest.raises(PodSetError, match="must be greater than or equal to 0") as excinfo:
        pod_set_requests({"name": "m", "count": 1, "requests": {"cpu": value}})
    assert excinfo.value.field == "requests.cpu"
    assert "-" in str(excinfo.value)


def test_negative_zero_is_fine() -> None:
    assert pod_set_requests({"name": "m", "count": 1, "requests": {"cpu": "-0"}}) == {"cpu": 0}


@pytest.mark.parametrize(
    ("pod_set", "field"),
    [
        ({"name": "m", "count": 1, "requests": ["cpu"]}, "requests"),
        ({"name": "m", "count": 1, "requests": {"cpu": None}}, "requests.cpu"),
        ({"name": "m", "count": 1, "requests": {"cpu": True}}, "requests.cpu"),
        ({"name": "m", "count": 1, "requests": {1: "1"}}, "requests"),
        ({"name": "m", "count": 1, "template": None}, "template"),
        ({"name": "m", "count": 1, "template": {"spec": []}}, "template.spec"),
        (templated({"containers": {"name": "c"}}), "template.spec.containers"),
        (templated({"containers": "c"}), "template.spec.containers"),
        (templated({"containers": ["c"]}), "template.spec.containers[0]"),
        (templated({"containers": [{"resources": "lots"}]}), "template.spec.containers[0].resources"),
        (templated({"initContainers": [{"resources": {"limits": 3}}]}), "template.spec.initContainers[0].resources.limits"),
        (templated({"initContainers": [{"restartPolicy": 1}]}), "template.spec.initContainers[0].restartPolicy"),
        (templated({"resources": []}), "template.spec.resources"),
        (templated({"overhead": "1"}), "template.spec.overhead"),
        ({"name": "m", "count": 1, "requests": {}, "template": {}}, ""),
    ],
)
def test_wrong_shapes_are_rejected(pod_set: dict[Any, Any], field: str) -> None:
    with pytest.raises(PodSetError) as excinfo:
        pod_set_requests(pod_set)
    assert excinfo.value.field == field


def test_errors_are_reported_in_a_deterministic_order() -> None:
    requests = {"zz": "bad", "aa": "-1", "cpu": "12Zi"}
    with pytest.raises(PodSetError) as excinfo:
        pod_set_requests({"name": "m", "count": 1, "requests": requests})
    assert excinfo.value.field == "requests.aa"


def test_path_prefixes_every_error() -> None:
    with pytest.raises(PodSetError) as excinfo:
        pod_set_requests({"name": "m", "requests": {"pods": 1}}, path="spec.podSets[2]")
    assert excinfo.value.field == "spec.podSets[2].requests.pods"
    with pytest.raises(PodSetError) as excinfo:
        pod_set_requests([], path="spec.podSets[2]")  # type: ignore[arg-type]
    assert excinfo.value.field == "spec.podSets[2]"


def test_pod_set_error_is_a_value_error() -> None:
    assert issubclass(PodSetError, ValueError)


def test_input_is_not_modified() -> None:
    spec = {
        "containers": [container({"cpu": "1"}, {"cpu": "2", "memory": "1Gi"})],
        "initContainers": [sidecar({"cpu": "1"})],
        "resources": {"limits": {"cpu": "4"}},
    }
    pod_set = templated(spec)
    before = repr(pod_set)
    pod_set_requests(pod_set)
    assert repr(pod_set) == before


quantities = st.one_of(
    st.integers(min_value=0, max_value=10**6).map(lambda n: f"{n}m"),
    st.integers(min_value=0, max_value=64).map(lambda n: f"{n}Mi"),
    st.integers(min_value=0, max_value=10**4),
)
resource_lists = st.dictionaries(st.sampled_from(["cpu", "memory", "example.com/gpu"]), quantities, max_size=3)


@given(st.lists(resource_lists, max_size=4))
def test_containers_only_is_the_sum_of_their_requests(lists: list[dict[str, Any]]) -> None:
    result = pod_set_requests(templated({"containers": [container(r) for r in lists]}))
    names = sorted({name for r in lists for name in r})
    assert list(result) == names
    for name in names:
        exact = sum((parse_quantity(r[name]) for r in lists if name in r), Fraction(0))
        assert result[name] == to_amount(name, exact)  # rounded once, after summing


@given(resource_lists, st.lists(resource_lists, max_size=3), st.lists(resource_lists, max_size=3))
def test_the_pod_needs_at_least_each_part(
    regular: dict[str, Any], inits: list[dict[str, Any]], sidecars: list[dict[str, Any]]
) -> None:
    spec = {
        "containers": [container(regular)],
        "initContainers": [sidecar(r) for r in sidecars] + [container(r) for r in inits],
    }
    result = pod_set_requests(templated(spec))
    for part in [regular, *inits, *sidecars]:
        for name, value in part.items():
            assert result[name] >= amount(name, value)


@given(resource_lists)
def test_template_and_compact_forms_agree_for_one_container(requests: dict[str, Any]) -> None:
    compact = pod_set_requests({"name": "m", "count": 1, "requests": requests})
    assert pod_set_requests(templated({"containers": [container(requests)]})) == compact
    assert pod_set_requests(templated({"containers": [container(limits=requests)]})) == compact
