"""Kueue's performance run in real time against `quotaflow agent` on Kafka, at a mini size.

The mini run (bench/kueue_perf/configs/mini, worked out by hand in tests/test_kueue_perf_smoke.py)
on the wall clock at half speed: the preemption cannot depend on timing (the preemptor arrives
1.5 s before either victim could finish), so the decisions are the virtual run's and only the
times move by the round trips through the broker.
"""

from __future__ import annotations

import pytest

from bench.kueue_perf import config, generator, realtime, virtual
from bench.kueue_perf.batching import DEFAULT_WINDOW

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(60, func_only=True)]


@pytest.mark.parametrize("window", [0, DEFAULT_WINDOW])
async def test_mini_run_on_kafka_decides_as_the_simulation(kafka_bootstrap: str, window: int) -> None:
    scenario = generator.generate(config.load("mini"))
    reference = virtual.run(scenario).summary
    run = await realtime.run(scenario, kafka_bootstrap, time_scale=0.5, max_wall_s=25, window=window)
    s = run.summary
    assert not run.timed_out and s.complete
    assert {k: v for k, v in s.decisions.items() if k != "Pending"} == {
        k: v for k, v in reference.decisions.items() if k != "Pending"}
    assert s.workload_classes["a"].total_evictions == 2 and s.workload_classes["b"].total_evictions == 0
    # each step waits for a decision to cross the broker: later, never earlier, than zero latency
    assert reference.wall_ms <= s.wall_ms < reference.wall_ms + 1500
    q, ref = s.cluster_queue_classes["q"], reference.cluster_queue_classes["q"]
    assert q.usage == pytest.approx(ref.usage, abs=8)
    # A finish is sent a runtime after the admission was seen and decided after that: every run
    # holds its quota at least its runtime, and more by the round trips only (the simulation: 1.0).
    assert reference.held_per_runtime == 1.0
    assert 1.0 < s.held_per_runtime < 1.5
    assert all(0 < c.avg_held_past_runtime_ms < 1500 for c in s.workload_classes.values())
    assert run.agent_cpu_s is not None and run.events >= 6
