"""bench.pods_ready_ab at a tiny size: its streams decide the same admissions, its reports are
all applied, and no PodsReady timeout falls due (what makes the comparison fair)."""

from __future__ import annotations

from bench.pods_ready_ab import main, variants
from domain.decisions import Evicted, Rejected
from domain.engine import Engine


def test_the_pods_ready_stream_reports_every_admission_and_evicts_nothing() -> None:
    streams = variants(120, seed=3)
    engine = Engine()
    decided = [d for offset, ev in enumerate(streams["pods-ready"]) for d in engine.apply(ev, offset)]
    assert not [d for d in decided if isinstance(d, (Evicted, Rejected))]
    reports = sum(b'"WorkloadPodsReady"' in ev for ev in streams["pods-ready"])
    assert reports == sum(type(d).__name__ == "Admitted" for d in decided) > 0
    assert main(["--workloads", "60", "--rounds", "1"]) == 0
