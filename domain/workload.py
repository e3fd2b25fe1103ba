"""Kueue Workload objects: parsing, validation, and the per-pod-set requests Kueue derives."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from domain import reasons
from domain.api_fields import check_api_version, check_strict
from domain.fields import Fields, InvalidInput
from domain.names import (
    annotations_message,
    label_problem,
    labels_message,
    subdomain_problem,
)
from domain.objects import Toleration, checked, described
from domain.pod_requests import PodSetError, pod_set_requests, requests_above_limits
from domain.selectors import NodeSelectorTerm, SelectorError, parse_node_selector_terms
from domain.shared_values import shared_labels, shared_name
from domain.timestamps import TimestampError, parse_time

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_POD_SETS = 18


@dataclass(frozen=True, slots=True)
class PodSet:
    name: str
    count: int
    min_count: int | None
    per_pod: tuple[tuple[str, int], ...]  # sorted by resource name
    node_selector: tuple[tuple[str, str], ...]
    tolerations: tuple[Toleration, ...]
    # (path below the pod set, resources) where a container requests more than its limit
    above_limits: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Required node affinity: terms ORed, each of requirements ANDed (selectors.py).
    node_affinity: tuple[NodeSelectorTerm, ...] = ()
    priority_class: str | None = None  # the template's priorityClassName (a PriorityClass)
    # The per-pod requests as the pods ask them, where the Configuration's `resources` make
    # `per_pod` (what counts against quota) differ (domain/resource_transformations.py).
    requested: tuple[tuple[str, int], ...] | None = None


class WorkloadSpec(msgspec.Struct, frozen=True, gc=False):
    """One per submission, so a Struct: built in C, where a frozen dataclass's __init__ set each
    field through object.__setattr__ (a large share of a submission's cost). Untracked by the
    garbage collector (`gc=False`): it holds only strings, numbers and frozen tuples built
    before it, so it can be in no reference cycle, and a deep backlog's specs cost neither the
    collector's header nor its passes."""

    namespace: str
    name: str
    queue_name: str
    priority: int | None
    priority_class: str | None
    active: bool
    labels: tuple[tuple[str, str], ...]
    creation_time: int | None
    pod_sets: tuple[PodSet, ...]
    uid: str | None = None
    # Set when some container requests more than its limit: Kueue holds such a workload as
    # Misconfigured (checked when it is nominated, like the namespace). An update keeps the pod
    # sets of the submission, and so this finding.
    resources_error: str | None = None
    # A Kubernetes PriorityClass the workload names (priorityClassSource
    # scheduling.k8s.io/priorityclass, or a priorityClassRef of that group); `priority_class`
    # is always a WorkloadPriorityClass.
    pod_priority_class: str | None = None
    # spec.maximumExecutionTimeSeconds, or Kueue's job label for it (domain/execution_time.py).
    max_exec_seconds: int | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _resources_error(pod_sets: tuple[PodSet, ...]) -> str | None:
    """Kueue's admissibility check of requests against limits (ValidateResources): the
    message a workload is held with, Misconfigured, or None."""
    errors = [
        f"spec.podSets[{i}].{where}: Invalid value: {_json_list(names)}: {reasons.MSG_REQUESTS_ABOVE_LIMITS}"
        for i, ps in enumerate(pod_sets)
        for where, names in ps.above_limits
    ]
    if not errors:
        return None
    unique = list(dict.fromkeys(errors))  # an aggregate of field errors drops repeats
    joined = unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"
    return f"{reasons.MSG_RESOURCES_VALIDATION_FAILED}: {joined}"


def _json_list(names: tuple[str, ...]) -> str:
    return "[" + ",".join(f'"{n}"' for n in names) + "]"


def _invalid(message: str) -> InvalidInput:
    return InvalidInput(reasons.INVALID_WORKLOAD, message)


# Kueue's v1beta1 priorityClassSource values, and the v1beta2 priorityClassRef groups and kinds.
WORKLOAD_PRIORITY_CLASS_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
POD_PRIORITY_CLASS_SOURCE = "scheduling.k8s.io/priorityclass"
_REF_KINDS = {"kueue.x-k8s.io": "WorkloadPriorityClass", "scheduling.k8s.io": "PriorityClass"}
# Kueue's label for a job's maximum execution time (pkg/controller/constants).
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"


def parse_workload(raw: object, path: str = "workload") -> WorkloadSpec:
    obj = Fields(raw, path, reasons.INVALID_WORKLOAD)
    kind = obj.str("kind", "Workload")
    if kind != "Workload":
        raise obj.fail("kind", f'expected "Workload", got "{kind}"')
    what = f"{path}: {described(kind, obj.data)}"
    try:
        version = check_api_version(kind, obj.str("apiVersion", ""))
    except InvalidInput as exc:
        raise InvalidInput(reasons.INVALID_WORKLOAD, f"{what}: {exc.message}") from None
    check_strict(kind, version, obj.data, what, reasons.INVALID_WORKLOAD)
    meta = obj.sub("metadata")
    name = meta.str("name")
    if not name:
        raise meta.fail("name", "required value")
    checked(meta, "name", name, subdomain_problem(name))
    namespace = meta.str("namespace", "default") or "default"
    checked(meta, "namespace", namespace, label_problem(namespace))
    labels = meta.str_map("labels")
    bad_labels = labels_message(labels.items())
    if bad_labels is not None:
        raise meta.fail("labels", bad_labels)
    annotations = meta.data.get("annotations")
    if isinstance(annotations, Mapping):
        too_long = annotations_message(
            (k, v) for k, v in annotations.items() if isinstance(k, str) and isinstance(v, str)
        )
        if too_long is not None:
            raise meta.fail("annotations", too_long)
    creation: int | None = None
    if meta.has("creationTimestamp"):
        try:
            creation = parse_time(meta.raw("creationTimestamp"))
        except TimestampError as exc:
            raise meta.fail("creationTimestamp", str(exc)) from None
    spec = obj.sub("spec")
    priority = spec.opt_int("priority")
    if priority is not None and not -(2**31) <= priority < 2**31:
        raise spec.fail("priority", "must be a 32-bit integer")
    pcn, pod_pcn = _priority_class(spec)
    queue_name = spec.str("queueName", "")
    if queue_name:
        checked(spec, "queueName", queue_name, subdomain_problem(queue_name))
    pod_sets = _pod_sets(spec)
    max_exec = _max_exec_seconds(spec, meta, labels)
    return WorkloadSpec(
        namespace=shared_name(namespace),
        name=name,
        queue_name=shared_name(queue_name),
        priority=priority,
        priority_class=pcn or None,
        active=spec.bool("active", True),
        labels=shared_labels(tuple(labels.items())),
        creation_time=creation,
        pod_sets=pod_sets,
        uid=meta.opt_str("uid"),
        resources_error=resources_error(pod_sets),
        pod_priority_class=pod_pcn,
        max_exec_seconds=max_exec,
    )


def _max_exec_seconds(spec: Fields, meta: Fields, labels: Mapping[str, str]) -> int | None:
    """`spec.maximumExecutionTimeSeconds` (Kueue's CRD: at least 1), else Kueue's job label for
    it, which Kueue's job framework copies into the Workload it creates (jobframework
    `MaximumExecutionTimeSeconds`) after its webhook checked it (`validateCreateForMaxExecTime`:
    an integer, greater than 0)."""
    seconds = spec.opt_int("maximumExecutionTimeSeconds")
    if seconds is not None:
        if not 1 <= seconds < 2**31:
            raise spec.fail(
                "maximumExecutionTimeSeconds",
                f"Invalid value: {seconds}: {spec.path}.maximumExecutionTimeSeconds in body should be greater "
                "than or equal to 1" if seconds < 1 else f"Invalid value: {seconds}: must be a 32-bit integer",
            )
        return seconds
    text = labels.get(MAX_EXEC_TIME_LABEL)
    if text is None:
        return None
    where = f"labels.{MAX_EXEC_TIME_LABEL}"
    try:
        value = int(text, 10)
    except ValueError:
        raise meta.fail(where, f'Invalid value: "{text}": strconv.Atoi: parsing "{text}": invalid syntax') from None
    if value <= 0:
        raise meta.fail(where, f"Invalid value: {value}: should be greater than 0")
    if value >= 2**31:
        raise meta.fail(where, f"Invalid value: {value}: must be a 32-bit integer")
    return value


def _priority_class(spec: Fields) -> tuple[str | None, str | None]:
    """(WorkloadPriorityClass, PriorityClass) the spec names: v1beta1's priorityClassName with
    priorityClassSource (empty: a WorkloadPriorityClass, quotaflow's reading since before the
    source was read), or v1beta2's priorityClassRef (no group: a WorkloadPriorityClass)."""
    pcn = spec.opt_str("priorityClassName")
    ref = spec.opt_sub("priorityClassRef")
    if pcn is None and ref is not None:
        name = ref.opt_str("name")
        group = ref.enum("group", tuple(_REF_KINDS), "kueue.x-k8s.io")
        kind = ref.opt_str("kind")
        if kind is not None and kind != _REF_KINDS[group]:
            raise ref.fail("kind", f"only the {_REF_KINDS[group]} kind is allowed for the {group} group")
        if not name:
            return None, None
        checked(ref, "name", name, subdomain_problem(name))
        return (None, name) if group == "scheduling.k8s.io" else (name, None)
    source = spec.enum(
        "priorityClassSource", (WORKLOAD_PRIORITY_CLASS_SOURCE, POD_PRIORITY_CLASS_SOURCE, ""), ""
    )
    if not pcn:
        return None, None
    checked(spec, "priorityClassName", pcn, subdomain_problem(pcn))
    return (None, pcn) if source == POD_PRIORITY_CLASS_SOURCE else (pcn, None)


def resources_error(pod_sets: tuple[PodSet, ...]) -> str | None:
    return _resources_error(pod_sets) if any(ps.above_limits for ps in pod_sets) else None


def pod_sets_of(spec: Fields) -> tuple[PodSet, ...]:
    """The pod sets of a workload's spec (the `spec` object's Fields)."""
    return _pod_sets(spec)


def _pod_sets(spec: Fields) -> tuple[PodSet, ...]:
    items = spec.objects("podSets")
    if not items:
        raise spec.fail("podSets", "a workload needs at least one pod set")
    if len(items) > MAX_POD_SETS:
        raise spec.fail("podSets", f"must have at most {MAX_POD_SETS} items")
    seen: set[str] = set()
    out: list[PodSet] = []
    with_min = 0
    for ps in items:
        parsed = _parse_pod_set(ps)
        if parsed.name in seen:
            raise ps.fail("name", f'Duplicate value: "{parsed.name}"')
        seen.add(parsed.name)
        with_min += parsed.min_count is not None
        out.append(parsed)
    if with_min > 1:
        raise spec.fail("podSets", "at most one podSet can use minCount")
    return tuple(out)


# Job templates repeat: the same pod set arrives thousands of times. Parsing one means exact
# quantity arithmetic over its containers, so identical raw pod sets share one parse. Only
# successful parses are kept (errors carry the event's path), and the result does not depend
# on what the memo holds, so decisions stay the same whatever was seen before.
_MEMO: dict[bytes, PodSet] = {}
_MEMO_LIMIT = 4096
_encode = msgspec.json.Encoder().encode


def _parse_pod_set(ps: Fields) -> PodSet:
    try:
        key = _encode(ps.data)
    except (TypeError, msgspec.EncodeError):
        return _parse_pod_set_uncached(ps)
    cached = _MEMO.get(key)
    if cached is None:
        cached = _parse_pod_set_uncached(ps)
        if len(_MEMO) >= _MEMO_LIMIT:
            _MEMO.clear()
        _MEMO[key] = cached
    return cached


def _parse_pod_set_uncached(ps: Fields) -> PodSet:
    name = ps.str("name", "main")
    if not _DNS_LABEL.match(name) or len(name) > 63:
        raise ps.fail("name", f'Invalid value: "{name}": must be a DNS label')
    count = ps.int("count", 1)
    if count < 0:
        raise ps.fail("count", "must be greater than or equal to 0")
    min_count = ps.opt_int("minCount")
    if min_count is not None:
        if min_count < 1:
            raise ps.fail("minCount", "must be greater than or equal to 1")
        if min_count > count:
            raise ps.fail("minCount", "should be less than or equal to count")
    try:
        per_pod = pod_set_requests(ps.data)
    except PodSetError as exc:
        raise InvalidInput(reasons.INVALID_WORKLOAD, f"{ps.path}: {exc}") from None
    pod_spec = ps.sub("template").sub("spec")
    required = pod_spec.sub("affinity").sub("nodeAffinity").sub("requiredDuringSchedulingIgnoredDuringExecution")
    affinity: tuple[NodeSelectorTerm, ...] = ()
    if required.has("nodeSelectorTerms") or required.data:
        try:
            affinity = parse_node_selector_terms(required.raw("nodeSelectorTerms") or [])
        except SelectorError as exc:
            raise InvalidInput(reasons.INVALID_WORKLOAD, f"{required.path}.nodeSelectorTerms{exc}") from None
    template_pcn = pod_spec.opt_str("priorityClassName") or None
    if template_pcn is not None:
        checked(pod_spec, "priorityClassName", template_pcn, subdomain_problem(template_pcn))
    return PodSet(
        name=name,
        count=count,
        min_count=min_count,
        per_pod=tuple(sorted(per_pod.items())),
        node_selector=tuple(pod_spec.str_map("nodeSelector").items()),
        tolerations=tuple(_toleration(t) for t in pod_spec.objects("tolerations")),
        above_limits=requests_above_limits(ps.data),
        node_affinity=affinity,
        priority_class=template_pcn,
    )


def _toleration(t: Fields) -> Toleration:
    return Toleration(t.str("key", ""), t.str("operator", "Equal"), t.str("value", ""), t.str("effect", ""))


def workload_ref(raw: Mapping[str, Any]) -> str | None:
    """Best-effort `namespace/name` of a workload in a malformed event, for the Rejected decision."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    if isinstance(meta, Mapping) and isinstance(meta.get("name"), str):
        ns = meta.get("namespace")
        return f"{ns if isinstance(ns, str) and ns else 'default'}/{meta['name']}"
    return None
