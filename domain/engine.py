"""The engine: folds contract-v1 input events into state and returns the decisions they cause.

`Engine.apply(event, offset)` is the whole interface: a pure step from (state, event) to
(state', decisions). It never raises on bad input; an invalid event becomes a `Rejected` decision
and changes nothing. After each event (a Batch counts as one) the admission cycle runs to a fixed
point (`scheduler.schedule`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

import msgspec
from mypy_extensions import mypyc_attr

from domain import local_queue_usage, reasons
from domain.decisions import INTERNAL_ERRORS, Admitted, Decision, Deleted, Finished, InternalError, Pending, Rejected
from domain.decisions import encode as encode_decision
from domain.emitter import Emitter
from domain.fields import Fields, InvalidInput, type_name
from domain.lifecycle import (
    DeferredWakes,
    drop_if_terminated,
    evict,
    release,
    new_queue,
    rebuild_queue,
    release_evicted,
    route,
    set_pending,
    set_priority,
    unroute,
    wake_all,
    wake_queue,
    wake_tree,
)
from domain.limits import MAX_DECISION_BYTES, batch_error, record_error, value_error
from domain.names import label_problem, shown, subdomain_problem
from domain.objects import (
    HOLD_AND_DRAIN,
    STOP_NONE,
    STRICT_FIFO,
    AdmissionCheckSpec,
    ClusterQueueSpec,
    CohortSpec,
    ConfigObject,
    Configuration,
    LocalQueueSpec,
    NamespaceSpec,
    PodPriorityClass,
    ResourceFlavor,
    WorkloadPriorityClass,
    checked,
    object_key,
    parse_object,
)
from domain.priority import apply_pod_priority_class, defaulted, priority_of
from domain.queues import PendingQueue
from domain.quota import QuotaNode
from domain.retransform import apply_to_spec, as_written, requests_changed
from domain.scheduler import schedule
from domain.tas import check_flavor_update, topology_problems
from domain.state import ClusterQueueState, State, WorkloadState
from domain.timestamps import TimestampError, parse_time
from domain.topology import (
    apply_cohort,
    delete_cohort,
    quota_maps,
    set_parent,
    would_cycle,
    yunikorn_max_violations,
)
from domain.typed_events import Batch as TypedBatch
from domain.typed_events import Deleted as TypedDeleted
from domain.typed_events import Finished as TypedFinished
from domain.typed_events import Submitted as TypedSubmitted
from domain.typed_events import WorkloadEvent
from domain.typed_decoding import NotTyped
from domain.typed_decoding import decode as decode_typed
from domain.typed_decoding import workload_ref as typed_ref
from domain.typed_decoding import workload_spec as typed_spec
from domain.workload import WorkloadSpec, parse_workload, workload_ref

EVENT_TYPES = (
    "ConfigApplied",
    "ConfigDeleted",
    "WorkloadSubmitted",
    "WorkloadFinished",
    "WorkloadDeleted",
    "WorkloadUpdated",
    "WorkloadReleased",
    "AdmissionCheckStateChanged",
    "Batch",
)
BATCH_SLOTS = 1 << 16
CHECK_STATES = ("Pending", "Ready", "Retry", "Rejected")  # log positions inside one Batch event
CONDITION_MESSAGE_MAX = 32768  # a Kubernetes condition's message

_json = msgspec.json.Decoder()
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_MAX_ERROR_TEXT = 1000


class Unparseable(NamedTuple):
    """An input record the reader could not even decode (say, a broken YAML document)."""

    message: str


# Benchmarks and tests wrap it in subclasses; compiled by mypyc, a class must allow that.
@mypyc_attr(allow_interpreted_subclasses=True)
class Engine:
    def __init__(self, max_decision_bytes: int = MAX_DECISION_BYTES) -> None:
        self.state = State()
        self.max_decision_bytes = max_decision_bytes
        self._event_time: int | None = None  # `time` of the event being applied, if it has one
        self._wakes: DeferredWakes | None = None  # while a Batch's typed events are applied

    def apply(self, event: bytes | str | Mapping[str, Any] | Unparseable, offset: int) -> list[Decision]:
        out = Emitter(offset)
        try:
            made = self._apply(event, offset, out)
        except Exception as exc:  # noqa: BLE001 - one bad record must not stop the log
            made = self._failed(exc, out)
        return self._bounded(made)

    def _bounded(self, made: list[Decision]) -> list[Decision]:
        """Each decision within `max_decision_bytes` encoded (the decision log's message limit),
        or in its place a Rejected of the same cause saying how large it would have been.

        Names and record sizes are bounded where they are read, so this is the last guard, for
        text built from many parts (a message quoting much configuration, say). It measures
        the very bytes the decision log would carry, so it is as deterministic as they are."""
        limit = self.max_decision_bytes
        for i, decision in enumerate(made):
            size = len(encode_decision(decision))
            if size > limit:
                made[i] = Rejected(
                    cause=decision.cause,
                    reason=reasons.LIMIT_EXCEEDED,
                    message=(
                        f"its {type(decision).__name__} decision would be {size} bytes, over the limit of "
                        f"{limit} bytes; the event was applied"
                    ),
                )
        return made

    def _failed(self, exc: Exception, out: Emitter) -> list[Decision]:
        """An InternalError after the decisions the event made before it failed.

        No undo: the state keeps what the event changed before the exception, and the decisions
        kept say exactly that much, so the decision log still matches the state. The admission
        cycle did not run for this event; the next event's does. A replay fails the same way
        (the engine is deterministic), so the outcome is reproducible."""
        self._wakes = None
        INTERNAL_ERRORS.count += 1
        text = _ADDRESS.sub("0x?", str(exc))  # object reprs carry memory addresses
        if len(text) > _MAX_ERROR_TEXT:
            text = text[:_MAX_ERROR_TEXT] + "..."
        out.emit(InternalError, error=type(exc).__name__, message=text)
        return out.decisions

    def _apply(self, event: bytes | str | Mapping[str, Any] | Unparseable, offset: int, out: Emitter) -> list[Decision]:
        too_big = _limit_error(event)
        if too_big is not None:
            out.emit(Rejected, reason=reasons.LIMIT_EXCEEDED, message=f"record at offset {offset}: {too_big}")
            return out.decisions
        state = self.state
        state.offset = offset
        deferred, state.deferred = state.deferred, {}
        if state.admitted_roots:
            state.admitted_roots = {}
        submitted: list[str] = []
        applied = self._apply_typed(event, offset * BATCH_SLOTS, out, submitted) if type(event) is bytes else None
        if applied is None:
            raw = self._decode(event, out)
            applied = raw is not None and self._dispatch(raw, offset * BATCH_SLOTS, out, submitted, top_level=True)
        if not applied:
            # A rejected or repeated event changes nothing, not even by way of what it wakes.
            state.deferred = {**deferred, **state.deferred}
            return out.decisions
        # A queue deferred by the previous event (its head could not take a workload that event
        # admitted) retries now. Only that queue: admissions wake no one else in its cohort, as
        # in Kueue, where an admission requeues no inadmissible workload.
        for name in deferred:
            cq = state.cluster_queues.get(name)
            if cq is not None:
                wake_queue(state, cq)
        local_queue_usage.advance(state)  # admission fair sharing: samplings the log's time reached
        schedule(state, out)
        self._settle(out, submitted)
        return out.decisions

    # -- decoding ----------------------------------------------------------------------------
    def _apply_typed(self, event: bytes, seq: int, out: Emitter, submitted: list[str]) -> bool | None:
        """`_dispatch` for the common workload events, decoded typed (domain/typed_decoding.py).

        None: this path does not decide the event, and it changed nothing the general path
        would not set the same way (the event's time and the clock), which then applies or
        rejects it. Everything that can refuse the event runs before anything changes."""
        ev = decode_typed(event)
        if ev is None:
            return None
        if isinstance(ev, TypedBatch):
            return self._apply_typed_batch(ev, seq, out, submitted)
        return self._apply_typed_event(ev, seq, out, submitted, None)

    def _apply_typed_batch(self, batch: TypedBatch, seq: int, out: Emitter, submitted: list[str]) -> bool | None:
        """`_dispatch` of a Batch, its inner events each typed where they can be and handed to
        the general path where not, in order. Nothing that could reject the Batch itself is
        left once it starts (decoding it typed checked the envelope's field types)."""
        state = self.state
        event_id = batch.id
        if event_id is not None and event_id in state.seen_ids:
            return False
        if batch.events is None or batch_error(len(batch.events)) is not None:
            return None  # the general path rejects it
        batch_time: int | None = None
        if batch.time is not None:
            try:
                batch_time = parse_time(batch.time)
            except TimestampError:
                return None
            if batch_time > state.clock:
                state.clock = batch_time
        if event_id is not None:
            state.seen_ids.add(event_id)
        # A run of finishes and deletions wakes parked heads once per cohort tree, at its end
        # (lifecycle.DeferredWakes); whatever else comes first sees the wakes made.
        wakes = self._wakes = DeferredWakes()
        try:
            for i, inner in enumerate(batch.events):
                ev = decode_typed(inner)
                # A typed event sets the time it is applied at itself (its own, or the Batch's).
                if ev is not None and not isinstance(ev, TypedBatch):
                    if type(ev) is not TypedFinished and type(ev) is not TypedDeleted:
                        wakes.flush(state)
                    if self._apply_typed_event(ev, seq + i, out, submitted, batch_time) is not None:
                        continue
                wakes.flush(state)
                self._event_time = batch_time  # inner events inherit the Batch's time
                # valid JSON: an element of the array just decoded
                self._dispatch_inner(_json.decode(inner), i, seq, out, submitted)
            wakes.flush(state)
        finally:
            self._wakes = None
        return True

    def _apply_typed_event(
        self, ev: WorkloadEvent, seq: int, out: Emitter, submitted: list[str], inherited: int | None
    ) -> bool | None:
        """One submission, finish, deletion or release, typed; `inherited` is the time of the
        Batch it is in (None at top level), which it keeps unless it has a time of its own."""
        state = self.state
        event_id = ev.id
        if event_id is not None and event_id in state.seen_ids:
            return False  # a producer's retry: already applied, no new outcome
        event_time = inherited
        try:
            if ev.time is not None:
                event_time = parse_time(ev.time)
            if isinstance(ev, TypedSubmitted):
                spec: WorkloadSpec | None = typed_spec(ev.workload)
                key = ""
            else:
                spec = None
                key = typed_ref(ev.namespace, ev.name)
        except (NotTyped, TimestampError):
            return None
        self._event_time = event_time
        if event_time is not None and event_time > state.clock:
            state.clock = event_time
        try:
            if spec is not None:
                self._submit(spec, seq, out, submitted)
            elif type(ev) is TypedFinished:
                self._finish(key, out)
            elif type(ev) is TypedDeleted:
                self._delete(key, out)
            else:
                self._release(key, out)
        except InvalidInput:
            return None  # refused before any change: the general path says why
        if event_id is not None:
            state.seen_ids.add(event_id)
        return True

    def _decode(self, event: bytes | str | Mapping[str, Any] | Unparseable, out: Emitter) -> Mapping[str, Any] | None:
        if type(event) is bytes:
            try:
                raw = _json.decode(event)
            except (msgspec.DecodeError, UnicodeDecodeError):
                pass  # reported below, by the general path
            else:
                if type(raw) is dict:
                    return raw
        if isinstance(event, Mapping):
            return event
        if isinstance(event, Unparseable):
            out.emit(Rejected, reason=reasons.MALFORMED_EVENT, message=event.message)
            return None
        try:
            raw = _json.decode(event)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            out.emit(Rejected, reason=reasons.MALFORMED_EVENT, message=f"event is not valid JSON: {exc}")
            return None
        if not isinstance(raw, Mapping):
            out.emit(
                Rejected,
                reason=reasons.MALFORMED_EVENT,
                message=f"event must be a JSON object, got {type_name(raw)}",
            )
            return None
        return raw

    def _dispatch(
        self,
        raw: Mapping[str, Any],
        seq: int,
        out: Emitter,
        submitted: list[str],
        top_level: bool,
    ) -> bool:
        """Apply one event; False when it was a producer's retry or was rejected."""
        etype = raw.get("type")
        try:
            event_id = raw.get("id")
            if event_id is not None:
                if not isinstance(event_id, str):
                    raise InvalidInput(reasons.MALFORMED_EVENT, f"id: expected a string, got {type_name(event_id)}")
                if event_id in self.state.seen_ids:
                    return False  # a producer's retry: already applied, no new outcome
            if raw.get("time") is not None:
                try:
                    self._event_time = parse_time(raw["time"])
                except TimestampError as bad_time:  # not `exc`: mypyc types a name by its first except
                    raise InvalidInput(reasons.MALFORMED_EVENT, f"time: {bad_time}") from None
                self.state.clock = max(self.state.clock, self._event_time)
            elif top_level:
                self._event_time = None  # inner events of a Batch inherit the Batch's time
            if etype == "Batch":
                if not top_level:
                    raise InvalidInput(reasons.MALFORMED_EVENT, "a Batch cannot contain another Batch")
                if raw.get("events") is None:
                    raise InvalidInput(reasons.MALFORMED_EVENT, "events: required value")
                events = Fields(raw, "", reasons.MALFORMED_EVENT).list("events")
                too_many = batch_error(len(events))
                if too_many is not None:
                    raise InvalidInput(reasons.LIMIT_EXCEEDED, too_many)
                if event_id is not None:
                    self.state.seen_ids.add(event_id)
                batch_time = self._event_time
                for i, inner in enumerate(events):
                    self._event_time = batch_time
                    self._dispatch_inner(inner, i, seq, out, submitted)
                return True
            handler = _HANDLERS.get(etype) if isinstance(etype, str) else None
            if handler is None:
                raise InvalidInput(
                    reasons.UNKNOWN_EVENT_TYPE,
                    f'unknown event type {shown(repr(etype))}; expected one of {", ".join(EVENT_TYPES)}',
                )
            handler(self, raw, seq, out, submitted)
            if event_id is not None:
                self.state.seen_ids.add(event_id)
            return True
        except InvalidInput as exc:
            label = shown(etype) if isinstance(etype, str) else "event"
            out.emit(Rejected, _rejected_workload(raw), reason=exc.reason, message=f"{label}: {exc.message}")
            return False

    def _dispatch_inner(self, inner: object, i: int, seq: int, out: Emitter, submitted: list[str]) -> None:
        """The i-th event of a Batch, by the general path."""
        if not isinstance(inner, Mapping):
            out.emit(
                Rejected,
                reason=reasons.MALFORMED_EVENT,
                message=f"events[{i}]: expected an event object, got {type_name(inner)}",
            )
            return
        self._dispatch(inner, seq + i, out, submitted, top_level=False)

    def _settle(self, out: Emitter, submitted: list[str]) -> None:
        """Every submission gets an outcome, even one the cycle did not reach."""
        state = self.state
        for key in submitted:
            ws = state.workloads.get(key)
            if ws is None or key in out.touched or ws.admission is not None:
                continue
            if ws.queued and ws.cluster_queue is not None:
                cq = state.cluster_queues[ws.cluster_queue]
                status = cq.queue.parked_status(key)
                if status is None and cq.sticky is not None and cq.sticky != key:
                    status = (
                        reasons.QUEUED,
                        reasons.MSG_QUEUED_BEHIND_PREEMPTOR.format(head=cq.sticky, cq=cq.name),
                    )
                if status is None:
                    head = cq.queue.head() or next(cq.queue.keys())
                    status = (
                        reasons.QUEUED,
                        reasons.MSG_QUEUED_STRICT.format(head=head[3], cq=cq.name),
                    )
                set_pending(state, out, ws, status)

    # -- configuration -----------------------------------------------------------------------
    def _config_applied(self, raw: Mapping[str, Any], seq: int, out: Emitter, submitted: list[str]) -> None:
        raw_object = raw.get("object")
        obj = parse_object(raw_object)
        self.apply_object(obj, out)
        assert isinstance(raw_object, Mapping)
        self.state.objects[config_key(obj)] = raw_object

    def apply_object(self, obj: ConfigObject, out: Emitter) -> None:
        state = self.state
        if isinstance(obj, ResourceFlavor):
            check_flavor_update(state.flavors.get(obj.name), obj)
            state.flavors[obj.name] = obj
            self._refresh_activeness(out)
        elif isinstance(obj, ClusterQueueSpec):
            self._apply_cluster_queue(obj, out)
        elif isinstance(obj, LocalQueueSpec):
            self._apply_local_queue(obj, out)
        elif isinstance(obj, CohortSpec):
            if would_cycle(state, obj.name, obj.parent):
                raise InvalidInput(
                    reasons.INVALID_OBJECT,
                    f"Cohort: spec.parentName: {obj.parent} would make a cycle of cohorts",
                )
            if obj.yunikorn_rules:
                existing = state.cohorts.get(obj.name)
                problems = yunikorn_max_violations(
                    state, existing.node if existing else None, obj.name, False, obj.quotas(), obj.parent
                )
                self._refuse_above_parent("Cohort", obj.name, problems)
            cohort = apply_cohort(state, obj)
            self._wake_node(cohort.node)
        elif isinstance(obj, WorkloadPriorityClass):
            state.priority_classes[obj.name] = obj.value
            for key in list(state.by_priority_class.get(obj.name, {})):
                ws = state.workloads[key]
                if ws.spec.priority is None:
                    self._set_priority(ws, obj.value, out)
        elif isinstance(obj, AdmissionCheckSpec):
            state.admission_checks[obj.name] = obj
            self._refresh_activeness(out)
        elif isinstance(obj, PodPriorityClass):
            apply_pod_priority_class(state.pod_priority_classes, obj)
        elif isinstance(obj, NamespaceSpec):
            state.namespaces[obj.name] = dict(obj.labels)
            wake_all(state)
        elif isinstance(obj, Configuration):
            old_configuration, state.configuration = state.configuration, obj
            requests_changed(state, out, old_configuration, obj)
            self._fair_sharing_changed()
            wake_all(state)

    def _apply_cluster_queue(self, spec: ClusterQueueSpec, out: Emitter) -> None:
        state = self.state
        if spec.yunikorn_rules:
            existing = state.cluster_queues.get(spec.name)
            problems = yunikorn_max_violations(
                state, existing.node if existing else None, spec.name, True, spec.quotas(), spec.cohort
            )
            self._refuse_above_parent("ClusterQueue", spec.name, problems)
        groups = {res: g for g in spec.resource_groups for res in g.covered}
        cq = state.cluster_queues.get(spec.name)
        strict = spec.queueing_strategy == STRICT_FIFO
        old_root: QuotaNode | None = None
        if cq is None:
            cq = ClusterQueueState(spec, QuotaNode(spec.name, True), PendingQueue(strict), groups)
            state.cluster_queues[spec.name] = cq
            cq.queue = new_queue(state, cq, strict)
        else:
            old_root = cq.node.root()
            cq.spec = spec
            cq.groups = groups
            cq.terminating = False
            fair = local_queue_usage.wants_fair(state, cq)
            if cq.queue.strict != strict or (cq.queue.fair is not None) != fair:
                rebuild_queue(state, cq, strict)
        cq.quotas = spec.quotas()
        cq.node.set_quotas(*quota_maps(cq.quotas))
        cq.node.weight = spec.fair_weight
        set_parent(state, cq.node, spec.cohort)
        if spec.stop_policy != STOP_NONE:
            for key in list(cq.admitted):
                ws = state.workloads[key]
                if ws.evicted or ws.admission is None:
                    continue
                if spec.stop_policy == HOLD_AND_DRAIN:
                    evict(state, out, ws, reasons.CLUSTER_QUEUE_STOPPED, reasons.MSG_CQ_STOPPED)
                elif not ws.admission.admitted:
                    # Reserved but not admitted (checks pending): no pods yet, the hold takes it back.
                    release_evicted(state, out, ws)
        # Only this queue's activeness can have changed: every other queue's depends on its own
        # spec and termination and on the flavors and admission checks, and each change of those
        # refreshes all queues (see _refresh_activeness). Refreshing them all here made applying
        # n ClusterQueues cost n² checks.
        self._refresh_activeness(out, only=cq)
        for key in list(state.parked.get(f"cq:{spec.name}", {})):
            ws = state.workloads[key]
            unroute(state, ws)
            route(state, out, ws)
        if old_root is not None and old_root is not cq.node.root():
            self._wake_node(old_root)
        wake_tree(state, cq)

    @staticmethod
    def _refuse_above_parent(kind: str, name: str, problems: list[str]) -> None:
        if problems:
            raise InvalidInput(
                reasons.INVALID_OBJECT,
                f"{kind} {name}: {'; '.join(problems)} (YuniKorn quota model: a child queue's max "
                "cannot exceed its parent's)",
            )

    def _apply_local_queue(self, spec: LocalQueueSpec, out: Emitter) -> None:
        state = self.state
        key = (spec.namespace, spec.name)
        old = state.local_queues.get(key)
        if old is not None and old.cluster_queue != spec.cluster_queue:
            raise InvalidInput(
                reasons.IMMUTABLE_FIELD,
                f"LocalQueue {spec.namespace}/{spec.name}: spec.clusterQueue: Invalid value: "
                f'"{spec.cluster_queue}": field is immutable',
            )
        state.local_queues[key] = spec
        local_queue_usage.local_queue_applied(state, key)
        members = list(state.by_local_queue.get(key, {}))
        if spec.stop_policy == HOLD_AND_DRAIN:
            for wl in members:
                ws = state.workloads[wl]
                if ws.admission is not None and not ws.evicted:
                    evict(state, out, ws, reasons.LOCAL_QUEUE_STOPPED, reasons.MSG_LQ_STOPPED)
        if old is None or old.stop_policy != spec.stop_policy:
            for wl in members:
                ws = state.workloads[wl]
                if ws.admission is None and ws.spec.active:
                    unroute(state, ws)
                    route(state, out, ws)

    def _refresh_activeness(self, out: Emitter, only: ClusterQueueState | None = None) -> None:
        """Recompute which ClusterQueues are active (and why not). A queue's activeness reads
        only its spec, whether it is terminating, and the flavors and admission checks that
        exist: whoever changes any of these calls this, for every queue or (`only`) for the one
        queue whose spec or termination alone changed."""
        state = self.state
        for cq in state.cluster_queues.values() if only is None else (only,):
            problems: list[str] = []
            missing = [f for f in cq.spec.flavor_names() if f not in state.flavors]
            if missing:
                problems.append(f"references missing ResourceFlavor(s): {', '.join(missing)}")
            checks = [c.name for c in cq.spec.admission_checks if c.name not in state.admission_checks]
            if checks:
                problems.append(f"references missing AdmissionCheck(s): {', '.join(checks)}")
            problems.extend(topology_problems(cq.spec, state.flavors))
            if cq.spec.stop_policy != STOP_NONE:
                problems.append("is stopped")
            if cq.terminating:
                problems.append("is terminating")
            active = not problems
            cq.inactive_message = "; ".join(problems)
            if active == cq.active:
                continue
            cq.active = active
            if active:
                wake_tree(state, cq)
            else:
                message = reasons.MSG_CQ_INACTIVE.format(cq=cq.name)
                for order_key in list(cq.queue.keys()):
                    set_pending(state, out, state.workloads[order_key[3]], (reasons.SUSPENDED, message))

    def _fair_sharing_changed(self) -> None:
        """A new Configuration: the ledger takes its admission fair sharing settings, and each
        ClusterQueue whose queue changes mode (fair or not) is queued anew."""
        state = self.state
        local_queue_usage.configuration_applied(state)
        for cq in state.cluster_queues.values():
            if (cq.queue.fair is not None) != local_queue_usage.wants_fair(state, cq):
                rebuild_queue(state, cq, cq.queue.strict)

    def _wake_node(self, node: QuotaNode) -> None:
        root = node.root()
        stack = [root]
        while stack:
            current = stack.pop()
            if current.is_cluster_queue:
                cq = self.state.cluster_queues.get(current.name)
                if cq is not None:
                    wake_tree(self.state, cq)
                return
            stack.extend(current.children.values())

    def _config_deleted(self, raw: Mapping[str, Any], seq: int, out: Emitter, submitted: list[str]) -> None:
        f = Fields(raw, "", reasons.MALFORMED_EVENT)
        kind = f.str("kind")
        name = f.str("name")
        if kind != "Configuration":
            checked(f, "name", name, label_problem(name) if kind == "Namespace" else subdomain_problem(name))
        state = self.state
        found = True
        if kind == "ClusterQueue":
            cq = state.cluster_queues.get(name)
            found = cq is not None and not cq.terminating
            if cq is not None and found:
                # Like Kueue's finalizer: it lingers, inactive, while workloads hold its quota.
                cq.terminating = True
                self._refresh_activeness(out)
                wake_tree(state, cq)
                drop_if_terminated(state, out, cq)
        elif kind == "LocalQueue":
            lq_key = (f.str("namespace", "default"), name)
            found = state.local_queues.pop(lq_key, None) is not None
            local_queue_usage.local_queue_deleted(state, lq_key)
            for key in list(state.by_local_queue.get(lq_key, {})):
                ws = state.workloads[key]
                if ws.admission is None and ws.spec.active:
                    unroute(state, ws)
                    route(state, out, ws)
        elif kind == "ResourceFlavor":
            found = state.flavors.pop(name, None) is not None
            self._refresh_activeness(out)
        elif kind == "Cohort":
            cohort = state.cohorts.get(name)
            found = cohort is not None and cohort.spec is not None
            if cohort is not None and found:
                node = cohort.node
                delete_cohort(state, name)
                self._wake_node(node)
        elif kind == "WorkloadPriorityClass":
            found = state.priority_classes.pop(name, None) is not None
        elif kind == "AdmissionCheck":
            found = state.admission_checks.pop(name, None) is not None
            self._refresh_activeness(out)
        elif kind == "Namespace":
            found = state.namespaces.pop(name, None) is not None
            wake_all(state)
        elif kind == "PriorityClass":
            found = state.pod_priority_classes.pop(name, None) is not None
        elif kind == "Configuration":
            old_configuration, state.configuration = state.configuration, Configuration()
            requests_changed(state, out, old_configuration, state.configuration)
            self._fair_sharing_changed()
            wake_all(state)
        else:
            raise InvalidInput(reasons.UNKNOWN_KIND, f'kind: unknown kind "{shown(kind)}"')
        if not found:
            raise InvalidInput(reasons.NOT_FOUND, f'{kind} "{name}" not found')
        if kind == "LocalQueue":
            state.objects.pop(object_key(kind, name, f.str("namespace", "default")), None)
        elif kind == "Configuration":
            state.objects.pop("Configuration", None)
        elif kind != "ClusterQueue":  # a deleted ClusterQueue lingers while it holds quota
            state.objects.pop(object_key(kind, name), None)

    # -- workloads ---------------------------------------------------------------------------
    def _workload_submitted(self, raw: Mapping[str, Any], seq: int, out: Emitter, submitted: list[str]) -> None:
        self._submit(parse_workload(raw.get("workload")), seq, out, submitted)

    def _submit(self, spec: WorkloadSpec, seq: int, out: Emitter, submitted: list[str]) -> None:
        state = self.state
        spec = apply_to_spec(spec, state.configuration.resources)  # Configuration `resources`
        key = spec.key
        if key in state.workloads or key in state.finished:
            raise InvalidInput(reasons.DUPLICATE_WORKLOAD, f"workload {key} already exists")
        spec = self._defaulted(spec)
        priority = self._priority_of(spec)
        # FIFO position: creationTimestamp, else this event's time, else the log's latest time.
        queue_time = spec.creation_time
        if queue_time is None:
            queue_time = self._event_time if self._event_time is not None else state.clock
        ws = WorkloadState(spec, seq, queue_time, priority, (-priority, queue_time, seq, key))
        state.workloads[key] = ws
        state.by_local_queue.setdefault((spec.namespace, spec.queue_name), {})[key] = None
        if spec.priority_class is not None:
            state.by_priority_class.setdefault(spec.priority_class, {})[key] = None
        submitted.append(key)
        if spec.active:
            route(state, out, ws)
        else:
            set_pending(state, out, ws, (reasons.DEACTIVATED, reasons.MSG_DEACTIVATED))

    def _defaulted(self, spec: WorkloadSpec) -> WorkloadSpec:
        state = self.state
        return defaulted(spec, state.priority_classes, state.configuration.workload_priority_class_defaulting)

    def _priority_of(self, spec: WorkloadSpec) -> int:
        return priority_of(spec, self.state.priority_classes, self.state.pod_priority_classes)

    def _set_priority(self, ws: WorkloadState, priority: int, out: Emitter) -> None:
        if priority == ws.priority:
            return
        state = self.state
        requeue = ws.queued
        if requeue:
            unroute(state, ws)
        set_priority(state, ws, priority)
        if requeue:
            route(state, out, ws)
        elif ws.admission is not None:
            wake_tree(state, state.cluster_queues[ws.admission.cluster_queue])

    def _lookup(self, raw: Mapping[str, Any]) -> tuple[str, WorkloadState | None]:
        f = Fields(raw, "", reasons.MALFORMED_EVENT)
        namespace = f.str("namespace", "default") or "default"
        name = f.str("name")
        checked(f, "namespace", namespace, label_problem(namespace))
        checked(f, "name", name, subdomain_problem(name))
        key = f"{namespace}/{name}"
        return key, self.state.workloads.get(key)

    def _workload_finished(self, raw: Mapping[str, Any], seq: int, out: Emitter, submitted: list[str]) -> None:
        self._finish(self._lookup(raw)[0], out)

    def _finish(self, key: str, out: Emitter) -> None:
        ws = self.state.workloads.get(key)
        if ws is None:
            if key in self.state.finished:
                raise InvalidInput(reasons.UNKNOWN_WORKLOAD, f"workload {key} already finished")
            raise InvalidInput(reasons.UNKNOWN_WORKLOAD, f"workload {key} not found")
        self._unevaluated(ws, out)
        # The finish itself first, then what it sets off (a lingering ClusterQueue going away).
        out.emit(Finished, key)
        self.state.finished[key] = None
        self._forget(ws, out)

    def _workload_deleted(self, raw: Mapping[str, Any], seq: int, out: Emitter, submitted: list[str]) -> None:
        self._delete(self._lookup(raw)[0], out)

    def _delete(self, key: str, out: Emitter) -> None:
        ws = self.state.workloads.get(key)
        if ws is None:
            if key not in self.state.finished:
                raise InvalidInput(reasons.UNKNOWN_WORKLOAD, f"workload {key} not found")
            del self.state.finished[key]
            out.emit(Deleted, key)
            return
        self._unevaluated(ws, out)
        out.emit(Deleted, key)
        self._forget(ws, out)

    def _unevaluated(self, ws: WorkloadState, out: Emitter) -> None:
        """A workload submitted earlier in the same Batch ends before the admission cycle (which
        runs after the whole Batch) saw it: its submission still gets an outcome of its own."""
        if ws.seq >= self.state.offset * BATCH_SLOTS and ws.key not in out.touched and ws.admission is None:
            set_pending(self.state, out, ws, (reasons.PENDING_EVALUATION, reasons.MSG_NOT_EVALUATED))

    def _forget(self, ws: WorkloadState, out: Emitter) -> None:
        state = self.state
        unroute(state, ws)
        cq = release(state, ws, self._wakes)
        del state.workloads[ws.key]
        spec = ws.spec
        members = state.by_local_queue.get((spec.namespace, spec.queue_name))
        if members is not None:
            members.pop(ws.key, None)
            if not members:
                del state.by_local_queue[(spec.namespace, spec.queue_name)]
        if spec.priority_class is not None:
            pc = state.by_priority_class.get(spec.priority_class)
            if pc is not None:
                pc.pop(ws.key, None)
                if not pc:
                    del state.by_priority_class[spec.priority_class]
        if cq is not None:
            drop_if_terminated(state, out, cq)

    def _workload_updated(self, raw: Mapping[str, Any], seq: int, out: Emitter, submitted: list[str]) -> None:
        spec = self._defaulted(parse_workload(raw.get("workload")))
        state = self.state
        ws = state.workloads.get(spec.key)
        if ws is None:
            raise InvalidInput(reasons.UNKNOWN_WORKLOAD, f"workload {spec.key} not found")
        old = ws.spec
        if spec.pod_sets != as_written(old.pod_sets):
            raise InvalidInput(reasons.IMMUTABLE_FIELD, "spec.podSets: field is immutable")
        if spec.queue_name != old.queue_name and ws.admission is not None:
            raise InvalidInput(
                reasons.IMMUTABLE_FIELD, "spec.queueName: field is immutable while the workload holds quota"
            )
        priority = self._priority_of(spec)
        # Keep the original queue position: an update is not a new submission.
        spec_kept = WorkloadSpec(
            spec.namespace, spec.name, spec.queue_name, spec.priority, spec.priority_class,
            spec.active, spec.labels, old.creation_time if spec.creation_time is None else spec.creation_time,
            old.pod_sets, pod_priority_class=spec.pod_priority_class,
        )
        was_pending = ws.admission is None and old.active
        if was_pending:
            unroute(state, ws)
        self._reindex(ws, old, spec_kept)
        ws.spec = spec_kept
        if spec_kept.creation_time is not None:
            ws.queue_time = spec_kept.creation_time
        set_priority(state, ws, priority)
        if not spec_kept.active:
            if ws.admission is None:
                set_pending(state, out, ws, (reasons.DEACTIVATED, reasons.MSG_DEACTIVATED))
            elif not ws.evicted:
                evict(state, out, ws, reasons.EVICTED_DEACTIVATED, reasons.MSG_DEACTIVATED)
            return
        if ws.admission is None:
            route(state, out, ws)
        elif priority != (old.priority if old.priority is not None else ws.priority):
            wake_tree(state, state.cluster_queues[ws.admission.cluster_queue])

    def _reindex(self, ws: WorkloadState, old: WorkloadSpec, new: WorkloadSpec) -> None:
        state = self.state
        if (old.namespace, old.queue_name) != (new.namespace, new.queue_name):
            members = state.by_local_queue.get((old.namespace, old.queue_name), {})
            members.pop(ws.key, None)
            if not members:
                state.by_local_queue.pop((old.namespace, old.queue_name), None)
            state.by_local_queue.setdefault((new.namespace, new.queue_name), {})[ws.key] = None
        if old.priority_class != new.priority_class:
            if old.priority_class is not None:
                pc = state.by_priority_class.get(old.priority_class, {})
                pc.pop(ws.key, None)
                if not pc:
                    state.by_priority_class.pop(old.priority_class, None)
            if new.priority_class is not None:
                state.by_priority_class.setdefault(new.priority_class, {})[ws.key] = None

    def _workload_released(self, raw: Mapping[str, Any], seq: int, out: Emitter, submitted: list[str]) -> None:
        self._release(self._lookup(raw)[0], out)

    def _release(self, key: str, out: Emitter) -> None:
        ws = self.state.workloads.get(key)
        if ws is None:
            raise InvalidInput(reasons.UNKNOWN_WORKLOAD, f"workload {key} not found")
        if not ws.evicted:
            raise InvalidInput(
                reasons.NOT_EVICTED, f"workload {key} holds no quota awaiting release (it was not evicted)"
            )
        release_evicted(self.state, out, ws)

    def _admission_check_state(self, raw: Mapping[str, Any], seq: int, out: Emitter, submitted: list[str]) -> None:
        key, ws = self._lookup(raw)
        if ws is None:
            raise InvalidInput(reasons.UNKNOWN_WORKLOAD, f"workload {key} not found")
        f = Fields(raw, "", reasons.MALFORMED_EVENT)
        check = f.str("check")
        checked(f, "check", check, subdomain_problem(check))
        new_state = f.enum("state", CHECK_STATES, "Pending")
        message = f.str("message", "")
        if len(message) > CONDITION_MESSAGE_MAX:
            raise f.fail("message", f"Too long: may not be more than {CONDITION_MESSAGE_MAX} bytes")
        admission = ws.admission
        if admission is None or ws.evicted or check not in admission.checks:
            raise InvalidInput(
                reasons.NOT_FOUND,
                f"admission check {check!r} is not pending on workload {key} (it holds no quota reservation "
                "that this check applies to)",
            )
        admission.checks[check] = new_state
        state = self.state
        detail = f'"{check}" ({message})' if message else f'"{check}"'
        if new_state == "Ready":
            if not admission.admitted and all(v == "Ready" for v in admission.checks.values()):
                admission.admitted = True
                local_queue_usage.admitted(state, ws)
                out.emit(Admitted, key, clusterQueue=admission.cluster_queue, podSetAssignments=admission.pod_sets)
        elif new_state == "Retry":
            # Kueue requeues a Retry-evicted workload by its eviction time: behind the others.
            ws.queue_time = max(ws.queue_time, state.clock)
            ws.order_key = (-ws.priority, ws.queue_time, ws.seq, ws.key)
            evict(state, out, ws, reasons.ADMISSION_CHECK, f"Evicted due to AdmissionCheck in Retry state: {detail}")
        elif new_state == "Rejected":
            ws.spec = msgspec.structs.replace(ws.spec, active=False)
            evict(
                state, out, ws, reasons.ADMISSION_CHECK,
                f"The workload is deactivated due to AdmissionCheck in Rejected state: {detail}",
            )


def _limit_error(event: bytes | str | Mapping[str, Any] | Unparseable) -> str | None:
    if type(event) is bytes:
        return record_error(event)
    if type(event) is str:
        return record_error(event.encode("utf-8", "replace"))
    if isinstance(event, Unparseable):
        return None
    return value_error(event)


def config_key(obj: ConfigObject) -> str:
    if isinstance(obj, Configuration):
        return "Configuration"
    if isinstance(obj, LocalQueueSpec):
        return object_key("LocalQueue", obj.name, obj.namespace)
    kinds = {
        ResourceFlavor: "ResourceFlavor",
        ClusterQueueSpec: "ClusterQueue",
        CohortSpec: "Cohort",
        WorkloadPriorityClass: "WorkloadPriorityClass",
        AdmissionCheckSpec: "AdmissionCheck",
        NamespaceSpec: "Namespace",
        PodPriorityClass: "PriorityClass",
    }
    return object_key(kinds[type(obj)], obj.name)


def _rejected_workload(raw: Mapping[str, Any]) -> str | None:
    """The workload a rejected event names, where its name is one Kubernetes would accept (an
    invalid one is quoted, cut short, in the message instead)."""
    etype = raw.get("type")
    ref: str | None = None
    if etype in ("WorkloadSubmitted", "WorkloadUpdated"):
        inner = raw.get("workload")
        ref = workload_ref(inner) if isinstance(inner, Mapping) else None
    elif etype in ("WorkloadFinished", "WorkloadDeleted", "WorkloadReleased", "AdmissionCheckStateChanged"):
        name = raw.get("name")
        ns = raw.get("namespace")
        if isinstance(name, str) and name:
            ref = f"{ns if isinstance(ns, str) and ns else 'default'}/{name}"
    if ref is None:
        return None
    namespace, _, name = ref.partition("/")
    if label_problem(namespace) is not None or subdomain_problem(name) is not None:
        return None
    return ref


_HANDLERS = {
    "ConfigApplied": Engine._config_applied,
    "ConfigDeleted": Engine._config_deleted,
    "WorkloadSubmitted": Engine._workload_submitted,
    "WorkloadFinished": Engine._workload_finished,
    "WorkloadDeleted": Engine._workload_deleted,
    "WorkloadUpdated": Engine._workload_updated,
    "WorkloadReleased": Engine._workload_released,
    "AdmissionCheckStateChanged": Engine._admission_check_state,
}

__all__ = ["Engine", "EVENT_TYPES", "Pending"]
