"""Configuration `resources`: what a pod's requests count as against quota (Kueue's
pkg/workload/workload.go `dropExcludedResources` and `applyResourceTransformations`)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.fields import Fields, InvalidInput
from domain.resource_transformations import (
    REPLACE,
    RETAIN,
    ResourcesConfig,
    ResourceTransformation,
    parse_resources,
    transform,
)


def config(*transformations: ResourceTransformation, exclude: tuple[str, ...] = ()) -> ResourcesConfig:
    return ResourcesConfig(exclude, transformations)


def t(input: str, strategy: str = RETAIN, multiply_by: str | None = None, **outputs: int | str) -> ResourceTransformation:
    return ResourceTransformation(input, strategy, multiply_by,
                                  tuple((k.replace("__", "/"), Fraction(v)) for k, v in sorted(outputs.items())))


def test_retain_keeps_the_input_and_adds_its_outputs() -> None:
    # 3 CPUs (3000 milli) -> 3 cpu_credits, cpu kept.
    assert transform((("cpu", 3000),), config(t("cpu", cpu_credits=1))) == (("cpu", 3000), ("cpu_credits", 3))


def test_replace_drops_the_input() -> None:
    assert transform((("cpu", 2000), ("memory", 5)), config(t("cpu", REPLACE, credits=2))) == (
        ("credits", 4), ("memory", 5))


def test_replace_without_outputs_ignores_the_input() -> None:
    assert transform((("example.com/x", 7), ("memory", 5)), config(t("example.com/x", REPLACE))) == (("memory", 5),)


def test_multiply_by_scales_the_outputs_not_the_retained_input() -> None:
    per_pod = (("nvidia.com/gpu", 2), ("nvidia.com/gpumem", 1000))
    out = transform(per_pod, config(t("nvidia.com/gpu", RETAIN, "nvidia.com/gpumem", total=1)))
    assert out == (("nvidia.com/gpu", 2), ("nvidia.com/gpumem", 1000), ("total", 2000))


def test_multiply_by_a_resource_not_requested_leaves_the_input_as_is() -> None:
    out = transform((("nvidia.com/gpu", 2),), config(t("nvidia.com/gpu", REPLACE, "nvidia.com/gpumem", total=3)))
    assert out == (("total", 6),)


def test_outputs_of_several_inputs_add_up_and_a_negative_total_becomes_zero() -> None:
    both = config(t("cpu", credits=2), t("memory", credits=-1))
    assert dict(transform((("cpu", 1000), ("memory", 1)), both))["credits"] == 1
    assert dict(transform((("cpu", 1000), ("memory", 5)), both))["credits"] == 0


def test_generated_output_does_not_reduce_a_request_of_the_same_name() -> None:
    # A negative total generated for `credits` is 0, not subtracted from the pod's own credits.
    out = transform((("cpu", 1000), ("credits", 4)), config(t("cpu", credits=-3)))
    assert dict(out)["credits"] == 4


def test_fractional_outputs_round_up_as_kueue_amounts() -> None:
    # 1 CPU * 0.5 -> 0.5 of a non-cpu resource: Quantity.Value() rounds up to 1; as cpu, 500m.
    assert dict(transform((("cpu", 1000),), config(t("cpu", REPLACE, gpu="0.5")))) == {"gpu": 1}
    assert dict(transform((("memory", 3),), config(t("memory", REPLACE, cpu="0.5")))) == {"cpu": 1500}


def test_excluded_prefixes_are_dropped_before_transformations() -> None:
    cfg = config(t("example.com/a", b=1), exclude=("example.com/",))
    assert transform((("cpu", 1000), ("example.com/a", 3)), cfg) == (("cpu", 1000),)


def test_nothing_configured_is_the_identity() -> None:
    per_pod = (("cpu", 1000), ("memory", 3))
    assert transform(per_pod, config()) is per_pod


@given(st.dictionaries(st.sampled_from(["cpu", "memory", "gpu", "x"]), st.integers(0, 10**6)),
       st.permutations(["cpu", "memory", "gpu"]))
def test_the_order_of_transformations_does_not_matter(requests: dict[str, int], order: list[str]) -> None:
    per_pod = tuple(sorted(requests.items()))
    rules = {"cpu": t("cpu", credits=2), "memory": t("memory", REPLACE, credits=-1), "gpu": t("gpu", RETAIN, "cpu", credits=3)}
    forward = transform(per_pod, config(*(rules[name] for name in order)))
    assert forward == transform(per_pod, config(*(rules[name] for name in reversed(order))))
    assert all(amount >= 0 for _, amount in forward)


def parsed(resources: object) -> ResourcesConfig:
    return parse_resources(Fields({"resources": resources}, "object", "InvalidObject"))


def test_parse_defaults_the_strategy_to_retain_and_reads_quantities() -> None:
    cfg = parsed({"excludeResourcePrefixes": ["a/"], "transformations": [
        {"input": "cpu", "outputs": {"credits": "500m"}}, {"input": "gpu", "strategy": "Replace", "multiplyBy": "mem"}]})
    assert cfg.exclude_prefixes == ("a/",)
    assert cfg.transformations == (
        ResourceTransformation("cpu", RETAIN, None, (("credits", Fraction(1, 2)),)),
        ResourceTransformation("gpu", REPLACE, "mem", ()),
    )


@pytest.mark.parametrize(("resources", "message"), [
    ({"transformations": [{"input": "cpu", "strategy": "Keep"}]},
     'object.resources.transformations[0].strategy: Unsupported value: "Keep": supported values: "Retain", "Replace"'),
    ({"transformations": [{"input": "cpu"}, {"input": "cpu"}]},
     'object.resources.transformations[1].input: Duplicate value: "cpu"'),
    ({"transformations": [{"outputs": {"a": 1}}]}, "object.resources.transformations[0].input: required value"),
    ({"transformations": [{"input": "cpu", "outputs": {"a": "x"}}]}, 'object.resources.transformations[0].outputs.a: invalid quantity "x"'),
    ({"deviceClassMappings": [{"name": "x"}]}, "object.resources.deviceClassMappings: Forbidden: not supported by quotaflow"),
])
def test_parse_refuses_what_kueue_refuses(resources: object, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parsed(resources)
    assert caught.value.message == message
