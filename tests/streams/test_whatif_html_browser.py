"""The what-if HTML report opened in a real headless browser (Debian's Chromium): every plot
renders, and the page logs nothing to the console (no error, no warning)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import msgspec
import pytest
from test_whatif_scenarios import one_queue_log
from typer.testing import CliRunner

from devtools.browser import HEADLESS_FLAGS, find
from devtools.generate import write_jsonl
from streams.cli.main import app

BROWSER = find()
# CI installs the browser (`make test` runs `python -m devtools.browser ensure`) and requires it.
REQUIRED = os.environ.get("QUOTAFLOW_REQUIRE_BROWSER", "") == "1"
pytestmark = [pytest.mark.skipif(BROWSER is None and not REQUIRED, reason="needs Debian's chromium"),
              pytest.mark.timeout(180, func_only=True)]


def test_the_report_renders_its_plots_without_console_messages(tmp_path: Path) -> None:
    log = tmp_path / "recorded.jsonl"
    write_jsonl(log, [msgspec.json.encode(e) for e in one_queue_log()])
    page = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["whatif", str(log), "--set", "clusterqueue/team-a.nominal=cpu:x1.5,x2",
                                      "--html", str(page), "--json"])
    assert result.exit_code == 0, result.output
    assert BROWSER is not None, "QUOTAFLOW_REQUIRE_BROWSER=1 but no Chromium: python -m devtools.browser ensure"
    run = subprocess.run(
        [BROWSER, *HEADLESS_FLAGS, "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=10000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=150, check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    dom = run.stdout
    # Three plots (waits of all workloads and of team-a, usage of team-a's cpu), each drawn by
    # plotly into its container, with one trace per world.
    assert dom.count('class="plot-container plotly"') == 3
    assert dom.count('class="legendtext"') == 9
