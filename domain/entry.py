"""A scheduling-cycle entry: one ClusterQueue head with its flavor assignment and victims."""

from __future__ import annotations

from domain.flavor_assigner import Assignment
from domain.preemption.policy import Target
from domain.state import ClusterQueueState, WorkloadState


class Entry:
    __slots__ = ("cq", "ws", "assignment", "targets", "deferred")

    def __init__(self, cq: ClusterQueueState, ws: WorkloadState, assignment: Assignment,
                 targets: list[Target] | None = None) -> None:
        self.cq = cq
        self.ws = ws
        self.assignment = assignment
        self.targets: list[Target] = [] if targets is None else targets
        # A failed first flavor scan whose resumed scan works: this cycle meets only the
        # failure, the next resumes the scan (Scheduler._deferred).
        self.deferred = False

    def order(self) -> tuple[int, int, int, int]:
        """Kueue's classical order: no borrowing first, then priority, then queue time."""
        return (self.assignment.borrowing, -self.ws.priority, self.ws.queue_time, self.ws.seq)
