"""Workload events: submission, update, finish, deletion and release of a workload.

Each function applies one event to the state, or raises `InvalidInput` before changing anything
(the engine then decides `Rejected`). What a workload's moves decide (Pending, evictions, quota
given back) is said in domain/lifecycle.py; the admission cycle that follows every event is
domain/scheduler.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from domain import reasons
from domain.decisions import Applied, Deleted, Finished
from domain.emitter import Emitter
from domain.envelope import BATCH_SLOTS
from domain.fields import Fields, InvalidInput
from domain.lifecycle import (
    DeferredWakes,
    drop_if_terminated,
    evict,
    release,
    release_evicted,
    route,
    set_pending,
    set_priority,
    unroute,
    wake_tree,
)
from domain.names import label_problem, subdomain_problem
from domain.objects import checked
from domain.priority import defaulted, global_default, template_priority_class
from domain.priority import priority_of as _priority_of
from domain.retransform import apply_to_spec, as_written
from domain.shared_values import order_key
from domain.state import ClusterQueueState, State, WorkloadState
from domain.workload import WorkloadSpec, workload_ref

UPDATED = "updated"  # an Applied decision's action


def submit(
    state: State, spec: WorkloadSpec, seq: int, event_time: int | None, out: Emitter, submitted: list[str]
) -> None:
    spec = apply_to_spec(spec, state.configuration.resources)  # Configuration `resources`
    key = spec.key
    if key in state.workloads or key in state.finished:
        raise InvalidInput(reasons.DUPLICATE_WORKLOAD, f"workload {key} already exists")
    spec = with_default_class(state, spec)
    priority = priority_of(state, spec)
    # FIFO position: creationTimestamp, else this event's time, else the log's latest time.
    queue_time = spec.creation_time
    if queue_time is None:
        queue_time = event_time if event_time is not None else state.clock
    ws = WorkloadState(spec, seq, queue_time, priority, order_key(priority, queue_time, seq, key))
    state.workloads[key] = ws
    state.by_local_queue.setdefault((spec.namespace, spec.queue_name), {})[key] = None
    if spec.priority_class is not None:
        state.by_priority_class.setdefault(spec.priority_class, {})[key] = None
    submitted.append(key)
    if spec.active:
        route(state, out, ws)
    else:
        set_pending(state, out, ws, (reasons.DEACTIVATED, reasons.MSG_DEACTIVATED))


def with_default_class(state: State, spec: WorkloadSpec) -> WorkloadSpec:
    """The workload with the `default` WorkloadPriorityClass where Kueue defaults it
    (domain/priority.py)."""
    return defaulted(spec, state.priority_classes, state.configuration.workload_priority_class_defaulting)


def priority_of(state: State, spec: WorkloadSpec) -> int:
    """Its priority, as domain/priority.py resolves it, or `InvalidInput` naming the missing class."""
    return _priority_of(spec, state.priority_classes, state.pod_priority_classes)


def change_priority(state: State, ws: WorkloadState, priority: int, out: Emitter) -> None:
    """Its WorkloadPriorityClass's value changed: it moves in its queue, or, holding quota, among
    the preemption candidates (which may let a waiting head in)."""
    if priority == ws.priority:
        return
    requeue = ws.queued
    if requeue:
        unroute(state, ws)
    set_priority(state, ws, priority)
    if requeue:
        route(state, out, ws)
    elif ws.admission is not None:
        wake_tree(state, state.cluster_queues[ws.admission.cluster_queue])


def lookup(raw: Mapping[str, Any]) -> str:
    """The `namespace/name` key an event's own `namespace` and `name` fields name."""
    f = Fields(raw, "", reasons.MALFORMED_EVENT)
    namespace = f.str("namespace", "default") or "default"
    name = f.str("name")
    checked(f, "namespace", namespace, label_problem(namespace))
    checked(f, "name", name, subdomain_problem(name))
    return f"{namespace}/{name}"


def finish(state: State, key: str, out: Emitter, wakes: DeferredWakes | None) -> None:
    ws = state.workloads.get(key)
    if ws is None:
        if key in state.finished:
            raise InvalidInput(reasons.UNKNOWN_WORKLOAD, f"workload {key} already finished")
        raise InvalidInput(reasons.UNKNOWN_WORKLOAD, f"workload {key} not found")
    _unevaluated(state, ws, out)
    # The finish itself first, then what it sets off (a lingering ClusterQueue going away).
    out.emit(Finished, key)
    state.finished[key] = None
    _forget(state, ws, out, wakes)


def delete(state: State, key: str, out: Emitter, wakes: DeferredWakes | None) -> None:
    ws = state.workloads.get(key)
    if ws is None:
        if key not in state.finished:
            raise InvalidInput(reasons.UNKNOWN_WORKLOAD, f"workload {key} not found")
        del state.finished[key]
        out.emit(Deleted, key)
        return
    _unevaluated(state, ws, out)
    out.emit(Deleted, key)
    _forget(state, ws, out, wakes)


def _unevaluated(state: State, ws: WorkloadState, out: Emitter) -> None:
    """A workload submitted earlier in the same Batch ends before the admission cycle (which
    runs after the whole Batch) saw it: its submission still gets an outcome of its own."""
    if ws.seq >= state.offset * BATCH_SLOTS and ws.key not in out.touched and ws.admission is None:
        set_pending(state, out, ws, (reasons.PENDING_EVALUATION, reasons.MSG_NOT_EVALUATED))


def _waiting_in(state: State, ws: WorkloadState) -> ClusterQueueState | None:
    """The ClusterQueue whose queue `ws` waits in, if it waits in one."""
    return state.cluster_queues.get(ws.cluster_queue) if ws.queued and ws.cluster_queue is not None else None


def _forget(state: State, ws: WorkloadState, out: Emitter, wakes: DeferredWakes | None) -> None:
    # A workload that waits in a ClusterQueue's queue and finishes or is deleted retries the
    # inadmissible workloads of that queue's cohort tree, as Kueue's workload controller does
    # for a finished workload and for a deleted one (pkg/controller/core/workload_controller.go
    # Update and Delete -> QueueAssociatedInadmissibleWorkloadsAfter, pkg/cache/queue/manager.go,
    # which notifies the root cohort of the workload's LocalQueue's ClusterQueue): an answer
    # that changed since the heads were parked (an admission in the tree gave them preemption
    # candidates) is found then, not at the next release.
    waited_in = _waiting_in(state, ws)
    unroute(state, ws)
    cq = release(state, ws, wakes)
    if waited_in is not None and ws.admission is None:
        wake_tree(state, waited_in)
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


def update(state: State, spec: WorkloadSpec, out: Emitter, batch_index: int | None) -> None:
    spec = with_default_class(state, spec)
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
    priority = priority_of(state, spec)
    # Its own outcome, whatever the update changes (it may change nothing another decision shows).
    out.emit(Applied, kind="Workload", name=spec.name, namespace=spec.namespace, action=UPDATED, batchIndex=batch_index)
    # Keep the original queue position: an update is not a new submission.
    # What the update cannot change stays the submission's: the pod sets as counted, what they
    # were found to be (requests above limits), and the UID.
    spec_kept = msgspec.structs.replace(
        old,
        queue_name=spec.queue_name,
        priority=spec.priority,
        priority_class=spec.priority_class,
        active=spec.active,
        labels=spec.labels,
        creation_time=old.creation_time if spec.creation_time is None else spec.creation_time,
        pod_priority_class=spec.pod_priority_class,
        max_exec_seconds=spec.max_exec_seconds,
    )
    was_pending = ws.admission is None and old.active
    # Kueue's workload controller handles a deactivated workload as a finished one
    # (QueueAssociatedInadmissibleWorkloadsAfter): the tree it waited in is retried, so the
    # room it held as a parked head is free at this event (see `_forget`).
    waited_in = _waiting_in(state, ws)
    if was_pending:
        unroute(state, ws)
    _reindex(state, ws, old, spec_kept)
    ws.spec = spec_kept
    if spec_kept.creation_time is not None:
        if ws.created_queue_time is not None:
            ws.created_queue_time = spec_kept.creation_time  # an eviction's time still orders it
        else:
            ws.queue_time = spec_kept.creation_time
    old_priority = ws.priority
    set_priority(state, ws, priority)
    if not spec_kept.active:
        if ws.admission is None:
            set_pending(state, out, ws, (reasons.DEACTIVATED, reasons.MSG_DEACTIVATED))
            if waited_in is not None:
                wake_tree(state, waited_in)
        elif not ws.evicted:
            evict(state, out, ws, reasons.EVICTED_DEACTIVATED, reasons.MSG_DEACTIVATED)
        return
    if ws.admission is None:
        route(state, out, ws)
    elif _priority_changed(state, old, spec_kept, old_priority, priority):
        wake_tree(state, state.cluster_queues[ws.admission.cluster_queue])


def _priority_changed(state: State, old: WorkloadSpec, new: WorkloadSpec, old_priority: int, priority: int) -> bool:
    """Whether an update of a workload holding quota retries its cohort tree's parked heads (a
    lower priority may give them a preemption target), as Kueue's workload controller does when
    workload.PriorityChanged (pkg/workload/workload.go; Update in
    pkg/controller/core/workload_controller.go -> QueueAssociatedInadmissibleWorkloadsAfter):
    only for a workload on a WorkloadPriorityClass, not one that was on a Kubernetes
    PriorityClass, when the class it names or its priority changed. A bare `spec.priority`
    change only updates what the cache holds there, so it waits for the next retry."""
    if new.priority_class is None:
        return False
    if old.priority_class is None and (
        old.pod_priority_class is not None
        or (
            old.priority is None
            and (template_priority_class(old) is not None or global_default(state.pod_priority_classes) is not None)
        )
    ):
        return False
    return new.priority_class != old.priority_class or priority != old_priority


def _reindex(state: State, ws: WorkloadState, old: WorkloadSpec, new: WorkloadSpec) -> None:
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


def release_workload(state: State, key: str, out: Emitter) -> None:
    """`WorkloadReleased`: the launcher says an evicted workload's pods are gone."""
    ws = state.workloads.get(key)
    if ws is None:
        raise InvalidInput(reasons.UNKNOWN_WORKLOAD, f"workload {key} not found")
    if not ws.evicted:
        raise InvalidInput(
            reasons.NOT_EVICTED, f"workload {key} holds no quota awaiting release (it was not evicted)"
        )
    release_evicted(state, out, ws)


def settle(state: State, out: Emitter, submitted: list[str]) -> None:
    """Every submission gets an outcome, even one the cycle did not reach."""
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


def rejected_workload(raw: Mapping[str, Any]) -> str | None:
    """The workload a rejected event names, where its name is one Kubernetes would accept (an
    invalid one is quoted, cut short, in the message instead)."""
    etype = raw.get("type")
    ref: str | None = None
    if etype in ("WorkloadSubmitted", "WorkloadUpdated"):
        inner = raw.get("workload")
        ref = workload_ref(inner) if isinstance(inner, Mapping) else None
    elif etype in (
        "WorkloadFinished", "WorkloadDeleted", "WorkloadReleased", "AdmissionCheckStateChanged", "WorkloadPodsReady",
    ):
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
