"""Two shortcuts of the classical shortfall bound change no decision: the bound counting only
the other queues a search may take from (`shortfall.ONLY_RECLAIMABLE`, `shortfall._may_give`:
every node up to the common ancestor with the preemptor above nominal in some requested
flavor-resource), and its "cannot fit" given again, within a pass's nominations on the same tree,
to the asks it dominates (`classical.KEEP_BOUNDS`, `classical._dominated`: no higher priority,
no smaller amounts).

Each stream is folded twice, the switch on and off (the other shortcuts as the engine runs them),
and every decision is compared byte for byte: flat cohorts with random preemption policies, in
Batches too; three- and four-level cohort trees under Classical preemption and fair sharing, both
release modes; the depth sweep's classical streams and its preemption-heavy deep backlog
(bench/depth_sweep.py), where each switch is checked to have been taken. Every "cannot fit" the
narrower bound gives, and every answer given again by dominance, is also checked against the
search made afresh by tests/domain/test_search_shortcuts.py, which runs with both on."""

from __future__ import annotations

import importlib
from contextlib import AbstractContextManager
from typing import Any

import pytest
import test_hierarchy_properties as hp
from event_streams import batched, mixed_stream
from hypothesis import HealthCheck, given, settings
from switches import counted_switch, decide

from domain.preemption import classical, shortfall

# Patches domain functions, which compiled callers would not see: runs on the sources.
pytestmark = pytest.mark.pure_python

bounded = shortfall.cannot_fit
# The depth sweep's stream generators (imported by name: mypy checks the engine and its tests,
# not the benchmarks and the shell they reach).
depth_sweep: Any = importlib.import_module("bench.depth_sweep")


def reclaimable_only(on: bool, answers: list[int]) -> AbstractContextManager[None]:
    """`shortfall.ONLY_RECLAIMABLE` set to `on`, counting the bound's "cannot fit" answers."""
    return counted_switch((shortfall, "ONLY_RECLAIMABLE"), on, (classical, "cannot_fit"), bounded, answers)


def reclaimable_both_ways(stream: list[Any]) -> tuple[int, int]:
    """The bound's "cannot fit" answers with the switch on and off; the decisions alike."""
    on, off = [0], [0]
    with reclaimable_only(True, on):
        fast = decide(stream)
    with reclaimable_only(False, off):
        assert decide(stream) == fast
    return on[0], off[0]


@pytest.mark.parametrize("seed", range(4))
def test_flat_cohorts_decide_alike_with_the_bound_counting_only_reclaimable_queues(seed: int) -> None:
    """The bound counting only the other queues a search may take from (every node up to the
    common ancestor above nominal in some requested flavor-resource: `shortfall._may_give`)
    against counting every other queue."""
    on, off = reclaimable_both_ways(mixed_stream(seed))
    assert on >= off


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tree=hp.trees(), ops_=hp.ops(submits=8, releases=3, finishes=2, deletes=1, min_size=20, max_size=60))
def test_cohort_trees_decide_alike_with_the_bound_counting_only_reclaimable_queues(
        tree: hp.Tree, ops_: list[Any]) -> None:
    def decisions() -> list[Any]:
        return [d for *_, d, _where in hp.replay(tree, ops_)]

    on, off = [0], [0]
    with reclaimable_only(True, on):
        fast = decisions()
    with reclaimable_only(False, off):
        assert decisions() == fast
    assert on[0] >= off[0]


def test_the_preemption_heavy_backlog_decides_alike_with_the_bound_counting_only_reclaimable_queues() -> None:
    """The deep two-level stream, where most searches that the whole-tree bound leaves to be made
    find nothing because the queues holding the low-priority workloads are within nominal: the
    narrower bound answers them (more "cannot fit" answers, the same decisions)."""
    stream = depth_sweep.preemption_deep_stream(300, depth=8)
    on, off = reclaimable_both_ways(stream.prelude + stream.timed)
    assert on > off + 20


def bounds_kept(on: bool, given: list[int]) -> AbstractContextManager[None]:
    """`classical.KEEP_BOUNDS` set to `on`, counting the asks a kept "cannot fit" answered."""
    return counted_switch((classical, "KEEP_BOUNDS"), on, (classical, "_dominated"), classical._dominated, given)


def bounds_both_ways(stream: list[Any]) -> int:
    """How many asks a kept "cannot fit" answered; the decisions alike with the switch off."""
    given, none = [0], [0]
    with bounds_kept(True, given):
        fast = decide(stream)
    with bounds_kept(False, none):
        assert decide(stream) == fast
    assert none[0] == 0
    return given[0]


@pytest.mark.parametrize("seed", range(4))
def test_flat_cohorts_decide_alike_with_and_without_the_bounds_kept(seed: int) -> None:
    """The bound's "cannot fit" given again within a pass's nominations to an ask it dominates
    (no higher priority, no smaller amounts: `classical._dominated`) against the bound asked
    every time."""
    bounds_both_ways(mixed_stream(seed))
    bounds_both_ways(batched(mixed_stream(seed), seed))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tree=hp.trees(), ops_=hp.ops(submits=8, releases=3, finishes=2, deletes=1, min_size=20, max_size=60))
def test_cohort_trees_decide_alike_with_and_without_the_bounds_kept(tree: hp.Tree, ops_: list[Any]) -> None:
    def decisions() -> list[Any]:
        return [d for *_, d, _where in hp.replay(tree, ops_)]

    given, none = [0], [0]
    with bounds_kept(True, given):
        fast = decisions()
    with bounds_kept(False, none):
        assert decisions() == fast


@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
def test_the_depth_sweeps_backlogs_decide_alike_with_and_without_the_bounds_kept(strategy: str) -> None:
    stream = depth_sweep.sweep_stream(strategy, "classical", depth=12, cohorts=1, per_cohort=4, events=150)
    bounds_both_ways(stream.prelude + stream.timed)


def test_the_preemption_heavy_backlog_decides_alike_with_and_without_the_bounds_kept() -> None:
    """The woken heads of one queue, one per cycle on an unchanged tree, ask the bound alike
    with other amounts and priorities: most of those asks are dominated."""
    stream = depth_sweep.preemption_deep_stream(300, depth=8)
    assert bounds_both_ways(stream.prelude + stream.timed) > 20
