"""Engine clock: Kueue's performance run where the only thing that takes time is the engine.

Between the zero-latency simulation (virtual.py) and the agent on Kafka (realtime.py). The same
runner (generator, executor, recorder) drives the in-process engine, and the clock advances by the
CPU time each engine step takes, and by nothing else. The engine is one server, as the agent's
engine process is: what falls due while it works waits, and everything waiting goes to it as one
step once it is free (Batches as in real time, batching.py); the step's decisions are seen when it
ends. Each step does what the engine process does with a read: decode the records (JSON bytes),
apply them, encode the decisions; under the engine process's collector thresholds.

No broker, no transport, no other process competing for the CPU: the wall time it gives is what
real time would reach on this machine if everything but the engine were free. So
virtual <= engine clock <= real time splits the real run's excess over the simulation into what
the engine's own speed costs and what the rest of the pipeline costs (README: "How close to the
limit").

It is not deterministic: the schedule depends on measured CPU time (`cpu`, injectable so that
tests can charge a fixed cost per step). `speedup` asks how much faster the engine would have
to be for real time to come within a given distance of the simulation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.timing import frozen_setup
from devtools.kueue_perf.batching import Batcher
from devtools.kueue_perf.executor import Executor
from devtools.kueue_perf.generator import SOURCE, Scenario
from devtools.kueue_perf.recorder import Recorder, Summary
from devtools.kueue_perf.virtual import next_time, rfc3339, take_arrivals
from domain.decisions import Decision, encode
from domain.engine import Engine
from streams.agent.engine_child import ENGINE_GC_THRESHOLD
from streams.log.envelope import event_message


@dataclass
class EngineClockRun:
    summary: Summary
    engine_s: float  # the steps' CPU time, i.e. how long the engine was busy on the clock
    steps: int  # times the engine became free and took what waited
    records: int  # input records applied (Batches of at most MAX_BATCH_EVENTS events)
    wall_s: float  # real seconds the whole run took (the runner's own work included)


def run(scenario: Scenario, *, batch: bool = True, speedup: float = 1.0,
        cpu: Callable[[], float] = time.process_time) -> EngineClockRun:
    """`speedup` divides every step's measured time: how the run would go with an engine that
    many times faster (a what-if; the engine does the same work, the clock counts less of it)."""
    wall0 = time.perf_counter()
    engine = Engine()
    offset = 0
    for event in scenario.setup:  # before the clock starts, as real time waits for the setup
        engine.apply(event_message({**event, "time": rfc3339(0)}, source=SOURCE).value, offset)
        offset += 1
    recorder = Recorder(scenario)
    executor = Executor({a.key: a.runtime_ms for a in scenario.arrivals})
    batcher = Batcher(scenario, batch)
    arrivals = scenario.arrivals
    i = 0
    free = 0.0  # when the engine is done with its current step
    busy_ms = 0.0
    steps = 0
    # The setup is not garbage: as in the engine process, no collection walks it again.
    with frozen_setup(ENGINE_GC_THRESHOLD):
        while True:
            due = next_time(executor, arrivals, i)
            if due is None:
                break
            now = max(free, due)
            events = executor.pop_due(now)
            i = take_arrivals(arrivals, i, now, recorder, events)  # waited for the engine since due
            stamp = rfc3339(now)
            records = []
            for event in batcher(events):
                event["time"] = stamp
                records.append(event_message(event, source=SOURCE).value)
            decisions: list[Decision] = []
            c0 = cpu()
            for record in records:
                out = engine.apply(record, offset)
                offset += 1
                for d in out:
                    encode(d)
                decisions.extend(out)
            spent = (cpu() - c0) * 1000.0 / speedup
            busy_ms += spent
            steps += 1
            free = now + spent
            for d in decisions:
                recorder.decision(d, free)
            executor.on_decisions(decisions, free)
    return EngineClockRun(recorder.summary(), busy_ms / 1000.0, steps, offset - len(scenario.setup),
                          time.perf_counter() - wall0)
