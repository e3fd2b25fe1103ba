"""A workload evicted by its PodsReady timeout waits out its requeuing backoff before it queues.

Kueue's workload controller keeps such a workload out of its queue until
`status.requeueState.requeueAt` (pkg/controller/core/workload_controller.go, the backoff branch
of Reconcile); its Requeued condition says why, with the eviction's reason and message. Here the
quota comes back first (WorkloadReleased, or at once with `evictionRelease: Immediate`); if the
backoff has not ended by then, the workload waits for a REQUEUE timer (domain/pods_ready.py
fires it) instead of being routed to its queue.
"""

from __future__ import annotations

from domain import reasons
from domain.decisions import Pending
from domain.emitter import Emitter
from domain.state import State, WorkloadState
from domain.timers import REQUEUE


def holds(state: State, out: Emitter, ws: WorkloadState) -> bool:
    """Whether the released workload must wait for its backoff (then it says so, and waits)."""
    pods = state.timers.pods.get(ws.key)
    if pods is None or pods.requeue_at is None:
        return False
    if pods.requeue_at <= state.clock:
        pods.requeue_at = None
        return False
    state.timers.set(REQUEUE, ws.key, pods.requeue_at)
    status = (reasons.PODS_READY_TIMEOUT, reasons.MSG_PODS_READY_TIMEOUT.format(key=ws.key))
    last = ws.last_status
    ws.last_status = status
    if last is None or last[0] != status[0]:
        out.emit(Pending, ws.key, reason=status[0], message=status[1])
    return True
