"""The decisions a launcher acts on, read in order together with the input log.

The launcher follows the two logs with the read side's own fold (`projections.Follower` and
`Projection`): it needs, for each `Admitted` workload, where its Workload was submitted (the
projection keeps that position, and decides as the engine did which submission was accepted),
and it reads each input event's decisions only once all of them are committed, so that a
`Preempted` followed in the same event by `QuotaReleased` (release policy `Immediate`) is seen
as one step and no release is sent for it.

Each decision after the launcher's stored position is applied to its state file in one
transaction with the new position (`LauncherState`); decisions at or before it were applied
before a restart and are only folded. The fold itself is rebuilt from the start of the logs at
every start, as `quotaflow status` rebuilds its views.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import structlog

from projections.fold import Projection
from projections.records import (
    Admitted,
    DecisionRecord,
    Deleted,
    Evicted,
    Finished,
    Preempted,
    QuotaReleased,
)
from streams.launcher.state import LauncherState

log = structlog.get_logger("quotaflow.launch")

ID_PREFIX = "quotaflow-launch"


def decision_id(d: DecisionRecord) -> str:
    """A decision's id (as its CloudEvents `ce_id`): `<cause.offset>.<cause.index>`."""
    return f"{d.cause_offset}.{d.cause_index}"


def release_id(workload: str, eviction: DecisionRecord) -> str:
    """The `WorkloadReleased` event id for one eviction: the same after any restart, so a resent
    release is a producer's retry to the engine (no second decision)."""
    return f"{ID_PREFIX}/release/{workload}/{decision_id(eviction)}"


def finish_id(workload: str, admission: str) -> str:
    return f"{ID_PREFIX}/finish/{workload}/{admission}"


def pods_ready_id(workload: str, admission: str) -> str:
    """The `WorkloadPodsReady` event id for one admission: resent after a restart, it is a
    producer's retry."""
    return f"{ID_PREFIX}/pods-ready/{workload}/{admission}"


class LaunchFold(Projection):
    """The projection, and after each input event the launcher's reaction to its decisions."""

    def __init__(self, state: LauncherState, on_decision: Callable[[str, DecisionRecord], None] | None = None) -> None:
        super().__init__(history=False)
        self.state = state
        self.on_decision = on_decision

    def _event_decided(self, decisions: list[DecisionRecord]) -> None:
        state = self.state
        position = state.position
        for d in decisions:
            if d.offset > position:
                self._react(d)
        state.advance(decisions[-1].offset)

    def _react(self, d: DecisionRecord) -> None:
        dec = d.decision
        workload = dec.workload if dec is not None else None
        if workload is None:
            return
        kind = type(dec)
        state = self.state
        if kind is Admitted:
            view = self.workloads.get(workload)
            if view is None:  # cannot happen with the engine's decisions: admitted means live
                log.warning("admission without a submission", workload=workload, decision_offset=d.offset)
                return
            assignments: list[dict[str, Any]] = json.loads(bytes(dec.podSetAssignments))  # type: ignore[union-attr]
            state.admitted(d.offset, workload, decision_id(d), dec.clusterQueue, assignments, view.seq)  # type: ignore[union-attr]
        elif kind is Preempted or kind is Evicted:
            state.evicted(d.offset, workload, release_id(workload, d))
        elif kind is QuotaReleased:
            state.quota_released(d.offset, workload)
        elif kind is Finished or kind is Deleted:
            state.ended(d.offset, workload)
        else:
            return
        if self.on_decision is not None:
            self.on_decision(kind.__name__, d)
