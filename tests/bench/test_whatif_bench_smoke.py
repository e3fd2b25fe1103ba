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
