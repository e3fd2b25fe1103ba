"""How simultaneous events reach the engine: one `Batch`, split only between cohorts.

Kueue's scheduler sees at once whatever changed since its last cycle, so events due at the same
instant go to the engine as one `Batch` (it schedules once, after all of them). One Kafka record
must stay well under the 1 MB a broker accepts by default, and the large-scale config creates
3,000 workloads at some instants, so a Batch holds at most MAX_BATCH_EVENTS events. It is split
only where that changes nothing: between cohorts, which never share quota (ClusterQueues of
different cohorts cannot borrow from or preempt each other). Within a cohort the order is kept
(releases, then finishes, then arrivals); only a single cohort with more simultaneous events
than the limit would be split inside, and the shipped configs have at most 300.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from devtools.kueue_perf.generator import Scenario

MAX_BATCH_EVENTS = 1000  # ~480 KB of WorkloadSubmitted events
# Real time: how many of the runner's records the agent may have undecided before what falls
# due waits and goes as one append (realtime._Run.sender); 0 appends as it falls due. The best
# of 1-4 measured on large-scale (bench/figures.md).
DEFAULT_WINDOW = 2


def _namespace(event: dict[str, Any]) -> str:
    if event["type"] == "WorkloadSubmitted":
        return str(event["workload"]["metadata"]["namespace"])
    return str(event["namespace"])


class Batcher:
    def __init__(self, scenario: Scenario, enabled: bool = True, limit: int = MAX_BATCH_EVENTS) -> None:
        cohorts: dict[str, int] = {}
        self._cohort = {q.name: cohorts.setdefault(q.cohort, len(cohorts)) for q in scenario.queues}
        self.enabled = enabled
        self.limit = limit

    def __call__(self, events: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The input events that carry `events`, in order within each cohort."""
        if not self.enabled or len(events) <= 1:
            yield from events
            return
        if len(events) <= self.limit:
            yield {"type": "Batch", "events": events}
            return
        by_cohort: dict[int, list[dict[str, Any]]] = {}
        for e in events:
            by_cohort.setdefault(self._cohort[_namespace(e)], []).append(e)
        chunk: list[dict[str, Any]] = []
        for c in sorted(by_cohort):
            group = by_cohort[c]
            if chunk and len(chunk) + len(group) > self.limit:
                yield from self._wrap(chunk)
                chunk = []
            for i in range(0, len(group), self.limit):
                part = group[i : i + self.limit]
                if len(part) == self.limit:
                    yield from self._wrap(part)
                else:
                    chunk.extend(part)
        if chunk:
            yield from self._wrap(chunk)

    @staticmethod
    def _wrap(chunk: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        yield chunk[0] if len(chunk) == 1 else {"type": "Batch", "events": chunk}
