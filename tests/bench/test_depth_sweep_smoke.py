"""Smoke test of bench/depth_sweep.py: its streams decide without rejections, keep the depth
they are built for, and a tiny run prints its table with the memory column."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bench import depth_sweep
from domain.engine import Engine


def _kinds(stream: depth_sweep.Stream) -> Counter[str]:
    engine = Engine()
    kinds: Counter[str] = Counter()
    for offset, event in enumerate(stream.prelude + stream.timed):
        for decision in engine.apply(event, offset):
            kinds[type(decision).__name__] += 1
    return kinds


@pytest.mark.parametrize("policy", depth_sweep.POLICIES)
def test_sweep_streams_decide_without_rejections(policy: str) -> None:
    stream = depth_sweep.sweep_stream("StrictFIFO", policy, 6, 1, 3, 60)
    assert len(stream.timed) == 60
    kinds = _kinds(stream)
    assert not kinds["Rejected"] and kinds["Admitted"] and kinds["Pending"]


def test_preemption_stream_preempts_releases_and_updates() -> None:
    stream = depth_sweep.preemption_deep_stream(80, depth=4)
    kinds = _kinds(stream)
    assert kinds["Preempted"] and kinds["QuotaReleased"] and kinds["Finished"]
    assert any(b'"WorkloadUpdated"' in e for e in stream.prelude + stream.timed)


def test_a_tiny_run_prints_its_table(capsys: pytest.CaptureFixture[str]) -> None:
    depth_sweep.main(["--depths", "2,4", "--cohorts", "1", "--per-cohort", "2", "--events", "40",
                      "--submit-all", "30", "--preemption-events", "0", "--strategies", "BestEffortFIFO",
                      "--policies", "none,classical", "--chunk", "10", "--no-memory"])
    out = capsys.readouterr().out
    assert "| BestEffortFIFO/classical/4 | 40 |" in out
    assert "submit-all/30" in out


def test_memory_is_measured_over_the_pending_backlog(tmp_path: Path) -> None:
    stream = depth_sweep.submit_all_stream(400, 1, 2)
    got = depth_sweep.memory(None, stream.prelude, stream.timed[:400], tmp_path)
    assert got is not None
    per_pending, pending = got
    assert pending > 300 and per_pending > 0


def test_kueue_requeue_batch_folds_the_retries_of_a_tree_within_a_second() -> None:
    def at(seconds: float) -> bytes:
        return depth_sweep.encode(depth_sweep._by_name(
            "WorkloadFinished", depth_sweep.START_US + int(seconds * 1_000_000), "ns", "w"))

    times = (0, 0.25, 0.5, 1.5, 2.4, 2.6, 3.0)
    stream = depth_sweep.Stream("t", [b"setup"], [at(s) for s in times])
    retried = [(1 + i, "a") for i in range(len(times))] + [(2, "b")]
    retried.sort()
    # Tree a: 0 (with 0.25, 0.5), 1.5 (with 2.4), 2.6 (with 3.0); tree b: 0.25.
    assert depth_sweep.tree_retries(stream, retried) == (8, 4)


def test_the_table_reports_decisions_per_event() -> None:
    row = {"name": "BestEffortFIFO/none/2", "group": "BestEffortFIFO/none", "depth": 2, "events": 10,
           "same": True, "rate_ours": 100.0, "decisions": 2.5, "pending": 1.5, "retries": (0.5, 0.25)}
    out = depth_sweep.table([row], ["ours"])
    assert "| 2.5 (1.5) | 0.50 (0.25) | yes |" in out


@pytest.mark.parametrize("argv", [["--depths", "x"], ["--depths", "0,8"], ["--policies", "classic"]])
def test_a_wrong_argument_is_refused_by_name(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        depth_sweep.main(argv)
    assert exit_.value.code == 2
    assert f"argument {argv[0]}" in capsys.readouterr().err
