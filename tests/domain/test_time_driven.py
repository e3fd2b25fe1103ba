"""Time as an input (domain/clock.py, domain/timers.py): timers fire at the first record whose
time reaches their deadline, a Tick changes nothing but the time, replays are byte-identical.

The properties run random streams of submissions, finishes, releases, PodsReady reports and
Ticks through a cluster with waitForPodsReady (a short timeout, backoff, a retry limit) and
workloads with a maximum execution time; times only move forward, by up to two minutes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain import snapshot
from domain.decisions import Applied, Decision, encode
from domain.engine import Engine
from domain.timestamps import format_time, parse_time

SCENARIOS = Path(__file__).resolve().parents[1] / "conformance" / "scenarios" / "time_driven"
T0 = parse_time("2026-03-02T10:00:00Z")
SECOND = 1_000_000


def _config(release: str, block: bool) -> list[dict[str, Any]]:
    return [
        {"type": "ConfigApplied", "object": {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "quotaflow": {"evictionRelease": release},
            "waitForPodsReady": {
                "timeout": "3m", "blockAdmission": block, "recoveryTimeout": "1m",
                "requeuingStrategy": {"backoffBaseSeconds": 30, "backoffMaxSeconds": 100, "backoffLimitCount": 3},
            },
        }},
        {"type": "ConfigApplied", "object": {"kind": "ResourceFlavor", "metadata": {"name": "f"}}},
        {"type": "ConfigApplied", "object": {
            "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
                     "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                         {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]},
        }},
        {"type": "ConfigApplied", "object": {
            "kind": "LocalQueue", "metadata": {"namespace": "ns", "name": "lq"}, "spec": {"clusterQueue": "cq"},
        }},
    ]


NAMES = [f"w{i}" for i in range(6)]


@st.composite
def streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    events = _config(draw(st.sampled_from(["Immediate", "OnRelease"])), draw(st.booleans()))
    now = T0
    for event in events:
        event["time"] = format_time(now)
    for _ in range(draw(st.integers(5, 30))):
        now += draw(st.integers(0, 120)) * SECOND
        name = draw(st.sampled_from(NAMES))
        kind = draw(st.sampled_from(["submit", "submit", "finish", "release", "ready", "ready", "lost", "tick"]))
        event: dict[str, Any]
        if kind == "submit":
            spec: dict[str, Any] = {
                "queueName": "lq", "priority": draw(st.integers(0, 2)),
                "podSets": [{"name": "main", "count": 1, "requests": {"cpu": str(draw(st.integers(1, 3)))}}],
            }
            if draw(st.booleans()):
                spec["maximumExecutionTimeSeconds"] = draw(st.integers(30, 400))
            event = {"type": "WorkloadSubmitted", "workload": {"metadata": {"namespace": "ns", "name": name}, "spec": spec}}
        elif kind == "finish":
            event = {"type": "WorkloadFinished", "namespace": "ns", "name": name}
        elif kind == "release":
            event = {"type": "WorkloadReleased", "namespace": "ns", "name": name}
        elif kind in ("ready", "lost"):
            event = {"type": "WorkloadPodsReady", "namespace": "ns", "name": name, "ready": kind == "ready"}
        else:
            event = {"type": "Tick"}
        event["time"] = format_time(now)
        events.append(event)
    return events


def _run(events: list[dict[str, Any]]) -> tuple[Engine, list[list[Decision]]]:
    engine = Engine()
    return engine, [engine.apply(e, offset) for offset, e in enumerate(events)]


def _without_causes(per_event: list[list[Decision]], skip_ticks: bool = True) -> list[bytes]:
    """Every decision, in order, with its cause zeroed; Ticks' own outcomes left out."""
    out = []
    for decisions in per_event:
        for d in decisions:
            if skip_ticks and isinstance(d, Applied) and d.kind == "Tick":
                continue
            out.append(encode(msgspec.structs.replace(d, cause=msgspec.structs.replace(d.cause, offset=0, index=0))))
    return out


_PROPERTY = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY
@given(events=streams())
def test_no_timer_is_left_due_after_a_record(events: list[dict[str, Any]]) -> None:
    """Whatever the record (applied or rejected), the timers its time reached have fired."""
    engine = Engine()
    for offset, event in enumerate(events):
        engine.apply(event, offset)
        due = engine.state.timers.next_due()
        assert due is None or due > parse_time(event["time"]), (offset, event)


@_PROPERTY
@given(events=streams(), data=st.data())
def test_a_tick_the_log_time_already_reached_changes_nothing(events: list[dict[str, Any]], data: st.DataObject) -> None:
    at = data.draw(st.integers(1, len(events)))
    earlier = parse_time(events[at - 1]["time"]) - data.draw(st.integers(0, 300)) * SECOND
    tick = {"type": "Tick", "time": format_time(earlier)}
    _, plain = _run(events)
    _, ticked = _run(events[:at] + [tick] + events[at:])
    assert [type(d) for d in ticked[at]] == [Applied]
    assert _without_causes(ticked) == _without_causes(plain)


@_PROPERTY
@given(events=streams(), data=st.data())
def test_a_tick_just_before_a_record_at_its_time_gives_the_same_decisions(
    events: list[dict[str, Any]], data: st.DataObject
) -> None:
    """The timers a record's time reaches fire before it is decided, as a Tick at that time just
    before it would fire them: only the decisions' causes differ."""
    at = data.draw(st.integers(4, len(events) - 1))
    tick = {"type": "Tick", "time": events[at]["time"]}
    _, plain = _run(events)
    _, ticked = _run(events[:at] + [tick] + events[at:])
    assert _without_causes(ticked) == _without_causes(plain)


@_PROPERTY
@given(events=streams(), data=st.data())
def test_a_record_without_time_takes_its_log_time_and_replays_the_same(
    events: list[dict[str, Any]], data: st.DataObject
) -> None:
    """The agent's path: records without `time` decide at their log time exactly as the same
    events carrying that time themselves; a snapshot taken anywhere goes on the same way."""
    log_times = [parse_time(e["time"]) for e in events]
    timeless = [{k: v for k, v in e.items() if k != "time"} for e in events]
    a, b = Engine(), Engine()
    first = [encode(d) for i, e in enumerate(events) for d in a.apply(e, i)]
    second = [encode(d) for i, e in enumerate(timeless) for d in b.apply(e, i, log_times[i])]
    assert first == second
    cut = data.draw(st.integers(0, len(events) - 1))
    engine = Engine()
    for i in range(cut + 1):
        engine.apply(timeless[i], i, log_times[i])
    restored = snapshot.load(snapshot.dump(engine))
    rest = [encode(d) for i in range(cut + 1, len(events)) for d in restored.apply(timeless[i], i, log_times[i])]
    tail = [encode(d) for i in range(cut + 1, len(events)) for d in engine.apply(timeless[i], i, log_times[i])]
    assert rest == tail


def _scenario(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def test_time_driven_scenarios_replay_byte_for_byte_and_through_snapshots() -> None:
    paths = sorted(SCENARIOS.glob("*.yaml"))
    scenarios = [p for p in paths if not p.name.endswith(".expected.yaml")]
    assert scenarios
    for path in scenarios:
        events = _scenario(path)
        first, second = Engine(), Engine()
        once = [encode(d) for i, e in enumerate(events) for d in first.apply(e, i)]
        again = [encode(d) for i, e in enumerate(events) for d in second.apply(e, i)]
        assert once == again, path.name
        for cut in range(len(events)):
            head = Engine()
            before = [encode(d) for i in range(cut + 1) for d in head.apply(events[i], i)]
            restored = snapshot.load(snapshot.dump(head))
            after = [encode(d) for i in range(cut + 1, len(events)) for d in restored.apply(events[i], i)]
            assert before + after == once, (path.name, cut)


def test_a_tick_needs_a_time_from_the_log_or_itself() -> None:
    engine = Engine()
    (rejected,) = engine.apply({"type": "Tick"}, 0)
    assert rejected.reason == "MalformedEvent"  # type: ignore[attr-defined]
    (applied,) = engine.apply({"type": "Tick"}, 1, T0)
    assert isinstance(applied, Applied) and applied.kind == "Tick"
    assert engine.state.clock == T0


def test_an_events_own_time_comes_before_its_log_time() -> None:
    engine = Engine()
    later = format_time(T0 + 60 * SECOND)
    engine.apply({"type": "Tick", "time": later}, 0, T0)
    assert engine.state.clock == T0 + 60 * SECOND
    engine.apply({"type": "WorkloadFinished", "name": "nobody"}, 1, T0 + 120 * SECOND)
    assert engine.state.clock == T0 + 60 * SECOND  # a rejected record's time does not move it
