"""The projection: a follower of the decision log, merged with the input log by cause offset.

`Projection.apply(offset, value, decisions, timestamp_ms)` folds input event `offset` together
with the decisions it caused (the decision log's records whose `cause.offset` is `offset`, in
index order). Everything the views show is kept here, incrementally; nothing re-runs the
scheduler, and nothing re-checks the input: what happened is the decision log's word.

- **Whether an input event took effect** is read from its decisions. The engine decides every
  input event (CONTRACT.md, "Every input event has an outcome"): a `Rejected` without
  `batchIndex` says the whole record changed nothing; inside a Batch, a `Rejected` with
  `batchIndex` i says the same of `events[i]`; every other event was applied, but for a
  producer's retry (an `id` already seen), which has no decision and is skipped as the engine
  skips it.
- **Configuration** follows the `Applied` decisions (created, updated, deleted); the object's
  content is read from the input event the decision names (config_following.py).
- **Workloads** are born from their accepted `WorkloadSubmitted` and changed by their accepted
  `WorkloadUpdated` and `AdmissionCheckStateChanged`: the decision log does not carry a spec, a
  priority or a queue time, so these are read from the input (workload_following.py).
- **Who holds quota**, who waits and why, and the counters come from the decisions alone
  (decision_handlers.py); where pending workloads wait, in the engine's order, is
  pending_queues.py; the view model and statistics are view_model.py and statistics.py.

The design keeps the input log as the one source of contents and the decision log as the one
source of outcomes: the decision log stays small (no object copied into it), and no engine rule
is repeated here, so a rule changes in one place. The fold shares with the engine only its
parsers (`parse_object`, `parse_workload`) and the pure helpers for what a decision does not
carry (`resolved_priority`, `retry_queue_time`, the log position `BATCH_SLOTS`).

A Rejected that stands in for a decision over the decision log's size limit (CONTRACT.md, input
limits) also has no `batchIndex`; the fold then takes its event as rejected, though the engine
applied it (the views lack that decision's content either way).

Time for metrics: the logs carry no wall clock except event `time` fields and record timestamps.
An event's time is its `time` (inner events of a Batch inherit the Batch's), else the input
record's timestamp (when the producer appended it). A workload waits from its creation
(`creationTimestamp`, else its submission event's time) or from its requeue (the event that
released its quota) until the event that admitted it.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from domain.envelope import BATCH_SLOTS
from domain.objects import (
    AdmissionCheckSpec,
    CohortSpec,
    Configuration,
    LocalQueueSpec,
    PodPriorityClass,
    ResourceFlavor,
)
from domain.timestamps import TimestampError, parse_time
from domain.workload_events import lookup
from projections.config_following import ConfigFollower
from projections.decision_handlers import DecisionHandlers
from projections.local_queue_counts import LocalQueueCounts
from projections.local_queue_usage import LocalQueueUsage
from projections.pending_queues import PendingQueues
from projections.records import FR as FR  # (re-exported, as DecisionRecord)
from projections.records import Applied, Rejected
from projections.records import DecisionRecord as DecisionRecord
from projections.statistics import (
    WAIT_BUCKETS as WAIT_BUCKETS,  # (re-exported, as the view model)
)
from projections.statistics import Counters
from projections.statistics import Histogram as Histogram
from projections.statistics import QueueKey as QueueKey
from projections.view_model import ClusterQueueView as ClusterQueueView
from projections.view_model import LQKey as LQKey
from projections.view_model import WorkloadView as WorkloadView
from projections.workload_decoding import envelope_decoder
from projections.workload_following import WorkloadFollower

_json = msgspec.json.Decoder()

_FAST_EVENTS = frozenset(("WorkloadSubmitted", "WorkloadFinished", "WorkloadDeleted", "WorkloadReleased"))
# What these change shows in their decisions (a Tick: evictions by timers).
_DECIDED_BY_DECISIONS = frozenset(("WorkloadFinished", "WorkloadDeleted", "WorkloadReleased", "Tick"))
_CONFIG_EVENTS = frozenset(("ConfigApplied", "ConfigDeleted"))


class Projection(ConfigFollower, WorkloadFollower, PendingQueues, DecisionHandlers):
    """The fold. Feed it `apply(...)` in input offset order; read the views from `projections.views`."""

    def __init__(self, *, history: bool = True, focus: str | None = None) -> None:
        # configuration, as the Applied decisions say
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cluster_queues: dict[str, ClusterQueueView] = {}
        self.cohorts: dict[str, CohortSpec] = {}  # explicit Cohort objects
        self.cohort_raw: dict[str, Mapping[str, Any]] = {}
        self.flavor_raw: dict[str, Mapping[str, Any]] = {}
        # (kind, namespace or "", name) -> when it was created, µs (config_following.py)
        self.config_created: dict[tuple[str, str, str], int] = {}
        self.local_queues: dict[LQKey, LocalQueueSpec] = {}
        self.priority_classes: dict[str, int] = {}
        self.pod_priority_classes: dict[str, PodPriorityClass] = {}
        self.admission_checks: dict[str, AdmissionCheckSpec] = {}
        self.namespaces: dict[str, dict[str, str]] = {}
        self.configuration = Configuration()
        self.lq_usage = LocalQueueUsage()  # admission fair sharing (projections/local_queue_usage.py)
        # workloads
        self.workloads: dict[str, WorkloadView] = {}
        self.finished: dict[str, LQKey] = {}  # finished, not deleted -> its LocalQueue
        self.finished_by_lq: dict[LQKey, int] = {}  # (Kueue's finished_workloads gauges)
        self.by_lq: dict[LQKey, dict[str, None]] = {}
        self.lq_counts: dict[LQKey, LocalQueueCounts] = {}  # (projections/local_queue_counts.py)
        self.by_priority_class: dict[str, dict[str, None]] = {}
        # LocalQueue -> OrderKeys of its workloads queued in its ClusterQueue (kept apart from the
        # LocalQueue object, which may be deleted and applied again)
        self.lq_pending: dict[LQKey, Any] = {}
        # the envelope of applied events: ids seen (to skip a producer's retry) and the clock
        self.seen_ids: set[str] = set()
        self.clock = 0  # latest `time` (µs) of an applied event, as the engine keeps it
        self.event_time_us = 0  # the time of the latest event (its `time`, else its record's)
        # progress
        self.position = -1  # last folded input offset
        self.next_decision_offset = 0  # decision log offset after the last folded decision
        self.events = 0
        self.decisions = 0
        self.counters = Counters()
        self.anomalies: list[str] = []  # decisions that do not fit the fold (should stay empty)
        # history: workload -> [decision log offset, cause offset, ...] (see _settle_history)
        self.track_history = history
        self.history: dict[str, list[int] | array[int]] = {}
        # one workload's history with the records themselves (CLI history/explain)
        self.focus = focus
        self.focus_records: list[tuple[DecisionRecord, bytes | None, int]] = []
        # per-event context
        self._event_time: int | None = None
        self._outcomes: dict[int | None, Applied | Rejected] = _NO_OUTCOMES
        self._timestamp_ms = 0
        self._dirty: dict[str, None] = {}  # workloads to (re)queue at the end of the event
        # id(Applied decision of a WorkloadPodsReady) -> (workload, ready): the report takes
        # effect where its Applied is in the decisions (after an admission the same record's
        # timers and cycle made first, before a preemption its cycle makes after)
        self._pods_reports: dict[int, tuple[str, bool]] = {}
        self._top_time: int | None = None
        # ClusterQueue -> the cohorts above it, for counting admissions per cohort subtree;
        # forgotten at every configuration change
        self._cohort_chains: dict[str, tuple[str, ...]] = {}

    # ------------------------------------------------------------------------------------------
    # the fold
    # ------------------------------------------------------------------------------------------
    def apply(
        self,
        offset: int,
        value: bytes | None,
        decisions: Iterable[DecisionRecord] = (),
        timestamp_ms: int = 0,
    ) -> None:
        """Fold input event `offset` and then the decisions it caused."""
        if type(decisions) is not list:
            decisions = list(decisions)
        self.position = offset
        self.events += 1
        record_time = timestamp_ms * 1000
        self.event_time_us = record_time
        # The outcomes of the event itself (of its inner events by batchIndex; None: the record).
        outcomes: dict[int | None, Applied | Rejected] = _NO_OUTCOMES
        for d in decisions:
            dec = d.decision
            kind = type(dec)
            if kind is Applied or kind is Rejected:
                if outcomes is _NO_OUTCOMES:
                    outcomes = {}
                outcomes[dec.batchIndex] = dec  # type: ignore[union-attr]
        self._outcomes = outcomes
        if value and type(outcomes.get(None)) is not Rejected:
            self._top_time = None
            self._follow_record(value, offset * BATCH_SLOTS, record_time)
            # Decisions are caused by the top-level event (a whole Batch): they happen at its time.
            self.event_time_us = self._top_time if self._top_time is not None else record_time
        if decisions:
            self._timestamp_ms = timestamp_ms
            self._decide_all(decisions, value)
        if self._dirty:
            self._route_dirty()
        if self._pods_reports:
            for key, _ in self._pods_reports.values():
                self._anomaly(f"input offset {offset}: WorkloadPodsReady of {key} without its Applied decision")
            self._pods_reports.clear()
        if decisions:
            self._event_decided(decisions)

    def _event_decided(self, decisions: list[DecisionRecord]) -> None:
        """Called once an input event and all its decisions are folded, with those decisions: a
        follower that acts on decisions (the launcher) reads the fold as it stands after the
        whole step. The views need nothing here."""

    def _follow_record(self, value: bytes, seq: int, record_time: int) -> None:
        """An input record the engine did not reject as a whole."""
        try:
            env = envelope_decoder.decode(value)
        except (msgspec.DecodeError, UnicodeDecodeError):
            env = None  # fields of other types than the envelope's: read as a dict
        if env is not None and env.type in _FAST_EVENTS and (env.id is None or type(env.id) is str):
            self._workload_event(env, value, seq, record_time)
            return
        try:
            raw = _json.decode(value)
        except (msgspec.DecodeError, UnicodeDecodeError):
            return
        if type(raw) is dict:
            self._follow(raw, seq, record_time, None)

    def _follow(self, raw: Mapping[str, Any], seq: int, record_time: int, index: int | None) -> None:
        """One event that was applied, or a producer's retry (the `index`-th of its Batch, or
        the top-level event when None)."""
        event_id = raw.get("id")
        if not self._stamp(event_id, raw.get("time"), record_time, index is None):
            return  # a producer's retry
        etype = raw.get("type")
        if etype == "Batch":
            self._remember(event_id)
            batch_time = self._event_time
            events = raw.get("events")
            for i, inner in enumerate(events if isinstance(events, list) else ()):
                self._event_time = batch_time
                if isinstance(inner, Mapping) and type(self._outcomes.get(i)) is not Rejected:
                    self._follow(inner, seq + i, record_time, i)
            return
        if etype in _CONFIG_EVENTS:
            applied = self._outcomes.get(index)
            if type(applied) is not Applied:
                self._anomaly(f"input offset {self.position}: {etype} applied without an Applied decision")
                return
            self._cohort_chains = {}
            self._follow_config(raw, applied)  # type: ignore[arg-type]
        elif etype == "WorkloadSubmitted":
            self._workload_submitted(raw, seq, index is None)
        elif etype == "WorkloadUpdated":
            self._workload_updated(raw, seq, index is None)
        elif etype == "AdmissionCheckStateChanged":
            self._admission_check_state(raw, seq, index is None)
        elif etype == "WorkloadPodsReady":
            applied = self._outcomes.get(index)
            if type(applied) is not Applied:
                self._anomaly(f"input offset {self.position}: WorkloadPodsReady applied without an Applied decision")
                return
            self._pods_reports[id(applied)] = (lookup(raw), raw.get("ready", True) is not False)
        elif etype not in _DECIDED_BY_DECISIONS:
            self._anomaly(f"input offset {self.position}: event type {etype!r} applied by the engine")
            return
        self._remember(event_id)

    def _stamp(self, event_id: Any, time: Any, record_time: int, top_level: bool) -> bool:
        """The envelope's time, as the engine reads it; False: a producer's retry."""
        if isinstance(event_id, str) and event_id in self.seen_ids:
            return False
        if time is not None or (top_level and record_time > 0):
            try:
                # Its own time, else the record's log time when the log keeps one (domain/clock.py).
                self._event_time = parse_time(time) if time is not None else record_time
            except TimestampError:
                self._anomaly(f"input offset {self.position}: applied by the engine, its time unreadable")
                self._event_time = None
            else:
                if self._event_time > self.clock:
                    self.clock = self._event_time
            if top_level:
                self._top_time = self._event_time
        elif top_level:
            self._event_time = None
        self.event_time_us = self._event_time if self._event_time is not None else record_time
        return True

    def _remember(self, event_id: Any) -> None:
        if isinstance(event_id, str):
            self.seen_ids.add(event_id)

    def _anomaly(self, text: str) -> None:
        if len(self.anomalies) < 100:
            self.anomalies.append(text)

    # ------------------------------------------------------------------------------------------
    # reading
    # ------------------------------------------------------------------------------------------
    def position_of(self, key: str) -> tuple[int, int] | None:
        """(positionInClusterQueue, positionInLocalQueue) of a queued workload."""
        wv = self.workloads.get(key)
        if wv is None or wv.queued_in is None:
            return None
        order = wv.order_key
        return (
            int(self.cluster_queues[wv.queued_in].pending.index(order)),
            int(self.lq_pending[wv.lq].index(order)),
        )

    def cohort_members(self) -> dict[str, list[str]]:
        """cohort -> its ClusterQueues (name order), for every cohort some ClusterQueue names."""
        out: dict[str, list[str]] = {}
        for name in sorted(self.cluster_queues):
            cohort = self.cluster_queues[name].spec.cohort
            if cohort is not None:
                out.setdefault(cohort, []).append(name)
        return out

    def cohort_names(self) -> list[str]:
        names = set(self.cohorts)
        names.update(self.cohort_members())
        for spec in self.cohorts.values():
            if spec.parent is not None:
                names.add(spec.parent)
        return sorted(names)

    def state_dict(self) -> dict[str, Any]:
        """Everything the fold holds, as plain data in a canonical order: two projections of the
        same logs (a live one and a rebuild) must give equal dicts."""

        def usage(m: Mapping[FR, int]) -> list[Any]:
            return sorted([f, r, v] for (f, r), v in m.items())

        def hist(h: Histogram) -> list[Any]:
            return [list(h.buckets), h.count, round(h.sum, 6)]

        c = self.counters
        return {
            "position": self.position,
            "next_decision_offset": self.next_decision_offset,
            "events": self.events,
            "decisions": self.decisions,
            "clock": self.clock,
            "event_time_us": self.event_time_us,
            "seen_ids": sorted(self.seen_ids),
            "flavors": sorted(self.flavors),
            "config_created": sorted([*k, v] for k, v in self.config_created.items()),
            "cluster_queues": {
                n: {
                    "spec": repr(cq.spec),
                    "terminating": cq.terminating,
                    "reservation": usage(cq.reservation),
                    "usage": usage(cq.usage),
                    "holders": sorted(cq.holders),
                    "admitted": cq.admitted,
                    "pending": list(cq.pending),
                }
                for n, cq in sorted(self.cluster_queues.items())
            },
            "cohorts": {n: repr(s) for n, s in sorted(self.cohorts.items())},
            "local_queues": {f"{k[0]}/{k[1]}": repr(v) for k, v in sorted(self.local_queues.items())},
            "lq_pending": {f"{k[0]}/{k[1]}": list(v) for k, v in sorted(self.lq_pending.items())},
            "priority_classes": dict(sorted(self.priority_classes.items())),
            "admission_checks": sorted(self.admission_checks),
            "namespaces": {k: sorted(v.items()) for k, v in sorted(self.namespaces.items())},
            "configuration": repr(self.configuration),
            "workloads": {
                k: [
                    repr(w.spec), w.seq, w.queue_time, w.priority, w.created_us, w.waiting_since_us,
                    w.active, w.cluster_queue, usage(w.usage or {}), w.admitted, w.evicted,
                    w.reason, w.message, w.queued_in,
                    w.reserved_us, w.admitted_us, w.ran_us, w.evicted_us, w.evicted_reason,
                    w.ready_us, w.pods_started, list(w.evictions),
                ]
                for k, w in sorted(self.workloads.items())
            },
            "finished": sorted(self.finished.items()),
            "finished_by_lq": sorted(self.finished_by_lq.items()),
            "by_lq": {f"{k[0]}/{k[1]}": sorted(v) for k, v in sorted(self.by_lq.items())},
            "lq_counts": {
                f"{k[0]}/{k[1]}": [c.pending, c.reserving, c.admitted, usage(c.reservation), usage(c.usage)]
                for k, c in sorted(self.lq_counts.items())
            },
            "by_priority_class": {k: sorted(v) for k, v in sorted(self.by_priority_class.items())},
            "counters": {
                "admitted": sorted(c.admitted.items()),
                "quota_reserved": sorted(c.quota_reserved.items()),
                "finished": sorted(c.finished.items()),
                "evicted": sorted(c.evicted.items()),
                "preempted": sorted(c.preempted.items()),
                "admission_wait": sorted((k, hist(h)) for k, h in c.admission_wait.items()),
                "quota_reserved_wait": sorted((k, hist(h)) for k, h in c.quota_reserved_wait.items()),
                "admission_checks_wait": sorted((k, hist(h)) for k, h in c.admission_checks_wait.items()),
                "execution_time": sorted((k, hist(h)) for k, h in c.execution_time.items()),
                "eviction_latency": sorted((k, hist(h)) for k, h in c.eviction_latency.items()),
                "ready_wait": sorted((k, hist(h)) for k, h in c.ready_wait.items()),
                "admitted_until_ready": sorted((k, hist(h)) for k, h in c.admitted_until_ready.items()),
                "pods_ready_to_evicted": sorted((k, hist(h)) for k, h in c.pods_ready_to_evicted.items()),
                "evicted_once": sorted(c.evicted_once.items()),
                "cohort_admitted": sorted(c.cohort_admitted.items()),
                "rejected": sorted(c.rejected.items()),
                "decisions": sorted(c.decisions.items()),
            },
            "history": {k: list(v) for k, v in sorted(self.history.items())},
            "anomalies": list(self.anomalies),
        }


_NO_OUTCOMES: dict[int | None, Applied | Rejected] = {}  # (shared while an event has none: never written)
