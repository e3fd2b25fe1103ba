"""`quotaflow demo` (what `make run` runs) shows the whole loop with the launcher."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streams.cli.demo import JOBS_DIR, demo_events

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_shows_a_preempted_workload_released_readmitted_and_finished(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "streams.cli.main", "demo"], cwd=tmp_path, capture_output=True, timeout=150, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout, not whichever one is installed
    )
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode() + out
    part = out[out.index("5. The whole loop"):]
    lines = [" ".join(line.split()) for line in part.splitlines()]

    def first(text: str, after: int = 0) -> int:
        return next(i for i, line in enumerate(lines) if i >= after and text in line)

    # The demo submits Kueue-style Jobs: their workloads carry the names Kueue's Job integration
    # derives (job-<job name>-<hash>), which the story shows.
    train, urgent = (_workload_of(f) for f in ("10-train.yaml", "20-urgent.yaml"))
    assert re.fullmatch(r"job-train-[0-9a-f]{5}", train) and re.fullmatch(r"job-urgent-[0-9a-f]{5}", urgent)
    story = [
        "submitted workload/default/train",
        "Admitted default/train",
        "launch started default/train",
        "submitted workload/default/urgent",
        # the launcher may print that it stops train before the demo prints the Preempted
        # decision it acts on: either order, both before the release
        ("Preempted default/train by default/urgent", "launch stopping default/train"),
        "launch released default/train",
        "QuotaReleased default/train",
        "Admitted default/urgent",
        "Quota usage now: the preemptor runs",
        "launch finished default/urgent: Succeeded",
        "Admitted default/train",
        "launch finished default/train: Succeeded (Pods succeeded: 3/3.)",
        "Finished default/train",
        "Quota usage at the end",
    ]
    def named(text: str) -> str:
        return text.replace("/train", f"/{train}").replace("/urgent", f"/{urgent}")

    at = 0
    for step in story:
        steps = [named(s) for s in (step if isinstance(step, tuple) else (step,))]
        try:
            at = max(first(s, at) for s in steps) + 1
        except StopIteration:
            raise AssertionError(f"{steps!r} is not shown after line {at}:\n" + "\n".join(lines)) from None
    assert list(tmp_path.iterdir()) == [], "the demo must clean up after itself"


def _workload_of(file: str) -> str:
    (submitted,) = [e for e in demo_events(JOBS_DIR / file) if e["type"] == "WorkloadSubmitted"]
    return str(submitted["workload"]["metadata"]["name"])
