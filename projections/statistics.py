"""Statistics the projection keeps for metrics: wait-time histograms and counters per queue, in
Kueue's buckets."""

from __future__ import annotations

import bisect
from typing import Any

from projections.records import KIND_NAMES

# (ClusterQueue, LocalQueue namespace, LocalQueue name, priority class): one key serves Kueue's
# per-ClusterQueue and per-LocalQueue metric families, summed at scrape time.
QueueKey = tuple[str, str, str, str]

# Kueue's histogram buckets for wait times: generateExponentialBuckets(16) = 1, 2.5 * 2^i. The
# families Kueue buckets with generateExponentialBuckets(14) read the first 14 (the same bounds).
WAIT_BUCKETS: tuple[float, ...] = (1.0, *(2.5 * 2**i for i in range(15)))

SETTLE_EVERY = 4096  # observations a histogram keeps before bucketing them


class Histogram:
    """Kueue's wait-time histogram. Observations are kept as they come (an append) and put in
    their buckets when the histogram is read, or every few thousand, in order: the same counts
    and the same floating-point sum as bucketing each at once."""

    __slots__ = ("_buckets", "_count", "_sum", "_waiting")

    def __init__(self) -> None:
        self._buckets = [0] * len(WAIT_BUCKETS)
        self._count = 0
        self._sum = 0.0
        self._waiting: list[float] = []  # (a list: appending to it is several times cheaper than to an array)

    def observe(self, value: float) -> None:
        waiting = self._waiting
        waiting.append(value)
        if len(waiting) >= SETTLE_EVERY:
            self._settle()

    def _settle(self) -> None:
        waiting = self._waiting
        if not waiting:
            return
        buckets = self._buckets
        n = len(buckets)
        total = self._sum
        for value in waiting:
            i = bisect.bisect_left(WAIT_BUCKETS, value)
            if i < n:
                buckets[i] += 1
            total += value
        self._sum = total
        self._count += len(waiting)
        self._waiting = []

    @property
    def buckets(self) -> list[int]:
        self._settle()
        return self._buckets

    @buckets.setter
    def buckets(self, value: list[int]) -> None:
        self._settle()
        self._buckets = value

    @property
    def count(self) -> int:
        self._settle()
        return self._count

    @count.setter
    def count(self, value: int) -> None:
        self._settle()
        self._count = value

    @property
    def sum(self) -> float:
        self._settle()
        return self._sum

    @sum.setter
    def sum(self, value: float) -> None:
        self._settle()
        self._sum = value


class QueueStats:
    """Kueue's per-queue counters and wait histograms of one QueueKey (one object, so that an
    admission updates them without a lookup per family; a workload keeps its own while it holds
    quota)."""

    __slots__ = ("key", "admitted", "quota_reserved", "finished", "admission_wait", "quota_reserved_wait",
                 "admission_checks_wait", "execution_time", "ready_wait", "admitted_until_ready")

    def __init__(self, key: QueueKey) -> None:
        self.key = key
        self.admitted = 0
        self.quota_reserved = 0
        self.finished = 0
        self.admission_wait: Histogram | None = None
        self.quota_reserved_wait: Histogram | None = None
        self.admission_checks_wait: Histogram | None = None
        self.execution_time: Histogram | None = None
        self.ready_wait: Histogram | None = None
        self.admitted_until_ready: Histogram | None = None


class Counters:
    """Kueue's counters and histograms, folded from the decisions (see projections/metrics.py)."""

    __slots__ = ("queues", "evicted", "preempted", "admission_wait", "quota_reserved_wait", "admission_checks_wait",
                 "execution_time", "ready_wait", "admitted_until_ready", "eviction_latency", "pods_ready_to_evicted",
                 "evicted_once", "cohort_admitted", "rejected", "by_kind")

    def __init__(self) -> None:
        self.queues: dict[QueueKey, QueueStats] = {}
        self.evicted: dict[tuple[QueueKey, str, str], int] = {}  # (queues, reason, cause)
        self.preempted: dict[tuple[str, str], int] = {}  # preempting cq, reason
        # the QueueStats' histograms, in the order of their first observation (the order in
        # which metrics sums them)
        self.admission_wait: dict[QueueKey, Histogram] = {}
        self.quota_reserved_wait: dict[QueueKey, Histogram] = {}
        self.admission_checks_wait: dict[QueueKey, Histogram] = {}
        self.execution_time: dict[QueueKey, Histogram] = {}
        self.ready_wait: dict[QueueKey, Histogram] = {}
        self.admitted_until_ready: dict[QueueKey, Histogram] = {}
        # (ClusterQueue, eviction reason): from the eviction until its quota is released
        self.eviction_latency: dict[tuple[str, str], Histogram] = {}
        # (ClusterQueue, reason, underlying cause): from its pods being ready until the eviction
        self.pods_ready_to_evicted: dict[tuple[str, str, str], Histogram] = {}
        # (ClusterQueue, reason, underlying cause, priority class): workloads evicted for that
        # reason and cause for the first time
        self.evicted_once: dict[tuple[str, str, str, str], int] = {}
        # (cohort, priority class): admissions in each cohort's subtree, counted at admission
        # for every cohort above the ClusterQueue then
        self.cohort_admitted: dict[tuple[str, str], int] = {}
        self.rejected: dict[str, int] = {}  # by reason
        self.by_kind: dict[type, int] = {}  # decisions by their class (type(None): undecodable)

    def stats(self, key: QueueKey) -> QueueStats:
        s = self.queues.get(key)
        if s is None:
            s = self.queues[key] = QueueStats(key)
        return s

    @property
    def admitted(self) -> dict[QueueKey, int]:
        return {k: s.admitted for k, s in self.queues.items() if s.admitted}

    @property
    def quota_reserved(self) -> dict[QueueKey, int]:
        return {k: s.quota_reserved for k, s in self.queues.items() if s.quota_reserved}

    @property
    def finished(self) -> dict[QueueKey, int]:
        return {k: s.finished for k, s in self.queues.items() if s.finished}

    @property
    def decisions(self) -> dict[str, int]:
        """Decisions by type ("Unknown": a record this version cannot decode)."""
        return {KIND_NAMES[kind]: n for kind, n in self.by_kind.items()}


def increment(counter: dict[Any, int], key: Any) -> None:
    counter[key] = counter.get(key, 0) + 1


def observe(histograms: dict[Any, Histogram], key: Any, value: float) -> Histogram:
    """Observe `value` in the histogram of `key`, made at its first observation."""
    h = histograms.get(key)
    if h is None:
        h = histograms[key] = Histogram()
    h.observe(value)
    return h
