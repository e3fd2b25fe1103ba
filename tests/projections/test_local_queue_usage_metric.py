"""`kueue_local_queue_admission_fair_sharing_usage`: the projection folds each LocalQueue's
admission-fair-sharing usage from the logs and reports what the engine orders by."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import yaml
from projection_harness import fold_lockstep
from prometheus_client.parser import text_string_to_metric_families

from projections.metrics import exposition, registry_for

SCENARIOS = Path(__file__).parents[1] / "conformance" / "scenarios" / "admission_fair_sharing"
METRIC = "kueue_local_queue_admission_fair_sharing_usage"


def usage_samples(text: bytes) -> dict[tuple[str, str, str], float]:
    out = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            if s.name == METRIC:
                out[(s.labels["namespace"], s.labels["name"], s.labels["cluster_queue"])] = s.value
    return out


@pytest.mark.parametrize("scenario", sorted(p.stem for p in SCENARIOS.glob("*.yaml") if not p.stem.endswith(".expected")))
def test_the_metric_reports_the_engines_usage_after_every_event(scenario: str) -> None:
    events = [msgspec.json.encode(e) for e in yaml.safe_load_all((SCENARIOS / f"{scenario}.yaml").read_text()) if e]
    for upto in range(6, len(events) + 1):
        proj, engine = fold_lockstep(events[:upto], check_every=10**6)
        got = usage_samples(exposition(registry_for(proj)))
        state = engine.state
        enabled = state.configuration.admission_fair_sharing is not None  # (the gate may turn it off)
        want = {
            (ns, name, spec.cluster_queue): state.afs.usage_value((ns, name), state.clock, spec.fair_weight)
            for (ns, name), spec in state.local_queues.items()
        } if enabled else {}
        assert got == want, f"after event {upto - 1}"
    assert any(v > 0 for v in got.values()) == enabled


def test_without_admission_fair_sharing_there_is_no_such_metric() -> None:
    text = (SCENARIOS / "less_used_local_queue_is_admitted_first.yaml").read_text()
    events = [e for e in yaml.safe_load_all(text) if e]
    del events[0]["object"]["admissionFairSharing"]
    proj, _ = fold_lockstep([msgspec.json.encode(e) for e in events])
    assert usage_samples(exposition(registry_for(proj))) == {}
