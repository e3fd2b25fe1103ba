"""`quotaflow estimate`: admission times worked out by hand from small logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from typer.testing import CliRunner
from whatif_helpers import FLAVOR, applied, cq, finished, lq, submitted

from devtools.generate import write_jsonl
from devtools.timed_stream import API, stamp
from streams.cli.main import app
from streams.whatif.estimate import (
    EstimateError,
    History,
    Profile,
    estimate,
    requests_of,
    similar_requests,
)
from streams.whatif.source import timed


def _estimate(events: list[dict[str, Any]], target: str, **kw: Any) -> dict[str, Any]:
    return estimate(timed([msgspec.json.encode(e) for e in events]), target, **kw)


CONFIG = [applied(FLAVOR), applied(cq("team-a", 4)), applied(lq("team-a", "team-a"))]


def test_the_pending_workload_is_admitted_when_the_running_one_finishes() -> None:
    """One earlier run took 100 s; w1 (as big) has run since 200; w2 waits for it: admitted at 300."""
    events = [*CONFIG,
              submitted(0, "team-a", "w0", 4), finished(100, "team-a", "w0"),
              submitted(200, "team-a", "w1", 4),
              submitted(210, "team-a", "w2", 4)]
    r = _estimate(events, "team-a/w2")
    assert r["admissible"] is True
    assert r["admittedAt"] == ts(300) and r["inSeconds"] == 90 and r["waitSeconds"] == 90
    assert r["clusterQueue"] == "team-a" and r["localQueue"] == "team-a/main"
    [first] = r["first"]
    assert first["workload"] == "team-a/w1" and first["at"] == ts(300) and first["running"]
    assert (first["runtimeSeconds"], first["runtimeBasis"], first["samples"]) == (100, "similar", 1)
    assert r["admittedAhead"] == []
    assert any("fewer than 3 runs: team-a/w1" in n for n in r["notes"])


def two_ahead_log() -> list[dict[str, Any]]:
    """Three 1-cpu runs of 10 s and three 4-cpu runs of 100 s; then r (4 cpu) runs from 1000 and
    p1, p2 and the target (4 cpu each) queue behind it."""
    history = [submitted(0, "team-a", f"s{i}", 1) for i in range(3)] + [finished(10, "team-a", f"s{i}") for i in range(3)]
    for i, t in enumerate((20, 200, 400)):
        history += [submitted(t, "team-a", f"h{i}", 4), finished(t + 100, "team-a", f"h{i}")]
    return [*CONFIG, *history,
            submitted(1000, "team-a", "r", 4),
            submitted(1010, "team-a", "p1", 4), submitted(1020, "team-a", "p2", 4),
            submitted(1030, "team-a", "target", 4)]


def test_two_ahead_each_run_their_similar_runs_median() -> None:
    r = _estimate(two_ahead_log(), "team-a/target")
    # r finishes at 1100 (the 4-cpu runs' 100 s, not the queue's lower median of 10 s), p1 runs
    # 1100-1200, p2 1200-1300: the target is admitted at 1300.
    assert r["admittedAt"] == ts(1300) and r["inSeconds"] == 270 and r["waitSeconds"] == 270
    assert [(f["workload"], f["at"]) for f in r["first"]] == [
        ("team-a/r", ts(1100)), ("team-a/p1", ts(1200)), ("team-a/p2", ts(1300))]
    assert {f["runtimeBasis"] for f in r["first"]} == {"similar"} and {f["samples"] for f in r["first"]} == {3}
    assert [f["running"] for f in r["first"]] == [True, False, False]
    assert [a["workload"] for a in r["admittedAhead"]] == ["team-a/p1", "team-a/p2"]
    assert r["runs"] == 6 and r["notes"] == []


def test_estimating_from_a_later_now_counts_the_time_already_run() -> None:
    r = _estimate(two_ahead_log(), "team-a/target", now=_t(1090))
    assert r["admittedAt"] == ts(1300) and r["inSeconds"] == 210
    # Past its estimate, a running workload is taken to finish now.
    r = _estimate(two_ahead_log(), "team-a/target", now=_t(1150))
    assert r["first"][0]["overdue"] and r["first"][0]["at"] == ts(1150)
    assert r["admittedAt"] == ts(1350)


def ts(seconds: float) -> str:
    from domain.timestamps import format_time

    return format_time(_t(seconds))


def _t(seconds: float) -> int:
    from domain.timestamps import parse_time

    return parse_time(stamp(seconds))


def test_a_queue_without_history_falls_back_to_the_clusters_runs() -> None:
    events = [*two_ahead_log()[:-4],  # team-a's history only
              applied(cq("team-b", 4)), applied(lq("team-b", "team-b")),
              submitted(1000, "team-b", "rb", 4), submitted(1010, "team-b", "tb", 4)]
    r = _estimate(events, "team-b/tb")
    [first] = r["first"]
    # The whole log's six runs: lower median of [10, 10, 10, 100, 100, 100] is 10 s.
    assert (first["runtimeBasis"], first["samples"], first["runtimeSeconds"]) == ("cluster", 6, 10)
    assert r["admittedAt"] == ts(1010)  # rb "finishes" at 1010: the target's submission instant


def test_without_any_finished_run_the_runtimes_are_unknown() -> None:
    events = [*CONFIG, submitted(0, "team-a", "w1", 4), submitted(10, "team-a", "w2", 4)]
    r = _estimate(events, "team-a/w2")
    assert r["admissible"] is None  # not "never": it waits on a workload whose end cannot be estimated
    assert r["reason"].startswith("the runtimes of team-a/w1 are unknown (no finished run in the log)")
    assert "insufficient unused quota for cpu" in r["reason"]  # the engine's last word on the wait
    assert r["notes"] == ["no finished run in the log: runtimes are unknown"]


def test_a_workload_no_quota_can_hold_is_never_admitted_with_the_engines_reason() -> None:
    events = [*CONFIG, submitted(0, "team-a", "w0", 4), finished(100, "team-a", "w0"),
              submitted(200, "team-a", "huge", 8)]
    r = _estimate(events, "team-a/huge")
    assert r["admissible"] is False
    assert "request (8) > maximum capacity (4)" in r["reason"], r["reason"]
    assert r["first"] == []


def test_a_preempted_workload_is_released_after_the_logs_release_delay_then_the_preemptor_runs() -> None:
    wpc = {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 100}
    preempting = cq("team-a", 4, preemption={"withinClusterQueue": "LowerPriority"})

    def high(t: float, name: str) -> dict[str, Any]:
        e = submitted(t, "team-a", name, 4)
        e["workload"]["spec"]["priorityClassName"] = "high"
        return e

    released = {"type": "WorkloadReleased", "namespace": "team-a", "name": "old", "time": stamp(8)}
    events = [applied(FLAVOR), applied(wpc), applied(preempting), applied(lq("team-a", "team-a")),
              # history: a release 3 s after its preemption
              submitted(0, "team-a", "old", 4), high(5, "old-urgent"), released,
              finished(20, "team-a", "old-urgent"), finished(40, "team-a", "old"),
              # now: urgent has just preempted batch, which is not released yet
              submitted(50, "team-a", "batch", 4), high(60, "urgent")]
    r = _estimate(events, "team-a/urgent")
    assert r["admittedAt"] == ts(63) and r["inSeconds"] == 3
    assert [(f["workload"], f["event"], f["at"]) for f in r["first"]] == [("team-a/batch", "released", ts(63))]


def test_only_a_pending_workload_is_estimated() -> None:
    events = [*CONFIG, submitted(0, "team-a", "w1", 4), submitted(10, "team-a", "w2", 4)]
    with pytest.raises(EstimateError, match="team-a/w1 is not pending: it was admitted at"):
        _estimate(events, "team-a/w1")
    with pytest.raises(EstimateError, match="no workload team-a/nope in the log"):
        _estimate(events, "team-a/nope")


def test_similar_means_the_same_resources_within_twice() -> None:
    assert similar_requests({"cpu": 2000}, {"cpu": 4000}) and not similar_requests({"cpu": 2000}, {"cpu": 4001})
    assert not similar_requests({"cpu": 2000}, {"cpu": 2000, "memory": 1})
    assert requests_of({"spec": {"podSets": [{"count": 3, "requests": {"cpu": "500m"}}]}}) == {"cpu": 1500}
    p = Profile("a/main", "a", "low", {"cpu": 4000})
    h = History([(Profile("a/main", "a", "high", {"cpu": 4000}), 50.0)] * 3)  # another priority
    assert (h.estimate(p).basis, h.estimate(p).seconds) == ("queue", 50.0)


def test_the_command_prints_the_estimate_and_json(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    write_jsonl(path, [msgspec.json.encode(e) for e in two_ahead_log()])
    result = CliRunner().invoke(app, ["estimate", "team-a/target", str(path)])
    assert result.exit_code == 0, result.output
    assert f"estimated admission: {ts(1300)}, in 4.5m" in result.stdout
    assert "team-a/r (running, team-a) finishes at" in result.stdout and "median of 3 similar runs" in result.stdout
    assert "admitted ahead of it (2): team-a/p1, team-a/p2" in result.stdout
    result = CliRunner().invoke(app, ["estimate", "team-a/target", str(path), "--json"])
    assert json.loads(result.stdout)["admittedAt"] == ts(1300)
    result = CliRunner().invoke(app, ["estimate", "team-a/nope", str(path)])
    assert result.exit_code == 1 and "quotaflow estimate: no workload team-a/nope in the log" in result.stderr
    result = CliRunner().invoke(app, ["estimate", "target", str(path)])
    assert result.exit_code == 2


def test_a_log_that_cannot_be_read_or_a_bad_time_is_one_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["estimate", "team-a/w", str(tmp_path / "missing.jsonl")])
    assert result.exit_code == 1 and result.stderr.strip() == f"quotaflow estimate: cannot read {tmp_path / 'missing.jsonl'}: no such file"
    path = tmp_path / "log.jsonl"
    write_jsonl(path, [msgspec.json.encode(e) for e in two_ahead_log()])
    result = CliRunner().invoke(app, ["estimate", "team-a/target", str(path), "--now", "yesterday"])
    assert result.exit_code == 2 and result.stderr.startswith("quotaflow estimate: --now: invalid RFC 3339 time")


def test_the_workloads_admitted_ahead_report_their_pods_ready_as_the_log_did() -> None:
    """waitForPodsReady (60 s): in the log each run's pods were ready 5 s after its admission, and
    a run of 4 cpu took 300 s. r1 and r2 run from 1000 and 1050 in 8 cpu; p1, p2 (4 cpu) and the
    target (8) wait. p1 and p2 are admitted at 1300 and 1350, reported ready 5 s later (not
    evicted at 1360 and 1410), and finish at 1600 and 1650: the target is admitted at 1650."""
    configuration = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                     "waitForPodsReady": {"timeout": "60s"}}

    def ready(t: float, name: str) -> dict[str, Any]:
        return {"type": "WorkloadPodsReady", "namespace": "team-a", "name": name, "time": stamp(t)}

    history: list[dict[str, Any]] = []
    for i, t in enumerate((0, 320, 640)):
        history += [submitted(t, "team-a", f"h{i}", 4), ready(t + 5, f"h{i}"), finished(t + 300, "team-a", f"h{i}")]
    events = [applied(configuration), applied(FLAVOR), applied(cq("team-a", 8)), applied(lq("team-a", "team-a")),
              *history,
              submitted(1000, "team-a", "r1", 4), ready(1005, "r1"), submitted(1050, "team-a", "r2", 4), ready(1055, "r2"),
              submitted(1060, "team-a", "p1", 4), submitted(1070, "team-a", "p2", 4), submitted(1080, "team-a", "target", 8)]
    r = _estimate(events, "team-a/target")
    assert r["admissible"] is True and r["admittedAt"] == ts(1650)
    assert [(f["workload"], f["event"], f["at"]) for f in r["first"]] == [
        ("team-a/r1", "finishes", ts(1300)), ("team-a/r2", "finishes", ts(1350)),
        ("team-a/p1", "finishes", ts(1600)), ("team-a/p2", "finishes", ts(1650))]
