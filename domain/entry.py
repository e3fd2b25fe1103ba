"""A scheduling-cycle entry: one ClusterQueue head with its flavor assignment and victims."""

from __future__ import annotations

from dataclasses import dataclass, field

from domain.flavor_assigner import Assignment
from domain.preemption import Target
from domain.state import ClusterQueueState, WorkloadState


@dataclass(slots=True)
class Entry:
    cq: ClusterQueueState
    ws: WorkloadState
    assignment: Assignment
    targets: list[Target] = field(default_factory=list)

    def order(self) -> tuple[int, int, int, int]:
        """Kueue's classical order: no borrowing first, then priority, then queue time."""
        return (self.assignment.borrowing, -self.ws.priority, self.ws.queue_time, self.ws.seq)
