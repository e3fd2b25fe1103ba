"""The fold's workloads, as the input events the engine accepted describe them.

A workload's existence, queue position inputs (priority, queue time, log position) and spec come
from its accepted `WorkloadSubmitted` / `WorkloadUpdated` events (the decision log does not carry
them), parsed with the engine's parsers (`domain.workload.parse_workload`, memoized per template
in projections/workload_decoding.py). Whether such an event was accepted is the decision log's
word: a `Rejected` naming it (the top-level event, or `batchIndex` in a Batch) means it changed
nothing; fold.py skips it before it gets here. Who holds quota, finishes and deletions come from
the decisions (decision_handlers.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from domain.admission_checks import retry_queue_time
from domain.fields import InvalidInput
from domain.objects import Configuration, PodPriorityClass
from domain.priority import defaulted, priority_of
from domain.timestamps import TimestampError, parse_time
from domain.workload import WorkloadSpec, parse_workload
from projections.local_queue_counts import LocalQueueCounts, count
from projections.view_model import LQKey, WorkloadView
from projections.workload_decoding import Envelope, parse_accepted, stamp_of

_json = msgspec.json.Decoder()


class WorkloadFollower:
    """The workload-event half of `Projection` (projections/fold.py holds the state)."""

    if TYPE_CHECKING:
        workloads: dict[str, WorkloadView]
        finished: dict[str, None]
        by_lq: dict[LQKey, dict[str, None]]
        lq_counts: dict[LQKey, LocalQueueCounts]
        by_priority_class: dict[str, dict[str, None]]
        priority_classes: dict[str, int]
        pod_priority_classes: dict[str, PodPriorityClass]
        configuration: Configuration
        seen_ids: set[str]
        clock: int
        event_time_us: int
        position: int
        _event_time: int | None
        _top_time: int | None
        _dirty: dict[str, None]

        def _anomaly(self, text: str) -> None: ...
        def _dequeue(self, wv: WorkloadView) -> None: ...
        def _reroute(self, wv: WorkloadView) -> None: ...

    def _workload_event(self, env: Envelope, value: bytes, seq: int, record_time: int) -> None:
        """A top-level workload event the engine did not reject, read from its envelope alone."""
        event_id = env.id
        if event_id is not None and event_id in self.seen_ids:
            return  # a producer's retry
        time = env.time
        if time is not None or record_time > 0:
            try:
                # Its own time, else the record's log time when the log keeps one (domain/clock.py).
                t = self._event_time = parse_time(time) if time is not None else record_time
            except TimestampError:
                self._anomaly(f"input offset {self.position}: accepted by the engine, its time unreadable")
                return
            if t > self.clock:
                self.clock = t
            self._top_time = t
            self.event_time_us = t
        else:
            self._event_time = None
            self.event_time_us = record_time
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
                return
        # else: a finish, deletion or release, whose effect is in its decisions
        if event_id is not None:
            self.seen_ids.add(event_id)

    def _defaulted(self, spec: WorkloadSpec) -> WorkloadSpec:
        return defaulted(spec, self.priority_classes, self.configuration.workload_priority_class_defaulting)

    def _priority_of(self, spec: WorkloadSpec) -> int | None:
        """The engine's priority (domain/priority.py); None where a class is unknown to the fold."""
        try:
            return priority_of(spec, self.priority_classes, self.pod_priority_classes)
        except InvalidInput:
            return None

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
        if key in workloads:
            self._anomaly(f"input offset {self.position}: {key} submitted by the engine, known to the fold")
            return
        template = self._defaulted(template)
        priority = template.priority
        pc = template.priority_class
        if priority is None:
            priority = self._priority_of(template)
            if priority is None:
                self._anomaly(f"input offset {self.position}: {key}: priority class {pc} unknown to the fold")
                priority = 0
        queue_time = creation
        if queue_time is None:
            queue_time = self._event_time if self._event_time is not None else self.clock
        created = creation if creation is not None else self.event_time_us
        lq = (namespace, template.queue_name)
        wv = workloads[key] = WorkloadView(
            key, template, name, creation, uid, lq, pc, seq, queue_time, priority, created, created, template.active,
        )
        count(self.lq_counts, wv, 1)
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
            self._anomaly(f"input offset {self.position}: {spec.key} updated by the engine, unknown to the fold")
            return
        old = wv.spec
        priority = self._priority_of(spec)
        if priority is None:
            self._anomaly(f"input offset {self.position}: {spec.key}: priority class unknown to the fold")
            priority = wv.priority
        # As the engine keeps it: an update is not a new submission (same pod sets, queue position).
        kept = WorkloadSpec(
            spec.namespace, spec.name, spec.queue_name, spec.priority, spec.priority_class,
            spec.active, spec.labels, old.creation_time if spec.creation_time is None else spec.creation_time,
            old.pod_sets, old.uid, pod_priority_class=spec.pod_priority_class,
        )
        self._dequeue(wv)
        count(self.lq_counts, wv, -1)
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
            if wv.created_queue_time is not None:
                wv.created_queue_time = kept.creation_time  # a Retry's time still orders it
            else:
                wv.queue_time = kept.creation_time
        wv.priority = priority
        if not wv.active and kept.active and not wv.holding:
            wv.waiting_since_us = self.event_time_us  # reactivated: queued again now
            wv.reserved_once = False
        wv.active = kept.active
        count(self.lq_counts, wv, 1)
        self._reroute(wv)

    @staticmethod
    def _unindex(index: dict[Any, dict[str, None]], key: Any, member: str) -> None:
        members = index.get(key)
        if members is not None:
            members.pop(member, None)
            if not members:
                del index[key]

    def _admission_check_state(self, raw: Mapping[str, Any], seq: int, top_level: bool) -> None:
        """Retry and Rejected change what the decisions do not say: the queue time a Retry
        requeues the workload with, and the deactivation of a Rejected."""
        namespace = raw.get("namespace")
        wv = self.workloads.get(f"{namespace or 'default'}/{raw.get('name')}")
        state = raw.get("state", "Pending")
        if wv is None or state not in ("Retry", "Rejected"):
            return  # Pending changes nothing; Ready shows as an Admitted decision
        if state == "Retry":
            if wv.created_queue_time is None:
                wv.created_queue_time = wv.queue_time
            wv.queue_time = retry_queue_time(wv.queue_time, self.clock)
        else:
            count(self.lq_counts, wv, -1)
            wv.active = False
            wv.spec = WorkloadSpec(
                wv.spec.namespace, wv.spec.name, wv.spec.queue_name, wv.spec.priority,
                wv.spec.priority_class, False, wv.spec.labels, wv.spec.creation_time,
                wv.spec.pod_sets, wv.spec.uid,
            )
            count(self.lq_counts, wv, 1)
