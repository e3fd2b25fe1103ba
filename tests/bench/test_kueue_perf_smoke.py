"""Smoke test of Kueue's performance suite on quotaflow (bench/kueue_perf) at a tiny size.

Untimed. It checks that the generator creates what Kueue's generator would (objects, names,
arrival times, classes), that the executor finishes and requeues as Kueue's runner does, and
that the recorder's numbers match a mini run worked out by hand.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from devtools.kueue_perf import config, generator, virtual
from devtools.kueue_perf.batching import Batcher
from devtools.kueue_perf.executor import Executor
from domain.decisions import Admitted, Cause, PodSetAssignment, Preempted

TINY = """
cohorts:
  - className: team
    count: 2
    queuesSets:
    - className: gold
      count: 2
      nominalQuota: 4
      borrowingLimit: 2
      reclaimWithinCohort: Any
      withinClusterQueue: LowerPriority
      workloadsSets:
      - count: 3
        creationIntervalMs: 100
        workloads:
        - {className: small, runtimeMs: 200, priority: 50, request: 1}
        - {className: tiny, runtimeMs: 50, priority: 10, request: 500m}
      - count: 2
        creationIntervalMs: 250
        workloads:
        - {className: large, runtimeMs: 1000, priority: 200, request: "4"}
    - className: iron
      count: 1
      nominalQuota: 0
      workloadsSets:
      - count: 1
        creationIntervalMs: 10
        workloads:
        - {className: small, runtimeMs: 5, priority: 0, request: 1}
"""

@pytest.fixture(scope="module")
def tiny() -> generator.Scenario:
    return generator.generate(config.parse(TINY))


def test_generator_objects_follow_kueue_names_and_specs(tiny: generator.Scenario) -> None:
    cqs = [e["object"] for e in tiny.setup if e["object"]["kind"] == "ClusterQueue"]
    assert [cq["metadata"]["name"] for cq in cqs] == [
        "gold-0-0-team-0", "gold-0-1-team-0", "iron-1-0-team-0",
        "gold-0-0-team-1", "gold-0-1-team-1", "iron-1-0-team-1",
    ]
    assert [q.cohort for q in tiny.queues] == ["team-0"] * 3 + ["team-1"] * 3
    gold = cqs[0]["spec"]
    assert gold["cohort"] == "team-0"
    assert gold["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    assert gold["resourceGroups"] == [{"coveredResources": ["cpu"], "flavors": [
        {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": "4", "borrowingLimit": "2"}]}]}]
    assert gold["namespaceSelector"] == {}
    iron = cqs[2]["spec"]
    assert iron["preemption"] == {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"}
    assert "borrowingLimit" not in iron["resourceGroups"][0]["flavors"][0]["resources"][0]
    kinds = [e["object"]["kind"] for e in tiny.setup]
    assert kinds == ["ResourceFlavor"] + ["ClusterQueue", "Namespace", "LocalQueue"] * 6
    lq = tiny.setup[3]["object"]
    assert lq["metadata"] == {"namespace": "gold-0-0-team-0", "name": "gold-0-0-team-0"}
    assert lq["spec"] == {"clusterQueue": "gold-0-0-team-0"}


def test_generator_arrival_schedule_is_one_workload_per_interval_per_set(tiny: generator.Scenario) -> None:
    # per gold queue: 3 x 2 templates + 2, per iron queue: 1
    assert len(tiny.arrivals) == 2 * (2 * 8 + 1)
    mine = [a for a in tiny.arrivals if a.namespace == "gold-0-1-team-1"]
    got = sorted((a.at_ms, a.name, a.class_name, a.request_mcpu, a.priority, a.runtime_ms) for a in mine)
    assert got == [
        (100, "small-0-0-0", "small", 1000, 50, 200),
        (200, "tiny-0-0-1", "tiny", 500, 10, 50),
        (250, "large-1-0-0", "large", 4000, 200, 1000),
        (300, "small-0-1-0", "small", 1000, 50, 200),
        (400, "tiny-0-1-1", "tiny", 500, 10, 50),
        (500, "large-1-1-0", "large", 4000, 200, 1000),
        (500, "small-0-2-0", "small", 1000, 50, 200),
        (600, "tiny-0-2-1", "tiny", 500, 10, 50),
    ]
    assert [a.at_ms for a in tiny.arrivals] == sorted(a.at_ms for a in tiny.arrivals)
    assert {a.at_ms for a in tiny.arrivals if a.namespace.startswith("iron")} == {10}
    wl = generator.workload(mine[0], "2024-01-01T00:00:00.100Z")
    assert wl["metadata"]["labels"] == {generator.RUNNING_TIME_LABEL: "200", generator.CLASS_LABEL: "small"}
    assert wl["spec"]["queueName"] == "gold-0-1-team-1"
    assert wl["spec"]["priority"] == 50
    assert wl["spec"]["podSets"][0]["count"] == 1
    assert wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}


def test_shipped_configs_are_kueues_baseline_and_large_scale() -> None:
    base = generator.generate(config.load("baseline"))
    assert len(base.queues) == 30 and len(base.arrivals) == 15_000
    assert base.last_arrival_ms == 60_000  # 50 large workloads, one every 1.2 s
    large = generator.generate(config.load("large-scale"))
    assert len(large.queues) == 1000 and len(large.arrivals) == 50_000
    assert {q.nominal_mcpu for q in large.queues} == {20_000}


def test_config_rejects_topology_aware_and_unknown_fields() -> None:
    with pytest.raises(config.ConfigError):
        config.parse(TINY.replace("request: 1}", "request: 1, tasLevel: rack}", 1))
    with pytest.raises(config.ConfigError):
        config.parse(TINY.replace("borrowingLimit: 2", "borrowingLimits: 2"))


def _admitted(key: str, cpu: str = "1") -> Admitted:
    return Admitted(workload=key, cause=Cause(0, 0), clusterQueue="q",
                    podSetAssignments=[PodSetAssignment("main", {"cpu": "rf"}, {"cpu": cpu}, 1)])


def test_executor_finishes_after_runtime_and_restarts_a_preempted_workload() -> None:
    ex = Executor({"ns/a": 300, "ns/b": 100})
    ex.on_decision(_admitted("ns/a"), 1000)
    ex.on_decision(_admitted("ns/b"), 1050)
    assert ex.next_due() == 1150
    assert ex.pop_due(1149) == []
    assert ex.pop_due(1150) == [{"type": "WorkloadFinished", "namespace": "ns", "name": "b"}]
    ex.on_decision(Preempted(workload="ns/a", cause=Cause(1, 0), preemptor="ns/b", reason="InClusterQueue", message=""), 1200)
    assert ex.pop_due(1200) == [{"type": "WorkloadReleased", "namespace": "ns", "name": "a"}]
    assert ex.next_due() is None  # the finish due at 1300 belonged to the preempted run
    assert ex.pop_due(5000) == []
    ex.on_decision(_admitted("ns/a"), 2000)
    assert ex.next_due() == 2300  # the full runtime again, from the readmission
    assert ex.pop_due(2300) == [{"type": "WorkloadFinished", "namespace": "ns", "name": "a"}]
    assert (ex.finishes_sent, ex.releases_sent) == (2, 1)
    assert ex.idle
    late = Executor({"ns/a": 300}, latency_ms=40)  # sees every decision 40 ms after it was taken
    late.on_decision(_admitted("ns/a"), 1000)
    assert late.next_due() == 1340
    late.on_decision(Preempted(workload="ns/a", cause=Cause(1, 0), preemptor="ns/b", reason="InClusterQueue", message=""), 1100)
    assert late.pop_due(1139) == [] and late.pop_due(1140) == [{"type": "WorkloadReleased", "namespace": "ns", "name": "a"}]


def test_executor_sends_no_release_for_a_workload_whose_finish_it_already_sent() -> None:
    """On Kafka the agent may preempt a workload before it reads the finish already in the log:
    the finish ends it, and a release after it would only be rejected as unknown."""
    ex = Executor({"ns/a": 300})
    ex.on_decision(_admitted("ns/a"), 1000)
    assert ex.pop_due(1300) == [{"type": "WorkloadFinished", "namespace": "ns", "name": "a"}]
    ex.on_decision(Preempted(workload="ns/a", cause=Cause(1, 0), preemptor="ns/b", reason="InClusterQueue", message=""), 1310)
    assert ex.pop_due(9000) == [] and ex.idle
    assert (ex.finishes_sent, ex.releases_sent, ex.releases_skipped) == (1, 0, 1)
    ex.on_decision(_admitted("ns/a"), 10000)  # admitted again (a resubmission): a new run
    ex.on_decision(Preempted(workload="ns/a", cause=Cause(2, 0), preemptor="ns/b", reason="InClusterQueue", message=""), 10100)
    assert ex.pop_due(10100) == [{"type": "WorkloadReleased", "namespace": "ns", "name": "a"}]


@pytest.mark.parametrize("batch", [True, False])
def test_recorder_matches_a_mini_run_worked_by_hand(batch: bool) -> None:
    scenario = generator.generate(config.load("mini"))  # devtools/kueue_perf/configs/mini: read its comment
    result = virtual.run(scenario, batch=batch)
    s = result.summary
    # a0 runs 1-2.5 s, a1 2-2.5 s; b preempts both at 2.5 s (released at once), runs 2.5-3.5 s;
    # a0 and a1 are readmitted at 3.5 s and run their full 3 s again, to 6.5 s.
    assert s.complete
    assert s.wall_ms == 6500
    assert s.decisions == {"Admitted": 5, "Preempted": 2, "QuotaReleased": 2, "Finished": 3, "Pending": s.decisions["Pending"]}
    q = s.cluster_queue_classes["q"]
    # cpu x ms: 1x1000 (1-2 s) + 2x500 (2-2.5 s) + 2x1000 (b) + 2x3000 (a0, a1 again)
    assert q.used_mcpu_ms == 1000 * (1 * 1000 + 2 * 500 + 2 * 1000 + 2 * 3000)
    assert (q.first_ms, q.last_ms, q.nominal_mcpu) == (0, 6500, 2000)
    assert q.usage == pytest.approx(100 * 10_000 / (2 * 6500))
    a, b = s.workload_classes["a"], s.workload_classes["b"]
    assert (a.count, a.total_evictions, b.total_evictions) == (2, 2, 0)
    assert a.avg_time_to_admission_ms == ((3500 - 1000) + (3500 - 2000)) / 2  # from creation to the latest admission
    assert b.avg_time_to_admission_ms == 0
    assert a.avg_time_to_finish_ms == ((6500 - 1000) + (6500 - 2000)) / 2
    # With no runner latency every run holds its quota exactly as long as it runs.
    assert (a.avg_held_past_runtime_ms, b.avg_held_past_runtime_ms, s.held_per_runtime) == (0, 0, 1.0)


def test_batches_split_only_between_cohorts_and_keep_the_order_within_one(tiny: generator.Scenario) -> None:
    events = [generator.submitted(a, "2024-01-01T00:00:00Z") for a in tiny.arrivals]
    events.insert(5, {"type": "WorkloadFinished", "namespace": "iron-1-0-team-1", "name": "x"})
    cohort = {q.name: q.cohort for q in tiny.queues}

    def cohort_of(e: dict[str, object]) -> str:
        ns = e["workload"]["metadata"]["namespace"] if e["type"] == "WorkloadSubmitted" else e["namespace"]  # type: ignore[index]
        return cohort[str(ns)]

    assert list(Batcher(tiny, enabled=False)(events)) == events
    assert list(Batcher(tiny)(events)) == [{"type": "Batch", "events": events}]  # under the limit: one Batch
    per_cohort = {c: [e for e in events if cohort_of(e) == c] for c in ("team-0", "team-1")}
    assert (len(per_cohort["team-0"]), len(per_cohort["team-1"])) == (17, 18)
    for limit in (20, 30):  # both cohorts do not fit in one Batch: one each
        out = list(Batcher(tiny, limit=limit)(events))
        assert [b["events"] for b in out] == [per_cohort["team-0"], per_cohort["team-1"]]
    # a cohort above the limit is cut into full Batches, in order; the rest packs with the next
    out = list(Batcher(tiny, limit=10)(events))
    assert [len(b["events"]) for b in out] == [10, 7, 10, 8]
    assert [e for b in out for e in b["events"]] == per_cohort["team-0"] + per_cohort["team-1"]


def test_runner_latency_delays_every_reaction_of_the_mini_run() -> None:
    # The runner sees each decision 100 ms late: b preempts a0 and a1 at 2.5 s, the runner releases
    # them at 2.6 s and b is admitted then; b's admission is seen at 2.7 s, so b finishes at 3.7 s,
    # when a0 and a1 are readmitted; seen at 3.8 s, they finish at 6.8 s.
    s = virtual.run(generator.generate(config.load("mini")), latency_ms=100).summary
    assert s.complete and s.wall_ms == 6800
    a, b = s.workload_classes["a"], s.workload_classes["b"]
    assert b.avg_time_to_admission_ms == 100
    assert a.avg_time_to_admission_ms == ((3700 - 1000) + (3700 - 2000)) / 2
    # Each last run holds its quota 100 ms past its runtime: b 2.6-3.7 s, a0 and a1 3.7-6.8 s,
    # weighted by request (b 2 cpu, a 1 cpu each): (2 x 1100 + 2 x 3100) / (2 x 1000 + 2 x 3000).
    assert (a.avg_held_past_runtime_ms, b.avg_held_past_runtime_ms) == (100, 100)
    assert s.held_per_runtime == pytest.approx(8400 / 8000)
    assert s.to_json()["heldPerRuntime"] == 1.05


def test_a_run_with_rejected_input_says_so(tiny: generator.Scenario) -> None:
    from bench.kueue_perf.__main__ import rejected_line

    clean = virtual.run(tiny).summary
    assert clean.rejected == [] and rejected_line("virtual", clean) is None
    clean.rejected.append("ns/w: UnknownWorkload: WorkloadReleased: workload ns/w not found")
    line = rejected_line("real", clean)
    assert line is not None and "1 input events were Rejected" in line and "ns/w not found" in line


class _AppendLog:
    """Records the runner's appends; each message gets the next offset (no broker: this checks
    only the runner's flow control, the Kafka mini run checks it against a real one)."""

    def __init__(self) -> None:
        self.appends: list[list[bytes]] = []

    async def append(self, topic: str, messages: list[Any]) -> list[int]:
        first = sum(map(len, self.appends))
        self.appends.append([m.value for m in messages])
        return list(range(first, first + len(messages)))


async def test_with_a_window_the_runner_waits_for_the_agent_and_sends_what_fell_due_as_one_append(
        tiny: generator.Scenario) -> None:
    from bench.kueue_perf import realtime
    from streams.log import Topics

    log = _AppendLog()
    run = realtime._Run(tiny, log, Topics("in", "out", "snap"), 1.0, True, window=1)  # type: ignore[arg-type]
    sender = asyncio.create_task(run.sender())
    finish = [{"type": "WorkloadFinished", "namespace": "gold-0-0-team-0", "name": f"w{i}"} for i in range(3)]
    await run.send(finish[:1])
    await asyncio.sleep(0.01)
    assert len(log.appends) == 1  # nothing undecided: sent at once
    await run.send(finish[1:2])
    await run.send(finish[2:])
    await asyncio.sleep(0.01)
    assert len(log.appends) == 1  # offset 0 undecided: both wait
    run._decided(0)
    await asyncio.sleep(0.01)
    assert len(log.appends) == 2 and len(log.appends[1]) == 1  # both in one record: a Batch
    batch = msgspec.json.decode(log.appends[1][0])
    assert [e["name"] for e in batch["events"]] == ["w1", "w2"]
    run._decided(0)  # a decision of an offset already decided changes nothing
    assert list(run.undecided) == [1]
    run.finished.set()
    run.may_send.set()
    await asyncio.wait_for(sender, 1)


async def test_without_a_window_every_send_is_appended_at_once(tiny: generator.Scenario) -> None:
    from bench.kueue_perf import realtime
    from streams.log import Topics

    log = _AppendLog()
    run = realtime._Run(tiny, log, Topics("in", "out", "snap"), 1.0, True, window=0)  # type: ignore[arg-type]
    for i in range(3):
        await run.send([{"type": "WorkloadFinished", "namespace": "gold-0-0-team-0", "name": f"w{i}"}])
    assert len(log.appends) == 3


def test_virtual_run_with_the_engine_process_gc_thresholds_and_back(capsys: pytest.CaptureFixture[str],
                                                                     tmp_path: Any) -> None:
    import gc
    import json

    from bench.kueue_perf.__main__ import main
    from devtools.kueue_perf.batching import DEFAULT_WINDOW
    from streams.agent.engine_child import ENGINE_GC_THRESHOLD
    from streams.settings import DEFAULT_STEP_BYTES, ENV_STEP_BYTES

    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []
    real_run = virtual.run

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.get_threshold())
        return real_run(*args, **kwargs)

    out = tmp_path / "r.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(ENV_STEP_BYTES, raising=False)
        mp.setattr(virtual, "run", spy)
        main(["--config", "mini", "--gc-threshold", "engine-process", "--json", str(out)])
    assert seen == [ENGINE_GC_THRESHOLD] and gc.get_threshold() == before
    assert f"GC thresholds {','.join(map(str, ENGINE_GC_THRESHOLD))}" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["gcThreshold"] == "engine-process"
    assert report["agentStepBytes"] == DEFAULT_STEP_BYTES and report["window"] == DEFAULT_WINDOW


def test_the_real_time_runner_runs_its_clock_with_its_setup_frozen_and_then_thaws_it() -> None:
    import gc

    from bench.kueue_perf.realtime import RUNNER_GC_THRESHOLD, _quiet_collector

    before = gc.get_threshold()
    setup = [[i] for i in range(1000)]  # container objects the collector would otherwise walk
    with _quiet_collector():
        assert gc.get_freeze_count() >= len(setup)
        assert gc.get_threshold() == RUNNER_GC_THRESHOLD
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before


class _StepCost:
    """A CPU clock for the engine-clock run that charges `ms` per engine step (read twice a step)."""

    def __init__(self, ms: float) -> None:
        self.reads = 0
        self.ms = ms

    def __call__(self) -> float:
        self.reads += 1
        return (self.reads // 2) * self.ms / 1000.0


def test_engine_clock_sees_each_step_when_it_ends_and_queues_what_falls_due_meanwhile() -> None:
    from bench.kueue_perf import engine_clock

    scenario = generator.generate(config.load("mini"))
    # 600 ms per step. a0 (created 1 s) is seen admitted at 1.6 s, a1 (2 s) at 2.6 s; b, created
    # at 2.5 s while the engine works on a1, waits for the step at 2.6 s, which preempts a0 and
    # a1 (seen at 3.2 s); their releases go at 3.2 s and admit b, seen at 3.8 s, so b finishes at
    # 4.8 s; that step readmits a0 and a1 (seen at 5.4 s), which finish at 8.4 s, seen at 9 s.
    result = engine_clock.run(scenario, cpu=_StepCost(600))
    s = result.summary
    assert s.complete and s.wall_ms == 9000
    assert result.steps == 6  # 1, 2, 2.6, 3.2, 4.8 and 8.4 s: b's arrival did not get a step of its own
    assert result.engine_s == pytest.approx(3.6)
    assert s.decisions["Preempted"] == 2 and s.decisions["Admitted"] == 5
    a, b = s.workload_classes["a"], s.workload_classes["b"]
    assert b.avg_time_to_admission_ms == 3800 - 2500  # from its creation, the wait for the engine included
    assert a.avg_time_to_admission_ms == ((5400 - 1000) + (5400 - 2000)) / 2
    assert (a.avg_held_past_runtime_ms, b.avg_held_past_runtime_ms) == (600, 600)


def test_engine_clock_with_a_free_engine_is_the_simulation() -> None:
    from bench.kueue_perf import engine_clock

    scenario = generator.generate(config.load("mini"))
    free = engine_clock.run(scenario, cpu=lambda: 0.0).summary
    assert free.to_json() == virtual.run(scenario).summary.to_json()


def test_engine_clock_speedup_divides_every_step() -> None:
    from bench.kueue_perf import engine_clock

    # 1,200 ms per step, counted twice faster: the run of the 600 ms test above.
    result = engine_clock.run(generator.generate(config.load("mini")), cpu=_StepCost(1200), speedup=2)
    assert result.summary.wall_ms == 9000 and result.steps == 6 and result.engine_s == pytest.approx(3.6)


def test_the_report_puts_the_engine_clock_between_the_simulation_and_real_time(
    capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    import json

    from bench.kueue_perf.__main__ import main, ratio_line

    out = tmp_path / "r.json"
    main(["--config", "mini", "--engine-clock", "--engine-speedup", "4", "--json", str(out)])
    printed = capsys.readouterr().out
    assert "| quotaflow, engine clock (no I/O, engine 4x faster) | 6.5 s |" in printed
    assert "engine clock / virtual: wall 1.000" in printed
    runs = json.loads(out.read_text())["runs"]["mini"]
    assert runs["engineClock"]["speedup"] == 4 and runs["engineClock"]["complete"]
    # real / engine clock, from the figures of two runs
    slower = {**runs["engineClock"], "wallMs": runs["engineClock"]["wallMs"] * 1.25}
    assert ratio_line(slower, runs["engineClock"], "real", "engine clock").startswith(
        "real / engine clock: wall 1.250, usage q 1.000")


def _evaluations(config_name: str, pure_python: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "QUOTAFLOW_PURE_PYTHON"}
    if pure_python:
        env["QUOTAFLOW_PURE_PYTHON"] = "1"
    return subprocess.run([sys.executable, "-m", "bench.kueue_perf.evaluations", "--config", config_name, "--json", "-"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=Path(__file__).resolve().parents[2])


def test_evaluation_breakdown_of_the_mini_run_sorts_every_head_evaluation_by_its_outcome() -> None:
    """The mini run, evaluation by evaluation: a1 and a2 fit and are admitted; b finds both as
    victims and preempts them, then, in the next cycle of the same event, finds the same (already
    evicted) victims and waits; b fits once they are released; a1 and a2's class finds no room and
    no target (b, of higher priority, runs) and is parked once; both fit when b finishes."""
    from bench.kueue_perf import evaluations as ev

    done = _evaluations("mini", pure_python=True)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    counts = {k: v["count"] for k, v in figures["evaluations"].items()}
    assert counts == {ev.ADMITTED: 5, ev.LOST_ROOM: 0, ev.NO_TARGET_AFTER_LOSS: 0, ev.NO_TARGET: 1,
                      ev.PREEMPTS: 2, ev.OVERLAPPING: 0, ev.RECHECK: 0}
    # Every admission comes from exactly one evaluation that fitted in its cycle.
    assert figures["admittedDecisions"] == counts[ev.ADMITTED]
    spent = sum(v["seconds"] for v in figures["evaluations"].values()) + figures["parkedAgain"]["seconds"]
    assert 0 < spent < figures["engineS"]


def test_evaluation_breakdown_refuses_a_compiled_engine_it_could_not_see_into() -> None:
    from domain._engine_form import running_compiled

    if not running_compiled():
        pytest.skip("domain/ is not compiled here: the breakdown runs on the sources either way")
    done = _evaluations("mini", pure_python=False)
    assert done.returncode != 0
    assert "QUOTAFLOW_PURE_PYTHON=1" in done.stderr
