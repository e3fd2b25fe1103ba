"""Conformance: every scenario is run through `quotaflow replay`, as a user would run it.

A scenario is a pair of files in a folder of `scenarios/` named for the rule it pins
(`preemption/`, `fair_sharing/`, `stop_policy/`, ...): `NAME.yaml` holds input events in the
contract's format (one event per YAML document) and `NAME.expected.yaml` holds the decisions
`quotaflow replay` must print, in order, compared field by field. Each scenario is named for the
behaviour it pins. `bad_input/` has a test of its own (test_bad_input_scenarios.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

SCENARIOS = Path(__file__).parent / "scenarios"


def scenario_names() -> list[str]:
    """`RULE/NAME` of every scenario, bad input aside."""
    return sorted(
        str(p.relative_to(SCENARIOS))[: -len(".expected.yaml")]
        for p in SCENARIOS.glob("*/*.expected.yaml")
        if p.parent.name != "bad_input"
    )


def replay(events: Path, hash_seed: str = "0") -> bytes:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    result = subprocess.run(
        [sys.executable, "-m", "streams.cli.main", "replay", str(events)],
        capture_output=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


@pytest.mark.parametrize("name", scenario_names())
def test_scenario(name: str) -> None:
    events = SCENARIOS / f"{name}.yaml"
    expected = yaml.safe_load((SCENARIOS / f"{name}.expected.yaml").read_text()) or []
    actual = [json.loads(line) for line in replay(events).splitlines()]
    assert actual == expected


def test_every_scenario_has_events() -> None:
    names = scenario_names()
    assert names, "no conformance scenarios found"
    for name in names:
        assert (SCENARIOS / f"{name}.yaml").exists(), name
