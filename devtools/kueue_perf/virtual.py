"""Virtual time: a discrete-event simulation of Kueue's performance run over the in-process engine.

The clock jumps from one due event to the next (an arrival from the generator, a release or a
finish from the executor), so every step of the policy happens with zero latency: this is the
reference for what quotaflow's admission policy does with Kueue's workload, free of any I/O or
processing delay. Everything due at the same virtual millisecond is handed to the engine as one
`Batch` event (releases, then finishes, then arrivals), as simultaneous changes reach one Kueue
scheduling cycle together (see batching.py); `batch=False` applies them one event at a time. The
executor's reactions to a step (releases of preempted workloads) are due at the same instant
and go in the next step, still at that instant. `latency_ms` makes the executor see every
decision that much later (a model of the real-time round trip, for comparison).

Zero latency can stall the clock: a policy that keeps preempting in a cycle (A reclaims from a
borrowing B, B's requeued workload reclaims from C, C's from A, ...) then runs step after step at
one instant, where in real time each step would take a round trip and other events would break
the cycle. The shipped configs do not do that (at most 6 steps at one instant in the baseline),
but `Stalled` says so rather than spinning if a config does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from devtools.kueue_perf.batching import Batcher
from devtools.kueue_perf.executor import Executor
from devtools.kueue_perf.generator import Arrival, Scenario, submitted
from devtools.kueue_perf.recorder import Recorder, Summary
from domain.decisions import Decision
from domain.engine import Engine

EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)

def rfc3339(ms: float) -> str:
    return (EPOCH + timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def next_time(executor: Executor, arrivals: list[Arrival], i: int) -> float | None:
    """When the next thing falls due: the executor's next release or finish, or arrival i
    (None: nothing is left)."""
    due = executor.next_due()
    next_arrival = arrivals[i].at_ms if i < len(arrivals) else None
    if due is None or next_arrival is None:
        return due if next_arrival is None else next_arrival
    return min(due, next_arrival)


def take_arrivals(arrivals: list[Arrival], i: int, now: float, recorder: Recorder,
                  events: list[dict[str, Any]]) -> int:
    """Append the submission of every arrival from i due by `now`, each created when it fell
    due (a run whose clock jumps past it created it then, and it waited); returns the next i."""
    while i < len(arrivals) and arrivals[i].at_ms <= now:
        a = arrivals[i]
        recorder.created(a, a.at_ms)
        events.append(submitted(a, rfc3339(a.at_ms)))
        i += 1
    return i


class Stalled(RuntimeError):
    """The clock stopped advancing: the engine and the executor keep reacting to each other."""


@dataclass
class VirtualRun:
    summary: Summary
    cpu_s: float  # this process, the whole simulation (generation of events included)
    engine_cpu_s: float  # inside Engine.apply only
    wall_s: float  # real seconds the simulation took
    events: int  # input events applied (a Batch counts once)
    steps_at_same_instant_max: int
    input_log: list[dict[str, Any]] | None = None


def run(scenario: Scenario, *, batch: bool = True, latency_ms: float = 0.0, keep_log: bool = False, stall_limit: int = 10_000,
        progress: Callable[[float, int, int, float], None] | None = None, report_every: int = 5000) -> VirtualRun:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    engine = Engine()
    log: list[dict[str, Any]] | None = [] if keep_log else None
    engine_cpu = 0.0
    offset = 0
    recorder = Recorder(scenario)
    executor = Executor({a.key: a.runtime_ms for a in scenario.arrivals}, latency_ms)
    batcher = Batcher(scenario, batch)

    def apply(event: dict[str, Any], now: float) -> list[Decision]:
        nonlocal offset, engine_cpu
        if log is not None:
            log.append(event)
        c0 = time.process_time()
        out = engine.apply(event, offset)
        engine_cpu += time.process_time() - c0
        offset += 1
        for d in out:
            recorder.decision(d, now)
        executor.on_decisions(out, now)
        return out

    for event in scenario.setup:
        apply({**event, "time": rfc3339(0)}, 0)

    arrivals = scenario.arrivals
    i = 0
    now = -1.0
    same_instant = worst = 0
    next_report = report_every
    while True:
        t = next_time(executor, arrivals, i)
        if t is None:
            break
        if t == now:
            same_instant += 1
            worst = max(worst, same_instant)
            if same_instant > stall_limit:
                raise Stalled(f"{stall_limit} steps at virtual time {t / 1000:.3f} s without the clock advancing")
        else:
            now, same_instant = t, 0
        events = executor.pop_due(now)
        i = take_arrivals(arrivals, i, now, recorder, events)  # due exactly now: the clock stops at each
        stamp = rfc3339(now)
        for event in batcher(events):
            event["time"] = stamp
            apply(event, now)
        if progress is not None and i >= next_report:
            progress(now, i, offset, time.process_time() - cpu0)
            next_report += report_every
    return VirtualRun(recorder.summary(), time.process_time() - cpu0, engine_cpu, time.perf_counter() - wall0,
                      offset, worst, log)
