"""What the dashboard's pages show, as JSON-ready dicts built from a `Projection`.

The JSON views (projections/views.py) speak Kueue's shapes, with quantities as Kubernetes
strings; a page that draws bars needs numbers too, and lists it can page through without the
server building the whole list on every request. Every function here reads a `Projection` and
never changes it; each costs what it returns plus one step per ClusterQueue, never a pass over
every workload, so a cluster with 100,000 pending workloads pages as fast as a small one.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any

from domain.objects import STOP_NONE
from domain.quantity import format_amount
from domain.timestamps import format_time
from projections import views
from projections.fold import FR, ClusterQueueView, Projection, WorkloadView

MAX_PAGE = 500
WORKLOAD_STATES = ("pending", "admitted")


def _value(resource: str, value: int) -> dict[str, Any]:
    return {"value": value, "text": format_amount(resource, value)}


def _root(p: Projection, cohort: str) -> str:
    seen: set[str] = set()
    while cohort not in seen:
        seen.add(cohort)
        spec = p.cohorts.get(cohort)
        if spec is None or spec.parent is None:
            return cohort
        cohort = spec.parent
    return cohort  # a cycle: Kueue marks such cohorts inactive; any member stands for the root


def _lent(p: Projection, figures: list[views.CohortFigures]) -> dict[tuple[str, FR], int]:
    """(ClusterQueue, flavor/resource) -> what the cohort tree borrows from it, as the cohort
    view attributes it (views.cohort_figures), taken at each tree's root so it counts the whole
    tree."""
    roots = {_root(p, f.name) for f in figures}
    out: dict[tuple[str, FR], int] = {}
    for f in figures:
        if f.name not in roots:
            continue
        for r in f.resources:
            for lender, value in r.lent.items():
                out[lender, (r.flavor, r.resource)] = value
    return out


def _cq_resources(cq: ClusterQueueView, lent: dict[tuple[str, FR], int]) -> list[dict[str, Any]]:
    out = []
    reservation, usage = cq.reservation, cq.usage
    listed: list[FR] = list(cq.quotas)
    listed += sorted(fr for fr in reservation if fr not in cq.quotas)
    for fr in listed:
        flavor, res = fr
        quota = cq.quotas.get(fr)
        nominal = quota.nominal if quota is not None else 0
        held = reservation.get(fr, 0)
        row: dict[str, Any] = {
            "flavor": flavor,
            "resource": res,
            "nominal": _value(res, nominal),
            "reservation": _value(res, held),
            "usage": _value(res, usage.get(fr, 0)),
            "borrowed": _value(res, max(0, held - nominal)),
            "lent": _value(res, lent.get((cq.name, fr), 0)),
        }
        if quota is not None and quota.borrowing_limit is not None:
            row["borrowingLimit"] = _value(res, quota.borrowing_limit)
        if quota is not None and quota.lending_limit is not None:
            row["lendingLimit"] = _value(res, quota.lending_limit)
        out.append(row)
    return out


def _status(active: bool, reason: str, terminating: bool, stop_policy: str) -> str:
    if terminating:
        return "terminating"
    if stop_policy != STOP_NONE:
        return "stopped"
    return "active" if active else "inactive"


def overview(p: Projection) -> dict[str, Any]:
    """The whole configuration with its usage: cohorts, ClusterQueues, LocalQueues, flavors."""
    cohort_figures = views.all_cohort_figures(p)
    lent = _lent(p, cohort_figures)
    cluster_queues = []
    flavor_users: dict[str, list[str]] = {}
    flavor_held: dict[str, dict[str, int]] = {}
    for name in sorted(p.cluster_queues):
        cq = p.cluster_queues[name]
        active, reason, message = views.cluster_queue_active(p, cq)
        for flavor_name in cq.spec.flavor_names():
            flavor_users.setdefault(flavor_name, []).append(name)
        for (flavor_name, res), value in cq.reservation.items():
            held = flavor_held.setdefault(flavor_name, {})
            held[res] = held.get(res, 0) + value
        cluster_queues.append({
            "name": name,
            "cohort": cq.spec.cohort,
            "status": _status(active, reason, cq.terminating, cq.spec.stop_policy),
            "reason": reason,
            "message": message,
            "stopPolicy": cq.spec.stop_policy,
            "queueingStrategy": cq.spec.queueing_strategy,
            "pending": len(cq.pending),
            "reserving": len(cq.holders),
            "admitted": cq.admitted,
            "resources": _cq_resources(cq, lent),
        })
    cohorts = []
    for f in cohort_figures:
        cohorts.append({
            "name": f.name,
            "explicit": f.spec is not None,
            "parent": f.spec.parent if f.spec is not None else None,
            "clusterQueues": f.cluster_queues,
            "cohorts": f.cohorts,
            "resources": [
                {
                    "flavor": r.flavor,
                    "resource": r.resource,
                    "nominalQuota": _value(r.resource, r.nominal),
                    "reservation": _value(r.resource, r.reservation),
                    "usage": _value(r.resource, r.usage),
                    "borrowed": _value(r.resource, r.borrowed),
                    "unusedLendable": _value(r.resource, r.unused_lendable),
                }
                for r in f.resources
            ],
            "lending": views.cohort_lending(f),
        })
    local_queues = []
    for key in sorted(p.local_queues):
        lq = p.local_queues[key]
        counts = views.local_queue_counts(p, key)
        active, reason, _ = views.local_queue_active(p, key)
        local_queues.append({
            "namespace": key[0],
            "name": key[1],
            "clusterQueue": lq.cluster_queue,
            "status": "stopped" if lq.stop_policy != STOP_NONE else "active" if active else "inactive",
            "reason": reason,
            "pending": counts["pending"],
            "admitted": counts["admitted"],
        })
    flavors = []
    for name in sorted(set(p.flavors) | set(flavor_users)):
        rf = p.flavors.get(name)
        flavors.append({
            "name": name,
            "exists": rf is not None,
            "nodeLabels": dict(rf.node_labels) if rf is not None else {},
            "clusterQueues": flavor_users.get(name, []),
            "reservation": {res: _value(res, v) for res, v in sorted(flavor_held.get(name, {}).items())},
        })
    return {
        "clusterQueues": cluster_queues,
        "cohorts": cohorts,
        "localQueues": local_queues,
        "flavors": flavors,
        "totals": {
            "clusterQueues": len(cluster_queues),
            "localQueues": len(local_queues),
            "pending": sum(c["pending"] for c in cluster_queues),
            "admitted": sum(c["admitted"] for c in cluster_queues),
            "reserving": sum(c["reserving"] for c in cluster_queues),
        },
    }


def _workload_row(p: Projection, wv: WorkloadView, position: int | None) -> dict[str, Any]:
    namespace, name = wv.key.split("/", 1)
    row: dict[str, Any] = {
        "namespace": namespace,
        "name": name,
        "localQueue": wv.lq[1],
        "clusterQueue": wv.cluster_queue or wv.queued_in,
        "priority": wv.priority,
        "created": format_time(wv.created_us),
    }
    if wv.holding:
        row["state"] = "Evicted" if wv.evicted else ("Admitted" if wv.admitted else "QuotaReserved")
        row["usage"] = ", ".join(f"{r}={format_amount(r, v)} ({f})" for (f, r), v in sorted((wv.usage or {}).items()))
    else:
        row["state"] = "Pending"
        row["position"] = position
        row["reason"] = wv.reason
        row["message"] = wv.message
    return row


def _pending_slice(p: Projection, names: list[str], offset: int, limit: int) -> Iterator[tuple[WorkloadView, int]]:
    """Queued workloads of `names`' ClusterQueues, queue after queue, from `offset`: queues
    before the page are skipped by their length, not walked."""
    skip = offset
    for name in names:
        pending = p.cluster_queues[name].pending
        if skip >= len(pending):
            skip -= len(pending)
            continue
        for index in range(skip, len(pending)):
            if limit <= 0:
                return
            yield p.workloads[pending[index][3]], index
            limit -= 1
        skip = 0


def _holding_slice(p: Projection, names: list[str], offset: int, limit: int) -> Iterator[WorkloadView]:
    skip = offset
    for name in names:
        holders = p.cluster_queues[name].holders
        if skip >= len(holders):
            skip -= len(holders)
            continue
        for key in islice(holders, skip, skip + limit):
            yield p.workloads[key]
            limit -= 1
        if limit <= 0:
            return
        skip = 0


def workloads(
    p: Projection, state: str, *, cluster_queue: str | None = None, offset: int = 0, limit: int = 100,
) -> dict[str, Any] | None:
    """A page of pending (in queue order) or quota-holding workloads, of one ClusterQueue or of
    all in name order. None when the ClusterQueue does not exist."""
    if state not in WORKLOAD_STATES:
        raise ValueError(f"state must be one of {', '.join(WORKLOAD_STATES)}")
    if cluster_queue is not None and cluster_queue not in p.cluster_queues:
        return None
    names = [cluster_queue] if cluster_queue is not None else sorted(p.cluster_queues)
    offset, limit = max(0, offset), max(0, min(limit, MAX_PAGE))
    if state == "pending":
        total = sum(len(p.cluster_queues[n].pending) for n in names)
        items = [_workload_row(p, wv, index) for wv, index in _pending_slice(p, names, offset, limit)]
    else:
        total = sum(len(p.cluster_queues[n].holders) for n in names)
        items = [_workload_row(p, wv, None) for wv in _holding_slice(p, names, offset, limit)]
    return {"state": state, "clusterQueue": cluster_queue, "offset": offset, "limit": limit, "total": total, "items": items}
