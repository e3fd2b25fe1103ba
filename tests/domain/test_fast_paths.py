"""Shortcuts on the engine's hot paths decide exactly what the general paths decide.

Each test folds the same random streams twice, once as the engine runs and once with a shortcut
turned back into the general path (monkeypatched), and compares every decision, byte for byte.
The streams mix non-preemptive ClusterQueues with preemptive ones, so both branches of every
shortcut are taken (checked)."""

from __future__ import annotations

import copy
import importlib
import random
from typing import Any

import msgspec
import pytest
from event_streams import batched, mixed_stream, random_stream

from domain import lifecycle, queues, scheduler
from domain.engine import Engine
from domain.flavor_assigner import BEST, should_try_next_flavor
from domain.objects import (
    BORROWING_OVER_PREEMPTION,
    MAY_STOP_SEARCH,
    PREEMPTION_OVER_BORROWING,
    TRY_NEXT_FLAVOR,
    FlavorFungibility,
)
from domain.preemption.policy import never_preempts

# Patches domain functions, which compiled callers would not see: runs on the sources
# (tests/domain/test_compiled.py runs it so where the engine is compiled).
pytestmark = pytest.mark.pure_python

def decide(stream: list[dict[str, Any]] | list[bytes]) -> list[bytes]:
    engine = Engine()
    encode = msgspec.json.encode
    return [encode(engine.apply(event, offset)) for offset, event in enumerate(stream)]


@pytest.mark.parametrize("seed", range(16))
def test_non_preemptive_queues_skip_searches_without_changing_decisions(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = mixed_stream(seed)
    answers = {True: 0, False: 0}

    def counted(cq: Any) -> bool:
        answer = never_preempts(cq)
        answers[answer] += 1
        return answer

    monkeypatch.setattr(scheduler, "never_preempts", counted)
    fast = decide(stream)
    assert answers[True] and answers[False]  # both kinds of queue were nominated
    monkeypatch.setattr(scheduler, "never_preempts", lambda cq: False)  # always search
    assert decide(stream) == fast


def _members_looked_up(state: Any, root: Any) -> list[Any]:
    return [state.cluster_queues.get(node.name) for node in root.leaves()]


@pytest.mark.parametrize("seed", range(16))
def test_tree_members_kept_with_the_leaves_are_those_looked_up(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """lifecycle.tree_members keeps each tree's ClusterQueues until its shape changes; the
    streams move ClusterQueues in and out of cohorts and stop them (random_stream)."""
    stream = mixed_stream(seed)
    kept = decide(stream)
    monkeypatch.setattr(lifecycle, "tree_members", _members_looked_up)
    assert decide(stream) == kept


@pytest.mark.parametrize("borrow", (MAY_STOP_SEARCH, TRY_NEXT_FLAVOR))
@pytest.mark.parametrize("preempt", (MAY_STOP_SEARCH, TRY_NEXT_FLAVOR))
@pytest.mark.parametrize("preference", (None, BORROWING_OVER_PREEMPTION, PREEMPTION_OVER_BORROWING))
def test_a_flavor_where_everything_fits_without_borrowing_ends_the_search(
    borrow: str, preempt: str, preference: str | None
) -> None:
    """FlavorAssigner._find_flavor takes such a flavor at once (`rep is BEST`), which is what
    the general test says under every fungibility."""
    assert not should_try_next_flavor(BEST, FlavorFungibility(borrow, preempt, preference))


def churned_config_stream(seed: int) -> list[dict[str, Any]]:
    """random_stream with flavors deleted and re-created, ClusterQueues deleted and re-applied,
    and ClusterQueues naming a flavor or an admission check that may not exist yet: every
    input of a queue's activeness changes, in every order."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for event in random_stream(seed, events=300):
        obj = event.get("object")
        if isinstance(obj, dict) and obj.get("kind") == "ClusterQueue" and rng.random() < 0.3:
            event = copy.deepcopy(event)
            spec = event["object"]["spec"]
            if rng.random() < 0.5:
                spec["resourceGroups"][0]["flavors"].append(
                    {"name": "late", "resources": [{"name": "cpu", "nominalQuota": "4"},
                                                   {"name": "memory", "nominalQuota": "8Gi"}]})
            else:
                spec["admissionChecks"] = ["check"]
        out.append(event)
        roll = rng.random()
        if roll < 0.04:
            out.append({"type": "ConfigApplied", "object": {
                "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "late"}}})
        elif roll < 0.07:
            out.append({"type": "ConfigDeleted", "kind": "ResourceFlavor", "name": "late"})
        elif roll < 0.09:
            out.append({"type": "ConfigApplied", "object": {
                "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "AdmissionCheck", "metadata": {"name": "check"},
                "spec": {"controllerName": "c"}}})
        elif roll < 0.11:
            out.append({"type": "ConfigDeleted", "kind": "AdmissionCheck", "name": "check"})
        elif roll < 0.13:
            out.append({"type": "ConfigDeleted", "kind": "ClusterQueue", "name": f"cq-{rng.randrange(2)}-{rng.randrange(3)}"})
    return out


@pytest.mark.parametrize("seed", range(12))
def test_applying_a_cluster_queue_refreshes_only_its_own_activeness(seed: int) -> None:
    """Engine._apply_cluster_queue refreshes only the applied queue's activeness: after every
    event, refreshing all queues changes nothing and decides nothing."""
    from domain.emitter import Emitter

    engine = Engine()
    kinds = {True: 0, False: 0}
    for offset, event in enumerate(churned_config_stream(seed)):
        engine.apply(event, offset)
        before = {name: (cq.active, cq.inactive_message) for name, cq in engine.state.cluster_queues.items()}
        scratch = Emitter(offset)
        engine._refresh_activeness(scratch)
        after = {name: (cq.active, cq.inactive_message) for name, cq in engine.state.cluster_queues.items()}
        assert after == before and not scratch.decisions
        for active, _ in before.values():
            kinds[active] += 1
    assert kinds[True] and kinds[False]  # both active and inactive queues were seen


@pytest.mark.parametrize("seed", range(24))
def test_a_batchs_finishes_wake_once_per_tree_what_they_wake_one_by_one(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lifecycle.DeferredWakes: the releases of a run of finishes and deletions in a Batch wake
    parked heads once per cohort tree, at the end of the run; waking at each release instead
    gives the same decisions."""
    from domain import engine as engine_module

    # As read from a log (bytes): the typed path, where the deferral is, takes them.
    events = batched(mixed_stream(seed, events=600, queues_per_cohort=6), seed)
    stream = [msgspec.json.encode(event) for event in events]
    passes = {"releases": 0, "passes": 0}
    add, wake = lifecycle.DeferredWakes.add, lifecycle._wake_tree_after_release

    def counted_add(self: Any, cq: Any, usage: Any, own: bool = True) -> None:
        passes["releases"] += 1
        add(self, cq, usage, own)

    def counted_wake(*args: Any) -> None:
        passes["passes"] += 1
        wake(*args)

    monkeypatch.setattr(lifecycle.DeferredWakes, "add", counted_add)
    monkeypatch.setattr(lifecycle, "_wake_tree_after_release", counted_wake)
    deferred = decide(stream)
    assert passes["passes"] < passes["releases"]  # some runs held several releases of one tree
    monkeypatch.undo()

    engine = Engine()

    class AtOnce(lifecycle.DeferredWakes):
        def add(self, cq: Any, usage: Any) -> None:
            lifecycle.wake_after_release(engine.state, cq, usage)

    monkeypatch.setattr(engine_module, "DeferredWakes", AtOnce)
    encode = msgspec.json.encode
    assert [encode(engine.apply(event, offset)) for offset, event in enumerate(stream)] == deferred


@pytest.mark.parametrize("seed", range(8))
def test_a_quiet_trees_heads_parked_at_once_as_one_cycle_at_a_time(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Scheduler._settle_quiet_trees parks the ready heads of a tree that has gone quiet in one
    pass; the streams keep backlogs of many shapes in preemptive and non-preemptive queues,
    with configuration changes, so that trees go quiet with heads left, and not (checked)."""
    stream = mixed_stream(seed, events=500, cohorts=2, queues_per_cohort=4)
    if seed % 2:
        stream = batched(stream, seed)
    settled = {"heads": 0, "refused": 0}
    original = queues.PendingQueue.park_ready
    original_settle = scheduler.Scheduler._settle_quiet_trees

    def counted(self: Any, filings: list[Any]) -> None:
        settled["heads"] += len(filings)
        original(self, filings)

    def counted_settle(self: Any, hopeless: Any, busy: Any) -> None:
        before = len(self._unquiet)
        original_settle(self, hopeless, busy)
        settled["refused"] += len(self._unquiet) > before

    monkeypatch.setattr(queues.PendingQueue, "park_ready", counted)
    monkeypatch.setattr(scheduler.Scheduler, "_settle_quiet_trees", counted_settle)
    at_once = decide(stream)
    assert settled["heads"] and settled["refused"]
    monkeypatch.setattr(scheduler, "SETTLE_QUIET_TREES", False)
    assert decide(stream) == at_once


# The depth sweep's stream generators (imported by name: mypy checks the engine and its tests,
# not the benchmarks and the shell they reach).
depth_sweep: Any = importlib.import_module("bench.depth_sweep")


def _held_room_streams(seed: int) -> list[Any]:
    """Backlogs of many shapes in cohorts whose queues cannot always reclaim (their heads hold
    room): random flat cohorts (in Batches for odd seeds), and a small no-preemption depth sweep
    stream, whose releases wake tens of heads per queue."""
    stream: list[Any] = mixed_stream(seed, events=500, cohorts=2, queues_per_cohort=4)
    if seed % 2:
        stream = batched(stream, seed)
    sweep = depth_sweep.sweep_stream("BestEffortFIFO", "none", depth=16, cohorts=2, per_cohort=3,
                                     events=120, seed=seed)
    return [stream, sweep.prelude + sweep.timed]


@pytest.mark.parametrize("seed", range(6))
def test_a_quiet_trees_heads_before_one_that_may_fit_parked_at_once_as_one_cycle_at_a_time(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scheduler._settle_quiet_trees parks, in a quiet tree where a ready head may fit, the
    ready heads that the cycles before its turn would park; against settling whole trees only
    (PARK_LEADING_HEADS off) and against parking one cycle at a time (SETTLE_QUIET_TREES off)."""
    leading = {"parks": 0}
    original = queues.PendingQueue.park_ready

    def counted(self: Any, filings: list[Any]) -> None:
        leading["parks"] += 0 < len(filings) < len(self.ready)
        original(self, filings)

    for stream in _held_room_streams(seed):
        monkeypatch.setattr(queues.PendingQueue, "park_ready", counted)
        fast = decide(stream)
        monkeypatch.setattr(queues.PendingQueue, "park_ready", original)
        monkeypatch.setattr(scheduler, "PARK_LEADING_HEADS", False)
        assert decide(stream) == fast
        monkeypatch.setattr(scheduler, "SETTLE_QUIET_TREES", False)
        assert decide(stream) == fast
        monkeypatch.setattr(scheduler, "PARK_LEADING_HEADS", True)
        monkeypatch.setattr(scheduler, "SETTLE_QUIET_TREES", True)
    assert leading["parks"] > 5  # the deep stream's quiet trees had heads that may fit behind others


@pytest.mark.parametrize("seed", range(6))
def test_room_held_by_heads_without_candidates_set_aside_only_when_read(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scheduler.run_cycle sets aside the room of entries that found no candidates when a later
    entry of the cycle reads the quota (DEFER_HELD_ROOM), and not at all when none does; against
    setting it aside at once. Both happen on these streams (checked)."""
    seen = {"holds": 0, "late": 0}
    reserve, set_aside = scheduler._capacity_to_reserve, scheduler._set_aside

    def counted_reserve(*a: Any) -> Any:
        seen["holds"] += 1
        return reserve(*a)

    def counted_set_aside(holds: list[Any], *a: Any) -> None:
        seen["late"] += len(holds)
        set_aside(holds, *a)

    for stream in _held_room_streams(seed):
        monkeypatch.setattr(scheduler, "_capacity_to_reserve", counted_reserve)
        monkeypatch.setattr(scheduler, "_set_aside", counted_set_aside)
        deferred = decide(stream)
        monkeypatch.undo()
        monkeypatch.setattr(scheduler, "DEFER_HELD_ROOM", False)
        assert decide(stream) == deferred
        monkeypatch.undo()
    assert 0 < seen["late"] < seen["holds"]  # some room was set aside late, some never


@pytest.mark.parametrize("seed", range(6))
def test_assignments_kept_across_events_are_those_made_again(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Scheduler._kept_across: a non-preemptive head's flavor assignment, kept while the
    configuration and the usage it read stay, is given again (KEEP_ASSIGNMENTS); against
    assigning every time. The random streams change quotas, cohorts, flavors' presence and
    stop queues between the assignments kept (churned_config_stream); a deeper no-preemption
    sweep stream, where pending workloads' finishes retry the woken heads without moving any
    quota, keeps many (checked)."""
    seen = {"kept": 0}
    assign = scheduler.Scheduler.assign
    cycles = scheduler.Scheduler._cycles

    def counted(self: Any, cq: Any, ws: Any, fit_only: bool = False) -> Any:
        made = {"n": 0}

        def counting(*a: Any) -> Any:
            made["n"] += 1
            return cycles(self, *a)

        self._cycles = counting
        try:
            return assign(self, cq, ws, fit_only)
        finally:
            del self._cycles
            seen["kept"] += made["n"] == 0

    deep = depth_sweep.sweep_stream("BestEffortFIFO", "none", depth=40, cohorts=2, per_cohort=3, events=150,
                                    seed=seed)
    streams = [_held_room_streams(seed)[0], churned_config_stream(seed), deep.prelude + deep.timed]
    for stream in streams:
        monkeypatch.setattr(scheduler, "KEEP_ASSIGNMENTS", True)
        monkeypatch.setattr(scheduler.Scheduler, "assign", counted)
        kept = decide(stream)
        monkeypatch.undo()
        monkeypatch.setattr(scheduler, "KEEP_ASSIGNMENTS", False)
        assert decide(stream) == kept
        monkeypatch.undo()
    assert seen["kept"] > 20
