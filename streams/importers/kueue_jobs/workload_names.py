"""Names as Kueue and the API server derive them.

- The Workload of a job: `<kind lowercased>-<job name>` cut to 247 characters, `-`, and the first 5
  hex digits of SHA-1 over kind, group, job name and job UID, one per line (Kueue's
  pkg/controller/jobframework/workload_names.go, GetWorkloadNameForOwnerWithGVK; the
  ShortWorkloadNames gate, alpha and off, would cut to 63 characters: not modelled).
- `generateName`: the base cut to 58 characters plus 5 random characters from the API server's
  alphabet (apiserver's names.SimpleNameGenerator). Random on the client side, where the API
  server would pick them: `Naming.suffix` makes it deterministic for tests.
- The UID: the manifest's `metadata.uid` when it gives one; otherwise a name-based UUID (v5) of
  its apiVersion, kind, namespace and name, so the same file gives the same workload name (the
  API server would assign a random one).
- A pod's role hash (Kueue's pkg/util/pod/pod.go GenerateRoleHash), which names a pod group's pod
  sets: the first 8 hex digits of SHA-256 over the JSON of the pod's shape.
"""

from __future__ import annotations

import hashlib
import json
import random
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

HASH_LENGTH: Final = 5
MAX_WORKLOAD_NAME: Final = 253
MAX_PREFIX: Final = MAX_WORKLOAD_NAME - 1 - HASH_LENGTH
# apiserver/pkg/storage/names: maxNameLength 63, randomLength 5 -> base at most 58.
_GENERATE_BASE_MAX: Final = 58
_GENERATE_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
_UID_NAMESPACE: Final = uuid.UUID("6f2b8a52-2d4c-5b8e-9a3e-0c1d7e4f5a60")


def workload_name(owner_name: str, owner_uid: str, kind: str, group: str, extra: str = "") -> str:
    """Kueue's GetWorkloadNameForOwnerWithGVK (with `extra`: GenerateWorkloadNameWithExtra)."""
    prefix = f"{kind.lower()}-{owner_name}"[:MAX_PREFIX]
    h = hashlib.sha1()
    h.update(f"{kind}\n{group}\n{owner_name}\n{owner_uid}".encode())
    if extra:
        h.update(f"\n{extra}".encode())
    return f"{prefix}-{h.hexdigest()[:HASH_LENGTH]}"


def random_suffix(rng: random.Random | None = None) -> str:
    pick = (rng or random.SystemRandom()).choice
    return "".join(pick(_GENERATE_ALPHABET) for _ in range(5))


def generated_name(base: str, suffix: Callable[[], str]) -> str:
    return base[:_GENERATE_BASE_MAX] + suffix()


def derived_uid(api_version: str, kind: str, namespace: str, name: str) -> str:
    return str(uuid.uuid5(_UID_NAMESPACE, f"{api_version}\n{kind}\n{namespace}\n{name}"))


# --- the role hash of a pod ------------------------------------------------------------------
# The shape is what Kueue hashes of a pod as stored, so the API server's own defaults count:
# the Priority admission plugin sets `priority` (0 without a class), DefaultTolerationSeconds adds
# the not-ready/unreachable tolerations, and a container port's protocol defaults to TCP. Go's
# encoding/json sorts map keys but writes struct fields in declaration order; the structs that can
# appear (Toleration, ContainerPort) are written in that order here. Affinity and topology spread
# constraints are written with sorted keys, so a pod using them can hash differently from Kueue:
# such a pod can set the `kueue.x-k8s.io/role-hash` annotation, which Kueue also honours.
_DEFAULT_TOLERATIONS: Final = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
)
_TOLERATION_FIELDS: Final = ("key", "operator", "value", "effect", "tolerationSeconds")
_PORT_FIELDS: Final = ("name", "hostPort", "containerPort", "protocol", "hostIP")


def role_hash(pod_spec: Mapping[str, Any], *, as_stored: bool = True) -> str:
    """The role hash of a pod with `pod_spec`; `as_stored`: after the API server's defaults (a
    pod as Kueue reads it from a cluster), else of the spec exactly as given."""
    shape = {"spec": _spec_shape(pod_spec, as_stored)}
    text = json.dumps(shape, separators=(",", ":"), sort_keys=False, ensure_ascii=False)
    # Go's encoder escapes <, > and & for HTML safety.
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _spec_shape(spec: Mapping[str, Any], as_stored: bool) -> dict[str, Any]:
    tolerations = list(spec.get("tolerations") or [])
    priority = spec.get("priority")
    if as_stored:
        for default in _DEFAULT_TOLERATIONS:
            if not any(_tolerates(t, default) for t in tolerations if isinstance(t, Mapping)):
                tolerations.append(default)
        if priority is None and not spec.get("priorityClassName"):
            priority = 0
    shape: dict[str, Any] = {
        "initContainers": _containers(spec.get("initContainers"), as_stored),
        "containers": _containers(spec.get("containers"), as_stored),
        "nodeSelector": _sorted(spec.get("nodeSelector")),
        "affinity": _sorted(spec.get("affinity")),
        "tolerations": [_ordered(t, _TOLERATION_FIELDS) for t in tolerations] or None,
        "runtimeClassName": spec.get("runtimeClassName"),
        "priority": priority,
        "topologySpreadConstraints": _sorted(spec.get("topologySpreadConstraints")),
        "overhead": _quantities(spec.get("overhead")),
        "resourceClaims": _sorted(spec.get("resourceClaims")),
    }
    resources = spec.get("resources")
    if isinstance(resources, Mapping):
        shape["resources"] = _quantities(resources.get("requests"))
    return dict(sorted(shape.items()))


def _tolerates(t: Mapping[str, Any], default: Mapping[str, Any]) -> bool:
    # DefaultTolerationSeconds skips a pod that already tolerates the taint for NoExecute.
    return t.get("key") == default["key"] and t.get("effect") in (None, "", "NoExecute")


def _containers(raw: object, as_stored: bool) -> list[dict[str, Any]] | None:
    if not isinstance(raw, list) or not raw:
        return None
    out = []
    for item in raw:
        c: Mapping[str, Any] = item if isinstance(item, Mapping) else {}
        found = c.get("resources")
        resources: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        ports = c.get("ports")
        out.append({
            "ports": [_ordered({"protocol": "TCP", **p} if as_stored else p, _PORT_FIELDS) for p in ports if isinstance(p, Mapping)]
            if isinstance(ports, list) and ports else None,
            "resources": {"requests": _quantities(resources.get("requests"))},
        })
    return out


def _ordered(obj: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    return {f: obj[f] for f in fields if obj.get(f) not in (None, "", 0) or (f == "containerPort" and f in obj)}


def _sorted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _sorted(value[k]) for k in sorted(value, key=str)} if value else None
    if isinstance(value, list):
        return [_sorted(v) for v in value] if value else None
    return value


def _quantities(value: Any) -> Any:
    """A ResourceList: a Quantity marshals as a string."""
    if not isinstance(value, Mapping) or not value:
        return None
    return {str(k): str(value[k]) for k in sorted(value, key=str)}
