"""What to run for an admitted workload: its pods as processes, with the assignment in their
environment.

Read from the Workload exactly as submitted (its `spec.podSets[].template`), and from the
`Admitted` decision's `podSetAssignments`: each pod set runs the assigned `count` pods (partial
admission may assign fewer than the pod set asks for), numbered 0..count-1 as the pods of an
Indexed Job are. A pod is its template's containers, each a process: `command` followed by `args`,
with `$(VAR)` references expanded from the container's environment as the kubelet does.

A local process has no image, so the image's entrypoint cannot stand in for a missing `command`.
A workload with a container (or init container) without one, a pod set without a template (the
compact `requests` form), or an environment variable the launcher cannot resolve (`valueFrom`,
`envFrom`) cannot be run: `Unrunnable` says which and why, and the launcher finishes the workload
as `Failed` with that message instead of starting anything (its quota comes back at once).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

ENV_PREFIX = "QUOTAFLOW_"
_REF = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")


class Unrunnable(ValueError):
    """The workload cannot be run as local processes (the message says which part and why)."""


@dataclass(frozen=True)
class Assignment:
    """The launcher's view of an `Admitted` decision."""

    workload: str  # namespace/name
    admission: str  # the decision's id, `<cause.offset>.<cause.index>`
    cluster_queue: str
    pod_sets: list[dict[str, Any]]  # podSetAssignments as decided: name, flavors, resourceUsage, count


def env_name(resource: str) -> str:
    """`nvidia.com/gpu` -> `NVIDIA_COM_GPU`: a resource name as part of a variable name."""
    return re.sub(r"[^A-Za-z0-9]", "_", resource).upper()


def assignment_env(a: Assignment, pod_set: dict[str, Any], index: int) -> dict[str, str]:
    """The QUOTAFLOW_* variables of pod `index` of `pod_set` (one of `a.pod_sets`)."""
    namespace, _, name = a.workload.partition("/")
    flavors = pod_set.get("flavors") or {}
    usage = pod_set.get("resourceUsage") or {}
    env = {
        f"{ENV_PREFIX}WORKLOAD": a.workload,
        f"{ENV_PREFIX}WORKLOAD_NAMESPACE": namespace,
        f"{ENV_PREFIX}WORKLOAD_NAME": name,
        f"{ENV_PREFIX}CLUSTER_QUEUE": a.cluster_queue,
        f"{ENV_PREFIX}ADMISSION": a.admission,
        f"{ENV_PREFIX}POD_SET": str(pod_set["name"]),
        f"{ENV_PREFIX}POD_SET_COUNT": str(pod_set.get("count", 1)),
        f"{ENV_PREFIX}POD_INDEX": str(index),
        f"{ENV_PREFIX}FLAVORS": ",".join(f"{r}={flavors[r]}" for r in sorted(flavors)),
        f"{ENV_PREFIX}RESOURCE_USAGE": ",".join(f"{r}={usage[r]}" for r in sorted(usage)),
    }
    for resource in sorted(flavors):
        env[f"{ENV_PREFIX}FLAVOR_{env_name(resource)}"] = str(flavors[resource])
    return env


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion in command and args: a defined variable is replaced, an
    undefined reference is left as written, `$$` is a literal `$`."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _REF.sub(one, text)


def _container(c: Any, where: str, base: dict[str, str]) -> dict[str, Any]:
    if not isinstance(c, dict):
        raise Unrunnable(f"{where}: not an object")
    name = c.get("name") or "?"
    where = f"{where} {name}"
    command = c.get("command")
    if not command:
        raise Unrunnable(
            f"{where} has no command: quotaflow launch runs a container's command and args as a local "
            "process and cannot run an image's entrypoint"
        )
    args = c.get("args") or []
    if not isinstance(command, list) or not isinstance(args, list):
        raise Unrunnable(f"{where}: command and args must be lists of strings")
    if c.get("envFrom"):
        raise Unrunnable(f"{where}: envFrom cannot be resolved outside a cluster")
    env = dict(base)
    env["QUOTAFLOW_CONTAINER"] = str(name)
    for var in c.get("env") or []:
        if not isinstance(var, dict) or not isinstance(var.get("name"), str):
            raise Unrunnable(f"{where}: env entries need a name")
        if "valueFrom" in var:
            raise Unrunnable(f"{where}: env {var['name']}: valueFrom cannot be resolved outside a cluster")
        env[var["name"]] = expand(str(var.get("value", "")), env)
    out: dict[str, Any] = {
        "name": str(name),
        "argv": [expand(str(part), env) for part in [*command, *args]],
        "env": env,
    }
    if c.get("workingDir"):
        out["workingDir"] = str(c["workingDir"])
    if c.get("restartPolicy") == "Always":
        out["sidecar"] = True
    return out


def pods_of(workload: Any, a: Assignment) -> list[dict[str, Any]]:
    """Every pod to run for assignment `a` of `workload` (the Workload object as submitted):
    `{"pod": "<pod set>-<index>", "initContainers": [...], "containers": [...], "grace": s|None}`.
    Raises Unrunnable."""
    if not isinstance(workload, dict):
        raise Unrunnable("the workload as submitted is not an object")
    pod_sets = {ps.get("name", "main"): ps for ps in (workload.get("spec") or {}).get("podSets") or [] if isinstance(ps, dict)}
    pods: list[dict[str, Any]] = []
    for assigned in a.pod_sets:
        ps_name = assigned["name"]
        ps = pod_sets.get(ps_name)
        if ps is None:
            raise Unrunnable(f"pod set {ps_name} is not in the workload as submitted")
        template = ps.get("template")
        spec = template.get("spec") if isinstance(template, dict) else None
        if not isinstance(spec, dict) or not spec.get("containers"):
            raise Unrunnable(f"pod set {ps_name} has no pod template with containers: nothing to run")
        grace = spec.get("terminationGracePeriodSeconds")
        count = assigned.get("count", ps.get("count", 1))
        for index in range(int(count) if count is not None else 1):
            base = assignment_env(a, assigned, index)
            where = f"pod set {ps_name}"
            pods.append(
                {
                    "pod": f"{ps_name}-{index}",
                    "initContainers": [_container(c, f"{where} init container", base) for c in spec.get("initContainers") or []],
                    "containers": [_container(c, f"{where} container", base) for c in spec["containers"]],
                    "grace": float(grace) if isinstance(grace, (int, float)) else None,
                }
            )
    return pods
