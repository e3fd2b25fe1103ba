"""The projection's view model: workloads, pending order per queue, ClusterQueues as the views
read them."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import msgspec

from domain.objects import ClusterQueueSpec, ResourceQuota
from domain.workload import WorkloadSpec
from projections.records import FR
from projections.statistics import QueueStats

LQKey = tuple[str, str]  # (namespace, name)
OrderKey = tuple[int, int, int, str]  # (-priority, queue time, log position, namespace/name)


class WorkloadView(msgspec.Struct, gc=False):
    """A workload as the views see it. A Struct outside the cyclic GC (one per live workload;
    nothing it holds refers back to it).

    The fold does not build a workload's `WorkloadSpec` when it arrives: workloads of one job
    template share one parsed template, and the spec (the template with this workload's name,
    creationTimestamp and uid) is built the first time something reads `spec`. What the fold
    itself needs on every decision (LocalQueue, priority class) is kept beside it."""

    key: str
    template: WorkloadSpec  # the spec itself once `name` is None, else the template it comes from
    name: str | None
    creation: int | None
    uid: str | None
    lq: LQKey  # (namespace, queueName)
    priority_class: str | None
    seq: int  # position in the input log (offset * 2^16 + index within a Batch)
    queue_time: int  # µs; the engine's queue-order time
    priority: int
    created_us: int  # creationTimestamp, else the submission event's time (for display)
    waiting_since_us: int  # created or requeued (for the admission wait time metric)
    active: bool
    cluster_queue: str | None = None  # the ClusterQueue it holds quota in
    usage: Mapping[FR, int] | None = None  # shared between workloads: read only
    admitted: bool = False  # latest Admitted not followed by Preempted/Evicted/...
    evicted: bool = False  # preempted or evicted, still holding quota until QuotaReleased
    reserved_once: bool = False  # has held quota since it was last queued (metrics)
    reason: str | None = None  # latest Pending reason since it was last queued
    message: str | None = None
    queued_in: str | None = None  # the ClusterQueue whose pending queue holds it
    qstats: QueueStats | None = None  # its metrics (by QueueKey) while it holds quota
    # Times (µs) for Kueue's histograms: quota reserved, admitted (the current stretch), time
    # admitted before it (Kueue's accumulatedPastExecutionTimeSeconds), evicted and why.
    reserved_us: int = 0
    admitted_us: int = 0
    ran_us: int = 0
    evicted_us: int = 0
    evicted_reason: str = ""
    # Its creation's queue time while an admission check's Retry orders it by the eviction's
    # time instead (until it reserves quota again, as the engine's lifecycle.order_by_creation).
    created_queue_time: int | None = None
    # waitForPodsReady, as Kueue's PodsReady condition: ready since (µs; -1 while not ready);
    # whether they were ready since its admission (a loss then waits for recovery, and being
    # ready again is a recovery, not a start)
    ready_us: int = -1
    pods_started: bool = False
    # (reason, underlying cause) of its evictions so far, as Kueue's schedulingStats.evictions
    evictions: tuple[tuple[str, str], ...] = ()

    @property
    def spec(self) -> WorkloadSpec:
        if self.name is not None:
            t = self.template
            self.template = WorkloadSpec(
                t.namespace, self.name, t.queue_name, t.priority, t.priority_class, t.active,
                t.labels, self.creation, t.pod_sets, self.uid, pod_priority_class=t.pod_priority_class,
            )
            self.name = None
        return self.template

    @spec.setter
    def spec(self, spec: WorkloadSpec) -> None:
        self.template = spec
        self.name = None
        self.lq = (spec.namespace, spec.queue_name)
        self.priority_class = spec.priority_class
        self.qstats = None

    @property
    def order_key(self) -> OrderKey:
        return (-self.priority, self.queue_time, self.seq, self.key)

    @property
    def holding(self) -> bool:
        return self.cluster_queue is not None


class PendingOrder:
    """The OrderKeys of the workloads queued in one ClusterQueue (or LocalQueue), read in order.

    Adding and removing cost a dict operation; the order is built when first read and then kept
    up to date (binary search into a list). A rebuild, which never reads it halfway, sorts each
    queue once at the end instead of keeping every intermediate queue sorted."""

    __slots__ = ("_members", "_sorted", "rank")

    def __init__(self) -> None:
        self._members: dict[OrderKey, None] = {}
        self._sorted: list[OrderKey] | None = None
        # Admission fair sharing: each key's LocalQueue usage, which sorts first and moves with
        # time, so the order is sorted anew at each read (projections/local_queue_usage.py).
        self.rank: Callable[[OrderKey], Any] | None = None

    def set_rank(self, rank: Callable[[OrderKey], Any] | None) -> None:
        self.rank = rank
        self._sorted = None

    def add(self, key: OrderKey) -> None:
        self._members[key] = None
        if self._sorted is not None and self.rank is None:
            bisect.insort(self._sorted, key)

    def remove(self, key: OrderKey) -> None:
        del self._members[key]
        if self._sorted is not None and self.rank is None:
            del self._sorted[bisect.bisect_left(self._sorted, key)]

    def _order(self) -> list[OrderKey]:
        rank = self.rank
        if rank is not None:
            return sorted(self._members, key=lambda k: (rank(k), k))
        if self._sorted is None:
            self._sorted = sorted(self._members)
        return self._sorted

    def index(self, key: OrderKey) -> int:
        order = self._order()
        if self.rank is not None:
            return order.index(key)
        i = bisect.bisect_left(order, key)
        if i < len(order) and order[i] == key:
            return i
        raise ValueError(f"{key!r} is not queued")

    def __getitem__(self, i: int) -> OrderKey:
        return self._order()[i]

    def __iter__(self) -> Iterator[OrderKey]:
        return iter(self._order())

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, key: object) -> bool:
        return key in self._members


class ClusterQueueView:
    """A ClusterQueue and who holds quota in it.

    What its workloads hold is kept per distinct assignment (the fold shares one usage dict
    between every workload with the same assignment): how many hold it and how many of those
    are admitted. The totals per (flavor, resource) -- `reservation` (every workload holding
    quota) and `usage` (admitted ones only) -- are summed from that when read, so an admission
    or a release is a counter step whatever the number of resources."""

    __slots__ = ("name", "spec", "raw", "quotas", "terminating", "held", "holders", "admitted", "pending", "_totals")

    def __init__(self, name: str, spec: ClusterQueueSpec, raw: Mapping[str, Any], quotas: dict[FR, ResourceQuota]) -> None:
        self.name = name
        self.spec = spec
        self.raw = raw
        self.quotas = quotas
        self.terminating = False
        # id(usage dict) -> [usage dict, workloads holding it, of which admitted]; the entry keeps
        # the dict alive, so its id cannot be reused while counted
        self.held: dict[int, list[Any]] = {}
        self.holders: dict[str, None] = {}
        self.admitted = 0
        self.pending = PendingOrder()  # OrderKeys of the workloads queued here
        self._totals: tuple[dict[FR, int], dict[FR, int]] | None = None

    def _sums(self) -> tuple[dict[FR, int], dict[FR, int]]:
        totals = self._totals
        if totals is None:
            reservation: dict[FR, int] = {}
            usage: dict[FR, int] = {}
            for held, holding, admitted in self.held.values():
                for fr, value in held.items():
                    if value:
                        reservation[fr] = reservation.get(fr, 0) + holding * value
                        if admitted:
                            usage[fr] = usage.get(fr, 0) + admitted * value
            totals = self._totals = (
                {fr: v for fr, v in reservation.items() if v},
                {fr: v for fr, v in usage.items() if v},
            )
        return totals

    @property
    def reservation(self) -> Mapping[FR, int]:
        """Quota held by every workload holding quota here, per (flavor, resource); zeros left out."""
        return self._sums()[0]

    @property
    def usage(self) -> Mapping[FR, int]:
        """Quota held by the admitted ones."""
        return self._sums()[1]
