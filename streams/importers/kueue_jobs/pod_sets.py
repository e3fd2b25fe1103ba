"""A pod template of a job -> one pod set of its Workload, as every Kueue integration builds it:
`{name, count, minCount?, template}` with the template copied whole (containers with their
command and args, so a launcher can run them), environment variables deduplicated as Kueue's
jobframework.SanitizePodSet does (pkg/controller/jobframework/utils.go: the last value of a name
wins, at the place the name first appeared).

What the API server or Kueue would refuse in a template is refused here, naming the job's field:
a template without containers, requests above limits (the API server's pod validation), and
topology-aware scheduling annotations or DRA claims, which quotaflow does not implement.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from domain.pod_requests import PodSetError, pod_set_requests, requests_above_limits
from domain.quantity import QuantityError, parse_quantity, to_amount
from streams.importers.kueue_jobs.manifest import Manifest, mapping, sequence

DEFAULT_POD_SET: Final = "main"  # Kueue's kueue.DefaultPodSetName

# Kueue's topology-aware scheduling annotations on a pod template (apis/kueue/v1beta2/constants.go).
TAS_ANNOTATIONS: Final = (
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-preferred-topology",
    "kueue.x-k8s.io/podset-unconstrained-topology",
    "kueue.x-k8s.io/podset-slice-required-topology",
    "kueue.x-k8s.io/podset-slice-size",
    "kueue.x-k8s.io/podset-slice-required-topology-constraints",
    "kueue.x-k8s.io/podset-group-name",
)


@dataclass(frozen=True)
class PodSetSource:
    """Where a pod set comes from: its name (as Kueue names it), pod count, optional minCount, the
    pod template, and the template's path in the job (for messages)."""

    name: str
    count: int
    template: object  # a PodTemplateSpec as written; anything else is refused naming `path`
    path: str
    min_count: int | None = None


def pod_set(job: Manifest, source: PodSetSource) -> dict[str, Any]:
    template = _checked_template(job, source.template, source.path)
    out: dict[str, Any] = {"name": source.name, "count": source.count}
    if source.min_count is not None:
        out["minCount"] = source.min_count
    out["template"] = template
    return out


def named_groups(job: Manifest, groups: list[Any], where: str, name_field: str) -> Iterator[tuple[str, Mapping[str, Any], str]]:
    """The entries of a job's list of named pod groups, one pod set each (a JobSet's
    `replicatedJobs`, a Ray cluster's `workerGroupSpecs`): (the entry's path, the entry, its name
    as written; the pod set is named by it in lower case, Kueue's NewPodSetReference). An entry
    that is not a mapping, or has no name, is refused."""
    for i, group in enumerate(groups):
        here = f"{where}[{i}]"
        entry = mapping(group, here, job)
        name = entry.get(name_field)
        if not isinstance(name, str) or not name:
            raise job.refuse(f"{here}.{name_field}", "Required value")
        yield here, entry, name


def _checked_template(job: Manifest, raw: object, path: str) -> dict[str, Any]:
    template = mapping(raw, path, job)
    if not template:
        raise job.refuse(path, "Required value: a pod template")
    meta = mapping(template.get("metadata"), f"{path}.metadata", job)
    annotations = mapping(meta.get("annotations"), f"{path}.metadata.annotations", job)
    for key in TAS_ANNOTATIONS:
        if key in annotations:
            raise job.refuse(
                f"{path}.metadata.annotations[{key}]",
                "Unsupported: topology-aware scheduling (TAS) is not supported by quotaflow",
            )
    spec = mapping(template.get("spec"), f"{path}.spec", job)
    containers = sequence(spec.get("containers"), f"{path}.spec.containers", job)
    if not containers:
        raise job.refuse(f"{path}.spec.containers", "Required value")
    if spec.get("resourceClaims"):
        raise job.refuse(
            f"{path}.spec.resourceClaims",
            "Unsupported: dynamic resource allocation (DRA) claims are not supported: quotaflow cannot "
            "count the devices a claim asks for",
        )
    for field in ("containers", "initContainers"):
        for i, c in enumerate(sequence(spec.get(field), f"{path}.spec.{field}", job)):
            c = mapping(c, f"{path}.spec.{field}[{i}]", job)
            res = mapping(c.get("resources"), f"{path}.spec.{field}[{i}].resources", job)
            if res.get("claims"):
                raise job.refuse(
                    f"{path}.spec.{field}[{i}].resources.claims",
                    "Unsupported: dynamic resource allocation (DRA) claims are not supported",
                )
    copied = copy.deepcopy(dict(template))
    _sanitize_env(copied)
    _check_requests(job, copied, path)
    return copied


def _sanitize_env(template: dict[str, Any]) -> None:
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return
    for field in ("containers", "initContainers"):
        for c in spec.get(field) or ():
            env = c.get("env") if isinstance(c, dict) else None
            if not isinstance(env, list):
                continue
            last: dict[Any, Any] = {}
            order: list[Any] = []
            for var in env:
                key = var.get("name") if isinstance(var, Mapping) else id(var)
                if key not in last:
                    order.append(key)
                last[key] = var
            c["env"] = [last[k] for k in order]


def _check_requests(job: Manifest, template: dict[str, Any], path: str) -> None:
    """Quantities must parse, and no request may exceed its limit: the API server refuses such a
    job on creation (core/v1 ValidateResourceRequirements), so Kueue never sees it."""
    try:
        pod_set_requests({"template": template})
    except PodSetError as exc:
        raise job.refuse(_at(path, exc.field) if exc.field else path, exc.detail) from None
    for where, names in requests_above_limits({"template": template}):
        pod_level = where.endswith(".resources")
        node: Any = template
        for part in where.removeprefix("template.").replace("]", "").replace("[", ".").split("."):
            node = node[int(part)] if part.isdigit() else node[part]
        block = node if pod_level else node["resources"]
        name = names[0]
        field = f"{_at(path, where)}{'' if pod_level else '.resources'}.requests[{name}]"
        raise job.refuse(
            field,
            f'Invalid value: "{block["requests"][name]}": must be less than or equal to {name} limit of '
            f'{block["limits"][name]}',
        )


def _at(path: str, relative: str) -> str:
    """A path below a pod set ("template.spec...") as the job's field ("<path>.spec...")."""
    rest = relative.removeprefix("template")
    return f"{path}{rest}" if path else rest.removeprefix(".")


def rounded_up_to_milli(value: object) -> object:
    """A quantity rounded up to milli-units, as AppWrapper's defaultResourceList does; kept as
    written when it already has no finer digits."""
    try:
        q = parse_quantity(value)
    except QuantityError:
        return value
    if (q * 1000).denominator == 1:
        return value
    return f"{to_amount('cpu', q)}m"
