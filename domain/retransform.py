"""Pending workloads' requests computed again when the Configuration's `resources` change.

Kueue reads `resources` at start, so such a change is a restart there, after which every pending
workload's requests come from its pod sets and the new settings; an admitted workload keeps the
usage of its admission. quotaflow does the same at the ConfigApplied (or ConfigDeleted) that
changes them: each pending workload whose counted requests change leaves its queue and is queued
again with them (its place in the queue, priority and time, is unchanged), and is evaluated
afresh: its last status was about other requests, so it gets a `Pending` decision with its new
message even where the reason stays the same.
"""

from __future__ import annotations

from domain.emitter import Emitter
from domain.lifecycle import route, unroute
from domain.objects import Configuration
from domain.resource_transformations import apply_to_spec
from domain.state import State


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
