"""Four shortcuts of classical preemption searches change no decision: the shortfall bound
(domain/preemption/shortfall.py: no search where even every workload the preemptor could take
would leave it short), the answers kept across one scheduling pass's nominations
(`ClassicalPreemptor.targets`: a search asked again on a cohort tree nothing was admitted to or
evicted from since gets the same answer), and the entries kept across one pass
(`Scheduler._kept_assign`: a head's flavor assignment and targets, asked again on the same tree
with the same room moved for the while, are given again), and the answers kept across events
(`ClassicalPreemptor._across`: given again while the configuration and the tree's workloads
holding the flavor-resources searched stay as they were).

Each stream is folded twice, once as the engine runs and once with all four switched off
(`classical.cannot_fit` answering "might fit" always, `classical.KEEP_ANSWERS` and
`classical.KEEP_ACROSS_EVENTS` and `scheduler.KEEP_ENTRIES` false, so every search and every
assignment is made), and every decision is compared byte for byte. While they are on, each
answer given again (within a pass or across events) is checked against the search made afresh
at that point: the same targets, and no deferral the answer would miss. While the bound is on, each time it
answers "cannot fit" the search it replaces is also made, and must find nothing and defer the
ClusterQueue alike. The streams: flat cohorts with random preemption policies (borrowWithinCohort
among them), in Batches too; three- and four-level cohort trees under Classical preemption and
fair sharing, both release modes; and small versions of the depth sweep's deep-backlog streams
(bench/depth_sweep.py). Where a stream makes many classical searches, each shortcut is checked to
have been taken (and the bound to have answered both ways)."""

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

from domain import scheduler
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


# Bound answers (True, False), "asked" targets() calls, "searched" searches, "reused" entries
# given again (`Scheduler._kept_assign` without an `assign`).
Seen = dict[object, int]


@contextmanager
def shortcuts(on: bool, seen: Seen) -> Iterator[None]:
    """Both shortcuts on (each "cannot fit" checked against the search it replaces: no target,
    and the same deferral of the ClusterQueue) or both off."""
    original = classical.ClassicalPreemptor.targets
    search = classical.ClassicalPreemptor._targets  # the search itself, not the answers kept
    said: list[bool] = []

    def searched(self: Any, *a: Any) -> Any:
        seen["searched"] += 1
        return search(self, *a)

    def counted(state: Any, cq: Any, ws: Any, requests: Any) -> bool:
        answer = bounded(state, cq, ws, requests)
        seen[answer] += 1
        said.append(answer)
        return answer

    across = classical.ClassicalPreemptor._across
    asked_across: list[bool] = []

    def across_asked(self: Any, *a: Any) -> Any:
        asked_across.append(True)
        return across(self, *a)

    def checked(self: Any, cq: Any, ws: Any, requests: Any, frs: Any) -> Any:
        said.clear()
        asked_across.clear()
        deferred = self.state.deferred
        before = cq.name in deferred
        searches_before = seen["searched"]
        found = original(self, cq, ws, requests, frs)
        seen["asked"] += 1
        if seen["searched"] == searches_before:
            # An answer given again (kept within the pass, or across events when the pass had
            # none: `_across` was asked): the search made now finds the same targets, and
            # defers the ClusterQueue only if it already was.
            if asked_across:
                seen["across"] = seen.get("across", 0) + 1
            was = cq.name in deferred
            again = search(self, cq, ws, requests, frs)
            assert [(t.ws.key, t.reason, t.cq.name) for t in again] == [
                (t.ws.key, t.reason, t.cq.name) for t in found
            ], f"{ws.key}: an answer given again differs from the search made now"
            assert (cq.name in deferred) == was, f"{ws.key}: the search made now defers, the answer given again did not"
            return found
        if said and said[0]:
            was = cq.name in deferred
            if not before:
                deferred.pop(cq.name, None)
            setattr(classical, "cannot_fit", _never)
            try:
                again = search(self, cq, ws, requests, frs)
            finally:
                setattr(classical, "cannot_fit", counted)
            assert not again, f"{ws.key}: the bound says it cannot fit, the search found {again}"
            assert (cq.name in deferred) == was, f"{ws.key}: deferred {was} by the bound, not by the search"
        return found

    assign = scheduler.Scheduler.assign
    kept_assign = scheduler.Scheduler._kept_assign
    assigned: list[int] = [0]

    def assigning(self: Any, *a: Any) -> Any:
        assigned[0] += 1
        return assign(self, *a)

    def reusing(self: Any, *a: Any) -> Any:
        before = assigned[0]
        entry = kept_assign(self, *a)
        if assigned[0] == before:
            seen["reused"] = seen.get("reused", 0) + 1
        return entry

    setattr(scheduler.Scheduler, "assign", assigning)
    setattr(scheduler.Scheduler, "_kept_assign", reusing)
    setattr(classical, "cannot_fit", counted if on else _never)
    setattr(classical, "KEEP_ANSWERS", on)
    setattr(classical, "KEEP_ACROSS_EVENTS", on)
    setattr(classical.ClassicalPreemptor, "_across", across_asked)
    setattr(scheduler, "KEEP_ENTRIES", on)
    setattr(classical.ClassicalPreemptor, "targets", checked)
    setattr(classical.ClassicalPreemptor, "_targets", searched)
    try:
        yield
    finally:
        setattr(classical, "cannot_fit", bounded)
        setattr(classical, "KEEP_ANSWERS", True)
        setattr(classical, "KEEP_ACROSS_EVENTS", True)
        setattr(classical.ClassicalPreemptor, "_across", across)
        setattr(scheduler, "KEEP_ENTRIES", True)
        setattr(classical.ClassicalPreemptor, "targets", original)
        setattr(classical.ClassicalPreemptor, "_targets", search)
        setattr(scheduler.Scheduler, "assign", assign)
        setattr(scheduler.Scheduler, "_kept_assign", kept_assign)


def decide(stream: list[Any]) -> list[bytes]:
    engine = Engine()
    encode = msgspec.json.encode
    return [encode(engine.apply(event, offset)) for offset, event in enumerate(stream)]


def both_ways(stream: list[Any]) -> Seen:
    """The shortcuts' counts while they were on."""
    seen: Seen = {True: 0, False: 0, "asked": 0, "searched": 0}
    with shortcuts(True, seen):
        fast = decide(stream)
    off: Seen = {True: 0, False: 0, "asked": 0, "searched": 0}
    with shortcuts(False, off):
        assert decide(stream) == fast
    assert off["asked"] == off["searched"]  # switched off: every search is made
    assert not off.get("reused")  # and every assignment
    return seen


def taken(seen: Seen, kept: bool = True, across: bool = False) -> bool:
    """The bound answered both ways, (`kept`) some answer and some entry were given again, and
    (`across`) some answer kept across events was."""
    return seen[True] > 20 and seen[False] > 20 and (
        not kept or (seen["asked"] > seen["searched"] and seen.get("reused", 0) > 20)) and (
        not across or seen.get("across", 0) > 20)


@pytest.mark.parametrize("seed", range(8))
def test_flat_cohorts_decide_alike_with_and_without_the_shortcuts(seed: int) -> None:
    seen = both_ways(mixed_stream(seed))
    seen_batched = both_ways(batched(mixed_stream(seed), seed))
    assert seen[False] + seen_batched[False] > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tree=hp.trees(), ops_=hp.ops(submits=8, releases=3, finishes=2, deletes=1, min_size=20, max_size=60))
def test_cohort_trees_decide_alike_with_and_without_the_shortcuts(tree: hp.Tree, ops_: list[Any]) -> None:
    def decisions() -> list[Any]:
        return [d for *_, d, _where in hp.replay(tree, ops_)]

    with shortcuts(True, {True: 0, False: 0, "asked": 0, "searched": 0}):
        fast = decisions()
    with shortcuts(False, {True: 0, False: 0, "asked": 0, "searched": 0}):
        assert decisions() == fast


@pytest.mark.parametrize("policy", ["classical", "fair"])
@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
def test_the_depth_sweeps_backlogs_decide_alike_with_and_without_the_shortcuts(strategy: str, policy: str) -> None:
    """Deep backlogs of many shapes and priorities: under classical preemption the bound answers
    both ways many times (a release wakes heads that cannot preempt enough), and under
    BestEffortFIFO preemptors waiting for their victims are nominated again in every cycle."""
    stream = depth_sweep.sweep_stream(strategy, policy, depth=12, cohorts=1, per_cohort=4, events=150)
    seen = both_ways(stream.prelude + stream.timed)
    if policy == "classical":
        assert taken(seen, kept=strategy == "BestEffortFIFO", across=strategy == "BestEffortFIFO")


def test_the_preemption_heavy_backlog_decides_alike_with_and_without_the_shortcuts() -> None:
    """A two-level cohort tree with borrowWithinCohort, both release modes, quota and priority
    changes, deletes (bench/depth_sweep.py preemption_deep_stream)."""
    stream = depth_sweep.preemption_deep_stream(200, depth=8)
    assert taken(both_ways(stream.prelude + stream.timed), across=True)
