"""Kueue's Configuration `resources`: `excludeResourcePrefixes` and `transformations`.

What a workload asks of quota is not always what its pods request: Kueue drops the resources
whose names start with an excluded prefix, then turns each transformed input resource into its
outputs (Retain keeps the input as well, Replace drops it), before it multiplies a pod set's
per-pod requests by its count (pkg/workload/workload.go, `totalRequestsFromPodSets`,
`dropExcludedResources`, `applyResourceTransformations`). quotaflow does the same to each pod
set's per-pod requests when a workload is submitted, and again for every workload still pending
when a Configuration changes these settings (Kueue reads them at start, so a configuration change
there is a restart, after which every pending workload's requests are computed anew; an admitted
workload keeps the usage it was admitted with, as Kueue's does from its status).

The requests as the pods ask them stay on the pod set (`PodSet.requested`), so that an update of
the workload compares pod sets as written, and a later Configuration can transform them again
(domain/retransform.py applies this to workloads).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from domain.fields import Fields
from domain.quantity import QuantityError, parse_quantity, to_amount

RETAIN = "Retain"
REPLACE = "Replace"

PerPod = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ResourceTransformation:
    input: str
    strategy: str  # Retain (Kueue's default) or Replace
    multiply_by: str | None
    outputs: tuple[tuple[str, Fraction], ...]  # output resource -> amount per unit of input


@dataclass(frozen=True, slots=True)
class ResourcesConfig:
    """Configuration `resources`, as quotaflow implements it."""

    exclude_prefixes: tuple[str, ...] = ()
    transformations: tuple[ResourceTransformation, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.exclude_prefixes or self.transformations)


NO_RESOURCES = ResourcesConfig()


def parse_resources(obj: Fields) -> ResourcesConfig:
    """`resources` of a Configuration, validated as Kueue's pkg/config/validation.go
    (`validateResourceTransformations`) does. The fields of `resources` quotaflow does not
    implement (`quotaCheckStrategy`, `deviceClassMappings`) are refused rather than ignored."""
    res = obj.opt_sub("resources")
    if res is None:
        return NO_RESOURCES
    for key in ("quotaCheckStrategy", "deviceClassMappings"):
        if res.has(key):
            raise res.fail(key, "Forbidden: not supported by quotaflow")
    prefixes = tuple(res.str_list("excludeResourcePrefixes"))
    transformations: list[ResourceTransformation] = []
    seen: set[str] = set()
    for t in res.objects("transformations"):
        name = t.str("input")
        strategy = t.enum("strategy", (RETAIN, REPLACE), RETAIN)
        if name in seen:
            raise t.fail("input", f'Duplicate value: "{name}"')
        seen.add(name)
        multiply_by = t.opt_str("multiplyBy") or None
        outputs_raw = t.sub("outputs")
        outputs: list[tuple[str, Fraction]] = []
        for out_name in sorted(outputs_raw.data, key=str):
            value = outputs_raw.raw(out_name)
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise outputs_raw.fail(str(out_name), f"expected a quantity, got {value!r}")
            try:
                # A negative factor is how Kueue writes an allowance: it is kept.
                outputs.append((str(out_name), parse_quantity(value)))
            except QuantityError as exc:
                raise outputs_raw.fail(str(out_name), str(exc)) from None
        transformations.append(ResourceTransformation(name, strategy, multiply_by, tuple(outputs)))
    return ResourcesConfig(prefixes, tuple(transformations))


def _base(resource: str, amount: int) -> Fraction:
    """A Kueue amount (milli-units for cpu) back in the resource's base unit."""
    return Fraction(amount, 1000) if resource == "cpu" else Fraction(amount)


def transform(per_pod: PerPod, config: ResourcesConfig) -> PerPod:
    """One pod's requests as Kueue counts them against quota: excluded prefixes dropped, then
    the transformations applied (`applyResourceTransformations`): outputs are summed per name
    apart from what was requested, a negative total of generated output becomes 0, then both are
    merged by sum and each is rounded as Kueue's int64 amounts are, and floored at 0."""
    requests = {
        name: amount
        for name, amount in per_pod
        if not any(name.startswith(prefix) for prefix in config.exclude_prefixes)
    }
    by_input = {t.input: t for t in config.transformations}
    if not any(name in by_input for name in requests):
        return tuple(requests.items()) if len(requests) != len(per_pod) else per_pod
    retained: dict[str, Fraction] = {}
    generated: dict[str, Fraction] = {}
    for name, amount in requests.items():
        quantity = _base(name, amount)
        t = by_input.get(name)
        if t is None:
            retained[name] = quantity
            continue
        # multiplyBy scales what the outputs are computed from, not the retained input.
        basis = quantity
        if t.multiply_by is not None and t.multiply_by in requests:
            basis = quantity * _base(t.multiply_by, requests[t.multiply_by])
        for out_name, factor in t.outputs:
            generated[out_name] = generated.get(out_name, Fraction(0)) + basis * factor
        if t.strategy == RETAIN:
            retained[name] = quantity
    merged = dict(retained)
    for out_name, value in generated.items():
        merged[out_name] = merged.get(out_name, Fraction(0)) + max(value, Fraction(0))
    return tuple((name, max(0, to_amount(name, merged[name]))) for name in sorted(merged))
