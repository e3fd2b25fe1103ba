"""Smoke test of bench/preemption_bench.py's Configuration options at a tiny size (untimed)."""

from __future__ import annotations

import pytest

from bench import preemption_bench as pb

GATE = "PrioritizePreemptorWorkloads"


def test_fair_sharing_with_the_gate_runs_the_baseline_to_the_end() -> None:
    config = pb.configuration(True, [GATE])
    assert config is not None
    assert config["object"]["fairSharing"] == {"enable": True}
    assert config["object"]["featureGates"] == {GATE: True}
    stream = pb.baseline_stream(0.02, 2_000, config)
    assert stream.events[0] is config
    assert stream.stalled is None
    assert stream.finished == stream.workloads
    assert stream.decisions["Preempted"] > 0  # the mix still preempts: the gate only orders it


def test_defaults_add_no_configuration() -> None:
    assert pb.configuration(False, []) is None
    assert pb.baseline_stream(0.01, 2_000).events[0]["object"]["kind"] == "ResourceFlavor"


def test_a_gate_the_engine_rejects_stops_the_benchmark() -> None:
    with pytest.raises(SystemExit, match="unrecognized feature gate"):
        pb.baseline_stream(0.01, 2_000, pb.configuration(False, ["NoSuchGate"]))
