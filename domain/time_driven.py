"""The time-driven rules' two hooks into the engine: what decisions start and stop, and what the
log's time fires.

`watch` reads the decisions an event made, in order, and keeps the timers in step with them: an
`Admitted` starts a workload's execution-time and PodsReady deadlines, a `Preempted` or
`Evicted` ends its admission, a `Finished` or `Deleted` forgets it, a `WorkloadUpdated`'s
`Applied` may change its maximum execution time. Reading decisions rather than hooking every
place that admits or evicts keeps the rules out of the admission cycle's code; it costs one
pass over the event's own decisions, and none at all until a rule is in use.

`fire_due` fires, in (deadline, kind, workload) order, every timer the time `now` reached.
"""

from __future__ import annotations

from domain import execution_time, pods_ready
from domain.decisions import (
    Admitted,
    Applied,
    Decision,
    Deleted,
    Evicted,
    Finished,
    Preempted,
)
from domain.emitter import Emitter
from domain.state import State
from domain.timers import EXECUTION_TIME, PODS_READY


def watching(state: State) -> bool:
    return state.configuration.pods_ready is not None or state.timers.watch_execution


def watch(state: State, decisions: list[Decision], start: int, now: int) -> None:
    for i in range(start, len(decisions)):
        d = decisions[i]
        kind = type(d)
        key = d.workload
        if key is None:
            if kind is Applied:
                _applied(state, d)
            continue
        if kind is Admitted:
            execution_time.admitted(state, key, now)
            pods_ready.admitted(state, key, now)
        elif kind is Preempted or kind is Evicted:
            execution_time.ended(state, key, now)
            pods_ready.ended(state, key)
        elif kind is Finished or kind is Deleted:
            state.timers.forget(key)


def _applied(state: State, d: Decision) -> None:
    assert isinstance(d, Applied)
    if d.kind == "Workload" and d.name is not None and d.namespace is not None:
        execution_time.updated(state, f"{d.namespace}/{d.name}")


def fire_due(state: State, out: Emitter, now: int) -> bool:
    """Fire every timer `now` reached; whether any fired."""
    timers = state.timers
    fired = False
    while True:
        timer = timers.pop_due(now)
        if timer is None:
            return fired
        fired = True
        deadline, kind, key = timer
        start = len(out.decisions)
        if kind == EXECUTION_TIME:
            execution_time.expired(state, out, key)
        elif kind == PODS_READY:
            pods_ready.timed_out(state, out, key, deadline)
        else:
            pods_ready.backoff_ended(state, out, key)
        watch(state, out.decisions, start, deadline)
