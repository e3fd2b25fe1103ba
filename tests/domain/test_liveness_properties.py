"""Liveness: nothing waits in an empty cluster for quota it could have.

The safety properties (test_engine_properties.py) hold for an engine that admits nothing. This
one catches the opposite bug, a queue that stays asleep: after a random stream (the same
configurations and streams, and busy cohorts with borrowing and lending limits, with some
ClusterQueues StrictFIFO), every admitted workload is finished, again and again, until nothing
holds quota. Then, for every workload still pending:

* in a BestEffortFIFO queue, a fresh engine with the same configuration, given that workload
  alone, must not admit it either: the drained engine had the whole cluster for it;
* in a StrictFIFO queue, the head that holds the queue must be such a workload (what waits
  behind it waits for good, as in Kueue, whatever its last status says).
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from draining import admitted_alone, drain
from event_streams import batched, mixed_stream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_engine_properties import (
    Config,
    Expect,
    Model,
    cohort_configs,
    configs,
    decisions_of,
    setup_events,
    streams,
    to_event,
)

from domain.engine import Engine
from domain.flavor_assigner import MODE_FIT, FlavorAssigner
from domain.state import State


def with_strategies(events: list[dict[str, Any]], strict: frozenset[str]) -> list[dict[str, Any]]:
    out = []
    for event in events:
        if event["type"] == "Batch":
            out.append({**event, "events": with_strategies(event["events"], strict)})
            continue
        obj = event.get("object")
        if obj is not None and obj["kind"] == "ClusterQueue" and obj["metadata"]["name"] in strict:
            obj = {**obj, "spec": {**obj["spec"], "queueingStrategy": "StrictFIFO"}}
            event = {**event, "object": obj}
        out.append(event)
    return out


def config_events(event: dict[str, Any]) -> list[dict[str, Any]]:
    if event["type"] == "Batch":
        return [e for inner in event["events"] for e in config_events(inner)]
    return [event] if event["type"] == "ConfigApplied" else []


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=configs() | cohort_configs(), ops=streams(max_delta_low=-2), strict_mask=st.integers(0, 15))
def test_a_drained_cluster_leaves_no_workload_waiting_for_quota(config: Config, ops: list[Any], strict_mask: int) -> None:
    strict = frozenset(cq.name for i, cq in enumerate(config.queues) if strict_mask >> i & 1)
    engine = Engine()
    config_log = with_strategies(setup_events(config), strict)
    offset = 0
    for event in config_log:
        decisions_of(engine, event, offset)
        offset += 1
    model = Model(config)
    for op in ops:
        event = to_event(op, model, Expect())
        if event is None:
            continue
        event = with_strategies([event], strict)[0]
        config_log += config_events(event)
        decisions_of(engine, event, offset)
        offset += 1

    state = engine.state

    def send(event: dict[str, Any]) -> None:
        nonlocal offset
        decisions_of(engine, event, offset)
        offset += 1

    drain(state, send)
    for cq in state.cluster_queues.values():
        assert not any(cq.node.usage.values()), f"{cq.name} still uses {cq.node.usage} with nothing admitted"

    by_key = {f"{wl['metadata']['namespace']}/{wl['metadata']['name']}": wl for wl in model.submitted}
    for cq in sorted(state.cluster_queues.values(), key=lambda c: c.name):
        queue = cq.queue
        if not len(queue):
            continue
        if cq.name in strict:
            # Kueue tries only the head: what waits behind a head that can never fit waits
            # forever, whatever its last status says.
            assert queue.blocker is not None, f"StrictFIFO {cq.name} has pending workloads and sleeps with no head"
            head = queue.blocker[3]
            assert head in queue, f"StrictFIFO {cq.name} is held by {head}, which is no longer in it"
            assert not admitted_alone(config_log, by_key[head]), (
                f"{head} holds StrictFIFO {cq.name} ({state.workloads[head].last_status}) in an empty "
                "cluster that admits it when alone"
            )
            continue
        for order_key in queue.keys():
            key = order_key[3]
            assert not admitted_alone(config_log, by_key[key]), (
                f"{key} waits ({state.workloads[key].last_status}) in an empty cluster that admits it when alone"
            )


def heads_left_untried(state: State) -> list[str]:
    """After an event (a fixed point): ClusterQueues with a head that no cycle will try. Every
    active queue with a head is tried until its head is admitted or parked, except one whose
    preemptor waits, parked, for its victims (it joins cycles from `waiting_preemptors`)."""
    out = []
    for name, cq in sorted(state.cluster_queues.items()):
        head = cq.queue.head()
        if not cq.active or head is None:
            continue
        if cq.sticky is not None and cq.queue.is_parked(cq.sticky):
            continue
        out.append(f"{name} ({head[3]})")
    return out


@pytest.mark.parametrize("seed", range(48))
@pytest.mark.parametrize("in_batches", [False, True])
def test_no_queue_is_left_with_a_head_no_cycle_will_try(seed: int, in_batches: bool) -> None:
    """A waiting preemptor that a later cycle parks (it no longer fits, or cannot preempt any
    more) gives its queue back to the next head, as in Kueue; before the fix its queue stayed
    out of `ready` with heads nobody tried until something unrelated woke it (in one stream in
    seven of 400 such streams, one in nine in Batches; here seeds 3, 30 and 35, and 14 and 30 in
    Batches)."""
    events = mixed_stream(seed, events=600, queues_per_cohort=6)
    if in_batches:
        events = batched(events, seed)
    engine = Engine()
    for offset, event in enumerate(events):
        engine.apply(msgspec.json.encode(event), offset)
        untried = heads_left_untried(engine.state)
        assert not untried, f"after offset {offset}: {', '.join(untried)}"


def heads_asleep_that_fit(state: State, resumed: frozenset[str] = frozenset()) -> list[str]:
    """After an event: parked BestEffortFIFO heads waiting for quota that a flavor assignment
    (no preemption) would admit as the cluster stands. Left out: queues that a waiting preemptor
    heads, heads of a cohort tree where some preemptor or blocked StrictFIFO head may hold room
    (the room it holds in the tree's cycles is not in the usage), heads that overlapped another entry's victims (they wait
    for those victims' release), and `resumed`: heads whose last answer came from a flavor scan
    resumed from an earlier cycle's progress (they wait, as in Kueue, for the next change)."""
    held_trees = {
        id(cq.node.root()) for cq in state.cluster_queues.values()
        if cq.sticky is not None and cq.sticky in state.workloads and state.workloads[cq.sticky].queued
    }
    # A blocked StrictFIFO head of a queue that cannot always reclaim holds room in every cycle
    # of its tree where it needs preemption and finds no candidates (Kueue's
    # reserveCapacityForUnreclaimablePreempt, Scheduler._hold_room): that room is not in the usage.
    held_trees |= {
        id(cq.node.root()) for cq in state.cluster_queues.values()
        if cq.queue.strict and cq.queue.blocker is not None and cq.spec.preemption.reclaim_within_cohort != "Any"
    }
    out = []
    for name, cq in sorted(state.cluster_queues.items()):
        queue = cq.queue
        if not cq.active or queue.strict or id(cq.node.root()) in held_trees:
            continue
        for cls, (reason, message) in sorted(queue.parked.items()):
            if reason != "WaitingForQuota" or "overlapping" in message:
                continue
            ws = state.workloads[queue.classes[cls].first()[3]]
            if ws.key in resumed:
                continue
            assigner = FlavorAssigner(cq.spec, cq.node, cq.groups, state.flavors, quotas=cq.quotas, plans=cq.plans)
            if assigner.assign(ws.spec).mode == MODE_FIT:
                out.append(f"{ws.key} in {name} ({message[:60]})")
    return out


def resumed_answers(state: State) -> frozenset[str]:
    """Workloads whose last flavor assignment resumed an earlier cycle's scan progress or left
    progress for a next cycle's resumed scan."""
    return frozenset(key for key, ws in state.workloads.items() if ws.resume_flavors is not None)


@pytest.mark.parametrize("seed", [*range(24), 62, 67, 81])
@pytest.mark.parametrize("release", ["OnRelease", "Immediate"])
def test_no_head_sleeps_in_quota_it_fits_in(seed: int, release: str) -> None:
    """A head parked because a preemptor held the room it needed ("no longer fits") is tried
    again when that preemptor stops waiting without taking the room (deleted, parked), not only
    at the next release; seed 81 left two such heads asleep before the fix (scenario
    deleting_a_waiting_preemptor_frees_the_room_it_held_for_the_rest_of_its_cohort). With
    evictionRelease Immediate, victims release inside the cycle while its held room still counts
    as used: their trees are woken again once the cycle frees it (seeds 62 and 67 left heads
    filed by resource asleep before).

    Kueue's exception: a head tried a second time in the event (skipped for room another entry
    took, or failed with flavors pending) resumes its flavor scan where the first try stopped;
    when that finds nothing, Kueue leaves it with the inadmissible workloads until the next
    change in its cohort, even if an earlier flavor has room again (scenario
    skipped_partial_head_resumed_scan_finding_nothing_waits_for_the_next_change). Such a head is
    one whose last assignment resumed a scan (WorkloadState.resume_flavors: kept until its next
    assignment)."""
    configuration = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
                     "quotaflow": {"evictionRelease": release}}
    events = [{"type": "ConfigApplied", "object": configuration}, *mixed_stream(seed, events=600, queues_per_cohort=6)]
    engine = Engine()
    for offset, event in enumerate(events):
        engine.apply(msgspec.json.encode(event), offset)
        asleep = heads_asleep_that_fit(engine.state, resumed_answers(engine.state))
        assert not asleep, f"after offset {offset}: {', '.join(asleep)}"
