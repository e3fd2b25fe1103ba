"""Each ClusterQueue's preemption-candidate index follows its workloads through admissions,
preemptions, releases, priority changes and finishes, and is rebuilt by a snapshot restore."""

from __future__ import annotations

import random
from typing import Any

import pytest

from domain.candidate_index import CandidateIndex
from domain.engine import Engine
from domain.snapshot import dump, load
from domain.state import ClusterQueueState, State

V1 = "kueue.x-k8s.io/v1beta1"
QUEUES = ("a", "b", "c")
PRIORITIES = (0, 50, 100, 200)


def setup() -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "ConfigApplied", "object": {"apiVersion": V1, "kind": "ResourceFlavor", "metadata": {"name": "rf"}}}
    ]
    for name in QUEUES:
        spec = {
            "cohort": "co",
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            "resourceGroups": [{"coveredResources": ["cpu"],
                                "flavors": [{"name": "rf", "resources": [{"name": "cpu", "nominalQuota": 6}]}]}],
        }
        events.append({"type": "ConfigApplied", "object": {"apiVersion": V1, "kind": "ClusterQueue",
                                                           "metadata": {"name": name}, "spec": spec}})
        events.append({"type": "ConfigApplied", "object": {"apiVersion": V1, "kind": "LocalQueue",
                                                           "metadata": {"namespace": name, "name": "lq"},
                                                           "spec": {"clusterQueue": name}}})
    return events


def workload(ns: str, name: str, priority: int, cpu: int) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name},
            "spec": {"queueName": "lq", "priority": priority,
                     "podSets": [{"name": "main", "count": 1, "requests": {"cpu": str(cpu)}}]}}


def expected_order(state: State, cq: ClusterQueueState) -> list[str]:
    """Kueue's candidate order, written out: evicted first, lower priority first, admitted
    more recently first."""
    def key(name: str) -> tuple[bool, int, int, int]:
        ws = state.workloads[name]
        assert ws.admission is not None
        offset, index = ws.admission.sequence
        return (not ws.evicted, ws.priority, -offset, -index)

    return sorted(cq.admitted, key=key)


def index_order(cq: ClusterQueueState) -> list[str]:
    return [key for evicted in (True, False) for *_, key in cq.candidates.ordered(evicted)]


def check(state: State, where: str) -> None:
    for cq in state.cluster_queues.values():
        assert index_order(cq) == expected_order(state, cq), f"{cq.name} {where}"
        assert len(cq.candidates) == len(cq.admitted)


@pytest.mark.parametrize("seed", range(6))
def test_index_keeps_candidate_order_through_a_preempting_stream(seed: int) -> None:
    rng = random.Random(seed)
    engine = Engine()
    offset = 0
    for event in setup():
        engine.apply(event, offset)
        offset += 1
    specs: dict[str, dict[str, Any]] = {}
    seen = {"evicted": 0, "reprioritised": 0, "candidates": 0}
    for step in range(400):
        state = engine.state
        holding = sorted(k for k, ws in state.workloads.items() if ws.admission is not None)
        evicted = sorted(k for k in holding if state.workloads[k].evicted)
        roll = rng.random()
        if evicted and roll < 0.25:
            ns, name = rng.choice(evicted).split("/")
            event: dict[str, Any] = {"type": "WorkloadReleased", "namespace": ns, "name": name}
        elif holding and roll < 0.4:
            key = rng.choice(holding)
            ws = specs[key]
            ws["spec"]["priority"] = rng.choice(PRIORITIES)
            event = {"type": "WorkloadUpdated", "workload": ws}
            seen["reprioritised"] += 1
        elif holding and roll < 0.5:
            ns, name = rng.choice(holding).split("/")
            event = {"type": "WorkloadFinished", "namespace": ns, "name": name}
        else:
            ns = rng.choice(QUEUES)
            ws = workload(ns, f"w{step}", rng.choice(PRIORITIES), rng.randint(1, 4))
            specs[f"{ns}/w{step}"] = ws
            event = {"type": "WorkloadSubmitted", "workload": ws}
        engine.apply(event, offset)
        offset += 1
        check(engine.state, f"after event {offset - 1}")
        seen["evicted"] += sum(ws.evicted for ws in engine.state.workloads.values())
        seen["candidates"] += sum(len(cq.admitted) for cq in engine.state.cluster_queues.values())
        if step % 50 == 49:
            restored = load(dump(engine))
            check(restored.state, f"restored at event {offset - 1}")
            for name, cq in engine.state.cluster_queues.items():
                assert index_order(restored.state.cluster_queues[name]) == index_order(cq)
    # The stream did exercise what the index must follow.
    assert seen["evicted"] > 0 and seen["reprioritised"] > 0 and seen["candidates"] > 400


def test_reading_stops_at_the_priority_bound() -> None:
    engine = Engine()
    events = setup() + [
        {"type": "WorkloadSubmitted", "workload": workload("a", f"w{i}", p, 1)}
        for i, p in enumerate((100, 0, 50, 0, 200))
    ]
    for offset, event in enumerate(events):
        engine.apply(event, offset)
    cq = engine.state.cluster_queues["a"]
    assert [k for *_, k in cq.candidates.ordered(False)] == ["a/w3", "a/w1", "a/w2", "a/w0", "a/w4"]
    assert [k for *_, k in cq.candidates.ordered(False, 50)] == ["a/w3", "a/w1", "a/w2"]
    assert [k for *_, k in cq.candidates.ordered(False, -1)] == []
    assert list(cq.candidates.ordered(True)) == []
    last = len(events) - 1
    # Admitted without having been preempted by the same event: nothing shielded.
    assert not cq.candidates.shields_at(last)


def test_reading_leaves_out_the_admissions_one_offset_shields() -> None:
    """A workload preempted and admitted again by the offset being applied is no candidate within
    it (preemptible_now): the index steps over such admissions, wherever they sit among the
    others, and over no other admission of that offset."""
    index = CandidateIndex()
    index.add("a/w0", False, 0, (5, 0), {})
    index.add("a/w1", False, 50, (5, 1), {}, shielded=True)
    index.add("a/w2", False, 0, (5, 2), {}, shielded=True)
    index.add("a/x0", False, 0, (6, 0), {})
    index.add("a/x1", False, 50, (6, 1), {})
    everything = [k for *_, k in index.ordered(False)]
    assert everything == ["a/x0", "a/w2", "a/w0", "a/x1", "a/w1"]
    assert index.shields_at(5) and not index.shields_at(6)
    assert [k for *_, k in index.ordered(False, None, 5)] == ["a/x0", "a/w0", "a/x1"]
    assert [k for *_, k in index.ordered(False, 0, 5)] == ["a/x0", "a/w0"]
    assert [k for *_, k in index.ordered(False, None, 6)] == everything
    # Shielding follows a refile (priority change) and ends with the admission.
    index.refile("a/w2", False, 60, (5, 2))
    assert [k for *_, k in index.ordered(False, None, 5)] == ["a/x0", "a/w0", "a/x1"]
    index.discard("a/w2")
    index.discard("a/w1")
    assert not index.shields_at(5)
    assert [k for *_, k in index.ordered(False, None, 5)] == ["a/x0", "a/w0", "a/x1"]
    assert index.holds(False) and index.holds(False, 0) and not index.holds(False, -1)
    assert not index.holds(True)
