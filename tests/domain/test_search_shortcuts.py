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

import pytest
import test_hierarchy_properties as hp
from event_streams import batched, mixed_stream
from hypothesis import HealthCheck, given, settings
from switches import (
    Seen,
    both_ways,
    bound_agrees,
    counted_bound,
    entry_counts,
    patched,
    trees_alike,
)

from domain import scheduler
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
def shortcuts(on: bool, seen: Seen) -> Iterator[None]:
    """All four shortcuts on (each answer given again checked against the search made now; each
    "cannot fit" against the search it replaces: no target, and the same deferral of the
    ClusterQueue) or all four off (tests/domain/switches.py counts into `seen`)."""
    original = classical.ClassicalPreemptor.targets
    search = classical.ClassicalPreemptor._targets  # the search itself, not the answers kept
    across = classical.ClassicalPreemptor._across
    said: list[bool] = []
    asked_across: list[bool] = []
    counted = counted_bound(bounded, seen, said)

    def searched(self: Any, *a: Any) -> Any:
        seen["searched"] += 1
        return search(self, *a)

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
                seen["across"] += 1
            was = cq.name in deferred
            again = search(self, cq, ws, requests, frs)
            assert [(t.ws.key, t.reason, t.cq.name) for t in again] == [
                (t.ws.key, t.reason, t.cq.name) for t in found
            ], f"{ws.key}: an answer given again differs from the search made now"
            assert (cq.name in deferred) == was, f"{ws.key}: the search made now defers, the answer given again did not"
            return found
        if said and said[0]:
            bound_agrees(lambda: search(self, cq, ws, requests, frs),
                         lambda: patched((classical, "cannot_fit", _never)), ws.key, cq.name, deferred, before)
        return found

    with patched(
        *entry_counts(seen),
        (classical, "cannot_fit", counted if on else _never),
        (classical, "KEEP_ANSWERS", on),
        (classical, "KEEP_ACROSS_EVENTS", on),
        (scheduler, "KEEP_ENTRIES", on),
        (classical.ClassicalPreemptor, "_across", across_asked),
        (classical.ClassicalPreemptor, "targets", checked),
        (classical.ClassicalPreemptor, "_targets", searched),
    ):
        yield


def taken(seen: Seen, kept: bool = True, across: bool = False) -> bool:
    """The bound answered both ways, (`kept`) some answer and some entry were given again, and
    (`across`) some answer kept across events was."""
    return seen["bounded"] > 20 and seen["unbounded"] > 20 and (
        not kept or (seen["asked"] > seen["searched"] and seen["reused"] > 20)) and (
        not across or seen["across"] > 20)


@pytest.mark.parametrize("seed", range(8))
def test_flat_cohorts_decide_alike_with_and_without_the_shortcuts(seed: int) -> None:
    seen = both_ways(mixed_stream(seed), shortcuts)
    seen_batched = both_ways(batched(mixed_stream(seed), seed), shortcuts)
    assert seen["unbounded"] + seen_batched["unbounded"] > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tree=hp.trees(), ops_=hp.ops(submits=8, releases=3, finishes=2, deletes=1, min_size=20, max_size=60))
def test_cohort_trees_decide_alike_with_and_without_the_shortcuts(tree: hp.Tree, ops_: list[Any]) -> None:
    trees_alike(tree, ops_, shortcuts)


@pytest.mark.parametrize("policy", ["classical", "fair"])
@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
def test_the_depth_sweeps_backlogs_decide_alike_with_and_without_the_shortcuts(strategy: str, policy: str) -> None:
    """Deep backlogs of many shapes and priorities: under classical preemption the bound answers
    both ways many times (a release wakes heads that cannot preempt enough), and under
    BestEffortFIFO preemptors waiting for their victims are nominated again in every cycle."""
    stream = depth_sweep.sweep_stream(strategy, policy, depth=12, cohorts=1, per_cohort=4, events=150)
    seen = both_ways(stream.prelude + stream.timed, shortcuts)
    if policy == "classical":
        assert taken(seen, kept=strategy == "BestEffortFIFO", across=strategy == "BestEffortFIFO")


def test_the_preemption_heavy_backlog_decides_alike_with_and_without_the_shortcuts() -> None:
    """A two-level cohort tree with borrowWithinCohort, both release modes, quota and priority
    changes, deletes (bench/depth_sweep.py preemption_deep_stream)."""
    stream = depth_sweep.preemption_deep_stream(200, depth=8)
    assert taken(both_ways(stream.prelude + stream.timed, shortcuts), across=True)
