"""`waitForPodsReady`, as Kueue's workload controller and scheduler do it
(pkg/controller/core/workload_controller.go: `reconcileNotReadyTimeout`,
`admittedNotReadyWorkload`, `triggerDeactivation`; pkg/workload/workload.go
`UpdateRequeueState`; pkg/scheduler/scheduler.go `waitForPodsReadyIfNeeded`).

- An admitted workload's pods must be ready (`WorkloadPodsReady`, from its launcher) within
  `timeout` of its admission; once ready, pods that are lost (`WorkloadPodsReady` with
  `ready: false`) must be ready again within `recoveryTimeout`.
- Otherwise it is evicted, reason `PodsReadyTimeout`, `Exceeded the PodsReady timeout NS/NAME`,
  and requeued after a backoff of `backoffBaseSeconds * 2^(n-1)` seconds (at most
  `backoffMaxSeconds`) for its n-th such eviction; with `timestamp: Eviction` (the default) it
  queues by its eviction time, with `Creation` by its creation time.
- The eviction that would exceed `backoffLimitCount` deactivates it instead (`Deactivated`,
  `... due to exceeding the maximum number of re-queuing retries`).
- `blockAdmission`: no admission cycle runs while an admitted workload's pods are not ready.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from domain import reasons
from domain.decisions import Applied
from domain.emitter import Emitter
from domain.fields import Fields, InvalidInput
from domain.lifecycle import evict, order_by_eviction, route, set_pending
from domain.pods_ready_config import EVICTION_TIMESTAMP
from domain.state import State
from domain.timers import PODS_READY, REQUEUE, PodsReadyState
from domain.workload_events import UPDATED, lookup


def admitted(state: State, key: str, now: int) -> None:
    timers = state.timers
    pods = timers.pods.get(key)
    if pods is not None and pods.requeue_at is not None:
        pods.requeue_at = None  # queued again before its backoff ended (a WorkloadUpdated): done
        timers.cancel(REQUEUE, key)
    config = state.configuration.pods_ready
    if config is None:
        return
    if pods is None:
        pods = timers.pods[key] = PodsReadyState()
    pods.ready = False
    timers.not_ready[key] = None
    timers.set(PODS_READY, key, now + config.timeout)


def ended(state: State, key: str) -> None:
    """Its admission ended (evicted or preempted): no pods to wait for."""
    timers = state.timers
    timers.cancel(PODS_READY, key)
    timers.not_ready.pop(key, None)
    pods = timers.pods.get(key)
    if pods is not None:
        pods.ready = False


def blocks_admission(state: State) -> bool:
    config = state.configuration.pods_ready
    return config is not None and config.block_admission and bool(state.timers.not_ready)


def timed_out(state: State, out: Emitter, key: str, at: int) -> None:
    config = state.configuration.pods_ready
    ws = state.workloads.get(key)
    admission = ws.admission if ws is not None else None
    if config is None or ws is None or admission is None or not admission.admitted or ws.evicted:
        return
    if not ws.spec.active:
        return
    pods = state.timers.pods.setdefault(key, PodsReadyState())
    limit = config.backoff_limit_count
    if limit is not None and pods.requeue_count + 1 > limit:
        pods.requeue_count = 0  # Kueue clears the requeue state of a deactivated workload
        pods.requeue_at = None
        ws.spec = msgspec.structs.replace(ws.spec, active=False)
        evict(state, out, ws, reasons.EVICTED_DEACTIVATED, reasons.MSG_REQUEUING_LIMIT_EXCEEDED)
        return
    pods.requeue_count += 1
    pods.requeue_at = at + config.backoff(pods.requeue_count)
    if config.timestamp == EVICTION_TIMESTAMP:
        # Kueue's GetQueueOrderTimestamp: the eviction's time orders it in its queue (until it
        # reserves quota again).
        order_by_eviction(ws, at)
    evict(state, out, ws, reasons.PODS_READY_TIMEOUT, reasons.MSG_PODS_READY_TIMEOUT.format(key=key))


def backoff_ended(state: State, out: Emitter, key: str) -> None:
    ws = state.workloads.get(key)
    pods = state.timers.pods.get(key)
    if pods is not None:
        pods.requeue_at = None
    if ws is None or ws.queued or ws.admission is not None or ws.parked_on is not None or not ws.spec.active:
        return
    route(state, out, ws)


def reported(state: State, raw: Mapping[str, Any], out: Emitter, batch_index: int | None) -> None:
    """`WorkloadPodsReady`: the launcher says the workload's pods are ready (or, with
    `ready: false`, that a pod was lost and they are not ready any more)."""
    key = lookup(raw)
    f = Fields(raw, "", reasons.MALFORMED_EVENT)
    ready = f.bool("ready", True)
    ws = state.workloads.get(key)
    if ws is None:
        raise InvalidInput(reasons.UNKNOWN_WORKLOAD, f"workload {key} not found")
    admission = ws.admission
    if admission is None or not admission.admitted or ws.evicted:
        raise InvalidInput(
            reasons.NOT_ADMITTED, f"workload {key} is not admitted: it has no pods to be ready"
        )
    namespace, _, name = key.partition("/")
    out.emit(Applied, kind="Workload", name=name, namespace=namespace, action=UPDATED, batchIndex=batch_index)
    timers = state.timers
    pods = timers.pods.get(key)
    if pods is None:
        pods = timers.pods[key] = PodsReadyState()
    if ready:
        pods.ready = True
        timers.cancel(PODS_READY, key)
        timers.not_ready.pop(key, None)
        return
    if not pods.ready:
        return  # still waiting for its first start: the admission's timeout runs on
    pods.ready = False
    config = state.configuration.pods_ready
    if config is None:
        return
    timers.not_ready[key] = None
    if config.recovery_timeout is not None:
        timers.set(PODS_READY, key, state.clock + config.recovery_timeout)


def settle_blocked(state: State, out: Emitter, submitted: list[str]) -> None:
    """Submissions while blockAdmission holds the admission cycle: they wait for it."""
    status = (reasons.WAITING_FOR_PODS_READY, reasons.MSG_WAITING_FOR_PODS_READY)
    for key in submitted:
        ws = state.workloads.get(key)
        if ws is None or key in out.touched or ws.admission is not None or not ws.queued:
            continue
        set_pending(state, out, ws, status)


