"""Stop policies of ClusterQueues and LocalQueues (Kueue's `spec.stopPolicy`).

`None` admits as usual; `Hold` admits nothing new and keeps what runs; `HoldAndDrain` also
evicts what holds quota. The values are those of the spec field (domain/objects.py reads it);
this module holds what applying a stopped queue, or deleting a queue, does to the workloads in
it, as Kueue's workload controller does (pkg/controller/core/workload_controller.go, `reconcileOnLocalQueueActiveState`
and `reconcileOnClusterQueueActiveState`; a stopped ClusterQueue is inactive, as
pkg/cache/scheduler/clusterqueue.go's `isStopped`).
"""

from __future__ import annotations

from domain import reasons
from domain.emitter import Emitter
from domain.lifecycle import evict, release_evicted
from domain.objects import HOLD, HOLD_AND_DRAIN, STOP_NONE
from domain.state import ClusterQueueState, State


def is_stopped(stop_policy: str) -> bool:
    return stop_policy != STOP_NONE


def stop_cluster_queue(state: State, out: Emitter, cq: ClusterQueueState) -> None:
    """A ClusterQueue applied with a stop policy: HoldAndDrain evicts every admitted workload
    holding its quota; either policy takes back the reservations not admitted yet (admission
    checks pending: no pods yet), as Kueue's `reconcileOnClusterQueueActiveState` unsets them
    without an eviction. A stopped queue is also inactive (config_events.refresh_activeness),
    which holds what waits in it."""
    policy = cq.spec.stop_policy
    if not is_stopped(policy):
        return
    for key in list(cq.admitted):
        ws = state.workloads[key]
        if ws.evicted or ws.admission is None:
            continue
        if not ws.admission.admitted:
            release_evicted(state, out, ws)
        elif policy == HOLD_AND_DRAIN:
            evict(state, out, ws, reasons.CLUSTER_QUEUE_STOPPED, reasons.MSG_CQ_STOPPED)


def drain_local_queue(state: State, out: Emitter, stop_policy: str, members: list[str]) -> None:
    """A LocalQueue applied with HoldAndDrain evicts its admitted workloads; under Hold they keep
    running. Either policy takes back the reservations not admitted yet, as Kueue's
    `reconcileOnLocalQueueActiveState` does. Its pending workloads wait, parked (lifecycle.route)."""
    if not is_stopped(stop_policy):
        return
    for key in members:
        ws = state.workloads[key]
        if ws.admission is None or ws.evicted:
            continue
        if not ws.admission.admitted:
            release_evicted(state, out, ws)
        elif stop_policy == HOLD_AND_DRAIN:
            evict(state, out, ws, reasons.LOCAL_QUEUE_STOPPED, reasons.MSG_LQ_STOPPED)


def take_back_reservations(state: State, out: Emitter, keys: list[str]) -> None:
    """A deleted LocalQueue or ClusterQueue: the reservations not admitted yet among `keys` are
    taken back (their workloads queue again, or wait for the missing queue), while admitted
    workloads keep running. Kueue's workload controller does this for a queue that is
    "terminating or missing" (pkg/controller/core/workload_controller.go,
    `reconcileOnLocalQueueActiveState`, `reconcileOnClusterQueueActiveState`)."""
    for key in keys:
        ws = state.workloads.get(key)
        if ws is not None and ws.admission is not None and not ws.admission.admitted and not ws.evicted:
            release_evicted(state, out, ws)


__all__ = ["HOLD", "HOLD_AND_DRAIN", "STOP_NONE", "drain_local_queue", "is_stopped", "stop_cluster_queue", "take_back_reservations"]
