"""The shortcuts of fair-sharing preemption searches change no decision: the bound that answers
a search no victim could satisfy (domain/preemption/fair_shortfall.py), the answers kept
across one scheduling pass's nominations (`FairSharingPreemptor.targets`: a search asked again on
a cohort tree nothing was admitted to or evicted from since gets the same answer), the searches
asked once per assigned workload (`Searches`, `scheduler.REMEMBER_FAIR`), the shares kept within
a pass while their node's usage stays (`fair_sharing_strategies.CACHE_SHARES`), and fair sharing's
entries kept across one pass (`Scheduler._kept_assign`, `scheduler.KEEP_FAIR_ENTRIES`).

Each stream is folded twice, once as the engine runs and once with every shortcut switched off
(every search and every assignment made), and every decision is compared byte for byte. While
the bound is on, each time it answers "cannot fit" the search it replaces is also made, and must
find nothing and defer the ClusterQueue alike. The
streams: flat cohorts with random preemption policies and fair-sharing strategies, in Batches
too; three- and four-level cohort trees under fair sharing, both release modes, random weights
and strategies; and small versions of the depth sweep's fair-sharing backlogs
(bench/depth_sweep.py). Where a stream makes many searches, each shortcut is checked to have
been taken (the bound too)."""

from __future__ import annotations

import copy
import importlib
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
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
from domain.preemption import fair_sharing_strategies as fair

# Patches domain functions and switches, which compiled callers would not see: runs on the sources.
pytestmark = pytest.mark.pure_python

depth_sweep: Any = importlib.import_module("bench.depth_sweep")

SWITCHES: tuple[tuple[Any, str], ...] = (
    (fair, "BOUND_SEARCHES"),
    (fair, "CACHE_SHARES"),
    (fair, "KEEP_ANSWERS"),
    (scheduler, "REMEMBER_FAIR"),
    (scheduler, "KEEP_FAIR_ENTRIES"),
)


@contextmanager
def shortcuts(on: bool, seen: Seen) -> Iterator[None]:
    """Every switch of SWITCHES on (each "cannot fit" checked against the search it replaces: no
    target, and the same deferral of the ClusterQueue) or off (tests/domain/switches.py counts
    into `seen`)."""
    targets = fair.FairSharingPreemptor.targets
    search = fair.FairSharingPreemptor._targets
    said: list[bool] = []

    def asking(self: Any, *a: Any) -> Any:
        seen["asked"] += 1
        return targets(self, *a)

    def searching(self: Any, cq: Any, ws: Any, requests: Any, frs: Any) -> Any:
        seen["searched"] += 1
        said.clear()
        deferred = self.state.deferred
        before = cq.name in deferred
        found = search(self, cq, ws, requests, frs)
        if said and said[0]:
            bound_agrees(lambda: search(self, cq, ws, requests, frs),
                         lambda: patched((fair, "BOUND_SEARCHES", False)), ws.key, cq.name, deferred, before)
        return found

    with patched(
        *[(owner, name, on) for owner, name in SWITCHES],
        *entry_counts(seen),
        (fair, "cannot_fit", counted_bound(fair.cannot_fit, seen, said)),
        (fair.FairSharingPreemptor, "targets", asking),
        (fair.FairSharingPreemptor, "_targets", searching),
    ):
        yield


def taken(seen: Seen) -> bool:
    """Some answers and some entries were given again, and the bound answered both ways."""
    return (seen["asked"] > seen["searched"] + 20 and seen["reused"] > 20
            and seen["bounded"] > 20 and seen["unbounded"] > 20)


STRATEGIES = (
    ["LessThanOrEqualToFinalShare", "LessThanInitialShare"],
    ["LessThanOrEqualToFinalShare"],
    ["LessThanInitialShare"],
)


def fair_stream(seed: int) -> list[dict[str, Any]]:
    """mixed_stream (flat cohorts, random policies, quota changes, stop policies) under fair
    sharing, with random strategies and ClusterQueue weights."""
    rng = random.Random(seed)
    config = {"type": "ConfigApplied", "object": {
        "apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
        "fairSharing": {"enable": True, "preemptionStrategies": rng.choice(STRATEGIES)}}}
    out: list[dict[str, Any]] = [config]
    for event in mixed_stream(seed, events=500):
        obj = event.get("object")
        if isinstance(obj, dict) and obj.get("kind") == "ClusterQueue":
            event = copy.deepcopy(event)
            event["object"]["spec"]["fairSharing"] = {"weight": rng.choice(("1", "1", "2", "0.5", "0"))}
            if "preemption" not in event["object"]["spec"] and rng.random() < 0.6:
                event["object"]["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority",
                                                         "reclaimWithinCohort": "Any"}
        out.append(event)
    return out


@pytest.mark.parametrize("seed", range(8))
def test_flat_fair_cohorts_decide_alike_with_and_without_the_shortcuts(seed: int) -> None:
    seen = both_ways(fair_stream(seed), shortcuts)
    seen_batched = both_ways(batched(fair_stream(seed), seed), shortcuts)
    assert seen["searched"] + seen_batched["searched"] > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tree=hp.trees(fair=True), ops_=hp.ops(submits=8, releases=3, finishes=2, deletes=1, min_size=20, max_size=60))
def test_fair_cohort_trees_decide_alike_with_and_without_the_shortcuts(tree: hp.Tree, ops_: list[Any]) -> None:
    trees_alike(tree, ops_, shortcuts)


@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
def test_the_depth_sweeps_fair_backlogs_decide_alike_with_and_without_the_shortcuts(strategy: str) -> None:
    """Deep backlogs of many shapes and priorities under fair sharing: a release wakes heads
    that are evaluated one per ClusterQueue per cycle, most cycles change nothing in their tree,
    and preemptors waiting for their victims are nominated again in every cycle."""
    stream = depth_sweep.sweep_stream(strategy, "fair", depth=12, cohorts=1, per_cohort=4, events=200)
    seen = both_ways(stream.prelude + stream.timed, shortcuts)
    if strategy == "BestEffortFIFO":
        assert taken(seen), seen


def test_a_deep_fair_hierarchy_decides_alike_with_and_without_the_shortcuts() -> None:
    """The preemption-heavy backlog's two-level tree (borrowWithinCohort, both release modes,
    quota and priority changes, deletes: bench/depth_sweep.py preemption_deep_stream) under
    fair sharing."""
    stream = depth_sweep.preemption_deep_stream(200, depth=8)
    events = [msgspec.json.decode(e) for e in stream.prelude + stream.timed]
    config = {"type": "ConfigApplied", "id": "configuration", "time": events[0]["time"], "object": {
        "apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration", "fairSharing": {"enable": True}}}
    assert taken(both_ways([config, *events], shortcuts))
