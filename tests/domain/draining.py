"""Liveness checks shared by the property tests: drain a cluster, then ask a fresh engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.engine import Engine
from domain.state import State


def drain(state: State, send: Callable[[dict[str, Any]], object]) -> None:
    """Release every evicted workload and finish every admitted one, again and again, until
    nothing holds quota (each finish may admit what waited). `send` applies one input event."""
    for _round in range(len(state.workloads) + 1):
        holding = sorted(key for key, ws in state.workloads.items() if ws.admission is not None)
        if not holding:
            break
        for key in holding:
            ws = state.workloads.get(key)
            if ws is None or ws.admission is None:
                continue  # gone, or released, by an earlier event of this round
            namespace, name = key.split("/", 1)
            kind = "WorkloadReleased" if ws.evicted else "WorkloadFinished"
            send({"type": kind, "namespace": namespace, "name": name})
    assert all(ws.admission is None for ws in state.workloads.values()), "draining never ends"


def admitted_alone(config: list[dict[str, Any]], workload: dict[str, Any]) -> bool:
    """Would a fresh engine with this configuration admit (or reserve quota for) this workload,
    given it alone?"""
    engine = Engine()
    for offset, event in enumerate(config):
        engine.apply(event, offset)
    decisions = engine.apply({"type": "WorkloadSubmitted", "workload": workload}, len(config))
    return any(type(d).__name__ in ("Admitted", "QuotaReserved") for d in decisions)
