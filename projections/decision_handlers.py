"""The fold's decision handlers: who holds quota, who waits and why, and Kueue's counters.

Everything here comes from the decisions alone: `Admitted` / `QuotaReserved` -> holds its
`resourceUsage` in `clusterQueue`; `Preempted` / `Evicted` -> no longer admitted, still holding;
`QuotaReleased`, `Finished`, `Deleted` -> releases; `Pending` carries the reason; `Rejected` and
`Applied` count (what they say about the input event itself was read before, in fold.py).
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Any

from domain import reasons
from projections.local_queue_counts import LocalQueueCounts, count, count_admission
from projections.records import (
    Admitted,
    Applied,
    DecisionRecord,
    Deleted,
    Evicted,
    Finished,
    FoldDecision,
    Pending,
    Preempted,
    QuotaReleased,
    QuotaReserved,
    Rejected,
    usage_of,
)
from projections.statistics import (
    SETTLE_EVERY,
    Counters,
    Histogram,
    QueueStats,
    increment,
    observe,
)
from projections.view_model import ClusterQueueView, LQKey, WorkloadView

if TYPE_CHECKING:
    from domain.objects import CohortSpec, Configuration, LocalQueueSpec
    from projections.local_queue_usage import LocalQueueUsage


class DecisionHandlers:
    """The decision half of `Projection` (projections/fold.py holds the state)."""

    if TYPE_CHECKING:
        workloads: dict[str, WorkloadView]
        finished: dict[str, LQKey]
        finished_by_lq: dict[LQKey, int]
        cluster_queues: dict[str, ClusterQueueView]
        lq_usage: LocalQueueUsage
        clock: int
        local_queues: dict[LQKey, LocalQueueSpec]
        cohorts: dict[str, CohortSpec]
        _cohort_chains: dict[str, tuple[str, ...]]
        by_lq: dict[LQKey, dict[str, None]]
        lq_counts: dict[LQKey, LocalQueueCounts]
        by_priority_class: dict[str, dict[str, None]]
        counters: Counters
        decisions: int
        next_decision_offset: int
        track_history: bool
        history: dict[str, Any]
        focus: str | None
        focus_records: list[tuple[DecisionRecord, bytes | None, int]]
        event_time_us: int
        position: int
        configuration: Configuration
        _timestamp_ms: int
        _pods_reports: dict[int, tuple[str, bool]]

        def _anomaly(self, text: str) -> None: ...
        def _dequeue(self, wv: WorkloadView) -> None: ...
        def _reroute(self, wv: WorkloadView) -> None: ...
        def _target(self, wv: WorkloadView) -> str | None: ...
        def _remove_cluster_queue(self, cq: ClusterQueueView) -> None: ...
        @staticmethod
        def _unindex(index: dict[Any, dict[str, None]], key: Any, member: str) -> None: ...

    def _decide_all(self, records: list[DecisionRecord], cause_value: bytes | None) -> None:
        """Fold the decisions of one input event, in order."""
        self.decisions += len(records)
        by_kind = self.counters.by_kind
        history = self.history if self.track_history else None
        focus = self.focus
        handlers = _DECISIONS
        for rec in records:
            d = rec.decision
            kind = type(d)
            by_kind[kind] = by_kind.get(kind, 0) + 1
            if d is None:
                continue
            wl = d.workload
            if wl is not None:
                if history is not None:
                    hist = history.get(wl)
                    if hist is None:
                        history[wl] = [rec.offset, rec.cause_offset]
                    elif type(hist) is list:
                        hist += (rec.offset, rec.cause_offset)
                    else:  # settled (see _settle_history)
                        hist.append(rec.offset)
                        hist.append(rec.cause_offset)
                if wl == focus:
                    self.focus_records.append((rec, cause_value, self._timestamp_ms))
            handlers[kind](self, d, rec)
        self.next_decision_offset = records[-1].offset + 1

    def _workload_of(self, d: FoldDecision) -> WorkloadView | None:
        wv = self.workloads.get(d.workload or "")
        if wv is None:
            self._anomaly(f"{type(d).__name__} for unknown workload {d.workload} (input offset {self.position})")
        return wv

    def _qstats(self, wv: WorkloadView, cq: str) -> QueueStats:
        """Its metrics (kept on it while it holds quota in `cq`)."""
        s = wv.qstats
        if s is None or s.key[0] != cq:
            lq = wv.lq
            s = wv.qstats = self.counters.stats((cq, lq[0], lq[1], wv.priority_class or ""))
        return s

    def _on_reserve(self, d: Admitted | QuotaReserved, rec: DecisionRecord) -> None:
        wv = self.workloads.get(d.workload or "")
        if wv is None:
            self._workload_of(d)
            return
        admitted = type(d) is Admitted
        wait = (self.event_time_us - wv.waiting_since_us) / 1e6
        if wait < 0.0:
            wait = 0.0
        if wv.cluster_queue is not None:
            # Admitted after QuotaReserved: every admission check is Ready.
            if not admitted or wv.admitted or wv.evicted:
                self._anomaly(f"{type(d).__name__} for {wv.key}, which already holds quota")
                return
            cq = self.cluster_queues[wv.cluster_queue]
            cq.held[id(wv.usage)][2] += 1
            cq._totals = None
            cq.admitted += 1
            wv.admitted = True
            count_admission(self.lq_counts, wv, 1)
            self.lq_usage.admitted(wv.key, wv.lq, cq.spec, wv.usage, self.clock)
            s = self._qstats(wv, cq.name)
            self._observe_admission(s, wait)
            # Kueue's admission_checks_wait_time_seconds: from the quota reservation
            # (workload_controller.go, on the Admitted condition).
            now = self.event_time_us
            hist = s.admission_checks_wait
            if hist is None:
                hist = s.admission_checks_wait = self.counters.admission_checks_wait[s.key] = Histogram()
            hist.observe(max(0, now - wv.reserved_us) / 1e6)
            wv.admitted_us = now
            wv.ready_us, wv.pods_started = -1, False  # Kueue's PodsReady: WaitForStart
            self._count_cohort_admission(cq, wv)
            return
        cq = self.cluster_queues.get(d.clusterQueue)  # type: ignore[assignment]
        if cq is None:
            self._anomaly(f"{type(d).__name__} of {wv.key} in unknown ClusterQueue {d.clusterQueue}")
            return
        if wv.queued_in is not None:
            self._dequeue(wv)
        if wv.created_queue_time is not None:
            # A quota reservation resets the Retry that ordered it by its eviction's time.
            wv.queue_time, wv.created_queue_time = wv.created_queue_time, None
        usage = rec.usage
        if usage is None:  # (a record not made by decode_decision)
            usage = usage_of(d.podSetAssignments) or {}
        name = cq.name
        count(self.lq_counts, wv, -1)
        wv.cluster_queue = name
        wv.usage = usage
        wv.admitted = admitted
        wv.evicted = False
        count(self.lq_counts, wv, 1)
        wv.reason = wv.message = None
        wv.reserved_us = self.event_time_us
        cq.holders[wv.key] = None
        self.lq_usage.reserved(wv.key, wv.lq, cq.spec, usage, admitted, self.clock)
        held = cq.held.get(id(usage))
        if held is None:
            cq.held[id(usage)] = [usage, 1, 1 if admitted else 0]
        else:
            held[1] += 1
            if admitted:
                held[2] += 1
        cq._totals = None
        s = wv.qstats
        if s is None or s.key[0] != name:
            s = self._qstats(wv, name)
        s.quota_reserved += 1
        hist = s.quota_reserved_wait
        if hist is None:
            hist = s.quota_reserved_wait = self.counters.quota_reserved_wait[s.key] = Histogram()
        waiting = hist._waiting  # Histogram.observe, inline
        waiting.append(wait)
        if len(waiting) >= SETTLE_EVERY:
            hist._settle()
        if admitted:
            cq.admitted += 1
            s.admitted += 1
            wv.admitted_us = wv.reserved_us
            wv.ready_us, wv.pods_started = -1, False  # Kueue's PodsReady: WaitForStart
            if cq.spec.cohort is not None:
                self._count_cohort_admission(cq, wv)
            hist = s.admission_wait
            if hist is None:
                hist = s.admission_wait = self.counters.admission_wait[s.key] = Histogram()
            waiting = hist._waiting
            waiting.append(wait)
            if len(waiting) >= SETTLE_EVERY:
                hist._settle()

    def _count_cohort_admission(self, cq: ClusterQueueView, wv: WorkloadView) -> None:
        """Kueue's cohort_subtree_admitted_workloads_total: one for every cohort above the
        ClusterQueue (cohort_metrics.go ReportCohortSubtreeAdmittedWorkload); costs the depth."""
        chain = self._cohort_chains.get(cq.name)
        if chain is None:
            above: list[str] = []
            cohort = cq.spec.cohort
            while cohort is not None and len(above) <= len(self.cohorts):  # (the engine refuses cycles)
                above.append(cohort)
                spec = self.cohorts.get(cohort)
                cohort = spec.parent if spec is not None else None
            chain = self._cohort_chains[cq.name] = tuple(above)
        counts = self.counters.cohort_admitted
        pc = wv.priority_class or ""
        for cohort in chain:
            key = (cohort, pc)
            counts[key] = counts.get(key, 0) + 1

    def _observe_admission(self, s: QueueStats, wait: float) -> None:
        s.admitted += 1
        hist = s.admission_wait
        if hist is None:
            hist = s.admission_wait = self.counters.admission_wait[s.key] = Histogram()
        hist.observe(wait)

    def _unadmit(self, wv: WorkloadView) -> None:
        if not wv.admitted:
            return
        count_admission(self.lq_counts, wv, -1)
        cq = self.cluster_queues[wv.cluster_queue]  # type: ignore[index]
        cq.held[id(wv.usage)][2] -= 1
        cq._totals = None
        cq.admitted -= 1
        wv.admitted = False

    def _release(self, wv: WorkloadView) -> ClusterQueueView | None:
        if wv.cluster_queue is None:
            return None
        count(self.lq_counts, wv, -1)
        self.lq_usage.released(wv.key, wv.lq, self.clock)
        cq = self.cluster_queues[wv.cluster_queue]
        key = id(wv.usage)
        held = cq.held[key]
        held[1] -= 1
        if wv.admitted:
            held[2] -= 1
            cq.admitted -= 1
            wv.admitted = False
        if not held[1]:
            del cq.held[key]
        cq._totals = None
        cq.holders.pop(wv.key, None)
        wv.cluster_queue = None
        wv.usage = None
        wv.evicted = False
        count(self.lq_counts, wv, 1)
        if cq.terminating and not cq.holders:
            self._remove_cluster_queue(cq)
        return cq

    def _on_evict(self, d: Preempted | Evicted, rec: DecisionRecord) -> None:
        wv = self._workload_of(d)
        if wv is None:
            return
        if not wv.holding or wv.evicted:
            self._anomaly(f"{type(d).__name__} for {wv.key}, which holds no quota")
            return
        c = self.counters
        key = self._qstats(wv, wv.cluster_queue or "").key
        if type(d) is Preempted:
            reason, cause = "Preempted", ""
            preemptor = self.workloads.get(d.preemptor)
            preempting = None
            if preemptor is not None:
                preempting = self._target(preemptor)
                if preempting is None:
                    lq = self.local_queues.get(preemptor.lq)
                    preempting = lq.cluster_queue if lq is not None else None
            increment(c.preempted, (preempting or "", d.reason))
        else:
            reason, cause = d.reason, _underlying_cause(d, wv)
            # A check Rejected deactivates the workload (its input event, followed before its
            # decisions, did so here too): Kueue counts that eviction as Deactivated.
            if d.reason == reasons.ADMISSION_CHECK and not wv.active:
                reason, cause = reasons.EVICTED_DEACTIVATED, reasons.ADMISSION_CHECK
        increment(c.evicted, (key, reason, cause))
        now = self.event_time_us
        # Kueue's evict.Evict: evicted_workloads_once_total the first time a workload is evicted
        # for this reason and cause (its schedulingStats.evictions count was 0), and
        # pods_ready_to_evicted_time_seconds while its PodsReady condition is True.
        seen = (reason, cause)
        if seen not in wv.evictions:
            wv.evictions += (seen,)
            increment(c.evicted_once, (key[0], reason, cause, key[3]))
        if wv.ready_us >= 0:
            if self.configuration.pods_ready is not None:
                observe(c.pods_ready_to_evicted, (key[0], reason, cause), max(0, now - wv.ready_us) / 1e6)
        wv.ready_us, wv.pods_started = -1, False
        if wv.admitted:
            wv.ran_us += now - wv.admitted_us
        wv.evicted_us = now
        wv.evicted_reason = reason
        self.lq_usage.evicted(wv.key, self.clock)
        self._unadmit(wv)
        wv.evicted = True

    def _on_quota_released(self, d: QuotaReleased, rec: DecisionRecord) -> None:
        wv = self._workload_of(d)
        if wv is None:
            return
        evicted, cq_name = wv.evicted, wv.cluster_queue
        if self._release(wv) is None:
            self._anomaly(f"QuotaReleased for {wv.key}, which holds no quota")
        elif evicted:
            # Kueue's workload_eviction_latency_seconds: Evicted until back to pending
            # (workload.EvictionPendingLatency), clamped at 0 as Kueue does.
            latency = max(0, self.event_time_us - wv.evicted_us) / 1e6
            observe(self.counters.eviction_latency, (cq_name, wv.evicted_reason), latency)
        wv.waiting_since_us = self.event_time_us
        wv.reason = wv.message = None
        self._reroute(wv)

    def _on_finished(self, d: Finished, rec: DecisionRecord) -> None:
        key = d.workload or ""
        wv = self.workloads.get(key)
        if wv is None:
            self._workload_of(d)
            return
        if wv.cluster_queue is not None:
            s = wv.qstats
            if s is None or s.key[0] != wv.cluster_queue:
                s = self._qstats(wv, wv.cluster_queue)
            s.finished += 1
            if wv.admitted:
                # Kueue's execution_time_seconds (workload.TotalExecutionTime): the time admitted,
                # earlier admissions included; only for a workload admitted when it finishes.
                hist = s.execution_time
                if hist is None:
                    hist = s.execution_time = self.counters.execution_time[s.key] = Histogram()
                waiting = hist._waiting  # Histogram.observe, inline
                waiting.append(max(0, wv.ran_us + self.event_time_us - wv.admitted_us) / 1e6)
                if len(waiting) >= SETTLE_EVERY:
                    hist._settle()
        self._forget(wv)
        self._forget_finished(key)  # (finished before under the same name, never deleted)
        lq = self.finished[key] = wv.lq
        self.finished_by_lq[lq] = self.finished_by_lq.get(lq, 0) + 1
        hist = self.history.get(key)
        if type(hist) is list:  # _settle_history, inline
            self.history[key] = array("q", hist)

    def _on_deleted(self, d: Deleted, rec: DecisionRecord) -> None:
        key = d.workload or ""
        self._settle_history(key)
        if self._forget_finished(key):
            return
        wv = self._workload_of(d)
        if wv is not None:
            self._forget(wv)

    def _forget_finished(self, key: str) -> bool:
        lq = self.finished.pop(key, None)
        if lq is None:
            return False
        left = self.finished_by_lq[lq] - 1
        if left:
            self.finished_by_lq[lq] = left
        else:
            del self.finished_by_lq[lq]
        return True

    def _settle_history(self, key: str) -> None:
        """A workload's history is a list while it lives (cheap to append to) and an array of
        64-bit offsets once it is gone (a quarter of the memory; later decisions still append)."""
        hist = self.history.get(key)
        if type(hist) is list:
            self.history[key] = array("q", hist)

    def _forget(self, wv: WorkloadView) -> None:
        if wv.queued_in is not None:
            self._dequeue(wv)
        if wv.cluster_queue is not None:
            self._release(wv)
        count(self.lq_counts, wv, -1)
        key = wv.key
        del self.workloads[key]
        members = self.by_lq.get(wv.lq)
        if members is not None:
            members.pop(key, None)
            if not members:
                del self.by_lq[wv.lq]
        if wv.priority_class is not None:
            self._unindex(self.by_priority_class, wv.priority_class, key)

    def _on_pending(self, d: Pending, rec: DecisionRecord) -> None:
        wv = self.workloads.get(d.workload or "")
        if wv is None:
            self._workload_of(d)
            return
        wv.reason = d.reason
        wv.message = d.message

    def _on_rejected(self, d: Rejected, rec: DecisionRecord) -> None:
        increment(self.counters.rejected, d.reason)

    def _on_applied(self, d: Applied, rec: DecisionRecord) -> None:
        # Followed with its input event (fold.py, config_following.py), but for a PodsReady
        # report, which takes effect here, in the order of the decisions.
        reports = self._pods_reports
        if reports:
            report = reports.pop(id(d), None)
            if report is not None:
                self._pods_ready(*report)

    def _pods_ready(self, key: str, ready: bool) -> None:
        """A `WorkloadPodsReady` the engine applied: Kueue's PodsReady condition, as the job
        reconciler sets it (pkg/controller/jobframework/reconciler.go
        generatePodsReadyCondition). Its first start since admission reports
        ready_wait_time_seconds (from its creation or requeue, as admission_wait_time_seconds)
        and admitted_until_ready_wait_time_seconds (from its admission); a recovery reports
        nothing. Kueue keeps the condition only while waitForPodsReady is on."""
        wv = self.workloads.get(key)
        if wv is None or not wv.admitted or wv.evicted:
            self._anomaly(f"WorkloadPodsReady for {key}, which is not admitted (input offset {self.position})")
            return
        if not ready:
            wv.ready_us = -1  # lost: waits for recovery if it had started, else still for its start
            return
        if wv.ready_us >= 0:
            return  # ready already: the condition does not change
        now = wv.ready_us = self.event_time_us
        if wv.pods_started:
            return  # Kueue's WorkloadRecovered
        wv.pods_started = True
        if self.configuration.pods_ready is None:
            return
        s = self._qstats(wv, wv.cluster_queue or "")
        hist = s.ready_wait
        if hist is None:
            hist = s.ready_wait = self.counters.ready_wait[s.key] = Histogram()
        hist.observe(max(0, now - wv.waiting_since_us) / 1e6)
        hist = s.admitted_until_ready
        if hist is None:
            hist = s.admitted_until_ready = self.counters.admitted_until_ready[s.key] = Histogram()
        hist.observe(max(0, now - wv.admitted_us) / 1e6)


_DECISIONS: dict[type, Any] = {
    Admitted: DecisionHandlers._on_reserve,
    QuotaReserved: DecisionHandlers._on_reserve,
    Preempted: DecisionHandlers._on_evict,
    Evicted: DecisionHandlers._on_evict,
    QuotaReleased: DecisionHandlers._on_quota_released,
    Finished: DecisionHandlers._on_finished,
    Deleted: DecisionHandlers._on_deleted,
    Pending: DecisionHandlers._on_pending,
    Rejected: DecisionHandlers._on_rejected,
    Applied: DecisionHandlers._on_applied,
}


_MAX_EXECUTION_TIME_EXCEEDED = "MaximumExecutionTimeExceeded"  # kueue.WorkloadMaximumExecutionTimeExceeded
_REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"  # kueue.WorkloadRequeuingLimitExceeded
_WAIT_FOR_START = "WaitForStart"  # kueue.WorkloadWaitForStart
_WAIT_FOR_RECOVERY = "WaitForRecovery"  # kueue.WorkloadWaitForRecovery
# The deactivations of the time-driven rules, by their message: the cause Kueue labels them with
# (its WorkloadDeactivationTarget condition's reason, workload_controller.go).
_DEACTIVATION_CAUSES = {
    reasons.MSG_MAX_EXEC_EXCEEDED: _MAX_EXECUTION_TIME_EXCEEDED,
    reasons.MSG_REQUEUING_LIMIT_EXCEEDED: _REQUEUING_LIMIT_EXCEEDED,
}


def _underlying_cause(d: Evicted, wv: WorkloadView) -> str:
    """Kueue's underlying cause of an eviction: a PodsReady timeout waited for the pods' start
    or, once they had been ready, for their recovery (admittedNotReadyWorkload); a deactivation
    names the rule that deactivated it."""
    if d.reason == reasons.PODS_READY_TIMEOUT:
        return _WAIT_FOR_RECOVERY if wv.pods_started else _WAIT_FOR_START
    if d.reason == reasons.EVICTED_DEACTIVATED:
        return _DEACTIVATION_CAUSES.get(d.message, "")
    return ""
