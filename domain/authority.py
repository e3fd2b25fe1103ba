"""Who may send what: an event's source, the rules a source is held to, and limits per tenant.

In Kueue, Kubernetes RBAC decides who may change a ClusterQueue (a batch administrator) and who
may create a Workload in a namespace (that namespace's users). quotaflow's counterpart is the
topic an event was written to, which Kafka's ACLs guard: the agent's sequencer
(streams/sequencer/) records it in the event's envelope as `source` when it appends the event
to the input log, and the rules here read nothing else, so `replay` and `audit` reproduce every
refusal from the input log alone.

- no `source` (single-topic mode): any event, as before.
- `admin` (the admin topic): any event.
- `tenant:<namespace>` (that namespace's tenant topic): only workload events
  (WorkloadSubmitted, WorkloadUpdated, WorkloadFinished, WorkloadDeleted, WorkloadReleased) of
  workloads in `<namespace>`. Configuration of any kind, admission check states (Kueue's
  admission check controllers set those, not a workload's owner), pods readiness reports and
  Ticks come only from the admin topic.

An event id is scoped by its source (`scoped_id`): a tenant reusing another source's id neither
suppresses that source's event nor is suppressed by it.

Limits per tenant (`quotaflow.tenantLimits` of the Configuration, so they too are in the log):
`maxPendingWorkloads` per namespace (as YuniKorn's queue `maxapplications`, which bounds the
applications a queue holds; here, workloads submitted and not admitted), whatever the source,
and `maxEventBytes`, the largest record a tenant topic may send.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from domain import reasons
from domain.fields import InvalidInput, type_name
from domain.names import label_problem, shown
from domain.state import State
from domain.tenant_limits import TENANT_PREFIX, TenantLimits

ADMIN: Final = "admin"

# What a tenant topic may carry: a workload's own lifecycle, nothing that changes quota.
TENANT_EVENTS: Final = frozenset(
    ("WorkloadSubmitted", "WorkloadUpdated", "WorkloadFinished", "WorkloadDeleted", "WorkloadReleased", "Batch")
)
# The Kubernetes verb each event stands for, as RBAC's "cannot VERB resource" names it.
_VERBS: Final = {
    "WorkloadSubmitted": "create",
    "WorkloadUpdated": "update",
    "WorkloadFinished": "update",
    "WorkloadReleased": "update",
    "WorkloadDeleted": "delete",
    "AdmissionCheckStateChanged": "update",
    "ConfigApplied": "apply",
    "ConfigDeleted": "delete",
    "WorkloadPodsReady": "update",
    "Tick": "append",
}
# Why a tenant may not send them, as each refusal says.
_ADMIN_CONFIGURATION: Final = "configuration and admission check states come only from the admin topic"
_ADMIN_REPORTS: Final = "pods readiness and Ticks come only from the admin topic"
# What the refusal of each event a tenant may not send names, besides configuration, and why.
_REFUSED: Final = {
    "AdmissionCheckStateChanged": ("admission check states", _ADMIN_CONFIGURATION),
    "WorkloadPodsReady": ("pods readiness", _ADMIN_REPORTS),
    "Tick": ("Ticks", _ADMIN_REPORTS),
}


def tenant_source(namespace: str) -> str:
    return TENANT_PREFIX + namespace


def read_source(raw: Mapping[str, Any]) -> str | None:
    """The event's `source`: None, `admin`, or `tenant:<namespace>` (a valid namespace name)."""
    source = raw.get("source")
    if source is None:
        return None
    if not isinstance(source, str):
        raise InvalidInput(reasons.MALFORMED_EVENT, f"source: expected a string, got {type_name(source)}")
    if source == ADMIN:
        return source
    if source.startswith(TENANT_PREFIX) and label_problem(source[len(TENANT_PREFIX) :]) is None:
        return source
    raise InvalidInput(
        reasons.MALFORMED_EVENT,
        f'source: "{shown(source)}" is not a source; expected "{ADMIN}" or "{TENANT_PREFIX}<namespace>"',
    )


def check_inner_source(raw: Mapping[str, Any], batch_source: str | None) -> None:
    """A Batch's events come from where the Batch came from; one naming another source is refused
    (the sequencer sets only the Batch's, so another is a producer's claim)."""
    own = raw.get("source")
    if own is not None and own != batch_source:
        raise InvalidInput(
            reasons.FORBIDDEN,
            f'source: "{shown(str(own))}" differs from its Batch\'s source "{batch_source}"; '
            "an event's source is where the sequencer read it, not a field a producer sets",
        )


def scoped_id(source: str | None, event_id: Any) -> Any:
    """The key an event id is remembered under: the id itself without a source (single-topic
    mode, as before), else the source and the id, so sources' ids never collide."""
    if source is None or not isinstance(event_id, str):
        return event_id
    return f"{source}\x1f{event_id}"


def _workload_namespace(etype: str, raw: Mapping[str, Any]) -> object:
    if etype in ("WorkloadSubmitted", "WorkloadUpdated"):
        workload = raw.get("workload")
        meta = workload.get("metadata") if isinstance(workload, Mapping) else None
        namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    else:
        namespace = raw.get("namespace")
    return namespace or "default"


def _resource(etype: str, raw: Mapping[str, Any]) -> str:
    if etype == "ConfigApplied":
        obj = raw.get("object")
        kind = obj.get("kind") if isinstance(obj, Mapping) else None
    elif etype == "ConfigDeleted":
        kind = raw.get("kind")
    else:
        kind = "Workload"
    return shown(kind) if isinstance(kind, str) else "configuration"


def check_source(source: str | None, etype: object, raw: Mapping[str, Any]) -> None:
    """Refuse (Forbidden) an event its source may not send; the message names the source and
    the rule, in the words of Kubernetes' RBAC refusals."""
    if source is None or source == ADMIN or not isinstance(etype, str):
        return
    namespace = source[len(TENANT_PREFIX) :]
    if etype not in TENANT_EVENTS:
        verb = _VERBS.get(etype)
        if verb is None:
            return  # not an event type at all: the engine says so
        if etype.startswith("Config"):
            what, rule = _resource(etype, raw), _ADMIN_CONFIGURATION
        else:
            what, rule = _REFUSED[etype]
        raise InvalidInput(reasons.FORBIDDEN, f'source "{source}" cannot {verb} {what}: {rule}')
    if etype == "Batch":
        return
    target = _workload_namespace(etype, raw)
    if target != namespace:
        shown_target = shown(target) if isinstance(target, str) else type_name(target)
        raise InvalidInput(
            reasons.FORBIDDEN,
            f'source "{source}" cannot {_VERBS[etype]} workloads in namespace "{shown_target}": '
            f'a tenant topic carries only its own namespace\'s workloads ("{namespace}")',
        )


# -- limits per tenant (domain/tenant_limits.py holds their configuration) --------------------


def pending_in(state: State, namespace: str) -> int:
    """Workloads of `namespace` submitted and not admitted (queued, parked, evicted and requeued).
    Costs a look at every LocalQueue's key and a walk of the namespace's workloads, and only
    where a limit is set."""
    count = 0
    for (ns, _), members in state.by_local_queue.items():
        if ns == namespace:
            for key in members:
                ws = state.workloads.get(key)
                if ws is not None and ws.admission is None:
                    count += 1
    return count


def check_pending(state: State, limits: TenantLimits, etype: object, raw: Mapping[str, Any]) -> None:
    """A new workload in a namespace already at its `maxPendingWorkloads` is refused."""
    if etype != "WorkloadSubmitted":
        return
    namespace = _workload_namespace(etype, raw)
    if not isinstance(namespace, str):
        return  # the submission itself is refused as invalid
    limit = limits.of(namespace).max_pending_workloads
    if limit is None:
        return
    workload = raw.get("workload")
    meta = workload.get("metadata") if isinstance(workload, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    key = f"{namespace}/{name}"
    if key in state.workloads or key in state.finished:
        return  # not a new workload: the engine says what it is
    pending = pending_in(state, namespace)
    if pending >= limit:
        raise InvalidInput(
            reasons.LIMIT_EXCEEDED,
            f'namespace "{namespace}" is at its tenantLimits maxPendingWorkloads of {limit}: '
            f"{pending} submitted and not admitted",
        )
