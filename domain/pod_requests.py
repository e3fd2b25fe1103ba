"""Per-pod requests of a Workload pod set, computed as Kueue computes them.

Kueue (pkg/workload: totalRequestsFromPodSets, UseLimitsAsMissingRequestsInPod)
takes component-helpers' ``PodRequests`` of the pod template and converts each
resource to an int64 amount once.  Per pod:

1. every container, init container and the pod-level block requests its
   limit for any resource it sets a limit but no request for;
2. S = sum of regular containers and sidecars (init containers with
   ``restartPolicy: Always``);
3. init container i needs, if a sidecar, the sidecars up to and including i,
   otherwise its own requests plus the sidecars started before it;
4. per resource, the pod needs max(S, every init container's need);
5. pod-level requests of cpu, memory and hugepages-* replace that aggregate;
6. spec.overhead is added.

Quantities stay exact Fractions throughout and are rounded up (ceil) once.
What Kueue adds from the cluster -- LimitRange defaults, RuntimeClass
overhead, DRA claims, resource transformations/exclusions -- is outside
this pure function.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any, Final

from domain.quantity import QuantityError, parse_quantity, to_amount

__all__ = ["PodSetError", "pod_set_requests", "requests_above_limits"]

# Kueue counts pods itself; users may not request them (workload webhook).
_RESERVED: Final = "pods"
# Pod-level resources Kubernetes honours (component-helpers supportedPodLevelResources).
_POD_LEVEL: Final = frozenset({"cpu", "memory"})
_HUGEPAGES_PREFIX: Final = "hugepages-"

Resources = dict[str, Fraction]


class PodSetError(ValueError):
    """An invalid pod set.  ``field`` is the offending path, ``detail`` what is wrong."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(f"{field}: {detail}" if field else detail)
        self.field = field
        self.detail = detail


def pod_set_requests(pod_set: Mapping[str, Any], *, path: str = "") -> dict[str, int]:
    """Per-pod requests of one Workload pod set, as Kueue amounts, keys sorted.

    ``pod_set`` is either the compact quotaflow form ``{"name", "count",
    "requests": {...per pod...}}`` or Kueue's ``{"name", "count", "template":
    {"spec": {...}}}``.  Zero amounts are kept.  ``path`` (e.g.
    ``"spec.podSets[0]"``) prefixes the field named in a PodSetError;
    without it fields are relative to the pod set ("requests.cpu",
    "template.spec.containers[0].resources.limits.memory").

    Raises PodSetError for the reserved key "pods", negative or invalid
    quantities, and values of the wrong shape.  name/count/minCount are not
    checked here.
    """
    prefix = f"{path}." if path else ""
    if not isinstance(pod_set, Mapping):
        raise PodSetError(path, "a pod set must be a mapping")
    if "template" in pod_set:
        if "requests" in pod_set:
            raise PodSetError(path, 'give either "template" or "requests", not both')
        requests = _template_requests(pod_set["template"], f"{prefix}template")
    else:
        requests = _resource_list(pod_set.get("requests"), f"{prefix}requests")
    return {name: to_amount(name, requests[name]) for name in sorted(requests)}


def requests_above_limits(pod_set: Mapping[str, Any]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Where a pod set's template requests more than its limits, as Kueue's ValidateResources
    finds it: (path relative to the pod set, sorted resource names) for each init container,
    then each container, then the pod-level block. Only the template form has limits.

    Call it on a pod set that pod_set_requests accepted (shapes are not checked again)."""
    template = pod_set.get("template")
    if not isinstance(template, Mapping):
        return ()
    spec = _mapping(template.get("spec"), "template.spec")
    found: list[tuple[str, tuple[str, ...]]] = []
    for field in ("initContainers", "containers"):
        for i, container in enumerate(_sequence(spec.get(field), f"template.spec.{field}")):
            where = f"template.spec.{field}[{i}]"
            names = _greater(_mapping(container, where).get("resources"), where)
            if names:
                found.append((where, names))
    names = _greater(spec.get("resources"), "template.spec.resources")
    if names:
        found.append(("template.spec.resources", names))
    return tuple(found)


def _greater(resources: object, where: str) -> tuple[str, ...]:
    """Resources whose request exceeds their limit, compared as Kueue amounts."""
    block = _mapping(resources, where)
    limits = _resource_list(block.get("limits"), f"{where}.limits")
    if not limits:
        return ()
    requests = _resource_list(block.get("requests"), f"{where}.requests")
    return tuple(
        name for name in sorted(requests)
        if name in limits and to_amount(name, requests[name]) > to_amount(name, limits[name])
    )


def _template_requests(template: object, where: str) -> Resources:
    if not isinstance(template, Mapping):
        raise PodSetError(where, f"must be a mapping, got {_type_name(template)}")
    spec = _mapping(template.get("spec"), f"{where}.spec")
    where = f"{where}.spec"
    total: Resources = {}
    for i, container in enumerate(_sequence(spec.get("containers"), f"{where}.containers")):
        _add(total, _container_requests(container, f"{where}.containers[{i}]"))

    sidecars: Resources = {}
    init_peak: Resources = {}
    init_containers = _sequence(spec.get("initContainers"), f"{where}.initContainers")
    for i, container in enumerate(init_containers):
        here = f"{where}.initContainers[{i}]"
        requests = _container_requests(container, here)
        if _is_sidecar(container, here):
            # A sidecar keeps running alongside everything started after it.
            _add(total, requests)
            _add(sidecars, requests)
            need = sidecars
        else:
            need = dict(requests)
            _add(need, sidecars)
        _max_into(init_peak, need)
    _max_into(total, init_peak)

    pod_level = _requests_or_limits(spec.get("resources"), f"{where}.resources")
    for name in sorted(pod_level):
        if name in _POD_LEVEL or name.startswith(_HUGEPAGES_PREFIX):
            total[name] = pod_level[name]

    _add(total, _resource_list(spec.get("overhead"), f"{where}.overhead"))
    return total


def _container_requests(container: object, where: str) -> Resources:
    return _requests_or_limits(_mapping(container, where).get("resources"), f"{where}.resources")


def _requests_or_limits(resources: object, where: str) -> Resources:
    """A resources block's requests, a missing request defaulting to its limit."""
    block = _mapping(resources, where)
    limits = _resource_list(block.get("limits"), f"{where}.limits")
    requests = _resource_list(block.get("requests"), f"{where}.requests")
    return {**limits, **requests}


def _is_sidecar(container: object, where: str) -> bool:
    policy = _mapping(container, where).get("restartPolicy")
    if policy is not None and not isinstance(policy, str):
        raise PodSetError(f"{where}.restartPolicy", "must be a string")
    return policy == "Always"


def _resource_list(raw: object, where: str) -> Resources:
    """A ResourceList: validated, sorted by name, values as exact quantities."""
    resources = _mapping(raw, where)
    result: Resources = {}
    for name in _sorted_keys(resources, where):
        here = f"{where}.{name}"
        if name == _RESERVED:
            raise PodSetError(here, "the key is reserved for internal kueue use")
        raw_value = resources[name]
        if raw_value is None:
            raise PodSetError(here, "a quantity is required, got null")
        try:
            value = parse_quantity(raw_value)
        except QuantityError as error:
            raise PodSetError(here, str(error)) from error
        if value < 0:
            shown = json.dumps(raw_value, ensure_ascii=False)
            raise PodSetError(here, f"invalid value {shown}: must be greater than or equal to 0")
        result[name] = value
    return result


def _add(into: Resources, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, Fraction(0)) + value


def _max_into(into: Resources, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        if name not in into or value > into[name]:
            into[name] = value


def _mapping(raw: object, where: str) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise PodSetError(where, f"must be a mapping, got {_type_name(raw)}")
    return raw


def _sequence(raw: object, where: str) -> Sequence[Any]:
    if raw is None:
        return ()
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
        raise PodSetError(where, f"must be a list, got {_type_name(raw)}")
    return raw


def _sorted_keys(mapping: Mapping[Any, Any], where: str) -> Iterable[str]:
    keys = list(mapping)
    for key in keys:
        if not isinstance(key, str):
            raise PodSetError(where, f"resource names must be strings, got {key!r}")
    return sorted(keys)


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__
