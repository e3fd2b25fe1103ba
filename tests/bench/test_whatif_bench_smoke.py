"""Smoke test of bench/whatif_bench.py at a tiny size (nothing is judged on its numbers)."""

from __future__ import annotations

import json
import sys
from unittest import mock

import pytest

from bench import whatif_bench


def test_the_benchmark_runs_every_case_and_reports_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    with mock.patch.object(sys, "argv", ["whatif_bench", "--workloads", "60", "--rounds", "1", "--json"]):
        whatif_bench.main()
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result["cpu_s"]) == {"replay", "whatif-none", "whatif-x1.5", "whatif-x1.5-decided"}
    assert result["events"] > 200 and all(v > 0 for v in result["ratio"].values())


def test_the_file_cases_read_a_kept_log_back(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # noqa: ANN001
    events = tmp_path / "events.jsonl"
    argv = ["whatif_bench", "--workloads", "40", "--rounds", "1", "--json", "--events", str(events),
            "--cases", "replay-cli,whatif-x1.5-file,whatif-x1.5-file-decided"]
    with mock.patch.object(sys, "argv", argv):
        whatif_bench.main()
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert events.is_file() and set(first["cpu_s"]) == {"replay-cli", "whatif-x1.5-file", "whatif-x1.5-file-decided"}
    assert set(first["ratio"]) == {"whatif-x1.5-file", "whatif-x1.5-file-decided"}
    assert (tmp_path / "events.jsonl.decisions.jsonl").is_file()
    with mock.patch.object(sys, "argv", argv):
        whatif_bench.main()
    out = capsys.readouterr().out
    assert out.startswith(f"read {first['events']} events from {events}")
