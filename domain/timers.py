"""Deadlines the log's time fires: what time-driven rules keep between events.

The engine has no clock: its time is the log's (domain/clock.py). A rule that must act when some
time has passed (a workload's maximum execution time, its PodsReady timeout, the end of its
requeuing backoff) files a deadline here, keyed by (kind, workload). The engine fires every
deadline the time of an input event reaches before it decides that event, in the order of
(deadline, kind, workload): plain integers and strings, so the order never depends on hashing
and a replay fires the same timers at the same events.

A heap with lazy deletion: setting or cancelling a timer costs O(log n) and O(1); firing the due
ones costs what they touch. Cancelled entries stay in the heap until they reach its top (or the
heap is rebuilt when they outnumber the live ones).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

# Kinds of timer, one per rule; the kind's name orders timers that fall due at the same time.
EXECUTION_TIME = "execution-time"
PODS_READY = "pods-ready"
REQUEUE = "requeue"

Timer = tuple[int, str, str]  # (deadline in µs, kind, workload key)


@dataclass(slots=True)
class PodsReadyState:
    """A workload's PodsReady bookkeeping (Kueue's PodsReady condition and RequeueState)."""

    ready: bool = False
    requeue_count: int = 0
    requeue_at: int | None = None  # while it waits for its backoff to end (µs)


@dataclass(slots=True)
class Timers:
    heap: list[Timer] = field(default_factory=list)
    live: dict[tuple[str, str], int] = field(default_factory=dict)  # (kind, key) -> deadline
    # Maximum execution time: seconds a workload was admitted before its current admission
    # (Kueue's status.accumulatedPastExecutionTimeSeconds), and when the current one started.
    executed: dict[str, int] = field(default_factory=dict)
    admitted_since: dict[str, int] = field(default_factory=dict)
    # waitForPodsReady: per workload, and the admitted workloads whose pods are not ready yet
    # (in admission order: blockAdmission waits for them).
    pods: dict[str, PodsReadyState] = field(default_factory=dict)
    not_ready: dict[str, None] = field(default_factory=dict)
    # Whether any workload ever asked for a maximum execution time: until one does, and while
    # waitForPodsReady is off, the engine skips watching its decisions.
    watch_execution: bool = False

    def set(self, kind: str, key: str, deadline: int) -> None:
        self.live[(kind, key)] = deadline
        heapq.heappush(self.heap, (deadline, kind, key))
        if len(self.heap) > 64 and len(self.heap) > 2 * len(self.live):
            self._rebuild()

    def cancel(self, kind: str, key: str) -> None:
        self.live.pop((kind, key), None)

    def deadline(self, kind: str, key: str) -> int | None:
        return self.live.get((kind, key))

    def next_due(self) -> int | None:
        """The earliest live deadline, None when there is none."""
        heap = self.heap
        live = self.live
        while heap:
            deadline, kind, key = heap[0]
            if live.get((kind, key)) == deadline:
                return deadline
            heapq.heappop(heap)
        return None

    def pop_due(self, now: int) -> Timer | None:
        """The earliest live timer whose deadline `now` reached, removed; None when none is due."""
        heap = self.heap
        live = self.live
        while heap and heap[0][0] <= now:
            deadline, kind, key = heapq.heappop(heap)
            if live.get((kind, key)) == deadline:
                del live[(kind, key)]
                return deadline, kind, key
        return None

    def forget(self, key: str) -> None:
        """The workload is gone (finished or deleted): nothing of it stays."""
        for kind in (EXECUTION_TIME, PODS_READY, REQUEUE):
            self.live.pop((kind, key), None)
        self.executed.pop(key, None)
        self.admitted_since.pop(key, None)
        self.pods.pop(key, None)
        self.not_ready.pop(key, None)

    def _rebuild(self) -> None:
        self.heap = [(deadline, kind, key) for (kind, key), deadline in self.live.items()]
        heapq.heapify(self.heap)
