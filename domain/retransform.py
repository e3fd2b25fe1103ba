"""A workload's requests as the Configuration's `resources` make them count, at submission and
again for pending workloads when those settings change.

Kueue reads `resources` at start, so such a change is a restart there, after which every pending
workload's requests come from its pod sets and the new settings; an admitted workload keeps the
usage of its admission. quotaflow does the same at the ConfigApplied (or ConfigDeleted) that
changes them: each pending workload whose counted requests change leaves its queue and is queued
again with them (its place in the queue, priority and time, is unchanged), and is evaluated
afresh: its last status was about other requests, so it gets a `Pending` decision with its new
message even where the reason stays the same.
"""

from __future__ import annotations

import dataclasses

import msgspec

from domain.emitter import Emitter
from domain.lifecycle import route, unroute
from domain.objects import Configuration
from domain.resource_transformations import PerPod, ResourcesConfig, transform
from domain.state import State
from domain.workload import PodSet, WorkloadSpec


def requests_changed(state: State, out: Emitter, old: Configuration, new: Configuration) -> None:
    if old.resources == new.resources:
        return
    for ws in list(state.workloads.values()):
        if ws.admission is not None:
            continue
        spec = apply_to_spec(ws.spec, new.resources)
        if spec is ws.spec:
            continue
        queued = ws.queued or ws.parked_on is not None
        if queued:
            unroute(state, ws)
        ws.spec = spec
        ws.last_status = None  # not an answer about these requests (Scheduler._still_hopeless)
        if queued:
            route(state, out, ws)


def requested(ps: PodSet) -> PerPod:
    """The pod set's per-pod requests as its pods ask them (before any transformation)."""
    return ps.per_pod if ps.requested is None else ps.requested


def as_written(pod_sets: tuple[PodSet, ...]) -> tuple[PodSet, ...]:
    """The pod sets with their requests as written, for comparing two versions of a workload."""
    if all(ps.requested is None for ps in pod_sets):
        return pod_sets
    return tuple(
        ps if ps.requested is None else dataclasses.replace(ps, per_pod=ps.requested, requested=None)
        for ps in pod_sets
    )


def apply_to_spec(spec: WorkloadSpec, config: ResourcesConfig) -> WorkloadSpec:
    """`spec` with each pod set's per-pod requests as `config` makes them count; the same
    object when nothing changes (the common case: no `resources` configured)."""
    if not config.active and all(ps.requested is None for ps in spec.pod_sets):
        return spec
    pod_sets: list[PodSet] = []
    changed = False
    for ps in spec.pod_sets:
        raw = requested(ps)
        counted = transform(raw, config) if config.active else raw
        keep = None if counted == raw else raw
        if counted == ps.per_pod and keep == ps.requested:
            pod_sets.append(ps)
            continue
        changed = True
        pod_sets.append(dataclasses.replace(ps, per_pod=counted, requested=keep))
    if not changed:
        return spec
    return msgspec.structs.replace(spec, pod_sets=tuple(pod_sets))
