"""Configuration.featureGates: PrioritizePreemptorWorkloads (Kueue's alpha gate, kueue#13797).

The orderings are pinned by the conformance scenarios `feature_gate_prioritize_preemptor_workloads_*`
and their gate-off twins; here: parsing, the capacity a preemptor without candidates reserves,
and that a snapshot restores the gate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from domain.decisions import encode
from domain.engine import Engine
from domain.fields import InvalidInput
from domain.objects import Configuration, parse_object
from domain.snapshot import dump, load

SCENARIOS = Path(__file__).parents[1] / "conformance" / "scenarios"


def configuration(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration", **fields}


def test_the_gate_is_off_unless_set() -> None:
    assert parse_object(configuration()) == Configuration()
    assert not Configuration().prioritize_preemptor_workloads
    on = parse_object(configuration(featureGates={"PrioritizePreemptorWorkloads": True}))
    assert isinstance(on, Configuration) and on.prioritize_preemptor_workloads
    off = parse_object(configuration(featureGates={"PrioritizePreemptorWorkloads": False}))
    assert off == Configuration()


@pytest.mark.parametrize(
    ("gates", "message"),
    [
        ({"PrioritySortingWithinCohort": False},
         'Configuration: object.featureGates.PrioritySortingWithinCohort: unrecognized feature gate '
         '"PrioritySortingWithinCohort"; quotaflow implements: AdmissionFairSharing, DisableWaitForPodsReady, '
         'PrioritizePreemptorWorkloads, WorkloadPriorityClassDefaulting'),
        ({"PrioritizePreemptorWorkloads": "true"},
         "Configuration: object.featureGates.PrioritizePreemptorWorkloads: expected a boolean, got string"),
        (["PrioritizePreemptorWorkloads"], "Configuration: object.featureGates: expected an object, got array"),
    ],
)
def test_a_gate_quotaflow_does_not_implement_is_invalid(gates: object, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_object(configuration(featureGates=gates))
    assert caught.value.reason == "InvalidObject"
    assert caught.value.message == message


def _cq(name: str, nominal: int, preemption: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "cohortName": "all", "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu"],
                            "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": nominal}]}]}],
    }
    if preemption:
        spec["preemption"] = preemption
    return {"type": "ConfigApplied", "object": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                                                "metadata": {"name": name}, "spec": spec}}


def _submit(ns: str, name: str, cpu: int, priority: int = 0) -> dict[str, Any]:
    return {"type": "WorkloadSubmitted", "workload": {
        "metadata": {"namespace": ns, "name": name},
        "spec": {"queueName": "jobs", "priority": priority,
                 "podSets": [{"name": "main", "count": 1, "requests": {"cpu": str(cpu)}}]}}}


def _decide(events: list[dict[str, Any]]) -> list[tuple[str, str | None, int]]:
    engine = Engine()
    out: list[tuple[str, str | None, int]] = []
    for offset, event in enumerate(events):
        out += [(type(d).__name__, d.workload, d.cause.offset) for d in engine.apply(event, offset)]
    return out


@pytest.mark.parametrize("gate", [False, True])
def test_a_preemptor_without_candidates_reserves_its_room_for_the_cycle(gate: bool) -> None:
    """a/high (4 CPUs, borrowing) preempts a/low and waits; then the lender c shrinks, so a/low's
    2 CPUs and the 1 free are too little: a/high has no candidates. a reclaims Any, so by default
    it reserves nothing (Kueue's reserveCapacityForUnreclaimablePreempt); with the gate it is the
    queue's preemptor, goes first and reserves its request for the rest of the cycle: b/small,
    arriving in the same step, no longer fits in that cycle and is admitted in the next."""
    events = [
        {"type": "ConfigApplied", "object": configuration(
            fairSharing={"enable": True}, featureGates={"PrioritizePreemptorWorkloads": gate})},
        {"type": "ConfigApplied", "object": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                             "metadata": {"name": "f"}}},
        _cq("a", 2, {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}), _cq("b", 2), _cq("c", 3),
        *({"type": "ConfigApplied", "object": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                                               "metadata": {"namespace": ns, "name": "jobs"},
                                               "spec": {"clusterQueue": ns}}} for ns in ("a", "b")),
        _submit("a", "low", 2), _submit("b", "base", 2), _submit("a", "high", 4, priority=10),
        {"type": "Batch", "events": [_cq("c", 1), _submit("b", "small", 1)]},
    ]
    last = _decide(events)[-3:] if gate else _decide(events)[-2:]
    step = len(events) - 1
    if gate:
        assert last == [("Pending", "a/high", step), ("Pending", "b/small", step), ("Admitted", "b/small", step)]
    else:
        assert last == [("Admitted", "b/small", step), ("Pending", "a/high", step)]


def test_a_restored_snapshot_keeps_the_gate() -> None:
    """Cut right after a/high's preemption: the restored engine must still put the waiting
    preemptor first (gate on), which the gate-off twin of the scenario shows is not the default."""
    def events(name: str) -> list[dict[str, Any]]:
        return [e for e in yaml.safe_load_all(next(SCENARIOS.rglob(f"{name}.yaml")).read_text()) if e]

    gated = events("feature_gate_prioritize_preemptor_workloads_fair_sharing_preemptor_keeps_its_room")
    cut = next(i for i, e in enumerate(gated) if e.get("workload", {}).get("metadata", {}).get("name") == "high") + 1

    def run(engine: Engine, evs: list[dict[str, Any]], start: int) -> list[bytes]:
        return [encode(d) for offset, e in enumerate(evs[start:], start) for d in engine.apply(e, offset)]

    straight = run(Engine(), gated, 0)
    engine = Engine()
    head = run(engine, gated[:cut], 0)
    assert head + run(load(dump(engine)), gated, cut) == straight

    # Not vacuous: from the same cut, the gate-off twin decides otherwise (b/small takes the room).
    default = events("fair_sharing_waiting_preemptor_loses_its_room_and_its_victim_is_readmitted")
    assert default[1:cut + 1] == gated[1:cut + 1]  # the same cluster and events; only the Configuration differs
    engine = Engine()
    run(engine, default[:cut], 0)
    assert run(load(dump(engine)), default, cut)[:2] != straight[len(head):len(head) + 2]


def test_admission_fair_sharing_gate_as_kueue_spells_it() -> None:
    """Kueue's afs.Enabled: the stanza and the gate (beta, on by default) both; with the gate off
    the stanza is still validated."""
    stanza = {"usageHalfLifeTime": "1h"}
    on = parse_object(configuration(admissionFairSharing=stanza))
    assert isinstance(on, Configuration) and on.admission_fair_sharing is not None
    same = parse_object(configuration(admissionFairSharing=stanza, featureGates={"AdmissionFairSharing": True}))
    assert same == on
    off = parse_object(configuration(admissionFairSharing=stanza, featureGates={"AdmissionFairSharing": False}))
    assert off == Configuration()
    with pytest.raises(InvalidInput, match="usageHalfLifeTime"):
        parse_object(configuration(admissionFairSharing={"usageHalfLifeTime": "-1h"}, featureGates={"AdmissionFairSharing": False}))
