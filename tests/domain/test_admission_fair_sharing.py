"""Admission fair sharing: the LocalQueue usage ledger (Kueue's pkg/cache/queue/afs and
pkg/util/admissionfairsharing) and the engine that orders by it."""

from __future__ import annotations

import copy
import random
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from typing import Any

import pytest
from event_streams import random_stream

from domain.admission_fair_sharing import (
    AdmissionFairSharing,
    UsageLedger,
    _keep,
    parse_admission_fair_sharing,
    parse_duration,
)
from domain.decisions import encode
from domain.engine import Engine
from domain.fields import Fields, InvalidInput
from domain.snapshot import dump, load

MINUTE = 60 * 10**6  # µs, the log's time unit
LQ = ("ns", "lq")


@pytest.mark.parametrize(("text", "ns"), [
    ("0", 0), ("5m", 300 * 10**9), ("168h", 168 * 3600 * 10**9), ("1h30m", 5400 * 10**9),
    ("1.5s", 1500 * 10**6), ("-2m", -120 * 10**9), ("300ms", 300 * 10**6), ("10us", 10**4),
])
def test_durations_read_as_go_reads_them(text: str, ns: int) -> None:
    assert parse_duration(text) == ns


@pytest.mark.parametrize("text", ["", "5", "m", "1x", "1h 2m", "--1s"])
def test_durations_go_refuses_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def config(half_life: str = "10m", sampling: str | None = "1m", **weights: float) -> AdmissionFairSharing:
    raw: dict[str, Any] = {"usageHalfLifeTime": half_life}
    if sampling is not None:
        raw["usageSamplingInterval"] = sampling
    if weights:
        raw["resourceWeights"] = weights
    parsed = parse_admission_fair_sharing(Fields({"admissionFairSharing": raw}, "", "InvalidObject"))
    assert parsed is not None
    return parsed


def test_sampling_interval_defaults_to_five_minutes_and_weights_to_one() -> None:
    cfg = config(sampling=None)
    assert cfg.sampling_ns == 5 * 60 * 10**9
    assert cfg.weight_of("memory") == 1
    assert config(cpu=2.5).weight_of("cpu") == Fraction(5, 2)


@pytest.mark.parametrize(("raw", "message"), [
    ({"usageHalfLifeTime": "-1h"}, 'admissionFairSharing.usageHalfLifeTime: Invalid value: "-1h": must be greater than or equal to 0'),
    ({"usageSamplingInterval": "-1m"}, 'admissionFairSharing.usageSamplingInterval: Invalid value: "-1m": must be greater than 0'),
    ({"resourceWeights": {"cpu": -1}}, "admissionFairSharing.resourceWeights.cpu: Invalid value: must be greater than or equal to 0"),
    ({"usageHalfLifeTime": "soon"}, 'admissionFairSharing.usageHalfLifeTime: time: invalid duration "soon"'),
])
def test_configuration_refuses_what_kueue_refuses(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_admission_fair_sharing(Fields({"admissionFairSharing": raw}, "", "InvalidObject"))
    assert caught.value.message == message


def test_keep_is_a_half_per_half_life_and_nothing_without_one() -> None:
    num, den = _keep(600 * 10**9, 600 * 10**9)
    assert Fraction(num, den) == Fraction(1, 2)
    num, den = _keep(60 * 10**9, 600 * 10**9)
    assert abs(Fraction(num, den) - Fraction(0.5 ** 0.1)) < Fraction(1, 10**15)
    assert _keep(60 * 10**9, 0) == (0, 1)


def ledger(cfg: AdmissionFairSharing) -> UsageLedger:
    ledger = UsageLedger()
    ledger.set_config(cfg, 0)
    ledger.entry(LQ, 0)
    return ledger


def test_history_comes_halfway_to_the_admitted_usage_in_a_half_life() -> None:
    led = ledger(config())
    led.admitted(LQ, "ns/w", {"cpu": 8000}, 0, settle=False)  # 8 CPUs, no penalty pushed
    led.advance(10 * MINUTE)
    assert led.entries[LQ].consumed == {"cpu": 4 * 10**9}
    led.uncount("ns/w", 10 * MINUTE)
    led.advance(20 * MINUTE)
    assert led.entries[LQ].consumed == {"cpu": 2 * 10**9}  # and halfway back to nothing
    assert led.usage_value(LQ, 20 * MINUTE, 1000) == 2.0


def test_samplings_fall_only_on_whole_intervals() -> None:
    led = ledger(config())
    led.admitted(LQ, "ns/w", {"cpu": 8000}, 0, settle=False)
    assert led.advance(MINUTE - 1) == []
    assert led.advance(MINUTE) == [LQ]
    assert led.advance(MINUTE + MINUTE // 2) == []  # the log's time reached it already: nothing


def test_the_entry_penalty_counts_at_once_and_settles_into_the_history() -> None:
    led = ledger(config())
    led.push_penalty(LQ, "ns/w", {"cpu": 10000}, 0)
    penalty = led.entries[LQ].pending["cpu"]
    # 10 CPUs * (1 - 0.5 ** (1/10)), rounded down to a nano
    assert penalty == int(Fraction(10**10) * (1 - Fraction(*_keep(60 * 10**9, 600 * 10**9))))
    assert led.usage_value(LQ, 0, 1000) == penalty / 10**9
    led.admitted(LQ, "ns/w", {"cpu": 10000}, 0, settle=True)
    assert led.entries[LQ].pending == {}
    assert led.entries[LQ].consumed == {"cpu": penalty}


def test_a_dropped_penalty_is_forgotten() -> None:
    led = ledger(config())
    led.push_penalty(LQ, "ns/w", {"cpu": 10000}, 0)
    led.drop_penalty(LQ, "ns/w")
    assert led.usage_value(LQ, 0, 1000) == 0.0


def test_a_half_life_of_zero_keeps_no_history_and_no_penalty() -> None:
    led = ledger(config(half_life="0"))
    led.push_penalty(LQ, "ns/w", {"cpu": 10000}, 0)
    led.admitted(LQ, "ns/w", {"cpu": 10000}, 0, settle=True)
    led.advance(5 * MINUTE)
    assert led.usage_value(LQ, 5 * MINUTE, 1000) == 0.0


def test_weights_divide_and_zero_weight_is_infinite() -> None:
    led = ledger(config(cpu=2))
    led.admitted(LQ, "ns/w", {"cpu": 4000, "memory": 3}, 0, settle=False)
    led.advance(10 * MINUTE)
    # (2 * 2 CPUs + 1.5 bytes) / 2
    assert led.usage_value(LQ, 10 * MINUTE, 2000) == 2.75
    assert led.usage_value(LQ, 10 * MINUTE, 0) == float("inf")


# -- the engine --------------------------------------------------------------------------------
def _stamp(day: datetime, minutes: float) -> str:
    return (day + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def afs_stream(seed: int, scope: bool = True, afs: bool = True, events: int = 300) -> list[dict[str, Any]]:
    """random_stream with admission fair sharing: a Configuration, every ClusterQueue opted in
    (`scope`), a second LocalQueue per ClusterQueue with a random weight that half the workloads
    use, and event times a few minutes apart."""
    rng = random.Random(seed)
    day = datetime(2025, 6, 3, tzinfo=timezone.utc)
    out: list[dict[str, Any]] = []
    configuration: dict[str, Any] = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration"}
    if afs:  # else the same Configuration without it, so that offsets match
        configuration["admissionFairSharing"] = {
            "usageHalfLifeTime": "30m", "usageSamplingInterval": "1m", "resourceWeights": {"cpu": 2.0}}
    out.append({"type": "ConfigApplied", "object": configuration})
    minutes = 0.0
    for event in random_stream(seed, events=events):
        event = copy.deepcopy(event)
        obj = event.get("object")
        if isinstance(obj, dict) and obj.get("kind") == "ClusterQueue" and scope:
            obj["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
        if isinstance(obj, dict) and obj.get("kind") == "LocalQueue":
            out.append({"type": "ConfigApplied", "time": _stamp(day, minutes), "object": {
                **obj, "metadata": {**obj["metadata"], "name": "lq2"},
                "spec": {**obj["spec"], "fairSharing": {"weight": rng.choice(["1", "2", "500m", "0"])}}}})
        if event["type"] == "WorkloadSubmitted" and rng.random() < 0.5:
            event["workload"]["spec"]["queueName"] = "lq2"
        minutes += rng.choice((0, 0, 0.5, 1, 3, 7))
        event["time"] = _stamp(day, minutes)
        out.append(event)
    return out


def decide(events: list[dict[str, Any]]) -> list[bytes]:
    engine = Engine()
    return [encode(d) for offset, e in enumerate(events) for d in engine.apply(e, offset)]


@pytest.mark.parametrize("seed", range(4))
def test_without_admission_scope_the_configuration_changes_no_decision(seed: int) -> None:
    """Kueue orders by usage only in ClusterQueues with admissionScope: elsewhere the ledger is
    kept (for the metric) and changes nothing."""
    assert decide(afs_stream(seed, scope=False)) == decide(afs_stream(seed, scope=False, afs=False))


@pytest.mark.parametrize("seed", range(4))
def test_admission_fair_sharing_changes_the_order(seed: int) -> None:
    """The streams are busy enough that ordering by usage admits in another order somewhere
    (if this fails, the fair order is not in force)."""
    with_afs = decide(afs_stream(seed))
    assert with_afs != decide(afs_stream(seed, afs=False))
    assert with_afs == decide(afs_stream(seed))  # and the same log decides the same


@pytest.mark.parametrize("seed", range(6))
def test_a_restored_snapshot_keeps_every_local_queue_usage(seed: int) -> None:
    events = afs_stream(seed, events=240)
    expected = decide(events)
    engine = Engine()
    head: list[bytes] = []
    for cut in range(30, len(events), 30):
        for offset in range(cut - 30, cut):
            head += [encode(d) for d in engine.apply(events[offset], offset)]
        restored = load(dump(engine))
        assert restored.state.afs.entries == engine.state.afs.entries
        tail = [encode(d) for offset in range(cut, len(events)) for d in restored.apply(events[offset], offset)]
        assert head + tail == expected, f"diverged after a snapshot at offset {cut}"


def test_an_event_at_a_time_already_reached_moves_no_usage() -> None:
    events = afs_stream(1, events=200)
    engine = Engine()
    for offset, event in enumerate(events):
        engine.apply(event, offset)
    before = copy.deepcopy(engine.state.afs.entries)
    # a Batch that changes nothing, at the log's own time
    engine.apply({"type": "Batch", "events": [], "time": events[-1]["time"]}, len(events))
    assert engine.state.afs.entries == before


def test_decisions_do_not_depend_on_string_hashing(tmp_path: Any) -> None:
    """Usage ledgers, fair queues and their ranks keep no hash order that reaches a decision."""
    import json
    import os
    import subprocess
    import sys

    path = tmp_path / "afs.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in afs_stream(2, events=300)))
    outputs = set()
    for seed in ("0", "1", "12345"):
        result = subprocess.run([sys.executable, "-m", "streams.cli.main", "replay", str(path)],
                                capture_output=True, env=dict(os.environ, PYTHONHASHSEED=seed), check=True)
        outputs.add(result.stdout)
    assert len(outputs) == 1


def test_admission_scope_and_configuration_changes_requeue_in_the_new_order() -> None:
    """Turning the scope (or the Configuration) on and off rebuilds the queue: every pending
    workload is still queued once, and in the new order."""
    events = afs_stream(5, events=200)
    engine = Engine()
    for offset, event in enumerate(events):
        engine.apply(event, offset)
    state = engine.state
    pending = {k for k, ws in state.workloads.items() if ws.queued}
    engine.apply({"type": "ConfigDeleted", "kind": "Configuration", "name": "config"}, len(events))
    assert all(cq.queue.fair is None for cq in state.cluster_queues.values())
    assert {k for k, ws in state.workloads.items() if ws.queued} <= pending
    for cq in state.cluster_queues.values():
        keys = list(cq.queue.keys())
        assert keys == sorted(keys)


def settled(ledger: UsageLedger) -> dict[Any, Any]:
    """The entries, but for zeros in `pending` (a push and pop of a zero penalty drops one)."""
    out = copy.deepcopy(ledger.entries)
    for e in out.values():
        e.pending = {r: v for r, v in e.pending.items() if v}
    return out


def test_admitted_at_once_is_a_push_and_a_settlement() -> None:
    """The ledger's one-step admission (a workload admitted as it reserves quota in a fair
    ClusterQueue) leaves every entry as pushing its penalty and settling it would."""
    config = parse_admission_fair_sharing(Fields({"admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "1m"}}, "", "InvalidObject"))
    rng = random.Random(7)
    one, two = UsageLedger(), UsageLedger()
    for ledger in (one, two):
        ledger.config = config
    now = 0
    for step in range(400):
        now += rng.choice((0, 0, 1, 30_000_000, 90_000_000))
        lq = ("ns", f"q{rng.randrange(3)}")
        workload = f"w{rng.randrange(20)}"
        usage = {"cpu": rng.randrange(1, 5000), "memory": rng.randrange(0, 3) * 2**30}
        roll = rng.random()
        if roll < 0.5:
            one.push_penalty(lq, workload, usage, now)
            one.admitted(lq, workload, usage, now, settle=True)
            two.admitted_at_once(lq, workload, usage, now)
        elif roll < 0.7:
            for ledger in (one, two):
                ledger.push_penalty(lq, workload, usage, now)
        else:
            for ledger in (one, two):
                ledger.uncount(workload, now)
                ledger.drop_penalty(lq, workload)
        assert settled(one) == settled(two), f"step {step}"
        assert one.counted == two.counted and sorted(one.due) == sorted(two.due)
