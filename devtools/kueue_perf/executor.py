"""The launcher side of Kueue's performance runner (runner/controller), on any clock.

Kueue's runner does two things with a workload: once it sees it admitted, it finishes it
`runtimeMs` later (measured from the admission it saw: a readmitted workload runs its full
runtime again); once it sees it evicted, it clears its quota reservation at once ("Evicted by
the test runner"), which requeues it. quotaflow's contract has the same two moves: on `Admitted`
the executor schedules `WorkloadFinished` a runtime later; on `Preempted` or `Evicted` it sends
`WorkloadReleased` (the launcher's confirmation that the pods are gone), and the engine then
gives the quota back and queues the workload again. The release goes through the log, as the
runner's status patch goes through the API server, so the engine keeps its default
`evictionRelease: OnRelease` policy: a preemptor waits for that release like Kueue's waits for
the victims' reservations to clear.

The executor only decides what to send and when; the caller owns the clock and the log.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from domain.decisions import Admitted, Decision, Evicted, Preempted

RELEASE, FINISH = 0, 1  # at the same instant a release goes first: it frees quota sooner


class Executor:
    def __init__(self, runtimes_ms: dict[str, int], latency_ms: float = 0.0) -> None:
        self._runtime = runtimes_ms  # "namespace/name" -> runtimeMs
        # How late the runner sees a decision (virtual time only: in real time the clock says it).
        self._latency = latency_ms
        self._run: dict[str, int] = {}  # admissions seen per workload: a finish is for the latest only
        self._finished: dict[str, int] = {}  # workload -> the run whose finish was sent
        self._due: list[tuple[float, int, int, str, int]] = []  # (at, kind, seq, key, run)
        self._seq = 0
        self.finishes_sent = 0
        self.releases_sent = 0
        self.releases_skipped = 0

    def on_decision(self, decision: Decision, now: float) -> None:
        key = decision.workload
        if key is None or key not in self._runtime:
            return
        if isinstance(decision, Admitted):
            run = self._run.get(key, 0) + 1
            self._run[key] = run
            self._push(now + self._latency + self._runtime[key], FINISH, key, run)
        elif isinstance(decision, (Preempted, Evicted)):
            if self._finished.get(key) == self._run.get(key):
                # The job completed and its finish is already in the log, ahead of anything sent
                # now: the engine reads it and the workload is gone. A release would only be
                # rejected ("not found"), as Kueue's runner has nothing to evict once it finished.
                self.releases_skipped += 1
                return
            run = self._run.get(key, 0) + 1  # the running copy is gone: its finish must not be sent
            self._run[key] = run
            self._push(now + self._latency, RELEASE, key, run)

    def on_decisions(self, decisions: Iterable[Decision], now: float) -> None:
        for d in decisions:
            self.on_decision(d, now)

    def _push(self, at: float, kind: int, key: str, run: int) -> None:
        heapq.heappush(self._due, (at, kind, self._seq, key, run))
        self._seq += 1

    def next_due(self) -> float | None:
        while self._due:
            at, kind, _, key, run = self._due[0]
            if kind == FINISH and self._run.get(key) != run:
                heapq.heappop(self._due)  # preempted since it was scheduled
                continue
            return at
        return None

    def pop_due(self, now: float) -> list[dict[str, Any]]:
        """The events to send at `now`, in order: releases, then finishes."""
        out: list[dict[str, Any]] = []
        while self._due and self._due[0][0] <= now:
            _, kind, _, key, run = heapq.heappop(self._due)
            namespace, _, name = key.partition("/")
            if kind == RELEASE:
                out.append({"type": "WorkloadReleased", "namespace": namespace, "name": name})
                self.releases_sent += 1
            elif self._run.get(key) == run:
                out.append({"type": "WorkloadFinished", "namespace": namespace, "name": name})
                self._finished[key] = run
                self.finishes_sent += 1
        return out

    @property
    def idle(self) -> bool:
        return self.next_due() is None
