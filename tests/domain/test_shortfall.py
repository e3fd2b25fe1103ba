"""The shortfall bound on classical preemption searches (domain/preemption/shortfall.py) changes
no decision.

Each stream is folded twice, once as the engine runs and once with the bound switched off
(`classical.cannot_fit` answering "might fit" always, so every search is made), and every
decision is compared byte for byte. While the bound is on, each time it answers "cannot fit" the
search it replaces is also made, and must find nothing. The streams: flat cohorts with random
preemption policies (borrowWithinCohort among them), in Batches too; three- and four-level cohort
trees under Classical preemption and fair sharing, both release modes; and small versions of the
depth sweep's deep-backlog streams (bench/depth_sweep.py)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
import pytest
import test_hierarchy_properties as hp
from event_streams import batched, mixed_stream
from hypothesis import HealthCheck, given, settings

from domain.engine import Engine
from domain.preemption import classical, shortfall

# Patches a domain function, which compiled callers would not see: runs on the sources.
pytestmark = pytest.mark.pure_python

bounded = shortfall.cannot_fit
# The depth sweep's stream generators (imported by name: mypy checks the engine and its tests,
# not the benchmarks and the shell they reach).
depth_sweep: Any = importlib.import_module("bench.depth_sweep")


def _never(*_: Any) -> bool:
    return False


@contextmanager
def bound(on: bool, seen: dict[bool, int]) -> Iterator[None]:
    """The bound on (each "cannot fit" checked against the search it replaces: no target, and the
    same deferral of the ClusterQueue) or off."""
    original = classical.ClassicalPreemptor.targets
    said: list[bool] = []

    def counted(state: Any, cq: Any, ws: Any, requests: Any) -> bool:
        answer = bounded(state, cq, ws, requests)
        seen[answer] += 1
        said.append(answer)
        return answer

    def checked(self: Any, cq: Any, ws: Any, requests: Any, frs: Any) -> Any:
        said.clear()
        deferred = self.state.deferred
        before = cq.name in deferred
        found = original(self, cq, ws, requests, frs)
        if said and said[0]:
            was = cq.name in deferred
            if not before:
                deferred.pop(cq.name, None)
            setattr(classical, "cannot_fit", _never)
            try:
                searched = original(self, cq, ws, requests, frs)
            finally:
                setattr(classical, "cannot_fit", counted)
            assert not searched, f"{ws.key}: the bound says it cannot fit, the search found {searched}"
            assert (cq.name in deferred) == was, f"{ws.key}: deferred {was} by the bound, not by the search"
        return found

    setattr(classical, "cannot_fit", counted if on else _never)
    classical.ClassicalPreemptor.targets = checked  # type: ignore[method-assign]
    try:
        yield
    finally:
        setattr(classical, "cannot_fit", bounded)
        classical.ClassicalPreemptor.targets = original  # type: ignore[method-assign]


def decide(stream: list[Any]) -> list[bytes]:
    engine = Engine()
    encode = msgspec.json.encode
    return [encode(engine.apply(event, offset)) for offset, event in enumerate(stream)]


def both_ways(stream: list[Any]) -> dict[bool, int]:
    seen = {True: 0, False: 0}
    with bound(True, seen):
        fast = decide(stream)
    with bound(False, seen):
        assert decide(stream) == fast
    return seen


@pytest.mark.parametrize("seed", range(8))
def test_flat_cohorts_decide_alike_with_and_without_the_bound(seed: int) -> None:
    seen = both_ways(mixed_stream(seed))
    seen_batched = both_ways(batched(mixed_stream(seed), seed))
    assert seen[False] + seen_batched[False] > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tree=hp.trees(), ops_=hp.ops(submits=8, releases=3, finishes=2, deletes=1, min_size=20, max_size=60))
def test_cohort_trees_decide_alike_with_and_without_the_bound(tree: hp.Tree, ops_: list[Any]) -> None:
    def decisions() -> list[Any]:
        return [d for *_, d, _where in hp.replay(tree, ops_)]

    seen = {True: 0, False: 0}
    with bound(True, seen):
        fast = decisions()
    with bound(False, seen):
        assert decisions() == fast


@pytest.mark.parametrize("policy", ["classical", "fair"])
@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
def test_the_depth_sweeps_backlogs_decide_alike_with_and_without_the_bound(strategy: str, policy: str) -> None:
    """Deep backlogs of many shapes and priorities: under classical preemption the bound answers
    both ways many times (a release wakes heads that cannot preempt enough)."""
    stream = depth_sweep.sweep_stream(strategy, policy, depth=12, cohorts=1, per_cohort=4, events=150)
    seen = both_ways(stream.prelude + stream.timed)
    if policy == "classical":
        assert seen[True] > 20 and seen[False] > 20


def test_the_preemption_heavy_backlog_decides_alike_with_and_without_the_bound() -> None:
    """A two-level cohort tree with borrowWithinCohort, both release modes, quota and priority
    changes, deletes (bench/depth_sweep.py preemption_deep_stream)."""
    stream = depth_sweep.preemption_deep_stream(200, depth=8)
    seen = both_ways(stream.prelude + stream.timed)
    assert seen[True] > 20 and seen[False] > 20
