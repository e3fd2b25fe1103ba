"""What-if changes: Kueue objects to apply, replace or delete, from a given point of the log.

A change is a list of operations on configuration objects, each keyed as the engine keys them
(`ClusterQueue/team-a`, `LocalQueue/ns/q`, `Configuration`):

- **apply** a whole object (a Kueue YAML document, or a `ConfigApplied` event);
- **delete** one (a `ConfigDeleted` event);
- **patch** one field of whatever version the log holds (`--set`, e.g. the nominal quota of a
  ClusterQueue times 1.5): the patch is applied to every recorded version of the object.

How a change meets the recorded log (`rewrite`): from the change point on, every recorded
`ConfigApplied` of a changed object is replaced by the changed object (apply), by the patched
recorded object (patch), or dropped (delete), and a recorded `ConfigDeleted` of a deleted object
is dropped. At the change point itself the change is applied to the objects that exist there; at
the start of the log nothing exists yet, so a changed object takes the place of its recorded
versions where they were applied, and an object the log never applies is applied before the
first record.

Every change is checked before any replay: YAML that does not parse, an object that is not a
configuration kind, an object the engine rejects on its own (Kueue's validation), a patch of an
object the log never applies, an unknown field: each is a `ChangeError` naming the change.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from domain.decisions import Rejected
from domain.engine import Engine
from domain.quantity import QuantityError, amount, format_amount

CONFIG_KINDS = (
    "ResourceFlavor",
    "ClusterQueue",
    "LocalQueue",
    "Cohort",
    "WorkloadPriorityClass",
    "AdmissionCheck",
    "Namespace",
    "Configuration",
)
KIND_ALIASES = {
    "clusterqueue": "ClusterQueue",
    "clusterqueues": "ClusterQueue",
    "cq": "ClusterQueue",
    "cohort": "Cohort",
    "cohorts": "Cohort",
    "resourceflavor": "ResourceFlavor",
    "flavor": "ResourceFlavor",
    "rf": "ResourceFlavor",
    "workloadpriorityclass": "WorkloadPriorityClass",
    "priorityclass": "WorkloadPriorityClass",
    "wpc": "WorkloadPriorityClass",
    "localqueue": "LocalQueue",
    "lq": "LocalQueue",
    "configuration": "Configuration",
    "config": "Configuration",
}
CONFIG_API = "config.kueue.x-k8s.io/v1beta1"


class ChangeError(ValueError):
    """A change that cannot be applied: refused before any replay."""


def object_key(kind: str, name: str, namespace: str | None = None) -> str:
    """As the engine keys configuration objects (domain.objects.object_key)."""
    if kind == "Configuration":
        return "Configuration"
    if kind == "LocalQueue":
        return f"{kind}/{namespace or 'default'}/{name}"
    return f"{kind}/{name}"


def key_of_object(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return object_key(str(obj.get("kind")), str(meta.get("name", "")), meta.get("namespace"))


@dataclass(frozen=True)
class Op:
    action: str  # apply | delete | patch
    key: str
    kind: str
    name: str
    namespace: str | None = None
    obj: dict[str, Any] | None = None  # apply
    patch: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # patch
    text: str = ""  # as the user wrote it

    def describe(self) -> str:
        return self.text or f"{self.action} {self.key}"


@dataclass(frozen=True)
class At:
    """Where the change starts: the start of the log, an input offset, or a time (micros)."""

    offset: int | None = None
    time: int | None = None

    def describe(self) -> str:
        if self.offset is not None:
            return f"offset {self.offset}"
        if self.time is not None:
            from domain.timestamps import format_time

            return format_time(self.time)
        return "start"


@dataclass(frozen=True)
class Change:
    name: str
    ops: tuple[Op, ...] = ()
    at: At = field(default_factory=At)


# -- reading -----------------------------------------------------------------------------------


def parse_at(text: str | None) -> At:
    if text is None or text in ("", "start", "0"):
        return At() if text != "0" else At(offset=0)
    if text.isdigit():
        return At(offset=int(text))
    from domain.timestamps import TimestampError, parse_time

    try:
        return At(time=parse_time(text))
    except TimestampError:
        raise ChangeError(f"--at {text!r}: expected an input offset (a number) or an RFC 3339 time") from None


def ops_from_documents(docs: list[Any], origin: str) -> list[Op]:
    ops: list[Op] = []
    for i, doc in enumerate(docs):
        where = f"{origin}, document {i + 1}"
        if not isinstance(doc, dict):
            raise ChangeError(f"{where}: expected a Kueue object or a ConfigApplied/ConfigDeleted event")
        if doc.get("type") == "ConfigDeleted":
            kind = str(doc.get("kind"))
            name = doc.get("name")
            if kind not in CONFIG_KINDS:
                raise ChangeError(f"{where}: ConfigDeleted of unknown kind {kind!r}; expected one of {', '.join(CONFIG_KINDS)}")
            if kind != "Configuration" and not isinstance(name, str):
                raise ChangeError(f"{where}: ConfigDeleted needs a name")
            ns = doc.get("namespace")
            ops.append(Op("delete", object_key(kind, str(name or ""), ns), kind, str(name or ""), ns,
                          text=f"delete {object_key(kind, str(name or ''), ns)}"))
            continue
        if doc.get("type") == "ConfigApplied":
            doc = doc.get("object")
            if not isinstance(doc, dict):
                raise ChangeError(f"{where}: ConfigApplied needs an object")
        elif "type" in doc:
            raise ChangeError(f"{where}: a change holds configuration only, not a {doc.get('type')} event")
        kind = doc.get("kind")
        if kind not in CONFIG_KINDS:
            raise ChangeError(f"{where}: kind {kind!r} is not a configuration object; expected one of {', '.join(CONFIG_KINDS)}")
        check_object(doc, where)
        key = key_of_object(doc)
        meta = doc.get("metadata") or {}
        ops.append(Op("apply", key, kind, str(meta.get("name", "")), meta.get("namespace"), obj=doc, text=f"apply {key}"))
    return ops


def read_change_file(path: str | Path) -> Change:
    from streams.log.event_files import load_yaml_documents

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ChangeError(f"--change {p}: cannot read it: {exc}") from None
    try:
        docs = load_yaml_documents(text)
    except Exception as exc:  # yaml.YAMLError and what it wraps
        raise ChangeError(f"--change {p}: not valid YAML: {exc}") from None
    if not docs:
        raise ChangeError(f"--change {p}: holds no object")
    return Change(p.stem, tuple(ops_from_documents(docs, f"--change {p}")))


def check_object(obj: dict[str, Any], where: str) -> None:
    """Kueue's validation of the object on its own, by the engine itself: a rejection here would
    be a rejection in the replay."""
    decisions = Engine().apply({"type": "ConfigApplied", "object": obj}, 0)
    for d in decisions:
        if isinstance(d, Rejected):
            raise ChangeError(f"{where}: {d.reason}: {d.message}")


# -- --set -------------------------------------------------------------------------------------

_QUOTA_FIELDS = {"nominal": "nominalQuota", "nominalquota": "nominalQuota", "borrowinglimit": "borrowingLimit",
                 "lendinglimit": "lendingLimit"}


def parse_set(text: str) -> list[Op]:
    """`KIND/NAME.FIELD=V1,V2,...` (or `configuration.FIELD=...`): one patch per value.

    Quota fields (`nominal`, `borrowingLimit`, `lendingLimit`) take `RESOURCE[@FLAVOR]:VALUE`,
    where VALUE is a quantity or `xFACTOR` (times the recorded value); a later value without a
    resource keeps the one before (`cpu:x1,x1.5,x2`). Any other field is a dotted path under the
    object's `spec` (top level for WorkloadPriorityClass and Configuration), set to the YAML
    scalar given (`clusterqueue/a.queueingStrategy=StrictFIFO`, `configuration.fairSharing=on`).
    """
    target, eq, values = text.partition("=")
    if not eq or not values:
        raise ChangeError(f"--set {text!r}: expected KIND/NAME.FIELD=VALUE[,VALUE...]")
    if target.lower().startswith(("configuration.", "config.")):
        kind, name, ns, path = "Configuration", "", None, target.split(".", 1)[1]
    else:
        ref, dot, path = target.partition(".")
        kind_text, slash, name = ref.partition("/")
        kind = KIND_ALIASES.get(kind_text.lower())
        if not dot or not slash or not name or not path:
            raise ChangeError(f"--set {text!r}: expected KIND/NAME.FIELD=VALUE (e.g. clusterqueue/team-a.nominal=cpu:x2)")
        if kind is None:
            raise ChangeError(f"--set {text!r}: unknown kind {kind_text!r}; expected one of {', '.join(sorted(set(KIND_ALIASES)))}")
        ns = None
        if kind == "LocalQueue":
            ns, _, name = name.rpartition("/")
            ns = ns or "default"
    key = object_key(kind, name, ns)
    ops: list[Op] = []
    if path.lower() in _QUOTA_FIELDS:
        if kind not in ("ClusterQueue", "Cohort"):
            raise ChangeError(f"--set {text!r}: {path} is a field of a ClusterQueue or a Cohort")
        resource: str | None = None
        flavor: str | None = None
        for value in values.split(","):
            res_text, colon, v = value.rpartition(":")
            if colon:
                resource, _, flavor_text = res_text.partition("@")
                flavor = flavor_text or None
            if resource is None:
                raise ChangeError(f"--set {text!r}: {value!r} names no resource (RESOURCE[@FLAVOR]:VALUE)")
            _check_quota_value(text, resource, v)
            label = f"{kind.lower()}/{name}.{path}={resource}{'@' + flavor if flavor else ''}:{v}"
            ops.append(Op("patch", key, kind, name, ns, patch=_quota_patch(_QUOTA_FIELDS[path.lower()], resource, flavor, v),
                          text=label))
        return ops
    for value in values.split(","):
        scalar = _scalar(value)
        field_path = path
        if kind == "Configuration" and path == "fairSharing" and isinstance(scalar, bool):
            field_path = "fairSharing.enable"
        ops.append(Op("patch", key, kind, name, ns, patch=_field_patch(kind, field_path, scalar),
                      text=f"{'configuration' if kind == 'Configuration' else kind.lower() + '/' + name}.{path}={value}"))
    return ops


def _scalar(value: str) -> Any:
    if value.lower() in ("on", "true", "yes"):
        return True
    if value.lower() in ("off", "false", "no"):
        return False
    from streams.log.event_files import load_yaml

    try:
        parsed = load_yaml(value)
    except Exception:  # noqa: BLE001 - any text that is not YAML is a string
        return value
    return parsed if isinstance(parsed, (str, int, float, bool)) else value


def _check_quota_value(text: str, resource: str, v: str) -> None:
    try:
        if v.startswith("x"):
            if float(v[1:]) < 0:
                raise ValueError
        else:
            amount(resource, v)
    except (ValueError, QuantityError):
        raise ChangeError(f"--set {text!r}: {v!r} is neither a quantity nor xFACTOR") from None


def _quota_patch(field_name: str, resource: str, flavor: str | None, v: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def patch(obj: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(obj)
        found = False
        for group in (out.get("spec") or {}).get("resourceGroups") or []:
            for fl in group.get("flavors") or []:
                if flavor is not None and fl.get("name") != flavor:
                    continue
                for r in fl.get("resources") or []:
                    if r.get("name") != resource:
                        continue
                    found = True
                    if v.startswith("x"):
                        base = r.get(field_name)
                        if base is None:
                            continue  # no limit stays no limit
                        scaled = amount(resource, base) * _fraction(v[1:])
                        r[field_name] = format_amount(resource, int(scaled))
                    else:
                        r[field_name] = v
        if not found:
            raise ChangeError(f"{key_of_object(obj)} has no {resource} quota{' in flavor ' + flavor if flavor else ''}")
        return out

    return patch


def _fraction(text: str) -> Any:
    from fractions import Fraction

    return Fraction(text)


def _field_patch(kind: str, path: str, value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    parts = path.split(".")
    under_spec = kind not in ("WorkloadPriorityClass", "Configuration", "ResourceFlavor") and parts[0] not in ("metadata", "spec")

    def patch(obj: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(obj)
        node = out
        if under_spec:
            node = node.setdefault("spec", {})
        for p in parts[:-1]:
            nxt = node.get(p)
            if not isinstance(nxt, dict):
                nxt = node[p] = {}
            node = nxt
        node[parts[-1]] = value
        return out

    return patch


def default_configuration() -> dict[str, Any]:
    return {"apiVersion": CONFIG_API, "kind": "Configuration"}


# -- a sweep -----------------------------------------------------------------------------------


def sweep(files: list[str], sets: list[str], at: At) -> list[Change]:
    """The variants to compare: the product of the change files (each one variant) and the
    values of each `--set` (each value one variant of that axis)."""
    axes: list[list[tuple[str, tuple[Op, ...]]]] = []
    if files:
        axes.append([(c.name, c.ops) for c in (read_change_file(f) for f in files)])
    for s in sets:
        axes.append([(op.text, (op,)) for op in parse_set(s)])
    if not axes:
        return [Change("no change", (), at)]
    out = []
    for combo in itertools.product(*axes):
        name = " + ".join(n for n, _ in combo)
        ops = tuple(op for _, group in combo for op in group)
        out.append(Change(name, ops, at))
    return out
