"""Kueue's performance run in real time against `quotaflow agent` on Kafka, at a mini size.

The mini run (devtools/kueue_perf/configs/mini, worked out by hand in tests/bench/test_kueue_perf_smoke.py)
on the wall clock at half speed: the preemption cannot depend on timing (the preemptor arrives
1.5 s before either victim could finish), so the decisions are the virtual run's and only the
times move by the round trips through the broker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.kueue_perf import realtime
from devtools.kueue_perf import config, generator, virtual
from devtools.kueue_perf.batching import DEFAULT_WINDOW

# exclusive: the real-time runs assert latencies through the broker (tests/exclusive.py).
pytestmark = [pytest.mark.kafka, pytest.mark.exclusive, pytest.mark.timeout(60, func_only=True)]


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


def test_a_real_run_is_measured_after_a_discarded_warm_up_on_the_same_broker(
        kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.kueue_perf.__main__ import main

    runs: list[float] = []
    real_run = realtime.run

    async def counted(scenario: generator.Scenario, bootstrap: str, **kwargs: Any) -> realtime.RealRun:
        runs.append(kwargs["time_scale"])
        assert bootstrap == kafka_bootstrap
        return await real_run(scenario, bootstrap, **kwargs)

    out = tmp_path / "r.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(realtime, "run", counted)
        main(["--config", "mini", "--mode", "real", "--time-scale", "0.25", "--warmup", "1",
              "--bootstrap", kafka_bootstrap, "--json", str(out)])
    assert runs == [0.25 * 0.25, 0.25]  # the warm-up first, 4x faster, then the measured run
    printed = capsys.readouterr().out
    assert "warm-up run 1 of 1" in printed and "real time on Kafka at time scale 0.25" in printed
    report = json.loads(out.read_text())
    assert report["warmupRuns"] == 1 and report["runs"]["mini"]["real"]["wallMs"] > 0
