"""AppWrapper (workload.codeflare.dev/v1beta2; Kueue's pkg/controller/jobs/appwrapper/
appwrapper_controller.go PodSets, with the AppWrapper library's pkg/utils GetComponentPodSpecs,
InferPodSets, GetPodTemplateSpec and Replicas, vendored by Kueue).

Each component's pod sets are its declared `podSets` (path and replicas), or, when it declares
none, those inferred for its kind: a batch/v1 Job (parallelism, or completions when smaller), a
JobSet's replicated jobs (replicas × pods per Job), a PyTorchJob's Master and Worker, a RayCluster
or RayJob's head and worker groups, a Pod, a Deployment or StatefulSet (replicas). Pod sets are
numbered across components and named `<appwrapper>-<n>`; count = replicas (default 1). The
template is the subset the library copies for Kueue: labels, annotations, containers (name,
image, command, args, requests and limits rounded up to milli-units, termination message and pull
policy defaults, security context), restart policy, grace period, DNS policy, node selector and
name, security context, affinity, scheduler, tolerations, priority class, preemption policy,
overhead, topology spread. A path that names no pod template is refused (the library would skip
that pod set silently).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from streams.importers.kueue_jobs.manifest import (
    Manifest,
    Naming,
    mapping,
    non_negative,
    sequence,
)
from streams.importers.kueue_jobs.pod_sets import (
    PodSetSource,
    pod_set,
    rounded_up_to_milli,
)
from streams.importers.kueue_jobs.workload_names import workload_name
from streams.importers.kueue_jobs.workload_object import check_managed, new_workload

_PATH_PART: Final = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def convert_appwrapper(aw: Manifest, naming: Naming) -> list[dict[str, Any]]:
    check_managed(aw)
    components = sequence(aw.spec.get("components"), "spec.components", aw)
    pod_sets: list[dict[str, Any]] = []
    for c, component in enumerate(components):
        where = f"spec.components[{c}]"
        component = mapping(component, where, aw)
        obj = mapping(component.get("template"), f"{where}.template", aw)
        declared = sequence(component.get("podSets"), f"{where}.podSets", aw)
        if declared:
            entries = []
            for i, ps in enumerate(declared):
                ps = mapping(ps, f"{where}.podSets[{i}]", aw)
                path = ps.get("path")
                if not isinstance(path, str):
                    raise aw.refuse(f"{where}.podSets[{i}].path", "Required value")
                entries.append((non_negative(ps.get("replicas"), f"{where}.podSets[{i}].replicas", aw, 1), path))
        else:
            entries = _inferred(aw, obj, where)
        for replicas, path in entries:
            raw = _at_path(aw, obj, path, f"{where}.{path}")
            if not isinstance(raw, Mapping) or not isinstance(raw.get("spec"), Mapping):
                raise aw.refuse(f"{where}.{path}", "does not refer to a v1.PodSpecTemplate: no spec")
            template = _kueue_subset(raw)
            name = f"{aw.name}-{len(pod_sets)}".lower()
            pod_sets.append(pod_set(aw, PodSetSource(name, replicas, template, f"{where}.{path}")))
    if not pod_sets:
        raise aw.refuse("spec.components", "Required value: no component has a pod set")
    return [new_workload(aw, workload_name(aw.name, aw.uid, aw.kind, aw.group), pod_sets)]


def _at_path(aw: Manifest, obj: Mapping[str, Any], path: str, where: str) -> Any:
    if not path.startswith("template"):
        raise aw.refuse(where, "first element of the path must be 'template'")
    cursor: Any = obj
    rest = path[len("template"):]
    pos = 0
    while pos < len(rest):
        m = _PATH_PART.match(rest, pos)
        if m is None:
            raise aw.refuse(where, f"invalid path element '{rest[pos:]}'")
        key, index = m.group(1), m.group(2)
        if key is not None:
            if not isinstance(cursor, Mapping) or key not in cursor:
                raise aw.refuse(where, f"missing field '{key}'")
            cursor = cursor[key]
        else:
            if not isinstance(cursor, list) or int(index) >= len(cursor):
                raise aw.refuse(where, f"out of bounds index '{index}'")
            cursor = cursor[int(index)]
        pos = m.end()
    return cursor


def _get(obj: object, *keys: str) -> object:
    """obj[k1][k2]..., or None where a level is missing or not an object."""
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _inferred(aw: Manifest, obj: Mapping[str, Any], where: str) -> list[tuple[int, str]]:
    """The library's InferPodSets: (replicas, path) of each pod template of a known kind."""
    gvk = (obj.get("apiVersion"), obj.get("kind"))
    if gvk == ("batch/v1", "Job"):
        pods = _int(_get(obj, "spec", "parallelism"), 1)
        pods = min(pods, _int(_get(obj, "spec", "completions"), pods))
        return [(pods, "template.spec.template")]
    if gvk == ("jobset.x-k8s.io/v1alpha2", "JobSet"):
        out = []
        for i, rj in enumerate(_list(_get(obj, "spec", "replicatedJobs"))):
            pods = _int(_get(rj, "template", "spec", "parallelism"), 1)
            pods = min(pods, _int(_get(rj, "template", "spec", "completions"), pods))
            out.append((_int(_get(rj, "replicas"), 1) * pods, f"template.spec.replicatedJobs[{i}].template.spec.template"))
        return out
    if gvk == ("kubeflow.org/v1", "PyTorchJob"):
        return [
            (_int(_get(obj, "spec", "pytorchReplicaSpecs", t, "replicas"), 1), f"template.spec.pytorchReplicaSpecs.{t}.template")
            for t in ("Master", "Worker") if _get(obj, "spec", "pytorchReplicaSpecs", t, "template") is not None
        ]
    if gvk in (("ray.io/v1", "RayCluster"), ("ray.io/v1", "RayJob")):
        keys = ("spec",) if gvk[1] == "RayCluster" else ("spec", "rayClusterSpec")
        prefix = "template." + ".".join(keys) + "."
        out = [(1, prefix + "headGroupSpec.template")]
        for i, wg in enumerate(_list(_get(obj, *keys, "workerGroupSpecs"))):
            if _get(wg, "template") is not None:
                out.append((_int(_get(wg, "replicas"), 1), f"{prefix}workerGroupSpecs[{i}].template"))
        return out
    if gvk == ("v1", "Pod"):
        return [(1, "template")]
    if gvk in (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet")):
        return [(_int(_get(obj, "spec", "replicas"), 1), "template.spec.template")]
    raise aw.refuse(
        f"{where}.podSets",
        f"Required value: pod sets of a {gvk[1]} ({gvk[0]}) component cannot be inferred; declare them "
        "(path and replicas), as the AppWrapper controller requires",
    )


def _kueue_subset(raw: Mapping[str, Any]) -> dict[str, Any]:
    """GetPodTemplateSpec: what of a pod template the AppWrapper library hands to Kueue."""
    src: Mapping[str, Any] = raw["spec"]
    found = raw.get("metadata")
    meta: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    out_meta = {k: dict(meta[k]) for k in ("labels", "annotations") if isinstance(meta.get(k), Mapping)}
    spec: dict[str, Any] = {}
    if src.get("initContainers"):
        spec["initContainers"] = [_container(c) for c in src["initContainers"] if isinstance(c, Mapping)]
    spec["containers"] = [_container(c) for c in src.get("containers") or [] if isinstance(c, Mapping)]
    spec["restartPolicy"] = src.get("restartPolicy") or "Always"
    spec["terminationGracePeriodSeconds"] = src.get("terminationGracePeriodSeconds", 30)
    spec["dnsPolicy"] = src.get("dnsPolicy") or "ClusterFirst"
    for key in ("nodeSelector", "nodeName", "affinity", "tolerations", "priorityClassName", "topologySpreadConstraints"):
        if src.get(key):
            spec[key] = src[key]
    spec["securityContext"] = src.get("securityContext") or {}
    spec["schedulerName"] = src.get("schedulerName") or "default-scheduler"
    spec["preemptionPolicy"] = src.get("preemptionPolicy") or "PreemptLowerPriority"
    if src.get("overhead"):
        spec["overhead"] = {k: rounded_up_to_milli(v) for k, v in src["overhead"].items()}
    out: dict[str, Any] = {"spec": spec}
    if out_meta:
        out["metadata"] = out_meta
    return out


def _container(c: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": c.get("name")}
    for key in ("image", "command", "args"):
        if c.get(key) is not None:
            out[key] = c[key]
    found = c.get("resources")
    res: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    resources = {k: {n: rounded_up_to_milli(v) for n, v in res[k].items()}
                 for k in ("requests", "limits") if isinstance(res.get(k), Mapping)}
    if resources:
        out["resources"] = resources
    out["terminationMessagePath"] = c.get("terminationMessagePath") or "/dev/termination-log"
    out["terminationMessagePolicy"] = c.get("terminationMessagePolicy") or "File"
    out["imagePullPolicy"] = c.get("imagePullPolicy") or _pull_policy(c.get("image"))
    if c.get("securityContext") is not None:
        out["securityContext"] = c["securityContext"]
    return out


def _pull_policy(image: object) -> str:
    """Always for an image tagged latest or untagged, else IfNotPresent (Kubernetes' default)."""
    if not isinstance(image, str):
        return "IfNotPresent"
    name = image.split("@", 1)[0]
    if "@" in image:
        tag = name.rpartition(":")[2] if ":" in name.rpartition("/")[2] else ""
        return "Always" if tag == "latest" else "IfNotPresent"
    last = name.rpartition("/")[2]
    tag = last.rpartition(":")[2] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"
