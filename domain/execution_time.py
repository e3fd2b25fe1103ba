"""A workload's maximum execution time (`spec.maximumExecutionTimeSeconds`, or Kueue's job label
`kueue.x-k8s.io/max-exec-time-seconds`), as Kueue's workload controller enforces it
(pkg/controller/core/workload_controller.go, `reconcileMaxExecutionTime`;
pkg/workload/admissionchecks.go for the accumulated time):

- While admitted, the time since its admission plus the whole seconds of its earlier admissions
  (`status.accumulatedPastExecutionTimeSeconds`: each admission that ends adds its duration,
  truncated to seconds as Kueue's int32 conversion does) may not exceed the maximum.
- When it does, the workload is deactivated (`spec.active: false`) and evicted with reason
  `Deactivated` and Kueue's message; the accumulated time is cleared, so a reactivated workload
  has its whole budget again.

An admission ends, for this count, at its `Preempted` or `Evicted` decision (the contract's
"admitted" ends there); a reservation waiting for admission checks does not count, as Kueue
counts from the Admitted condition.
"""

from __future__ import annotations

import msgspec

from domain import reasons
from domain.emitter import Emitter
from domain.lifecycle import evict
from domain.state import State
from domain.timers import EXECUTION_TIME

_SECOND = 1_000_000


def admitted(state: State, key: str, now: int) -> None:
    ws = state.workloads.get(key)
    if ws is None or ws.spec.max_exec_seconds is None:
        return
    timers = state.timers
    timers.admitted_since[key] = now
    _arm(state, key, ws.spec.max_exec_seconds, now)


def _arm(state: State, key: str, limit: int, since: int) -> None:
    timers = state.timers
    left = (limit - timers.executed.get(key, 0)) * _SECOND
    timers.set(EXECUTION_TIME, key, since + left)


def ended(state: State, key: str, now: int) -> None:
    """Its admission ended (evicted or preempted): the time it ran is added to its account."""
    timers = state.timers
    since = timers.admitted_since.pop(key, None)
    if since is None:
        return
    timers.cancel(EXECUTION_TIME, key)
    timers.executed[key] = timers.executed.get(key, 0) + (now - since) // _SECOND


def updated(state: State, key: str) -> None:
    """Its spec may set another maximum: the deadline of a running admission follows it."""
    timers = state.timers
    since = timers.admitted_since.get(key)
    ws = state.workloads.get(key)
    if since is None or ws is None:
        return
    if ws.spec.max_exec_seconds is None:
        timers.cancel(EXECUTION_TIME, key)
        del timers.admitted_since[key]
        return
    _arm(state, key, ws.spec.max_exec_seconds, since)


def expired(state: State, out: Emitter, key: str) -> None:
    ws = state.workloads.get(key)
    admission = ws.admission if ws is not None else None
    if ws is None or admission is None or not admission.admitted or ws.evicted or not ws.spec.active:
        return
    timers = state.timers
    timers.executed.pop(key, None)
    timers.admitted_since.pop(key, None)
    ws.spec = msgspec.structs.replace(ws.spec, active=False)
    evict(state, out, ws, reasons.EVICTED_DEACTIVATED, reasons.MSG_MAX_EXEC_EXCEEDED)
