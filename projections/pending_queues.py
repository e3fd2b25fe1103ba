"""The fold's pending queues: where each pending workload waits, in the engine's (and Kueue's)
order.

A pending workload waits in its ClusterQueue's queue when it is active, its LocalQueue exists and
is not stopped, and the ClusterQueue exists (a ClusterQueue being deleted keeps its queue,
inactive, while it lingers) -- exactly when the engine queues it there (domain/lifecycle.py
`route`). Order: higher priority first, then earlier queue time, then log position, then
`namespace/name`. Positions are indexes in each queue's order, which is sorted when first read
and then kept sorted (see `PendingOrder`).

A workload whose place may have changed is marked dirty and routed once the event's decisions
are folded too: a workload submitted and admitted by the same event never touches a queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from domain.stop_policy import is_stopped
from projections.view_model import LQKey, PendingOrder, WorkloadView

if TYPE_CHECKING:
    from domain.objects import LocalQueueSpec
    from projections.view_model import ClusterQueueView


class PendingQueues:
    """The routing half of `Projection` (projections/fold.py holds the state it reads)."""

    if TYPE_CHECKING:
        workloads: dict[str, WorkloadView]
        cluster_queues: dict[str, ClusterQueueView]
        local_queues: dict[LQKey, LocalQueueSpec]
        lq_pending: dict[LQKey, PendingOrder]
        by_lq: dict[LQKey, dict[str, None]]
        _dirty: dict[str, None]

    def _target(self, wv: WorkloadView) -> str | None:
        if wv.holding or not wv.active:
            return None
        lq = self.local_queues.get(wv.lq)
        if lq is None or is_stopped(lq.stop_policy):
            return None
        cq = self.cluster_queues.get(lq.cluster_queue)
        if cq is None:
            return None
        return cq.name  # (a ClusterQueue being deleted keeps its queue, inactive, while it lingers)

    def _dequeue(self, wv: WorkloadView) -> None:
        if wv.queued_in is None:
            return
        key = (-wv.priority, wv.queue_time, wv.seq, wv.key)
        cq = self.cluster_queues.get(wv.queued_in)
        if cq is not None:  # (a deleted ClusterQueue takes its list with it)
            cq.pending.remove(key)
        lq_pending = self.lq_pending[wv.lq]
        lq_pending.remove(key)
        if not lq_pending:
            del self.lq_pending[wv.lq]
        wv.queued_in = None

    def _reroute(self, wv: WorkloadView) -> None:
        """Queue the workload where it belongs, once this event's decisions are folded too."""
        self._dirty[wv.key] = None

    def _route_dirty(self) -> None:
        dirty = self._dirty
        workloads = self.workloads
        local_queues = self.local_queues
        cluster_queues = self.cluster_queues
        while dirty:
            keys = list(dirty)
            dirty.clear()
            for key in keys:
                wv = workloads.get(key)
                if wv is None:
                    continue
                # _route, with _target inline (once per submission: the hot case)
                target = None
                if wv.cluster_queue is None and wv.active:
                    lq = local_queues.get(wv.lq)
                    if lq is not None and not is_stopped(lq.stop_policy):
                        cq = cluster_queues.get(lq.cluster_queue)
                        if cq is not None:
                            target = cq.name
                if target != wv.queued_in:
                    self._route(wv)

    def _route(self, wv: WorkloadView) -> None:
        target = self._target(wv)
        if target == wv.queued_in:
            return
        if wv.queued_in is not None:
            self._dequeue(wv)
        if target is not None:
            key = (-wv.priority, wv.queue_time, wv.seq, wv.key)
            self.cluster_queues[target].pending.add(key)
            lq_pending = self.lq_pending.get(wv.lq)
            if lq_pending is None:
                lq_pending = self.lq_pending[wv.lq] = PendingOrder()
            lq_pending.add(key)
            wv.queued_in = target

    def _reroute_lq(self, key: LQKey) -> None:
        for wl in list(self.by_lq.get(key, {})):
            self._reroute(self.workloads[wl])

    def _reroute_cq(self, name: str) -> None:
        for key, lq in self.local_queues.items():
            if lq.cluster_queue == name:
                self._reroute_lq(key)
