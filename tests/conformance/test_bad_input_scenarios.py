"""Conformance for bad input: scenarios in `scenarios/bad_input/`, run through `quotaflow replay`.

The same shape as `test_scenarios.py`, with two additions bad input needs:

* the events file may be `NAME.jsonl` (one JSON object per line, so a malformed line can be
  written) as well as `NAME.yaml`;
* in `NAME.expected.yaml` a decision may give `messageMatches: <regex>` instead of `message`: the
  actual `message` must match the regex in full. The wording of a rejection is quotaflow's own
  (Kueue has no event log to reject), and parser errors quote the parser, so where a scenario pins
  only what matters — the reason, the event (`cause`), the workload, the offending value — it says so
  with a pattern. Every other field is compared exactly.

Each scenario shows that the bad event changes nothing and that later events are still processed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

BAD_INPUT = Path(__file__).parent / "scenarios" / "bad_input"


def replay(events: Path) -> bytes:
    """`quotaflow replay EVENTS`, as test_scenarios.py runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "streams.cli.main", "replay", str(events)],
        capture_output=True,
        env=dict(os.environ, PYTHONHASHSEED="0"),
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def scenario_names() -> list[str]:
    return sorted(p.name[: -len(".expected.yaml")] for p in BAD_INPUT.glob("*.expected.yaml"))


def events_file(name: str) -> Path:
    found = [p for p in (BAD_INPUT / f"{name}.yaml", BAD_INPUT / f"{name}.jsonl") if p.exists()]
    assert len(found) == 1, f"{name}: expected exactly one of {name}.yaml / {name}.jsonl, found {found}"
    return found[0]


def matches(expected: dict[str, Any], actual: dict[str, Any]) -> bool:
    if "messageMatches" not in expected:
        return expected == actual
    pattern = expected["messageMatches"]
    rest = {k: v for k, v in expected.items() if k != "messageMatches"}
    actual_rest = {k: v for k, v in actual.items() if k != "message"}
    message = actual.get("message")
    return (
        rest == actual_rest
        and isinstance(message, str)
        and re.fullmatch(pattern, message, re.DOTALL) is not None
    )


@pytest.mark.parametrize("name", scenario_names())
def test_bad_input_scenario(name: str) -> None:
    expected = yaml.safe_load((BAD_INPUT / f"{name}.expected.yaml").read_text()) or []
    actual = [json.loads(line) for line in replay(events_file(name)).splitlines()]
    mismatches = [
        (i, e, a) for i, (e, a) in enumerate(zip(expected, actual, strict=False)) if not matches(e, a)
    ]
    assert not mismatches and len(expected) == len(actual), (
        f"expected {len(expected)} decisions, got {len(actual)}\n"
        + "\n".join(f"#{i}\n  expected {e}\n  actual   {a}" for i, e, a in mismatches)
        + "\nactual:\n"
        + "\n".join(json.dumps(a) for a in actual)
    )


def test_bad_input_scenarios_exist() -> None:
    names = scenario_names()
    assert names, "no bad-input scenarios found"
    for name in names:
        events_file(name)


def test_matches_uses_the_pattern_only_for_message() -> None:
    expected = {"type": "Rejected", "reason": "R", "messageMatches": ".*12Zi.*"}
    assert matches(expected, {"type": "Rejected", "reason": "R", "message": "bad 12Zi here"})
    assert not matches(expected, {"type": "Rejected", "reason": "X", "message": "bad 12Zi here"})
    assert not matches(expected, {"type": "Rejected", "reason": "R", "message": "bad 12Gi"})
    assert not matches(expected, {"type": "Rejected", "reason": "R"})
