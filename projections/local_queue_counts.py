"""Each LocalQueue's workloads by state, and the quota they hold, kept by the fold.

A LocalQueue's status (Kueue's pendingWorkloads, reservingWorkloads, admittedWorkloads,
flavorsReservation, flavorsUsage), its /metrics gauges and the dashboard's counts are read from
here, so a read costs the LocalQueue's distinct assignments, not a walk over its workloads. The
fold keeps the counts in step with every change of a workload's state (`count` before and after
a change, `count_admission` for an admission or eviction that keeps the quota): a step each.

A workload counts where its `lq` (namespace, queueName) says, whether that LocalQueue exists or
not: pending while it is active and holds no quota, reserving while it holds quota (admitted or
not, evicted included), admitted while it holds quota and is admitted.
"""

from __future__ import annotations

from typing import Any

from projections.records import FR
from projections.view_model import LQKey, WorkloadView


class LocalQueueCounts:
    """One LocalQueue's counts. What its workloads hold is kept per distinct assignment (the fold
    shares one usage dict between the workloads with the same assignment), as ClusterQueueView
    keeps it, and summed when read."""

    __slots__ = ("pending", "reserving", "admitted", "held")

    def __init__(self) -> None:
        self.pending = 0
        self.reserving = 0
        self.admitted = 0
        # id(usage dict) -> [usage dict, workloads holding it, of which admitted]; the entry keeps
        # the dict alive, so its id cannot be reused while counted
        self.held: dict[int, list[Any]] = {}

    @property
    def reservation(self) -> dict[FR, int]:
        """Quota held by its workloads holding quota, per (flavor, resource) any of them holds."""
        out: dict[FR, int] = {}
        for usage, holding, _ in self.held.values():
            for fr, value in usage.items():
                out[fr] = out.get(fr, 0) + holding * value
        return out

    @property
    def usage(self) -> dict[FR, int]:
        """Quota held by its admitted workloads, per (flavor, resource) any of them holds."""
        out: dict[FR, int] = {}
        for usage, _, admitted in self.held.values():
            if admitted:
                for fr, value in usage.items():
                    out[fr] = out.get(fr, 0) + admitted * value
        return out


def count(counts: dict[LQKey, LocalQueueCounts], wv: WorkloadView, step: int) -> None:
    """Add (`step` 1) or take away (-1) what `wv`, as it is now, counts in its LocalQueue."""
    holding = wv.cluster_queue is not None
    if not holding and not wv.active:
        return
    key = wv.lq
    c = counts.get(key)
    if c is None:
        c = counts[key] = LocalQueueCounts()
    if not holding:
        c.pending += step
    else:
        c.reserving += step
        usage = wv.usage
        entry = c.held.get(id(usage))
        if entry is None:
            entry = c.held[id(usage)] = [usage, 0, 0]
        entry[1] += step
        if wv.admitted:
            entry[2] += step
            c.admitted += step
        if not entry[1]:
            del c.held[id(usage)]
    if not c.pending and not c.reserving:
        del counts[key]


def count_admission(counts: dict[LQKey, LocalQueueCounts], wv: WorkloadView, step: int) -> None:
    """`wv`, holding quota, is admitted (`step` 1) or no longer admitted (-1), holding the same."""
    c = counts[wv.lq]
    c.held[id(wv.usage)][2] += step
    c.admitted += step
