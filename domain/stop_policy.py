"""Stop policies of ClusterQueues and LocalQueues (Kueue's `spec.stopPolicy`).

`None` admits as usual; `Hold` admits nothing new and keeps what runs; `HoldAndDrain` also
evicts what holds quota. The values are those of the spec field (domain/objects.py reads it);
this module holds what applying a stopped queue does to the workloads in it, as Kueue's workload
controller does (pkg/controller/core/workload_controller.go, `reconcileOnLocalQueueActiveState`
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
    """A ClusterQueue applied with a stop policy: HoldAndDrain evicts every workload holding its
    quota; Hold takes back only reservations not yet admitted (admission checks pending: no pods
    yet). A stopped queue is also inactive (config_events.refresh_activeness), which holds what
    waits in it."""
    policy = cq.spec.stop_policy
    if not is_stopped(policy):
        return
    for key in list(cq.admitted):
        ws = state.workloads[key]
        if ws.evicted or ws.admission is None:
            continue
        if policy == HOLD_AND_DRAIN:
            evict(state, out, ws, reasons.CLUSTER_QUEUE_STOPPED, reasons.MSG_CQ_STOPPED)
        elif not ws.admission.admitted:
            release_evicted(state, out, ws)


def drain_local_queue(state: State, out: Emitter, stop_policy: str, members: list[str]) -> None:
    """A LocalQueue applied with HoldAndDrain evicts its workloads that hold quota; under Hold
    they keep running. Either way its pending workloads wait, parked (lifecycle.route)."""
    if stop_policy != HOLD_AND_DRAIN:
        return
    for key in members:
        ws = state.workloads[key]
        if ws.admission is not None and not ws.evicted:
            evict(state, out, ws, reasons.LOCAL_QUEUE_STOPPED, reasons.MSG_LQ_STOPPED)


__all__ = ["HOLD", "HOLD_AND_DRAIN", "STOP_NONE", "drain_local_queue", "is_stopped", "stop_cluster_queue"]
