"""Smoke test of the engine benchmark (bench/engine_bench.py) at a tiny size.

Nothing here is timed: it checks that the generated stream is what the benchmark says it is
(every workload admitted once and finished, a pending backlog, borrowing, both flavors), that it
is deterministic, and that the variants the benchmark compares really decide the same things.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import msgspec
import pytest

from bench import engine_bench as eb
from bench import engine_variants, timing
from devtools import cluster_stream

WORKLOADS = 200
COHORTS = 1  # 10 ClusterQueues
WINDOW = 0.15


@pytest.fixture(scope="module")
def gen() -> cluster_stream.Generated:
    return cluster_stream.generate(WORKLOADS, COHORTS, seed=7)


@pytest.fixture(scope="module")
def variants(gen: cluster_stream.Generated) -> tuple[dict[str, engine_variants.Variant], dict[str, object]]:
    return engine_variants.build_variants(gen, ("base", "cq10-same", "cq10", "backlog1"), WINDOW)


@pytest.fixture(scope="module")
def base_run(variants: tuple[dict[str, engine_variants.Variant], dict[str, object]]) -> timing.Run:
    return timing.run_once(variants[0]["base"], "bytes", WORKLOADS)


@pytest.fixture(scope="module")
def backlog_run(variants: tuple[dict[str, engine_variants.Variant], dict[str, object]]) -> timing.Run:
    """backlog1 over the first `window` events only (a pre-loaded backlog makes every event dearer)."""
    v = variants[0]["backlog1"]
    v = dataclasses.replace(v, stream=v.stream[: variants[0]["base"].window], complete=False)
    return timing.run_once(v, "bytes", WORKLOADS)


def test_stream_submits_and_finishes_every_workload_once(gen: cluster_stream.Generated) -> None:
    submits = [r for r in gen.records if r[1] == cluster_stream.SUBMIT]
    finishes = [r for r in gen.records if r[1] == cluster_stream.FINISH]
    assert len(submits) == len(finishes) == WORKLOADS
    assert sorted(r[4] for r in submits) == list(range(WORKLOADS))
    assert sorted(r[4] for r in finishes) == list(range(WORKLOADS))
    times = [r[0] for r in gen.records]
    assert times == sorted(times)
    submitted_at = {r[4]: i for i, r in enumerate(gen.records) if r[1] == cluster_stream.SUBMIT}
    assert all(submitted_at[r[4]] < i for i, r in enumerate(gen.records) if r[1] == cluster_stream.FINISH)
    # all ten ClusterQueues get work, and more than one size
    assert {(r[2], r[3]) for r in submits} == {(0, q) for q in range(cluster_stream.CQS_PER_COHORT)}
    assert len({r[5] for r in submits}) >= 3


def test_generator_decisions_have_a_backlog_and_nothing_else(gen: cluster_stream.Generated) -> None:
    counts = gen.decision_counts
    assert counts["Admitted"] == counts["Finished"] == WORKLOADS
    assert counts["Pending"] > 0
    assert set(counts) == {"Admitted", "Finished", "Pending"}
    assert gen.natural_pending_max > 0


def test_generation_is_deterministic(gen: cluster_stream.Generated) -> None:
    again = cluster_stream.generate(WORKLOADS, COHORTS, seed=7)
    assert again.records == gen.records
    encode = msgspec.json.encode
    assert [encode(cluster_stream.render(r)) for r in again.records[:50]] == [encode(cluster_stream.render(r)) for r in gen.records[:50]]
    assert cluster_stream.generate(50, COHORTS, seed=8).records != cluster_stream.generate(50, COHORTS, seed=7).records


def test_base_replays_the_generator_and_borrows(gen: cluster_stream.Generated, base_run: timing.Run) -> None:
    s = base_run.summary
    assert s["decisions"] == dict(gen.decision_counts)
    assert s["all_admitted_and_finished"] is True
    assert s["admitted_once"] == s["finished_after_admission"] == WORKLOADS
    assert s["workloads_that_waited"] > 0
    assert s["stream_pending_max"] > 0
    assert s["borrowed_admissions"] > 0  # hot queues borrow from cold ones
    assert 0 < s["spot_admissions"] < WORKLOADS  # both flavors are used
    assert base_run.events == 2 * WORKLOADS


def test_dict_mode_decides_like_bytes_mode(
    variants: tuple[dict[str, engine_variants.Variant], dict[str, object]], base_run: timing.Run
) -> None:
    as_dicts = timing.run_once(variants[0]["base"], "dict", WORKLOADS)
    assert as_dicts.summary == base_run.summary


def test_preloaded_backlog_waits_and_changes_nothing(
    variants: tuple[dict[str, engine_variants.Variant], dict[str, object]], base_run: timing.Run, backlog_run: timing.Run
) -> None:
    v = variants[0]["backlog1"]
    s = backlog_run.summary
    assert v.preload_per_cq >= len(cluster_stream.GPU_SHAPES)
    assert s["preloaded_pending"] == v.preload_per_cq * v.cqs
    assert s["preloaded_admitted"] == 0
    assert s["gpu_holders_admitted"] == s["gpu_holders_expected"] == len(cluster_stream.GPU_HOLDERS) * v.cqs
    assert s["decisions"] == base_run.summary["window_decisions"]
    assert s["all_admitted_and_finished"] is None  # a prefix: not every workload has finished yet


def test_cq10_is_ten_independent_copies_of_the_window(
    variants: tuple[dict[str, engine_variants.Variant], dict[str, object]], base_run: timing.Run
) -> None:
    vs, info = variants
    v = vs["cq10"]
    window = vs["base"].window
    assert window == info["cq10_window_base_events"]
    assert 0 < window < len(vs["base"].stream)
    assert len(v.stream) == engine_variants.CQ_SCALE * window
    assert v.cqs == engine_variants.CQ_SCALE * vs["base"].cqs
    ids = [msgspec.json.decode(b)["id"] for b in v.stream]
    assert len(set(ids)) == len(ids)
    s = timing.run_once(v, "bytes", WORKLOADS).summary
    assert base_run.summary["window_decisions"] is not None
    assert s["decisions"] == {k: engine_variants.CQ_SCALE * n for k, n in base_run.summary["window_decisions"].items()}
    # and each copy went to its own cohort's ClusterQueues
    cqs = Counter(
        msgspec.json.decode(b)["workload"]["metadata"]["namespace"]
        for b in v.stream
        if b.startswith(b'{"type":"WorkloadSubmitted"')
    )
    assert len(cqs) == engine_variants.CQ_SCALE * cluster_stream.CQS_PER_COHORT


def test_cq10_same_is_the_base_stream_among_untouched_clusterqueues_that_hold_state(
    variants: tuple[dict[str, engine_variants.Variant], dict[str, object]], base_run: timing.Run
) -> None:
    vs, _ = variants
    v, base = vs["cq10-same"], vs["base"]
    assert v.stream == base.stream
    assert v.cqs == engine_variants.CQ_SCALE * base.cqs
    state = [msgspec.json.decode(b) for b in v.prelude if isinstance(b, bytes)]
    assert state and all(e["type"] in ("WorkloadSubmitted", "WorkloadFinished") for e in state)
    base_namespaces = {cluster_stream.namespace(c, q) for c in range(base.cohorts) for q in range(cluster_stream.CQS_PER_COHORT)}
    touched = {e["workload"]["metadata"]["namespace"] if "workload" in e else e["namespace"] for e in state}
    assert touched.isdisjoint(base_namespaces)  # the stream's ClusterQueues start as empty as in base
    assert len(touched) == (engine_variants.CQ_SCALE - 1) * base.cqs  # every other ClusterQueue holds something
    assert max(e["time"] for e in state) < min(msgspec.json.decode(b)["time"] for b in base.stream)
    run = timing.run_once(v, "bytes", WORKLOADS)
    assert run.summary["decisions"] == base_run.summary["decisions"]
    assert run.summary["all_admitted_and_finished"] is True
    # the other queues still hold workloads (admitted or waiting) while the stream runs
    assert sum(e["type"] == "WorkloadSubmitted" for e in state) > sum(e["type"] == "WorkloadFinished" for e in state)


def test_report_checks_and_goals_are_computed(
    gen: cluster_stream.Generated,
    variants: tuple[dict[str, engine_variants.Variant], dict[str, object]],
    base_run: timing.Run,
    backlog_run: timing.Run,
) -> None:
    vs = {"base": variants[0]["base"], "backlog1": variants[0]["backlog1"]}
    (again,) = timing.measure({"base": vs["base"]}, ["bytes"], repeat=1, workloads=WORKLOADS, progress=False)
    assert again.summary == base_run.summary  # deterministic across runs
    runs = [base_run, backlog_run]
    analysis = eb.analyse(runs, vs, ["bytes"])
    assert analysis["deterministic"] == {"base": True, "backlog1": True}
    compared = analysis["results"]["backlog1"]["bytes"]["compared"]["base"]
    for clock in timing.CLOCKS:
        assert compared[clock]["ratio"] > 0 and len(compared[clock]["paired_ratios"]) == 1
    checks = eb.same_decisions({r.variant: r.summary for r in runs}, gen)
    assert checks == {"base = generator": True, "backlog1 = base": False}  # a prefix of the stream only
    names = [g["goal"] for g in eb.goals(analysis, ["bytes"])]
    assert names[0].startswith("base ≥ 20,000 events/s")
