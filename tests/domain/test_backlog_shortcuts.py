"""The deep-backlog shortcuts decide exactly what the general paths decide.

As in test_fast_paths.py: each stream is folded twice, once as the engine runs and once with the
shortcut turned off, and every decision is compared byte for byte. The streams keep a deep
backlog in preemptive ClusterQueues (both release modes, priority updates, quota changes,
deletions), where heads are re-nominated in many cycles of one event; each test checks that the
shortcut was taken."""

from __future__ import annotations

import copy
import random
from typing import Any

import msgspec
import pytest
from event_streams import POLICIES, mixed_stream, random_stream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain import scheduler
from domain.engine import Engine

# Patches domain globals, which compiled callers would not see: runs on the sources.
pytestmark = pytest.mark.pure_python

RELEASE_ANNOTATION = "quotaflow.dev/eviction-release"


def decide(stream: list[dict[str, Any]]) -> list[bytes]:
    engine = Engine()
    encode = msgspec.json.encode
    return [encode(engine.apply(event, offset)) for offset, event in enumerate(stream)]


def deep_preemptive_stream(seed: int, events: int = 300) -> list[dict[str, Any]]:
    """random_stream, every ClusterQueue preemptive (a random policy, a random release mode),
    with most events submissions so that queues grow deep, and a priority update now and then."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    base = random_stream(seed, events=events * 2, cohorts=2, queues_per_cohort=3)
    submitted: list[dict[str, Any]] = []
    for event in base:
        obj = event.get("object")
        if isinstance(obj, dict) and obj.get("kind") == "ClusterQueue":
            event = copy.deepcopy(event)
            event["object"]["spec"]["preemption"] = dict(rng.choice(POLICIES[1:]))
            if rng.random() < 0.5:
                event["object"]["metadata"]["annotations"] = {RELEASE_ANNOTATION: "Immediate"}
        elif event["type"] in ("WorkloadFinished", "WorkloadDeleted") and rng.random() < 0.5:
            continue  # fewer ends than submissions: a backlog builds
        elif event["type"] == "WorkloadSubmitted":
            submitted.append(event)
        out.append(event)
        if submitted and rng.random() < 0.05:
            update = copy.deepcopy(rng.choice(submitted))
            update["type"] = "WorkloadUpdated"
            update["workload"]["spec"]["priority"] = rng.choice((0, 50, 100, 200))
            out.append(update)
        if out and rng.random() < 0.04:  # release what an OnRelease eviction holds, if anything
            victim = rng.choice(submitted) if submitted else None
            if victim is not None:
                meta = victim["workload"]["metadata"]
                out.append({"type": "WorkloadReleased", "namespace": meta["namespace"], "name": meta["name"]})
        if len(out) >= events:
            break
    return out


def _memo_counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    counts = {"hits": 0, "searches": 0}
    original = scheduler.Searches._search

    def counted(self: Any, key: Any, requests: Any, frs: Any) -> Any:
        memo = self._memo
        before = None if memo is None else len(memo.answers)
        calls = [0]
        targets = self._preemptor.targets

        def counting(*args: Any) -> Any:
            calls[0] += 1
            return targets(*args)

        self._preemptor.targets = counting
        try:
            found = original(self, key, requests, frs)
        finally:
            del self._preemptor.targets
        counts["searches"] += calls[0]
        if memo is not None and before is not None and not calls[0]:
            counts["hits"] += 1
        return found

    monkeypatch.setattr(scheduler.Searches, "_search", counted)
    return counts


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_searches_kept_within_an_event_decide_as_searches_made_again(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    stream = deep_preemptive_stream(seed)
    monkeypatch.setattr(scheduler, "_MEMO_SEARCHES", True)
    kept = decide(stream)
    monkeypatch.setattr(scheduler, "_MEMO_SEARCHES", False)
    assert decide(stream) == kept


def test_search_memo_is_used_and_changes_no_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo answers some searches (so the comparison above exercises it), on mixed streams
    as well as deep preemptive ones."""
    hits = searches = 0
    streams = [make(seed) for seed in range(6) for make in (deep_preemptive_stream, mixed_stream)]
    for stream in streams:
        monkeypatch.setattr(scheduler, "_MEMO_SEARCHES", False)
        made = decide(stream)
        monkeypatch.setattr(scheduler, "_MEMO_SEARCHES", True)
        counts = _memo_counting(monkeypatch)
        assert decide(stream) == made
        monkeypatch.undo()
        hits += counts["hits"]
        searches += counts["searches"]
    assert searches > 0 and hits > 0
