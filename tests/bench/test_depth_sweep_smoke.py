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
