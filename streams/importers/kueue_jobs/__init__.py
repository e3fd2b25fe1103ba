"""Kueue's jobs in: the job kinds Kueue integrates, turned into the Workload that Kueue's
integration for each kind builds (pod sets, counts, minCount, requests, names, owner).

    from streams.importers.kueue_jobs import convert_documents, workloads_for

    workloads = workloads_for(job_manifest)          # one job -> its Workloads, or JobRefused
    result = convert_documents([("jobs.yaml#1", doc), ...])   # many, pod groups across documents
    result.refused      # what Kueue would refuse, or quotaflow cannot convert, with the reason
    result.workloads    # every Workload, in document order

One module per integration family (batch, pods, jobset, kubeflow, ray, serving, appwrapper), the
shared pod-template -> pod-set step (pod_sets), the Workload around the pod sets (workload_object),
names (workload_names) and the registry of kinds. Documents of kind Workload pass through as they
are (the engine decides about them). Each Workload produced from a job is checked by the engine's
own Workload parser, so what would be Rejected for its shape is refused here, before anything is
published.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from domain.fields import InvalidInput
from domain.workload import parse_workload
from streams.importers.kueue_jobs.manifest import (
    JobRefused,
    Manifest,
    Naming,
    read_manifest,
    ref_of,
)
from streams.importers.kueue_jobs.owners import owned_by
from streams.importers.kueue_jobs.pods import convert_pod_group, group_name
from streams.importers.kueue_jobs.registry import (
    CONFIGURATION_KINDS,
    NOT_CONVERTED,
    POD_BASED,
    canonical_job_kind,
    job_kind,
)
from streams.importers.kueue_jobs.workload_names import random_suffix


@dataclass
class Converted:
    """One document (or one pod group) and the Workloads it became (none: `note` says why)."""

    source: str
    ref: str
    kind: str
    workloads: list[dict[str, Any]]
    note: str = ""


@dataclass
class Refusal:
    """A refused document (or pod group): where it came from, and why (`error.field`,
    `error.reason`)."""

    source: str
    ref: str
    kind: str
    error: JobRefused

    @property
    def reason(self) -> str:
        return str(self.error)

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}"


class JobsRefused(ValueError):
    """Some documents were refused; nothing of the batch should be published."""

    def __init__(self, refusals: list[Refusal]) -> None:
        self.refusals = refusals
        super().__init__("; ".join(str(r) for r in refusals))


@dataclass
class Conversion:
    converted: list[Converted] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)

    @property
    def workloads(self) -> list[dict[str, Any]]:
        return [w for c in self.converted for w in c.workloads]


def default_naming(rng: random.Random | None = None) -> Naming:
    return Naming(suffix=lambda: random_suffix(rng), now=time.time)


def workloads_for(manifest: Mapping[str, Any], *, naming: Naming | None = None) -> list[dict[str, Any]]:
    """The Workloads Kueue builds for one job manifest (a Workload passes through), or
    JobRefused. A pod of a group needs its whole group: use convert_documents."""
    result = convert_documents([("manifest", manifest)], naming=naming)
    if result.refused:
        raise result.refused[0].error
    return result.workloads


def convert_documents(
    documents: Iterable[tuple[str, Mapping[str, Any]]], *, naming: Naming | None = None
) -> Conversion:
    """Convert `(source, document)` pairs in order; pods of one group (namespace and group name)
    are converted together where the group's first pod appears."""
    naming = naming or default_naming()
    result = Conversion()
    groups: dict[tuple[str, str], list[tuple[str, Manifest]]] = {}
    order: list[tuple[str, Any]] = []
    for source, doc in documents:
        try:
            item = _one(doc, naming)
        except JobRefused as exc:
            result.refused.append(Refusal(source, exc.ref, _kind_of(doc), exc))
            continue
        except Exception as exc:  # a shape no check foresaw: still an answer, never a crash
            ref = ref_of(doc) if isinstance(doc, Mapping) else "?"
            result.refused.append(Refusal(source, ref, _kind_of(doc), _unforeseen(ref, exc)))
            continue
        if isinstance(item, Manifest):
            key = (item.namespace, group_name(item))
            if key not in groups:
                groups[key] = []
                order.append(("group", key))
            groups[key].append((source, item))
        else:
            order.append(("done", Converted(source, item[0], _kind_of(doc), item[1], item[2])))
    for what, value in order:
        if what == "group":
            members = groups[value]
            source = members[0][0] if len(members) == 1 else f"{members[0][0]} (+{len(members) - 1} pods)"
            ref = f"pod-group/{value[0]}/{value[1]}"
            try:
                workloads = _checked(ref, convert_pod_group([m for _, m in members]))
            except JobRefused as exc:
                result.refused.append(Refusal(source, exc.ref, "Pod", exc))
                continue
            except Exception as exc:
                result.refused.append(Refusal(source, ref, "Pod", _unforeseen(ref, exc)))
                continue
            result.converted.append(Converted(source, ref, "Pod", workloads))
        else:
            result.converted.append(value)
    return result


def _unforeseen(ref: str, exc: Exception) -> JobRefused:
    return JobRefused(ref, "", f"quotaflow cannot convert this object ({type(exc).__name__}: {exc}); its fields are not as the kind defines them")


def _kind_of(doc: object) -> str:
    kind = doc.get("kind") if isinstance(doc, Mapping) else None
    return kind if isinstance(kind, str) else "?"


def _one(doc: Mapping[str, Any], naming: Naming) -> Manifest | tuple[str, list[dict[str, Any]], str]:
    """A grouped pod's Manifest (converted with its group), or (ref, workloads, note)."""
    if not isinstance(doc, Mapping):
        raise JobRefused("?", "", f"a document must be an object, got {type(doc).__name__}")
    ref = ref_of(doc)
    kind = doc.get("kind")
    api_version = doc.get("apiVersion")
    # A document without a kind is a Workload, as the engine reads one.
    if (kind is None or kind == "Workload") and (api_version is None or str(api_version).startswith("kueue.x-k8s.io/")):
        # Passed on as written: the engine decides about a Workload (Rejected names what is wrong).
        return (ref, [dict(doc)], "")
    if not isinstance(kind, str) or not kind:
        raise JobRefused(ref, "kind", "Required value: a job manifest needs a kind")
    if kind in CONFIGURATION_KINDS:
        raise JobRefused(ref, "", f"{kind} is not a Workload or a job: configuration is applied (quotaflow apply -f)")
    if not isinstance(api_version, str) or not api_version:
        raise JobRefused(ref, "apiVersion", "Required value: a job manifest needs an apiVersion")
    entry = job_kind(api_version, kind)
    if entry is None:
        if kind in NOT_CONVERTED:
            raise JobRefused(ref, "", f"Unsupported: Kueue integrates {kind} ({NOT_CONVERTED[kind]}), but quotaflow does not convert it")
        if canonical_job_kind(kind) == kind:
            raise JobRefused(ref, "apiVersion", f'no matches for kind "{kind}" in version "{api_version}"')
        hint = (
            "; Kueue admits the pods it creates through its pod integration: submit those pods"
            if kind in POD_BASED else ""
        )
        raise JobRefused(ref, "", f'kind "{kind}" ({api_version}) is not a job kind Kueue integrates{hint}')
    version = api_version.rpartition("/")[2]
    if version not in entry.versions:
        raise JobRefused(ref, "apiVersion", f'no matches for kind "{kind}" in version "{api_version}"')
    job = read_manifest(doc, naming)
    if kind == "Pod" and group_name(job):
        return job
    workloads = _checked(job.ref, entry.convert(job, naming))
    note = "" if workloads else "no pods (0 replicas), so no workload"
    return (job.ref, workloads, note)


def _checked(ref: str, workloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each Workload as the engine parses it: what it would reject is refused here."""
    for wl in workloads:
        try:
            parse_workload(wl)
        except InvalidInput as exc:
            raise JobRefused(ref, "", f"its Workload would be rejected: {exc.reason}: {exc.message}") from None
    return workloads


__all__ = [
    "Conversion",
    "Converted",
    "JobRefused",
    "JobsRefused",
    "Naming",
    "Refusal",
    "canonical_job_kind",
    "convert_documents",
    "default_naming",
    "owned_by",
    "workloads_for",
]
