"""One job manifest as a Kueue integration reads it: its identity (kind, namespace, name, UID),
the labels and annotations Kueue acts on, and the refusal raised when Kueue would refuse it or
quotaflow cannot convert it.

The identity is what the API server would give the object on creation: `metadata.namespace`
(default `default`, kubectl's), `metadata.name` or, with only `metadata.generateName`, the
generated name (see workload_names.generated_name), and `metadata.uid` or a UID derived from the
object's kind, namespace and name (see workload_names.derived_uid).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Final

from domain.names import invalid, label_problem, subdomain_problem

# Kueue's labels and annotations on a job (pkg/controller/constants/constants.go).
QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL: Final = "kueue.x-k8s.io/priority-class"
MAX_EXEC_TIME_LABEL: Final = "kueue.x-k8s.io/max-exec-time-seconds"
PREBUILT_WORKLOAD_LABEL: Final = "kueue.x-k8s.io/prebuilt-workload-name"
PREBUILT_WORKLOAD_ANNOTATION: Final = "kueue.x-k8s.io/prebuilt-workload-name"
ELASTIC_JOB_ANNOTATION: Final = "kueue.x-k8s.io/elastic-job"
JOB_MIN_PARALLELISM_ANNOTATION: Final = "kueue.x-k8s.io/job-min-parallelism"
JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
JOB_OWNER_GVK_ANNOTATION: Final = "kueue.x-k8s.io/job-owner-gvk"
JOB_OWNER_NAME_ANNOTATION: Final = "kueue.x-k8s.io/job-owner-name"
COMPONENT_WORKLOAD_INDEX_ANNOTATION: Final = "kueue.x-k8s.io/component-workload-index"
IS_GROUP_WORKLOAD_ANNOTATION: Final = "kueue.x-k8s.io/is-group-workload"
RESOURCE_IN_USE_FINALIZER: Final = "kueue.x-k8s.io/resource-in-use"


class JobRefused(ValueError):
    """A job manifest that Kueue would refuse, or that quotaflow cannot convert.

    `ref` is `kind/namespace/name` (as far as the manifest says), `field` the offending field path
    (may be empty) and `reason` the message, in Kueue's or the API server's words where they have
    one."""

    def __init__(self, ref: str, field: str, reason: str) -> None:
        self.ref = ref
        self.field = field
        self.reason = reason
        super().__init__(f"{ref}: {field}: {reason}" if field else f"{ref}: {reason}")


@dataclass(frozen=True)
class Naming:
    """What the API server would fill in, injectable so tests are deterministic.

    `suffix()` gives the 5 characters appended to a `generateName` (random by default, as the API
    server's SimpleNameGenerator does); `now()` is the wall clock in seconds (a CronJob's Job is
    named for the minute it is scheduled)."""

    suffix: Callable[[], str]
    now: Callable[[], float]


@dataclass
class Manifest:
    """A job object (a mapping as parsed from YAML) and the identity it gets on creation."""

    raw: Mapping[str, Any]
    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def group(self) -> str:
        group, slash, _ = self.api_version.rpartition("/")
        return group if slash else ""

    @property
    def ref(self) -> str:
        return f"{self.kind.lower()}/{self.namespace}/{self.name}"

    def refuse(self, field: str, reason: str) -> JobRefused:
        return JobRefused(self.ref, field, reason)

    @property
    def spec(self) -> Mapping[str, Any]:
        return mapping(self.raw.get("spec"), "spec", self)

    @property
    def queue_name(self) -> str:
        return self.labels.get(QUEUE_LABEL, "")


def ref_of(raw: Mapping[str, Any]) -> str:
    """`kind/namespace/name` as far as a (possibly malformed) manifest says."""
    kind = raw.get("kind")
    meta = raw.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    ns = meta.get("namespace") if isinstance(meta.get("namespace"), str) and meta.get("namespace") else "default"
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        gen = meta.get("generateName")
        name = f"{gen}*" if isinstance(gen, str) and gen else "?"
    return f"{str(kind).lower() if isinstance(kind, str) else '?'}/{ns}/{name}"


def read_manifest(raw: Mapping[str, Any], naming: Naming) -> Manifest:
    """The identity of a job manifest as the API server would give it, or JobRefused."""
    from streams.importers.kueue_jobs.workload_names import derived_uid, generated_name

    ref = ref_of(raw)
    kind = raw.get("kind")
    api_version = raw.get("apiVersion")
    if not isinstance(kind, str) or not kind:
        raise JobRefused(ref, "kind", "Required value: a job manifest needs a kind")
    if not isinstance(api_version, str) or not api_version:
        raise JobRefused(ref, "apiVersion", "Required value: a job manifest needs an apiVersion")
    meta = raw.get("metadata")
    if not isinstance(meta, Mapping):
        raise JobRefused(ref, "metadata", "Required value: a job manifest needs metadata")
    namespace = _opt_str(meta, "namespace", ref) or "default"
    problem = label_problem(namespace)
    if problem is not None:
        raise JobRefused(ref, "metadata.namespace", invalid(namespace, problem))
    labels = _str_map(meta, "labels", ref)
    annotations = _str_map(meta, "annotations", ref)
    name = _opt_str(meta, "name", ref)
    if not name:
        base = _opt_str(meta, "generateName", ref)
        if not base:
            raise JobRefused(ref, "metadata.name", "Required value: name or generateName is required")
        name = generated_name(base, naming.suffix)
    problem = subdomain_problem(name)
    if problem is not None:
        raise JobRefused(ref, "metadata.name", invalid(name, problem))
    uid = _opt_str(meta, "uid", ref) or derived_uid(api_version, kind, namespace, name)
    return Manifest(raw, kind, api_version, namespace, name, uid, labels, annotations)


def _opt_str(meta: Mapping[str, Any], key: str, ref: str) -> str:
    value = meta.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise JobRefused(ref, f"metadata.{key}", f"must be a string, got {type(value).__name__}")
    return value


def _str_map(meta: Mapping[str, Any], key: str, ref: str) -> dict[str, str]:
    value = meta.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise JobRefused(ref, f"metadata.{key}", f"must be a map of strings, got {type(value).__name__}")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise JobRefused(ref, f"metadata.{key}.{k}", f"must be a string, got {type(v).__name__}")
        out[k] = v
    return out


def mapping(value: object, where: str, job: Manifest) -> Mapping[str, Any]:
    """`value` if a mapping, {} if absent, else the job is refused naming `where`."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise job.refuse(where, f"must be an object, got {type(value).__name__}")
    return value


def sequence(value: object, where: str, job: Manifest) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise job.refuse(where, f"must be a list, got {type(value).__name__}")
    return value


def integer(value: object, where: str, job: Manifest, default: int) -> int:
    """An int32 field of the job (absent: `default`, as the API server defaults it)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise job.refuse(where, f"must be an integer, got {type(value).__name__}")
    if not -(2**31) <= value < 2**31:
        raise job.refuse(where, f"Invalid value: {value}: must be a 32-bit integer")
    return value


def non_negative(value: object, where: str, job: Manifest, default: int) -> int:
    n = integer(value, where, job, default)
    if n < 0:
        raise job.refuse(where, f"Invalid value: {n}: must be greater than or equal to 0")
    return n
