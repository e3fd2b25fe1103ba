"""The projection: a fold over the input log and the decision log, merged by cause offset.

`Projection.apply(offset, value, decisions, timestamp_ms)` folds input event `offset` together
with the decisions it caused (the decision log's records whose `cause.offset` is `offset`, in
index order). Everything the views show is kept here, incrementally, and nothing re-runs the
scheduler:

- **configuration** comes from the input log: `ConfigApplied` / `ConfigDeleted`, parsed with
  the engine's own parsers (`domain.objects.parse_object`), so quotas, LocalQueue -> ClusterQueue,
  cohorts and priority classes mean exactly what they mean to the engine;
- **workloads** are born from `WorkloadSubmitted` (parsed with `domain.workload.parse_workload`)
  and changed by `WorkloadUpdated` and `AdmissionCheckStateChanged` (Retry requeues by eviction
  time, Rejected deactivates), as the engine changes them;
- **who holds quota** comes from the decisions only: `Admitted` / `QuotaReserved` -> holds its
  `resourceUsage` in `clusterQueue`; `Preempted` / `Evicted` -> no longer admitted, still holding;
  `QuotaReleased`, `Finished`, `Deleted` -> releases. `Pending` carries the reason.

Whether an input event was applied at all is also read from the decisions: an invalid event gets
a `Rejected` decision and changes nothing, and every rejection names its event by `cause`. Inside
a `Batch` one `Rejected` names only the Batch, so for inner events the fold checks what the engine
checks before it changes anything (parsing, unknown or duplicate workloads, immutable fields,
missing priority classes, cohort cycles); the one engine check it does not repeat (YuniKorn's
child-max rule) is taken from the `Rejected` decision naming the object.

Pending order is the engine's, and Kueue's: higher priority first, then earlier queue time
(`creationTimestamp`, else the event `time`, else the latest event time in the log; an admission
check `Retry` moves it to the eviction time), then log position, then `namespace/name`. A pending
workload waits in its ClusterQueue's queue when it is active, its LocalQueue exists and is not
stopped, and the ClusterQueue exists and is not being deleted -- exactly when the engine queues it
there. Positions are indexes in each queue's order, which is sorted when first read and then kept
sorted (see `PendingOrder`).

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

from domain import reasons
from domain.admission_fair_sharing import USAGE_BASED
from domain.fields import InvalidInput
from domain.objects import (
    STOP_NONE,
    AdmissionCheckSpec,
    ClusterQueueSpec,
    CohortSpec,
    Configuration,
    LocalQueueSpec,
    NamespaceSpec,
    PodPriorityClass,
    ResourceFlavor,
    WorkloadPriorityClass,
    parse_object,
)
from domain.priority import apply_pod_priority_class, defaulted, priority_of
from domain.timestamps import TimestampError, parse_time
from domain.workload import WorkloadSpec, parse_workload
from projections.local_queue_usage import LocalQueueUsage
from projections.records import FR as FR  # (re-exported, as DecisionRecord)
from projections.records import (
    Admitted,
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
from projections.records import DecisionRecord as DecisionRecord
from projections.statistics import SETTLE_EVERY, Counters, QueueStats, increment
from projections.statistics import (
    WAIT_BUCKETS as WAIT_BUCKETS,  # (re-exported, as the view model)
)
from projections.statistics import Histogram as Histogram
from projections.statistics import QueueKey as QueueKey
from projections.view_model import ClusterQueueView as ClusterQueueView
from projections.view_model import LQKey as LQKey
from projections.view_model import OrderKey
from projections.view_model import PendingOrder
from projections.view_model import WorkloadView as WorkloadView
from projections.workload_decoding import (
    Envelope,
    envelope_decoder,
    parse_accepted,
    stamp_of,
)

BATCH_SLOTS = 1 << 16  # as domain.engine: an inner event's log position is offset * 2^16 + i

_json = msgspec.json.Decoder()

_FAST_EVENTS = frozenset(("WorkloadSubmitted", "WorkloadFinished", "WorkloadDeleted", "WorkloadReleased"))


class _Reject(Exception):
    """The engine would reject this (inner) event: it changes nothing."""




class Projection:
    """The fold. Feed it `apply(...)` in input offset order; read the views from `projections.views`."""

    def __init__(self, *, history: bool = True, focus: str | None = None) -> None:
        # configuration, from the input log
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cluster_queues: dict[str, ClusterQueueView] = {}
        self.cohorts: dict[str, CohortSpec] = {}  # explicit Cohort objects
        self.cohort_raw: dict[str, Mapping[str, Any]] = {}
        self.local_queues: dict[LQKey, LocalQueueSpec] = {}
        self.priority_classes: dict[str, int] = {}
        self.pod_priority_classes: dict[str, PodPriorityClass] = {}
        self.admission_checks: dict[str, AdmissionCheckSpec] = {}
        self.namespaces: dict[str, dict[str, str]] = {}
        self.configuration = Configuration()
        self.lq_usage = LocalQueueUsage()  # admission fair sharing (projections/local_queue_usage.py)
        # workloads
        self.workloads: dict[str, WorkloadView] = {}
        self.finished: dict[str, None] = {}
        self.by_lq: dict[LQKey, dict[str, None]] = {}
        self.by_priority_class: dict[str, dict[str, None]] = {}
        # LocalQueue -> OrderKeys of its workloads queued in its ClusterQueue (kept apart from the
        # LocalQueue object, which may be deleted and applied again)
        self.lq_pending: dict[LQKey, Any] = {}
        # the engine's envelope bookkeeping, mirrored
        self.seen_ids: set[str] = set()
        self.clock = 0  # latest event `time` (µs), as the engine keeps it
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
        self._rejections: list[Rejected] = []
        self._evictions: dict[str, int] = {}
        self._timestamp_ms = 0
        self._dirty: dict[str, None] = {}  # workloads to (re)queue at the end of the event
        self._top_time: int | None = None

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
        # Shared empty ones unless this event has some: neither is written to when empty.
        rejections: list[Rejected] = _NO_REJECTIONS
        evictions: dict[str, int] = _NO_EVICTIONS
        for d in decisions:
            dec = d.decision
            kind = type(dec)
            if kind not in _SPECIAL:
                continue
            if kind is Rejected:
                if rejections is _NO_REJECTIONS:
                    rejections = []
                rejections.append(dec)  # type: ignore[arg-type]
            elif kind is Evicted and dec.reason == reasons.ADMISSION_CHECK and dec.workload:  # type: ignore[union-attr]
                if evictions is _NO_EVICTIONS:
                    evictions = {}
                evictions[dec.workload] = evictions.get(dec.workload, 0) + 1  # type: ignore[union-attr]
        self._rejections = rejections
        self._evictions = evictions
        if value:
            self._top_time = None
            try:
                env = envelope_decoder.decode(value)
            except (msgspec.DecodeError, UnicodeDecodeError):
                env = None  # not a JSON object (the engine rejected it), or fields of other types
            try:
                if env is not None and env.type in _FAST_EVENTS:
                    self._workload_event(env, value, offset * BATCH_SLOTS, record_time)
                else:
                    try:
                        raw = _json.decode(value)
                    except (msgspec.DecodeError, UnicodeDecodeError):
                        raw = None  # not JSON: the engine rejected it
                    if type(raw) is dict:
                        self._dispatch(raw, offset * BATCH_SLOTS, record_time, top_level=True)
            except _Reject:
                pass
            # Decisions are caused by the top-level event (a whole Batch): they happen at its time.
            self.event_time_us = self._top_time if self._top_time is not None else record_time
        if decisions:
            self._timestamp_ms = timestamp_ms
            self._decide_all(decisions, value)
        if self._dirty:
            self._route_dirty()

    def _workload_event(self, env: Envelope, value: bytes, seq: int, record_time: int) -> None:
        """`_dispatch` of a top-level workload event, read from its envelope alone."""
        event_id = env.id
        if event_id is not None:
            if type(event_id) is not str:
                raise _Reject
            if event_id in self.seen_ids:
                return  # a producer's retry
        time = env.time
        if time is not None:
            try:
                t = self._event_time = parse_time(time)
            except TimestampError:
                raise _Reject from None
            if t > self.clock:
                self.clock = t
            self._top_time = t
            self.event_time_us = t
        else:
            self._event_time = None
            self.event_time_us = record_time
        if self._rejections:
            raise _Reject  # the engine said so (see _dispatch)
        if env.type == "WorkloadSubmitted":
            try:
                doc = env.workload
                stamp = stamp_of(doc, value, True) if doc is not None else None
                if stamp is None:
                    self._submit(parse_accepted(_json.decode(value).get("workload")), None, None, None, seq)
                else:
                    self._submit(stamp[0], stamp[1], stamp[2], stamp[3], seq)
            except InvalidInput:
                self._anomaly(f"input offset {self.position}: accepted by the engine, invalid to the fold")
                raise _Reject from None
            except _Reject:
                self._anomaly(f"input offset {self.position}: accepted by the engine, rejected by the fold")
                raise
        # else: decided by its decisions (_DECIDED_BY_DECISIONS)
        if event_id is not None:
            self.seen_ids.add(event_id)

    def _stamp(self, event_id: Any, time: Any, record_time: int, top_level: bool) -> bool:
        """The envelope's id and time, as the engine reads them first; False: a retried id."""
        if event_id is not None:
            if not isinstance(event_id, str):
                raise _Reject
            if event_id in self.seen_ids:
                return False  # a producer's retry
        if time is not None:
            try:
                self._event_time = parse_time(time)
            except TimestampError:
                raise _Reject from None
            if self._event_time > self.clock:
                self.clock = self._event_time
            if top_level:
                self._top_time = self._event_time
        elif top_level:
            self._event_time = None
        self.event_time_us = self._event_time if self._event_time is not None else record_time
        return True

    def _dispatch(self, raw: Mapping[str, Any], seq: int, record_time: int, top_level: bool) -> None:
        etype = raw.get("type")
        event_id = raw.get("id")
        if not self._stamp(event_id, raw.get("time"), record_time, top_level):
            return
        if etype == "Batch":
            if not top_level:
                raise _Reject
            events = raw.get("events")
            if events is None:
                events = []
            if not isinstance(events, (list, tuple)):
                raise _Reject
            if event_id is not None:
                self.seen_ids.add(event_id)
            batch_time = self._event_time
            for i, inner in enumerate(events):
                self._event_time = batch_time
                if not isinstance(inner, Mapping):
                    continue
                try:
                    self._dispatch(inner, seq + i, record_time, top_level=False)
                except _Reject:
                    pass
            return
        handler = _HANDLERS.get(etype) if isinstance(etype, str) else None
        if handler is None:
            raise _Reject
        if top_level:
            if self._rejections:
                # The engine said so: a Rejected decision for a plain event means it changed nothing.
                raise _Reject
            if etype in _DECIDED_BY_DECISIONS:
                # Accepted: its effect (a release, a finish, a deletion) is in its decisions.
                if event_id is not None:
                    self.seen_ids.add(event_id)
                return
        try:
            handler(self, raw, seq, top_level)
        except InvalidInput:
            if top_level:
                self._anomaly(f"input offset {self.position}: accepted by the engine, invalid to the fold")
            raise _Reject from None
        except _Reject:
            if top_level:
                self._anomaly(f"input offset {self.position}: accepted by the engine, rejected by the fold")
            raise
        if event_id is not None:
            self.seen_ids.add(event_id)

    def _anomaly(self, text: str) -> None:
        if len(self.anomalies) < 100:
            self.anomalies.append(text)

    # -- configuration ---------------------------------------------------------------------------
    def _config_applied(self, raw: Mapping[str, Any], seq: int, top_level: bool) -> None:
        raw_object = raw.get("object")
        obj = parse_object(raw_object)
        assert isinstance(raw_object, Mapping)
        if isinstance(obj, ResourceFlavor):
            self.flavors[obj.name] = obj
        elif isinstance(obj, ClusterQueueSpec):
            if obj.yunikorn_rules and not top_level:
                self._rejected_by_name("ClusterQueue", obj.name)
            self._apply_cluster_queue(obj, raw_object)
        elif isinstance(obj, LocalQueueSpec):
            key = (obj.namespace, obj.name)
            old = self.local_queues.get(key)
            if old is not None and old.cluster_queue != obj.cluster_queue:
                raise _Reject
            self.local_queues[key] = obj
            self.lq_usage.local_queue_applied(key, self.clock)
            if old is None or old.stop_policy != obj.stop_policy:
                self._reroute_lq(key)
        elif isinstance(obj, CohortSpec):
            if self._would_cycle(obj.name, obj.parent):
                raise _Reject
            if obj.yunikorn_rules and not top_level:
                self._rejected_by_name("Cohort", obj.name)
            self.cohorts[obj.name] = obj
            self.cohort_raw[obj.name] = raw_object
        elif isinstance(obj, WorkloadPriorityClass):
            self.priority_classes[obj.name] = obj.value
            for wl in list(self.by_priority_class.get(obj.name, {})):
                wv = self.workloads[wl]
                if wv.spec.priority is None and wv.priority != obj.value:
                    self._dequeue(wv)
                    wv.priority = obj.value
                    self._reroute(wv)
        elif isinstance(obj, AdmissionCheckSpec):
            self.admission_checks[obj.name] = obj
        elif isinstance(obj, PodPriorityClass):
            try:
                apply_pod_priority_class(self.pod_priority_classes, obj)
            except InvalidInput:
                raise _Reject from None
        elif isinstance(obj, NamespaceSpec):
            self.namespaces[obj.name] = dict(obj.labels)
        elif isinstance(obj, Configuration):
            self.configuration = obj
            self.lq_usage.configuration(obj, list(self.local_queues), self.clock)
            for cq in self.cluster_queues.values():
                self._fair_order(cq)

    def _rejected_by_name(self, kind: str, name: str) -> None:
        needle = f"{kind} {name}: "
        for i, rej in enumerate(self._rejections):
            if rej.message.startswith("ConfigApplied: ") and needle in rej.message:
                del self._rejections[i]
                raise _Reject

    def _would_cycle(self, name: str, parent: str | None) -> bool:
        seen = {name}
        current = parent
        while current is not None:
            if current in seen:
                return True
            seen.add(current)
            cohort = self.cohorts.get(current)
            if cohort is None:
                return False
            current = cohort.parent
        return False

    def _apply_cluster_queue(self, spec: ClusterQueueSpec, raw_object: Mapping[str, Any]) -> None:
        cq = self.cluster_queues.get(spec.name)
        if cq is None:
            cq = ClusterQueueView(spec.name, spec, raw_object, spec.quotas())
            self.cluster_queues[spec.name] = cq
            self._fair_order(cq)
            self._reroute_cq(spec.name)
        else:
            cq.spec = spec
            cq.raw = raw_object
            cq.quotas = spec.quotas()
            cq.terminating = False
            self._fair_order(cq)

    def _fair_order(self, cq: ClusterQueueView) -> None:
        """Order cq's pending workloads by LocalQueue usage first where the engine does."""
        fair = self.lq_usage.enabled and cq.spec.admission_mode == USAGE_BASED
        if fair != (cq.pending.rank is not None):
            cq.pending.set_rank(self._usage_rank if fair else None)

    def _usage_rank(self, key: OrderKey) -> Any:
        lq = self.workloads[key[3]].lq
        spec = self.local_queues.get(lq)
        return self.lq_usage.rank(lq, 1000 if spec is None else spec.fair_weight, self.clock)

    def _config_deleted(self, raw: Mapping[str, Any], seq: int, top_level: bool) -> None:
        kind = raw.get("kind")
        name = raw.get("name")
        if not isinstance(kind, str) or not isinstance(name, str):
            raise _Reject
        if kind == "ClusterQueue":
            cq = self.cluster_queues.get(name)
            if cq is None or cq.terminating:
                raise _Reject
            cq.terminating = True  # it lingers, inactive, while workloads hold its quota
            if not cq.holders:
                self._remove_cluster_queue(cq)
        elif kind == "LocalQueue":
            namespace = raw.get("namespace")
            if namespace is None:
                namespace = "default"
            if not isinstance(namespace, str):
                raise _Reject
            key = (namespace, name)
            if self.local_queues.pop(key, None) is None:
                raise _Reject
            self.lq_usage.local_queue_deleted(key)
            self._reroute_lq(key)
        elif kind == "ResourceFlavor":
            if self.flavors.pop(name, None) is None:
                raise _Reject
        elif kind == "Cohort":
            if self.cohorts.pop(name, None) is None:
                raise _Reject
            self.cohort_raw.pop(name, None)
        elif kind == "WorkloadPriorityClass":
            if self.priority_classes.pop(name, None) is None:
                raise _Reject
        elif kind == "AdmissionCheck":
            if self.admission_checks.pop(name, None) is None:
                raise _Reject
        elif kind == "Namespace":
            if self.namespaces.pop(name, None) is None:
                raise _Reject
        elif kind == "PriorityClass":
            if self.pod_priority_classes.pop(name, None) is None:
                raise _Reject
        elif kind == "Configuration":
            self.configuration = Configuration()
            self.lq_usage.configuration(self.configuration, list(self.local_queues), self.clock)
            for cq in self.cluster_queues.values():
                self._fair_order(cq)
        else:
            raise _Reject

    def _remove_cluster_queue(self, cq: ClusterQueueView) -> None:
        # The workloads that waited in it now wait for a ClusterQueue that does not exist (taken out
        # now, so that a ClusterQueue applied again in the same event starts empty).
        waiting = [self.workloads[order[3]] for order in cq.pending]
        for wv in waiting:
            self._dequeue(wv)
        self.cluster_queues.pop(cq.name, None)
        for wv in waiting:
            self._reroute(wv)

    # -- workloads -------------------------------------------------------------------------------
    def _defaulted(self, spec: WorkloadSpec) -> WorkloadSpec:
        return defaulted(spec, self.priority_classes, self.configuration.workload_priority_class_defaulting)

    def _priority_of(self, spec: WorkloadSpec) -> int:
        """The engine's (domain/priority.py)."""
        try:
            return priority_of(spec, self.priority_classes, self.pod_priority_classes)
        except InvalidInput:
            raise _Reject from None

    def _workload_submitted(self, raw: Mapping[str, Any], seq: int, top_level: bool) -> None:
        spec = parse_accepted(raw.get("workload")) if top_level else parse_workload(raw.get("workload"))
        self._submit(spec, None, None, None, seq)

    def _submit(self, template: WorkloadSpec, name: str | None, creation: int | None, uid: str | None, seq: int) -> None:
        """A new workload: `template` with this name, creation time and uid (name None:
        `template` is its whole spec)."""
        namespace = template.namespace
        if name is None:
            key = f"{namespace}/{template.name}"
            creation = template.creation_time
        else:
            key = f"{namespace}/{name}"
        workloads = self.workloads
        if key in workloads or key in self.finished:
            raise _Reject
        template = self._defaulted(template)
        pc = template.priority_class
        priority = template.priority
        if priority is None:
            priority = self._priority_of(template)
        queue_time = creation
        if queue_time is None:
            queue_time = self._event_time if self._event_time is not None else self.clock
        created = creation if creation is not None else self.event_time_us
        lq = (namespace, template.queue_name)
        workloads[key] = WorkloadView(
            key, template, name, creation, uid, lq, pc, seq, queue_time, priority, created, created, template.active,
        )
        members = self.by_lq.get(lq)
        if members is None:
            members = self.by_lq[lq] = {}
        members[key] = None
        if pc is not None:
            self.by_priority_class.setdefault(pc, {})[key] = None
        self._dirty[key] = None  # queued once this event's decisions are folded (see _reroute)

    def _workload_updated(self, raw: Mapping[str, Any], seq: int, top_level: bool) -> None:
        spec = self._defaulted(parse_workload(raw.get("workload")))
        wv = self.workloads.get(spec.key)
        if wv is None:
            raise _Reject
        old = wv.spec
        if spec.pod_sets != old.pod_sets:
            raise _Reject
        if spec.queue_name != old.queue_name and wv.holding:
            raise _Reject
        priority = self._priority_of(spec)
        kept = WorkloadSpec(
            spec.namespace, spec.name, spec.queue_name, spec.priority, spec.priority_class,
            spec.active, spec.labels, old.creation_time if spec.creation_time is None else spec.creation_time,
            old.pod_sets, old.uid, pod_priority_class=spec.pod_priority_class,
        )
        self._dequeue(wv)
        if (old.namespace, old.queue_name) != (kept.namespace, kept.queue_name):
            self._unindex(self.by_lq, wv.lq, wv.key)
            self.by_lq.setdefault((kept.namespace, kept.queue_name), {})[wv.key] = None
        if old.priority_class != kept.priority_class:
            if old.priority_class is not None:
                self._unindex(self.by_priority_class, old.priority_class, wv.key)
            if kept.priority_class is not None:
                self.by_priority_class.setdefault(kept.priority_class, {})[wv.key] = None
        wv.spec = kept
        if kept.creation_time is not None:
            wv.queue_time = kept.creation_time
        wv.priority = priority
        if not wv.active and kept.active and not wv.holding:
            wv.waiting_since_us = self.event_time_us  # reactivated: queued again now
            wv.reserved_once = False
        wv.active = kept.active
        self._reroute(wv)

    @staticmethod
    def _unindex(index: dict[Any, dict[str, None]], key: Any, member: str) -> None:
        members = index.get(key)
        if members is not None:
            members.pop(member, None)
            if not members:
                del index[key]

    def _workload_ref(self, raw: Mapping[str, Any]) -> str:
        namespace = raw.get("namespace")
        name = raw.get("name")
        if namespace is not None and not isinstance(namespace, str):
            raise _Reject
        if not isinstance(name, str):
            raise _Reject
        return f"{namespace or 'default'}/{name}"

    def _workload_finished(self, raw: Mapping[str, Any], seq: int, top_level: bool) -> None:
        if self._workload_ref(raw) not in self.workloads:
            raise _Reject

    def _workload_deleted(self, raw: Mapping[str, Any], seq: int, top_level: bool) -> None:
        key = self._workload_ref(raw)
        if key not in self.workloads and key not in self.finished:
            raise _Reject

    def _workload_released(self, raw: Mapping[str, Any], seq: int, top_level: bool) -> None:
        wv = self.workloads.get(self._workload_ref(raw))
        if wv is None or not wv.evicted:
            raise _Reject

    def _admission_check_state(self, raw: Mapping[str, Any], seq: int, top_level: bool) -> None:
        key = self._workload_ref(raw)
        wv = self.workloads.get(key)
        if wv is None or not wv.holding or wv.evicted:
            raise _Reject
        state = raw.get("state", "Pending")
        if state not in ("Retry", "Rejected"):
            return  # Pending changes nothing; Ready shows as an Admitted decision
        # Accepted Retry/Rejected always evicts; an eviction for it in this event's decisions
        # is the engine's word that it was accepted.
        if not self._evictions.get(key):
            raise _Reject
        self._evictions[key] -= 1
        if state == "Retry":
            # Kueue requeues a Retry-evicted workload by its eviction time: behind the others.
            wv.queue_time = max(wv.queue_time, self.clock)
        else:
            wv.active = False
            wv.spec = WorkloadSpec(
                wv.spec.namespace, wv.spec.name, wv.spec.queue_name, wv.spec.priority,
                wv.spec.priority_class, False, wv.spec.labels, wv.spec.creation_time,
                wv.spec.pod_sets, wv.spec.uid, pod_priority_class=wv.spec.pod_priority_class,
            )

    # -- pending queues --------------------------------------------------------------------------
    def _target(self, wv: WorkloadView) -> str | None:
        if wv.holding or not wv.active:
            return None
        lq = self.local_queues.get(wv.lq)
        if lq is None or lq.stop_policy != STOP_NONE:
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
        """Queue the workload where it belongs, once this event's decisions are folded too: a
        workload submitted and admitted by the same event never touches a queue."""
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
                    if lq is not None and lq.stop_policy == STOP_NONE:
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

    # -- decisions -------------------------------------------------------------------------------
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
            self.lq_usage.admitted(wv.key, wv.lq, cq.spec, wv.usage, self.clock)
            self._observe_admission(self._qstats(wv, cq.name), wait)
            return
        cq = self.cluster_queues.get(d.clusterQueue)  # type: ignore[assignment]
        if cq is None:
            self._anomaly(f"{type(d).__name__} of {wv.key} in unknown ClusterQueue {d.clusterQueue}")
            return
        if wv.queued_in is not None:
            self._dequeue(wv)
        usage = rec.usage
        if usage is None:  # (a record not made by decode_decision)
            usage = usage_of(d.podSetAssignments) or {}
        name = cq.name
        wv.cluster_queue = name
        wv.usage = usage
        wv.admitted = admitted
        wv.evicted = False
        wv.reason = wv.message = None
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
            hist = s.admission_wait
            if hist is None:
                hist = s.admission_wait = self.counters.admission_wait[s.key] = Histogram()
            waiting = hist._waiting
            waiting.append(wait)
            if len(waiting) >= SETTLE_EVERY:
                hist._settle()

    def _observe_admission(self, s: QueueStats, wait: float) -> None:
        s.admitted += 1
        hist = s.admission_wait
        if hist is None:
            hist = s.admission_wait = self.counters.admission_wait[s.key] = Histogram()
        hist.observe(wait)

    def _unadmit(self, wv: WorkloadView) -> None:
        if not wv.admitted:
            return
        cq = self.cluster_queues[wv.cluster_queue]  # type: ignore[index]
        cq.held[id(wv.usage)][2] -= 1
        cq._totals = None
        cq.admitted -= 1
        wv.admitted = False

    def _release(self, wv: WorkloadView) -> ClusterQueueView | None:
        if wv.cluster_queue is None:
            return None
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
            reason, cause = d.reason, ""
            if d.reason == reasons.ADMISSION_CHECK and "deactivated" in d.message:
                reason, cause = reasons.EVICTED_DEACTIVATED, reasons.ADMISSION_CHECK
        increment(c.evicted, (key, reason, cause))
        self.lq_usage.evicted(wv.key, self.clock)
        self._unadmit(wv)
        wv.evicted = True

    def _on_quota_released(self, d: QuotaReleased, rec: DecisionRecord) -> None:
        wv = self._workload_of(d)
        if wv is None:
            return
        if self._release(wv) is None:
            self._anomaly(f"QuotaReleased for {wv.key}, which holds no quota")
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
        self._forget(wv)
        self.finished[key] = None
        hist = self.history.get(key)
        if type(hist) is list:  # _settle_history, inline
            self.history[key] = array("q", hist)

    def _on_deleted(self, d: Deleted, rec: DecisionRecord) -> None:
        key = d.workload or ""
        self._settle_history(key)
        if key in self.finished:
            del self.finished[key]
            return
        wv = self._workload_of(d)
        if wv is not None:
            self._forget(wv)

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
                ]
                for k, w in sorted(self.workloads.items())
            },
            "finished": sorted(self.finished),
            "by_lq": {f"{k[0]}/{k[1]}": sorted(v) for k, v in sorted(self.by_lq.items())},
            "by_priority_class": {k: sorted(v) for k, v in sorted(self.by_priority_class.items())},
            "counters": {
                "admitted": sorted(c.admitted.items()),
                "quota_reserved": sorted(c.quota_reserved.items()),
                "finished": sorted(c.finished.items()),
                "evicted": sorted(c.evicted.items()),
                "preempted": sorted(c.preempted.items()),
                "admission_wait": sorted((k, hist(h)) for k, h in c.admission_wait.items()),
                "quota_reserved_wait": sorted((k, hist(h)) for k, h in c.quota_reserved_wait.items()),
                "rejected": sorted(c.rejected.items()),
                "decisions": sorted(c.decisions.items()),
            },
            "history": {k: list(v) for k, v in sorted(self.history.items())},
            "anomalies": list(self.anomalies),
        }


_NO_EVICTIONS: dict[str, int] = {}  # (_admission_check_state only decrements a count it found)
_NO_REJECTIONS: list[Rejected] = []  # (_rejected_by_name only deletes one it found)
_SPECIAL = frozenset((Rejected, Evicted))  # decisions that say how the input event itself was taken

# Events whose whole effect on the views shows in their decisions (the handlers only validate).
_DECIDED_BY_DECISIONS = frozenset(("WorkloadFinished", "WorkloadDeleted", "WorkloadReleased"))

_HANDLERS = {
    "ConfigApplied": Projection._config_applied,
    "ConfigDeleted": Projection._config_deleted,
    "WorkloadSubmitted": Projection._workload_submitted,
    "WorkloadFinished": Projection._workload_finished,
    "WorkloadDeleted": Projection._workload_deleted,
    "WorkloadUpdated": Projection._workload_updated,
    "WorkloadReleased": Projection._workload_released,
    "AdmissionCheckStateChanged": Projection._admission_check_state,
}

_DECISIONS: dict[type, Any] = {
    Admitted: Projection._on_reserve,
    QuotaReserved: Projection._on_reserve,
    Preempted: Projection._on_evict,
    Evicted: Projection._on_evict,
    QuotaReleased: Projection._on_quota_released,
    Finished: Projection._on_finished,
    Deleted: Projection._on_deleted,
    Pending: Projection._on_pending,
    Rejected: Projection._on_rejected,
}
