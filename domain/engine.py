"""The engine: folds contract-v1 input events into state and returns the decisions they cause.

`Engine.apply(event, offset)` is the whole interface: a pure step from (state, event) to
(state', decisions). It never raises on bad input; an invalid event becomes a `Rejected` decision
and changes nothing. After each event (a Batch counts as one) the admission cycle runs to a fixed
point (`scheduler.schedule`).

The engine dispatches; the rules live by concern: reading a record and its envelope
(envelope.py), configuration (config_events.py, with stop_policy.py), workloads
(workload_events.py), admission checks (admission_checks.py), a workload's moves and their
decisions (lifecycle.py), and the admission cycle (scheduler.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
from mypy_extensions import mypyc_attr

from domain import local_queue_usage, pods_ready, reasons, time_driven
from domain.admission_checks import check_state_changed
from domain.authority import (
    check_inner_source,
    check_pending,
    check_source,
    read_source,
    scoped_id,
)
from domain.clock import own_time, trusts_time
from domain.config_events import (
    apply_object,
    config_applied,
    config_deleted,
    refresh_activeness,
)
from domain.decisions import (
    INTERNAL_ERRORS,
    Applied,
    Decision,
    InternalError,
    Pending,
    Rejected,
)
from domain.decisions import encode as encode_decision
from domain.emitter import Emitter
from domain.envelope import (
    BATCH_SLOTS,
    Record,
    Unparseable,
    advance_clock,
    decode_record,
    event_time,
    is_retry,
    limit_error,
    remember,
    subject,
)
from domain.fields import Fields, InvalidInput, type_name
from domain.lifecycle import DeferredWakes, wake_queue
from domain.limits import MAX_DECISION_BYTES, batch_error
from domain.names import shown
from domain.objects import ConfigObject
from domain.scheduler import schedule
from domain.state import State
from domain.tenant_limits import NO_TENANT_LIMITS, check_event_size
from domain.typed_decoding import NotTyped
from domain.typed_decoding import decode as decode_typed
from domain.typed_decoding import workload_ref as typed_ref
from domain.typed_decoding import workload_spec as typed_spec
from domain.typed_events import Batch as TypedBatch
from domain.typed_events import Deleted as TypedDeleted
from domain.typed_events import Finished as TypedFinished
from domain.typed_events import Submitted as TypedSubmitted
from domain.typed_events import WorkloadEvent
from domain.workload import WorkloadSpec, parse_workload
from domain.workload_events import (
    UPDATED,
    delete,
    finish,
    lookup,
    rejected_workload,
    release_workload,
    settle,
    submit,
    update,
)

EVENT_TYPES = (
    "ConfigApplied",
    "ConfigDeleted",
    "WorkloadSubmitted",
    "WorkloadFinished",
    "WorkloadDeleted",
    "WorkloadUpdated",
    "WorkloadReleased",
    "AdmissionCheckStateChanged",
    "WorkloadPodsReady",
    "Tick",
    "Batch",
)

Raw = Mapping[str, Any]

_json = msgspec.json.Decoder()
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_MAX_ERROR_TEXT = 1000


# Benchmarks and tests wrap it in subclasses; compiled by mypyc, a class must allow that.
@mypyc_attr(allow_interpreted_subclasses=True)
class Engine:
    def __init__(self, max_decision_bytes: int = MAX_DECISION_BYTES) -> None:
        self.state = State()
        self.max_decision_bytes = max_decision_bytes
        self._event_time: int | None = None  # `time` of the event being applied, if it has one
        self._wakes: DeferredWakes | None = None  # while a Batch's typed events are applied
        # The `source` of the top-level event being applied (domain/authority.py), and its size.
        self._source: str | None = None
        self._record_size: int | None = None
        self._log_time: int | None = None  # the record's log time, when the log gave one
        self._ticked = False  # the event being applied is a Tick

    def apply(self, event: Record, offset: int, log_time: int | None = None) -> list[Decision]:
        """Decide one input record. `log_time`: its time in the log (µs since the epoch), when
        the log keeps one (domain/clock.py): the event's time when it has no `time` of its own."""
        out = Emitter(offset)
        self._log_time = log_time
        self._ticked = False
        try:
            made = self._apply(event, offset, out)
        except Exception as exc:  # noqa: BLE001 - one bad record must not stop the log
            made = self._failed(exc, out)
        return self._bounded(made)

    def apply_object(self, obj: ConfigObject, out: Emitter) -> None:
        """Apply a configuration object (a snapshot's, when it is restored)."""
        apply_object(self.state, obj, out)

    def _refresh_activeness(self, out: Emitter) -> None:
        refresh_activeness(self.state, out)

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

    def _apply(self, event: Record, offset: int, out: Emitter) -> list[Decision]:
        too_big = limit_error(event)
        if too_big is not None:
            out.emit(Rejected, reason=reasons.LIMIT_EXCEEDED, message=f"record at offset {offset}: {too_big}")
            return out.decisions
        state = self.state
        state.offset = offset
        deferred, state.deferred = state.deferred, {}
        if state.admitted_roots:
            state.admitted_roots = {}
        if state.timers.live:
            when = own_time(event)
            if when is None:
                when = self._log_time
            due = state.timers.next_due()
            if when is not None and due is not None and due <= when:
                self._fire_timers(when, deferred, out)
                deferred, state.deferred = state.deferred, {}
        start = len(out.decisions)
        submitted: list[str] = []
        self._source = None
        self._record_size = len(event) if type(event) is bytes or type(event) is str else None
        # An event with a `source` (the sequencer's, domain/authority.py) takes the general path,
        # which holds it to its source's rules; the word anywhere else only costs that path.
        # So does every event while tenant limits are set: the typed path does not count a
        # namespace's pending workloads.
        applied = (
            self._apply_typed(event, offset * BATCH_SLOTS, out, submitted)
            if type(event) is bytes and b'"source"' not in event
            and state.configuration.tenant_limits is NO_TENANT_LIMITS
            else None
        )
        if applied is None:
            raw = decode_record(event, out)
            applied = raw is not None and self._dispatch(raw, offset * BATCH_SLOTS, out, submitted, None)
        if not applied or self._ticked:
            # A rejected or repeated event changes nothing, not even by way of what it wakes;
            # nor does a Tick, beyond the timers its time fired (before it).
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
        if pods_ready.blocks_admission(state):
            pods_ready.settle_blocked(state, out, submitted)
        else:
            schedule(state, out)
        settle(state, out, submitted)
        if time_driven.watching(state):
            time_driven.watch(state, out.decisions, start, state.clock)
        return out.decisions

    def _fire_timers(self, when: int, deferred: dict[str, None], out: Emitter) -> None:
        """The timers the record's time `when` reached fire, before the record is decided, and
        an admission cycle follows: what a `Tick` at that time just before the record would do
        (so inserting one there changes no decision, only their causes).

        That step runs as an input event of its own for the rules that compare offsets (one
        preemption per workload per event, a resumed flavor scan): `state.offset` is then a
        number no record has."""
        state = self.state
        offset = state.offset
        advance_clock(state, when)
        state.offset = -2 - offset
        try:
            for name in deferred:
                cq = state.cluster_queues.get(name)
                if cq is not None:
                    wake_queue(state, cq)
            start = len(out.decisions)
            time_driven.fire_due(state, out, when)
            local_queue_usage.advance(state)
            if not pods_ready.blocks_admission(state):
                schedule(state, out)
            time_driven.watch(state, out.decisions, start, state.clock)
        finally:
            state.offset = offset
        if state.admitted_roots:
            state.admitted_roots = {}

    # -- the typed path: the common workload events, decoded into Structs -------------------
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
        if is_retry(state, batch.id):
            return False
        if not batch.events or batch_error(len(batch.events)) is not None:
            return None  # the general path rejects it
        try:
            batch_time = event_time(batch.time)
        except InvalidInput:
            return None
        if batch_time is None:
            batch_time = self._log_time
        advance_clock(state, batch_time)
        remember(state, batch.id)
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
        if is_retry(state, ev.id):
            return False  # a producer's retry: already applied, no new outcome
        time = inherited
        try:
            if ev.time is not None:
                time = event_time(ev.time)
            if time is None:
                time = self._log_time
            if isinstance(ev, TypedSubmitted):
                spec: WorkloadSpec | None = typed_spec(ev.workload)
                key = ""
            else:
                spec = None
                key = typed_ref(ev.namespace, ev.name)
        except (NotTyped, InvalidInput):
            return None
        self._event_time = time
        clock = state.clock
        advance_clock(state, time)
        try:
            if spec is not None:
                submit(state, spec, seq, time, out, submitted)
            elif type(ev) is TypedFinished:
                finish(state, key, out, self._wakes)
            elif type(ev) is TypedDeleted:
                delete(state, key, out, self._wakes)
            else:
                release_workload(state, key, out)
        except InvalidInput:
            state.clock = clock
            return None  # refused before any change: the general path says why
        remember(state, ev.id)
        return True

    # -- the general path: any event, decoded as a dict ---------------------------------------
    def _dispatch(
        self,
        raw: Mapping[str, Any],
        seq: int,
        out: Emitter,
        submitted: list[str],
        batch_index: int | None,
    ) -> bool:
        """Apply one event (the `batch_index`-th of a Batch, or one at the top level when
        None); False when it was a producer's retry or was rejected. A rejected event changes
        nothing: not even the clock, which its `time` would have moved."""
        etype = raw.get("type")
        state = self.state
        top_level = batch_index is None
        clock = state.clock
        try:
            if top_level:
                self._source = read_source(raw)
                check_event_size(state.configuration.tenant_limits, self._source, self._record_size)
            else:
                check_inner_source(raw, self._source)
            event_id = scoped_id(self._source, raw.get("id"))
            if is_retry(state, event_id):
                return False  # a producer's retry: already applied, no new outcome
            check_source(self._source, etype, raw)
            check_pending(state, state.configuration.tenant_limits, etype, raw)
            time = event_time(raw.get("time"))  # read even where not trusted: a bad one is refused
            if not trusts_time(self._source):
                time = None  # a tenant's event has the log's time (domain/clock.py)
            if time is None and top_level:
                time = self._log_time
            if time is not None:
                self._event_time = time
                advance_clock(state, time)
            elif top_level:
                self._event_time = None  # inner events of a Batch inherit the Batch's time
            if etype == "Batch":
                if not top_level:
                    raise InvalidInput(reasons.MALFORMED_EVENT, "a Batch cannot contain another Batch")
                if raw.get("events") is None:
                    raise InvalidInput(reasons.MALFORMED_EVENT, "events: required value")
                events = Fields(raw, "", reasons.MALFORMED_EVENT).list("events")
                if not events:
                    raise InvalidInput(reasons.MALFORMED_EVENT, "events: must hold at least one event")
                too_many = batch_error(len(events))
                if too_many is not None:
                    raise InvalidInput(reasons.LIMIT_EXCEEDED, too_many)
                remember(state, event_id)
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
            handler(self, raw, seq, out, submitted, batch_index)
            remember(state, event_id)
            return True
        except InvalidInput as exc:
            state.clock = clock
            label = shown(etype) if isinstance(etype, str) else "event"
            kind, name, namespace = subject(raw)
            out.emit(
                Rejected,
                rejected_workload(raw),
                reason=exc.reason,
                message=f"{label}: {exc.message}",
                kind=kind,
                name=name,
                namespace=namespace,
                batchIndex=batch_index,
            )
            return False

    def _dispatch_inner(self, inner: object, i: int, seq: int, out: Emitter, submitted: list[str]) -> None:
        """The i-th event of a Batch, by the general path."""
        if not isinstance(inner, Mapping):
            out.emit(
                Rejected,
                reason=reasons.MALFORMED_EVENT,
                message=f"events[{i}]: expected an event object, got {type_name(inner)}",
                batchIndex=i,
            )
            return
        self._dispatch(inner, seq + i, out, submitted, i)

    # -- handlers: each event type to the module that holds its rules ------------------------
    # (raw event, its log position, the decisions so far, the submissions to settle, and its
    # index in its Batch: None at the top level)
    def _config_applied(self, raw: Raw, seq: int, out: Emitter, submitted: list[str], index: int | None) -> None:
        config_applied(self.state, raw, out, index)

    def _config_deleted(self, raw: Raw, seq: int, out: Emitter, submitted: list[str], index: int | None) -> None:
        config_deleted(self.state, raw, out, index)

    def _workload_submitted(self, raw: Raw, seq: int, out: Emitter, submitted: list[str], index: int | None) -> None:
        spec = parse_workload(raw.get("workload"))
        if spec.max_exec_seconds is not None:
            self.state.timers.watch_execution = True
        submit(self.state, spec, seq, self._event_time, out, submitted)

    def _workload_updated(self, raw: Raw, seq: int, out: Emitter, submitted: list[str], index: int | None) -> None:
        spec = parse_workload(raw.get("workload"))
        if spec.max_exec_seconds is not None:
            self.state.timers.watch_execution = True
        update(self.state, spec, out, index)

    def _workload_finished(self, raw: Raw, seq: int, out: Emitter, submitted: list[str], index: int | None) -> None:
        finish(self.state, lookup(raw), out, self._wakes)

    def _workload_deleted(self, raw: Raw, seq: int, out: Emitter, submitted: list[str], index: int | None) -> None:
        delete(self.state, lookup(raw), out, self._wakes)

    def _workload_released(self, raw: Raw, seq: int, out: Emitter, submitted: list[str], index: int | None) -> None:
        release_workload(self.state, lookup(raw), out)

    def _admission_check_state(
        self, raw: Raw, seq: int, out: Emitter, submitted: list[str], index: int | None
    ) -> None:
        check_state_changed(self.state, raw, out, index)

    def _workload_pods_ready(self, raw: Raw, seq: int, out: Emitter, submitted: list[str], index: int | None) -> None:
        pods_ready.reported(self.state, raw, out, index)

    def _tick(self, raw: Raw, seq: int, out: Emitter, submitted: list[str], index: int | None) -> None:
        """The log's time, appended by the agent while nothing else moves it (domain/clock.py):
        the timers it reached fired before it; it changes nothing else."""
        if index is not None:
            raise InvalidInput(reasons.MALFORMED_EVENT, "a Tick cannot be inside a Batch")
        if self._event_time is None:
            raise InvalidInput(reasons.MALFORMED_EVENT, "time: required value (a Tick carries the log's time)")
        out.emit(Applied, kind="Tick", action=UPDATED)
        self._ticked = True


_Handler = Callable[[Engine, Raw, int, Emitter, list[str], int | None], None]

_HANDLERS: dict[str, _Handler] = {
    "ConfigApplied": Engine._config_applied,
    "ConfigDeleted": Engine._config_deleted,
    "WorkloadSubmitted": Engine._workload_submitted,
    "WorkloadFinished": Engine._workload_finished,
    "WorkloadDeleted": Engine._workload_deleted,
    "WorkloadUpdated": Engine._workload_updated,
    "WorkloadReleased": Engine._workload_released,
    "AdmissionCheckStateChanged": Engine._admission_check_state,
    "WorkloadPodsReady": Engine._workload_pods_ready,
    "Tick": Engine._tick,
}

__all__ = ["BATCH_SLOTS", "EVENT_TYPES", "Engine", "Pending", "Unparseable"]
