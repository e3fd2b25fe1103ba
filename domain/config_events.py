"""Configuration events: `ConfigApplied` and `ConfigDeleted` of Kueue's objects, and what they
change for the queues and workloads that depend on them (activeness, cohort trees, priorities,
stop policies).

`config_applied` and `config_deleted` apply one event or raise `InvalidInput` before changing
anything (the engine then decides `Rejected`). An applied event's first decision is `Applied`
(created, updated or deleted), then what it set off (evictions of a stopped queue, Pending of the
workloads that wait differently). `apply_object` alone also restores a snapshot's configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from domain import local_queue_usage, reasons
from domain.decisions import Applied
from domain.emitter import Emitter
from domain.fields import Fields, InvalidInput
from domain.lifecycle import (
    drop_if_terminated,
    new_queue,
    rebuild_queue,
    route,
    set_pending,
    sync_checks,
    unroute,
    wake_all,
    wake_tree,
)
from domain.names import label_problem, shown, subdomain_problem
from domain.objects import (
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
from domain.priority import apply_pod_priority_class, check_pod_priority_class
from domain.queues import PendingQueue
from domain.quota import QuotaNode
from domain.retransform import requests_changed
from domain.state import ClusterQueueState, State
from domain.stop_policy import (
    drain_local_queue,
    is_stopped,
    stop_cluster_queue,
    take_back_reservations,
)
from domain.tas import check_flavor_update, topology_problems
from domain.topology import (
    apply_cohort,
    delete_cohort,
    quota_maps,
    set_parent,
    would_cycle,
    yunikorn_max_violations,
)
from domain.workload_events import UPDATED, change_priority

CREATED = "created"
DELETED = "deleted"


def config_applied(state: State, raw: Mapping[str, Any], out: Emitter, batch_index: int | None) -> None:
    """Validate the object (`refuse`), decide `Applied`, then apply it and what it sets off."""
    raw_object = raw.get("object")
    obj = parse_object(raw_object)
    refuse(state, obj)
    assert isinstance(raw_object, Mapping)
    key = config_key(obj)
    kind, name, namespace = identity(obj)
    existing = state.cluster_queues.get(obj.name) if isinstance(obj, ClusterQueueSpec) else None
    # A deleted ClusterQueue that lingers while it holds quota is gone to the user: applied
    # again, it is created.
    known = key in state.objects and (existing is None or not existing.terminating)
    action = UPDATED if known else CREATED
    out.emit(Applied, kind=kind, name=name, namespace=namespace, action=action, batchIndex=batch_index)
    apply_object(state, obj, out)
    state.objects[key] = raw_object


def refuse(state: State, obj: ConfigObject) -> None:
    """Raise `InvalidInput` if the object, valid on its own, cannot be applied to this state.
    Runs before anything changes, so a refused object changes nothing."""
    if isinstance(obj, CohortSpec):
        if would_cycle(state, obj.name, obj.parent):
            raise InvalidInput(
                reasons.INVALID_OBJECT,
                f"Cohort: spec.parentName: {obj.parent} would make a cycle of cohorts",
            )
        if obj.yunikorn_rules:
            cohort = state.cohorts.get(obj.name)
            problems = yunikorn_max_violations(
                state, cohort.node if cohort else None, obj.name, False, obj.quotas(), obj.parent
            )
            _refuse_above_parent("Cohort", obj.name, problems)
    elif isinstance(obj, ClusterQueueSpec):
        if obj.yunikorn_rules:
            cq = state.cluster_queues.get(obj.name)
            problems = yunikorn_max_violations(
                state, cq.node if cq else None, obj.name, True, obj.quotas(), obj.cohort
            )
            _refuse_above_parent("ClusterQueue", obj.name, problems)
    elif isinstance(obj, ResourceFlavor):
        check_flavor_update(state.flavors.get(obj.name), obj)
    elif isinstance(obj, PodPriorityClass):
        check_pod_priority_class(state.pod_priority_classes, obj)
    elif isinstance(obj, LocalQueueSpec):
        old = state.local_queues.get((obj.namespace, obj.name))
        if old is not None and old.cluster_queue != obj.cluster_queue:
            raise InvalidInput(
                reasons.IMMUTABLE_FIELD,
                f"LocalQueue {obj.namespace}/{obj.name}: spec.clusterQueue: Invalid value: "
                f'"{obj.cluster_queue}": field is immutable',
            )


def apply_object(state: State, obj: ConfigObject, out: Emitter) -> None:
    """Apply a valid object (`refuse` found nothing against it)."""
    state.config_epoch += 1
    if isinstance(obj, ResourceFlavor):
        state.flavors[obj.name] = obj
        refresh_activeness(state, out)
    elif isinstance(obj, ClusterQueueSpec):
        _apply_cluster_queue(state, obj, out)
    elif isinstance(obj, LocalQueueSpec):
        _apply_local_queue(state, obj, out)
    elif isinstance(obj, CohortSpec):
        cohort = apply_cohort(state, obj)
        wake_node(state, cohort.node)
    elif isinstance(obj, WorkloadPriorityClass):
        state.priority_classes[obj.name] = obj.value
        for key in list(state.by_priority_class.get(obj.name, {})):
            ws = state.workloads[key]
            if ws.spec.priority is None:
                change_priority(state, ws, obj.value, out)
    elif isinstance(obj, AdmissionCheckSpec):
        state.admission_checks[obj.name] = obj
        refresh_activeness(state, out)
    elif isinstance(obj, PodPriorityClass):
        apply_pod_priority_class(state.pod_priority_classes, obj)
    elif isinstance(obj, NamespaceSpec):
        state.namespaces[obj.name] = dict(obj.labels)
        wake_all(state)
    elif isinstance(obj, Configuration):
        configuration_changed(state, out, obj)


def _apply_cluster_queue(state: State, spec: ClusterQueueSpec, out: Emitter) -> None:
    groups = {res: g for g in spec.resource_groups for res in g.covered}
    cq = state.cluster_queues.get(spec.name)
    strict = spec.queueing_strategy == STRICT_FIFO
    old_root: QuotaNode | None = None
    checks_changed = False
    if cq is None:
        cq = ClusterQueueState(spec, QuotaNode(spec.name, True), PendingQueue(strict), groups)
        state.cluster_queues[spec.name] = cq
        cq.queue = new_queue(state, cq, strict)
    else:
        old_root = cq.node.root()
        checks_changed = cq.spec.admission_checks != spec.admission_checks
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
    # Kueue's Reconcile syncs a reservation's checks before it looks at the stop policy: a
    # reservation whose last pending check is removed is admitted, and Hold then keeps it.
    if checks_changed:
        sync_checks(state, out, cq)
    stop_cluster_queue(state, out, cq)
    # Only this queue's activeness can have changed: every other queue's depends on its own
    # spec and termination and on the flavors and admission checks, and each change of those
    # refreshes all queues (see refresh_activeness). Refreshing them all here made applying
    # n ClusterQueues cost n² checks.
    refresh_activeness(state, out, only=cq)
    for key in list(state.parked.get(f"cq:{spec.name}", {})):
        ws = state.workloads[key]
        unroute(state, ws)
        route(state, out, ws)
    if old_root is not None and old_root is not cq.node.root():
        wake_node(state, old_root)
    wake_tree(state, cq)


def _refuse_above_parent(kind: str, name: str, problems: list[str]) -> None:
    if problems:
        raise InvalidInput(
            reasons.INVALID_OBJECT,
            f"{kind} {name}: {'; '.join(problems)} (YuniKorn quota model: a child queue's max "
            "cannot exceed its parent's)",
        )


def _apply_local_queue(state: State, spec: LocalQueueSpec, out: Emitter) -> None:
    key = (spec.namespace, spec.name)
    old = state.local_queues.get(key)
    state.local_queues[key] = spec
    local_queue_usage.local_queue_applied(state, key)
    members = list(state.by_local_queue.get(key, {}))
    drain_local_queue(state, out, spec.stop_policy, members)
    if old is None or old.stop_policy != spec.stop_policy:
        for wl in members:
            ws = state.workloads[wl]
            if ws.admission is None and ws.spec.active:
                unroute(state, ws)
                route(state, out, ws)


def refresh_activeness(state: State, out: Emitter, only: ClusterQueueState | None = None) -> None:
    """Recompute which ClusterQueues are active (and why not). A queue's activeness reads
    only its spec, whether it is terminating, and the flavors and admission checks that
    exist: whoever changes any of these calls this, for every queue or (`only`) for the one
    queue whose spec or termination alone changed."""
    state.config_epoch += 1
    for cq in state.cluster_queues.values() if only is None else (only,):
        problems: list[str] = []
        missing = [f for f in cq.spec.flavor_names() if f not in state.flavors]
        if missing:
            problems.append(f"references missing ResourceFlavor(s): {', '.join(missing)}")
        checks = [c.name for c in cq.spec.admission_checks if c.name not in state.admission_checks]
        if checks:
            problems.append(f"references missing AdmissionCheck(s): {', '.join(checks)}")
        problems.extend(topology_problems(cq.spec, state.flavors))
        if is_stopped(cq.spec.stop_policy):
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
                set_pending(state, out, state.workloads[cast(str, order_key[3])], (reasons.SUSPENDED, message))


def configuration_changed(state: State, out: Emitter, new: Configuration) -> None:
    """A Configuration applied or deleted (`new` is then the default): pending workloads' requests
    as the new `resources` count them, the admission fair sharing ledger's settings and the
    queues whose mode (fair or not) changes, and every parked head retried."""
    old, state.configuration = state.configuration, new
    requests_changed(state, out, old, new)
    local_queue_usage.configuration_applied(state)
    for cq in state.cluster_queues.values():
        if (cq.queue.fair is not None) != local_queue_usage.wants_fair(state, cq):
            rebuild_queue(state, cq, cq.queue.strict)
    wake_all(state)


def wake_node(state: State, node: QuotaNode) -> None:
    """Retry the parked heads of the cohort tree `node` is in."""
    root = node.root()
    stack = [root]
    while stack:
        current = stack.pop()
        if current.is_cluster_queue:
            cq = state.cluster_queues.get(current.name)
            if cq is not None:
                wake_tree(state, cq)
            return
        stack.extend(current.children.values())


def config_deleted(state: State, raw: Mapping[str, Any], out: Emitter, batch_index: int | None) -> None:
    """Find the object (or raise `InvalidInput`, having changed nothing), decide `Applied`
    (deleted), then delete it and apply what that sets off."""
    f = Fields(raw, "", reasons.MALFORMED_EVENT)
    kind = f.str("kind")
    name = f.str("name")
    if kind != "Configuration":
        checked(f, "name", name, label_problem(name) if kind == "Namespace" else subdomain_problem(name))
    namespace: str | None = None
    if kind == "ClusterQueue":
        cq = state.cluster_queues.get(name)
        found = cq is not None and not cq.terminating
    elif kind == "LocalQueue":
        namespace = f.str("namespace", "default")
        checked(f, "namespace", namespace, label_problem(namespace))
        found = (namespace, name) in state.local_queues
    elif kind == "ResourceFlavor":
        found = name in state.flavors
    elif kind == "Cohort":
        cohort = state.cohorts.get(name)
        found = cohort is not None and cohort.spec is not None
    elif kind == "WorkloadPriorityClass":
        found = name in state.priority_classes
    elif kind == "AdmissionCheck":
        found = name in state.admission_checks
    elif kind == "Namespace":
        found = name in state.namespaces
    elif kind == "PriorityClass":
        found = name in state.pod_priority_classes
    elif kind == "Configuration":
        found = True  # deleting it restores the defaults, whether or not one was applied
    else:
        raise InvalidInput(reasons.UNKNOWN_KIND, f'kind: unknown kind "{shown(kind)}"')
    if not found:
        raise InvalidInput(reasons.NOT_FOUND, f'{kind} "{name}" not found')
    out.emit(
        Applied,
        kind=kind,
        name=None if kind == "Configuration" else name,
        namespace=namespace,
        action=DELETED,
        batchIndex=batch_index,
    )
    _delete_object(state, kind, name, namespace, out)


def _delete_object(state: State, kind: str, name: str, namespace: str | None, out: Emitter) -> None:
    """Delete an object that exists, and apply what that sets off."""
    state.config_epoch += 1
    if kind == "ClusterQueue":
        cq = state.cluster_queues[name]
        # Taken back first, while the queue is still there to queue them again; then, like
        # Kueue's finalizer, it lingers, inactive, while admitted workloads hold its quota.
        take_back_reservations(state, out, list(cq.admitted))
        cq.terminating = True
        refresh_activeness(state, out)
        # No wake of its cohort tree: Kueue's ClusterQueue controller requeues nothing when a
        # queue is deleted (pkg/controller/core/clusterqueue_controller.go Delete, and Update of
        # a queue being deleted), so a head that could now preempt in the smaller cohort (under
        # fair sharing the other queues' shares rise) waits for the next event that retries its
        # tree. Reservations taken back above are releases and wake as any release does.
        drop_if_terminated(state, out, cq)
    elif kind == "LocalQueue":
        assert namespace is not None
        lq_key = (namespace, name)
        del state.local_queues[lq_key]
        local_queue_usage.local_queue_deleted(state, lq_key)
        members = list(state.by_local_queue.get(lq_key, {}))
        for key in members:
            ws = state.workloads[key]
            if ws.admission is None and ws.spec.active:
                unroute(state, ws)
                route(state, out, ws)
        take_back_reservations(state, out, members)
    elif kind == "ResourceFlavor":
        del state.flavors[name]
        refresh_activeness(state, out)
    elif kind == "Cohort":
        node = state.cohorts[name].node
        delete_cohort(state, name)
        wake_node(state, node)
    elif kind == "WorkloadPriorityClass":
        del state.priority_classes[name]
    elif kind == "AdmissionCheck":
        del state.admission_checks[name]
        refresh_activeness(state, out)
    elif kind == "Namespace":
        del state.namespaces[name]
        wake_all(state)
    elif kind == "PriorityClass":
        del state.pod_priority_classes[name]
    elif kind == "Configuration":
        configuration_changed(state, out, Configuration())
    if kind == "LocalQueue":
        state.objects.pop(object_key(kind, name, namespace), None)
    elif kind == "Configuration":
        state.objects.pop("Configuration", None)
    elif kind != "ClusterQueue":  # a deleted ClusterQueue lingers while it holds quota
        state.objects.pop(object_key(kind, name), None)


def identity(obj: ConfigObject) -> tuple[str, str | None, str | None]:
    """An object's kind, name (None for the Configuration, one per log) and namespace (for a
    namespaced kind)."""
    if isinstance(obj, Configuration):
        return "Configuration", None, None
    if isinstance(obj, LocalQueueSpec):
        return "LocalQueue", obj.name, obj.namespace
    return _KINDS[type(obj)], obj.name, None


def config_key(obj: ConfigObject) -> str:
    kind, name, namespace = identity(obj)
    return "Configuration" if name is None else object_key(kind, name, namespace)


_KINDS: dict[type, str] = {
    ResourceFlavor: "ResourceFlavor",
    ClusterQueueSpec: "ClusterQueue",
    CohortSpec: "Cohort",
    WorkloadPriorityClass: "WorkloadPriorityClass",
    AdmissionCheckSpec: "AdmissionCheck",
    NamespaceSpec: "Namespace",
    PodPriorityClass: "PriorityClass",
}
