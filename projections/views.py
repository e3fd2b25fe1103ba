"""The views, as JSON-ready dicts, in Kueue's shapes.

- ClusterQueue: `kueue.x-k8s.io` ClusterQueue with its `status` as Kueue writes it:
  `pendingWorkloads`, `reservingWorkloads`, `admittedWorkloads`, `flavorsReservation` (every
  workload holding quota, QuotaReserved included) and `flavorsUsage` (admitted workloads only),
  each per flavor and resource with the `borrowed` part (above nominal quota), and the `Active`
  condition with Kueue's reasons and messages.
- LocalQueue: likewise (no `borrowed`, as in Kueue).
- Cohort: its ClusterQueues and child cohorts, totals per flavor and resource, and who lends to
  whom (see `cohort`).
- Pending workloads: Kueue's visibility API (`PendingWorkloadsSummary`): in ClusterQueue order
  with `positionInClusterQueue` and `positionInLocalQueue`, from 0.
- A workload: its state and its history (every decision about it with the input event that
  caused it).

All functions read a `Projection` and never change it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from domain.objects import STOP_NONE, ClusterQueueSpec, CohortSpec
from domain.quantity import format_amount
from domain.timestamps import format_time
from projections.fold import FR, ClusterQueueView, LQKey, Projection, WorkloadView

KUEUE_API = "kueue.x-k8s.io/v1beta1"
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
# Kueue serves the same storage at both versions, v1beta2 preferred (pkg/visibility/server.go).
VISIBILITY_VERSIONS = ("v1beta2", "v1beta1")
VISIBILITY_API = f"{VISIBILITY_GROUP}/v1beta1"  # what quotaflow's own paths report
DEFAULT_PENDING_LIMIT = 1000  # Kueue's constants.DefaultPendingWorkloadsLimit
MAX_PENDING_LIMIT = 4000  # a page's bound; Kueue's constants.MaxPendingWorkloadsLimit is 100_000

_json = msgspec.json.Decoder()


def fmt(resource: str, value: int) -> str:
    return format_amount(resource, value)


def as_of(p: Projection, undecided: int = 0) -> dict[str, Any]:
    """Where the views stand in the logs."""
    return {
        "inputOffset": p.position,
        "decisionOffset": p.next_decision_offset - 1,
        "events": p.events,
        "decisions": p.decisions,
        "undecided": undecided,
    }


# -- ClusterQueues ------------------------------------------------------------------------------
def _flavor_frs(spec: ClusterQueueSpec | CohortSpec) -> list[tuple[str, list[tuple[str, Any]]]]:
    return [(f.name, list(f.resources)) for g in spec.resource_groups for f in g.flavors]


def _flavor_usage(
    spec: ClusterQueueSpec, values: Mapping[FR, int], *, borrowed: bool
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[FR] = set()
    for flavor, resources in _flavor_frs(spec):
        items = []
        for res, quota in resources:
            total = values.get((flavor, res), 0)
            seen.add((flavor, res))
            item = {"name": res, "total": fmt(res, total)}
            if borrowed:
                item["borrowed"] = fmt(res, max(0, total - quota.nominal))
            items.append(item)
        out.append({"name": flavor, "resources": items})
    # Quota held under a flavor/resource the ClusterQueue no longer lists (its spec changed
    # after the admission): still held, so still shown.
    extra: dict[str, list[dict[str, Any]]] = {}
    for (flavor, res), total in sorted(values.items()):
        if (flavor, res) in seen or not total:
            continue
        item = {"name": res, "total": fmt(res, total)}
        if borrowed:
            item["borrowed"] = fmt(res, total)
        extra.setdefault(flavor, []).append(item)
    for flavor, items in extra.items():
        named = next((f for f in out if f["name"] == flavor), None)
        if named is not None:
            named["resources"].extend(items)
        else:
            out.append({"name": flavor, "resources": items})
    return out


def cluster_queue_active(p: Projection, cq: ClusterQueueView) -> tuple[bool, str, str]:
    """Kueue's Active condition: (status, reason, message)."""
    if cq.terminating:
        return False, "Terminating", "Can't admit new workloads; clusterQueue is terminating"
    spec = cq.spec
    reasons: list[str] = []
    messages: list[str] = []
    if spec.stop_policy != STOP_NONE:
        reasons.append("Stopped")
        messages.append("is stopped")
    missing_flavors = [f for f in spec.flavor_names() if f not in p.flavors]
    if missing_flavors:
        reasons.append("FlavorNotFound")
        messages.append(f"references missing ResourceFlavor(s): {','.join(missing_flavors)}")
    missing_checks = [c.name for c in spec.admission_checks if c.name not in p.admission_checks]
    if missing_checks:
        reasons.append("AdmissionCheckNotFound")
        messages.append(f"references missing AdmissionCheck(s): {','.join(missing_checks)}")
    if reasons:
        return False, reasons[0], f"Can't admit new workloads: {', '.join(messages)}."
    return True, "Ready", "Can admit new workloads"


def _condition(active: bool, reason: str, message: str) -> dict[str, Any]:
    return {"type": "Active", "status": "True" if active else "False", "reason": reason, "message": message}


def _metadata(p: Projection, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    """name (and namespace), and creationTimestamp when the fold saw the object created."""
    out: dict[str, Any] = {"name": name} if namespace is None else {"namespace": namespace, "name": name}
    created = p.config_created.get((kind, namespace or "", name))
    if created is not None:
        out["creationTimestamp"] = format_time(created)
    return out


def _spec_of(raw: Mapping[str, Any]) -> Any:
    spec = raw.get("spec")
    return msgspec.to_builtins(spec) if spec is not None else {}


def cluster_queue(p: Projection, name: str) -> dict[str, Any] | None:
    cq = p.cluster_queues.get(name)
    if cq is None:
        return None
    active, reason, message = cluster_queue_active(p, cq)
    metadata = _metadata(p, "ClusterQueue", name)
    if cq.terminating:
        metadata["deletionTimestamp"] = "terminating"
    return {
        "apiVersion": cq.raw.get("apiVersion") or KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": metadata,
        "spec": _spec_of(cq.raw),
        "status": {
            "pendingWorkloads": len(cq.pending),
            "reservingWorkloads": len(cq.holders),
            "admittedWorkloads": cq.admitted,
            "flavorsReservation": _flavor_usage(cq.spec, cq.reservation, borrowed=True),
            "flavorsUsage": _flavor_usage(cq.spec, cq.usage, borrowed=True),
            "conditions": [_condition(active, reason, message)],
        },
    }


def cluster_queues(p: Projection) -> list[dict[str, Any]]:
    return [v for n in sorted(p.cluster_queues) if (v := cluster_queue(p, n)) is not None]


# -- LocalQueues --------------------------------------------------------------------------------
def local_queue_counts(p: Projection, key: LQKey) -> dict[str, Any]:
    """Pending / reserving / admitted counts and held quota of one LocalQueue's workloads (kept
    by the fold: projections/local_queue_counts.py)."""
    c = p.lq_counts.get(key)
    if c is None:
        return {"pending": 0, "reserving": 0, "admitted": 0, "reservation": {}, "usage": {}}
    return {"pending": c.pending, "reserving": c.reserving, "admitted": c.admitted, "reservation": c.reservation, "usage": c.usage}


def local_queue_active(p: Projection, key: LQKey) -> tuple[bool, str, str]:
    lq = p.local_queues[key]
    if lq.stop_policy != STOP_NONE:
        return False, "Stopped", "LocalQueue is stopped"
    cq = p.cluster_queues.get(lq.cluster_queue)
    if cq is None:
        return False, "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue"
    if not cluster_queue_active(p, cq)[0]:
        return False, "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue"
    return True, "Ready", "Can submit new workloads to localQueue"


def _lq_flavor_usage(p: Projection, key: LQKey, values: Mapping[FR, int]) -> list[dict[str, Any]]:
    lq = p.local_queues[key]
    cq = p.cluster_queues.get(lq.cluster_queue)
    order: list[FR] = []
    if cq is not None:
        order = [(f, r) for f, resources in _flavor_frs(cq.spec) for r, _ in resources]
    order += sorted(fr for fr in values if fr not in order)
    out: dict[str, list[dict[str, Any]]] = {}
    for flavor, res in order:
        out.setdefault(flavor, []).append({"name": res, "total": fmt(res, values.get((flavor, res), 0))})
    return [{"name": f, "resources": items} for f, items in out.items()]


def local_queue(p: Projection, namespace: str, name: str) -> dict[str, Any] | None:
    key = (namespace, name)
    lq = p.local_queues.get(key)
    if lq is None:
        return None
    counts = local_queue_counts(p, key)
    active, reason, message = local_queue_active(p, key)
    spec: dict[str, Any] = {"clusterQueue": lq.cluster_queue}
    if lq.stop_policy != STOP_NONE:
        spec["stopPolicy"] = lq.stop_policy
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": _metadata(p, "LocalQueue", name, namespace),
        "spec": spec,
        "status": {
            "pendingWorkloads": counts["pending"],
            "reservingWorkloads": counts["reserving"],
            "admittedWorkloads": counts["admitted"],
            "flavorsReservation": _lq_flavor_usage(p, key, counts["reservation"]),
            "flavorUsage": _lq_flavor_usage(p, key, counts["usage"]),  # v1beta1's name (v1beta2: flavorsUsage)
            "conditions": [_condition(active, reason, message)],
        },
    }


def local_queues(p: Projection, namespace: str | None = None) -> list[dict[str, Any]]:
    return [
        v
        for ns, name in sorted(p.local_queues)
        if namespace is None or ns == namespace
        if (v := local_queue(p, ns, name)) is not None
    ]


# -- Cohorts ------------------------------------------------------------------------------------
def _children(p: Projection) -> dict[str, list[str]]:
    kids: dict[str, list[str]] = {}
    for name, spec in sorted(p.cohorts.items()):
        if spec.parent is not None:
            kids.setdefault(spec.parent, []).append(name)
    return kids


class _CohortTree:
    """Who belongs to which cohort, worked out once for a view of many cohorts: each cohort's
    view reads it instead of walking every ClusterQueue again."""

    def __init__(self, p: Projection) -> None:
        self.members = p.cohort_members()
        self.kids = _children(p)
        self.names = set(p.cohort_names())


def _subtree_queues(p: Projection, name: str, tree: _CohortTree | None = None) -> list[str]:
    tree = tree or _CohortTree(p)
    members = tree.members
    kids = tree.kids
    out: list[str] = []
    stack = [name]
    seen: set[str] = set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        out.extend(members.get(current, []))
        stack.extend(reversed(kids.get(current, [])))
    return sorted(out)


def _subtree_cohorts(p: Projection, name: str, tree: _CohortTree | None = None) -> list[str]:
    kids = (tree or _CohortTree(p)).kids
    out: list[str] = []
    stack = [name]
    while stack:
        current = stack.pop()
        if current in out:
            continue
        out.append(current)
        stack.extend(kids.get(current, []))
    return out


def _split(total: int, weights: list[tuple[str, int]]) -> dict[str, int]:
    """`total` split in proportion to the weights, in integers (largest remainder, ties by name)."""
    wsum = sum(w for _, w in weights)
    if total <= 0 or wsum <= 0:
        return {}
    base = {n: total * w // wsum for n, w in weights}
    rest = total - sum(base.values())
    by_remainder = sorted(weights, key=lambda nw: (-(total * nw[1] % wsum), nw[0]))
    for n, _ in by_remainder[:rest]:
        base[n] += 1
    return {n: v for n, v in base.items() if v}


@dataclass(frozen=True)
class CohortResource:
    """One flavor and resource of a cohort's subtree, in integer amounts (`cohort` formats them)."""

    flavor: str
    resource: str
    nominal: int
    reservation: int
    usage: int
    borrowed: int
    unused_lendable: int
    borrowers: list[tuple[str, int]]  # ClusterQueue -> what it holds above its nominal quota
    lent: dict[str, int]  # lender -> its attributed share of `borrowed`, in name order
    lending: list[tuple[str, str, int]]  # (from, to, amount): borrowers paired with lenders


@dataclass(frozen=True)
class CohortFigures:
    """A cohort's members and its totals, as numbers: what `cohort` shows, before formatting."""

    name: str
    spec: CohortSpec | None
    cluster_queues: list[str]  # its own members
    cohorts: list[str]  # its child cohorts
    subtree_cluster_queues: list[str]
    resources: list[CohortResource]


def cohort_figures(p: Projection, name: str, tree: _CohortTree | None = None) -> CohortFigures | None:
    """A cohort's members, totals, and who lends to whom (None: no such cohort).

    Kueue pools a cohort's unused quota and keeps no ledger of who lends to whom, so that part is
    an attribution: per flavor and resource, what the subtree's ClusterQueues borrow (usage above
    nominal quota) is attributed to the lenders -- ClusterQueues with unused lendable quota
    (nominal quota, or its lendingLimit, minus what they use of it) and the cohorts' own quota --
    in proportion to what each could lend, and paired borrower by borrower in name order.
    """
    tree = tree or _CohortTree(p)
    if name not in p.cohorts and name not in tree.names:
        return None
    queues = _subtree_queues(p, name, tree)
    cohorts_below = _subtree_cohorts(p, name, tree)
    frs: list[FR] = []
    for cq_name in queues:
        for fr in p.cluster_queues[cq_name].quotas:
            if fr not in frs:
                frs.append(fr)
    own: dict[tuple[str, FR], int] = {}
    for c in cohorts_below:
        cspec = p.cohorts.get(c)
        if cspec is None:
            continue
        for fr, q in cspec.quotas().items():
            own[f"Cohort/{c}", fr] = q.nominal
            if fr not in frs:
                frs.append(fr)
    resources = []
    for fr in frs:
        flavor, res = fr
        nominal = reservation = usage = 0
        borrowers: list[tuple[str, int]] = []
        lenders: list[tuple[str, int]] = []
        for cq_name in queues:
            cq = p.cluster_queues[cq_name]
            quota = cq.quotas.get(fr)
            n = quota.nominal if quota is not None else 0
            held = cq.reservation.get(fr, 0)
            nominal += n
            reservation += held
            usage += cq.usage.get(fr, 0)
            if held > n:
                borrowers.append((cq_name, held - n))
            lendable = n if quota is None or quota.lending_limit is None else min(n, quota.lending_limit)
            guaranteed = n - lendable
            unused = lendable - max(0, held - guaranteed)
            if unused > 0:
                lenders.append((cq_name, unused))
        for (owner, ofr), value in own.items():
            if ofr == fr and value > 0:
                nominal += value
                lenders.append((owner, value))
        borrowed = sum(b for _, b in borrowers)
        lent = dict(sorted(_split(borrowed, lenders).items()))
        # pair borrowers with lenders, both in name order
        lending: list[tuple[str, str, int]] = []
        supply = list(lent.items())
        i = 0
        left = supply[0][1] if supply else 0
        for borrower, need in sorted(borrowers):
            while need > 0 and i < len(supply):
                take = min(need, left)
                lending.append((supply[i][0], borrower, take))
                need -= take
                left -= take
                if left == 0:
                    i += 1
                    left = supply[i][1] if i < len(supply) else 0
        resources.append(CohortResource(
            flavor, res, nominal, reservation, usage, borrowed, sum(v for _, v in lenders), borrowers, lent, lending,
        ))
    return CohortFigures(name, p.cohorts.get(name), tree.members.get(name, []), tree.kids.get(name, []), queues, resources)


def all_cohort_figures(p: Projection) -> list[CohortFigures]:
    """Every cohort's figures, in name order."""
    tree = _CohortTree(p)
    return [f for n in sorted(tree.names) if (f := cohort_figures(p, n, tree)) is not None]


def cohort_view(p: Projection, figures: CohortFigures) -> dict[str, Any]:
    """A cohort in Kueue's shape, its amounts as quantity strings."""
    name, spec = figures.name, figures.spec
    return {
        "apiVersion": KUEUE_API,
        "kind": "Cohort",
        "metadata": _metadata(p, "Cohort", name),
        "spec": _spec_of(p.cohort_raw[name]) if name in p.cohort_raw else {},
        "status": {
            "explicit": spec is not None,
            "parent": spec.parent if spec is not None else None,
            "clusterQueues": figures.cluster_queues,
            "cohorts": figures.cohorts,
            "subtreeClusterQueues": figures.subtree_cluster_queues,
            "resources": [
                {
                    "flavor": r.flavor,
                    "resource": r.resource,
                    "nominalQuota": fmt(r.resource, r.nominal),
                    "reservation": fmt(r.resource, r.reservation),
                    "usage": fmt(r.resource, r.usage),
                    "borrowed": fmt(r.resource, r.borrowed),
                    "unusedLendable": fmt(r.resource, r.unused_lendable),
                    "borrowers": {n: fmt(r.resource, v) for n, v in r.borrowers},
                    "lenders": {n: fmt(r.resource, v) for n, v in r.lent.items()},
                }
                for r in figures.resources
            ],
            "lending": cohort_lending(figures),
        },
    }


def cohort_lending(figures: CohortFigures) -> list[dict[str, Any]]:
    """Who lends to whom in a cohort, flavor/resource after flavor/resource."""
    return [
        {"from": lender, "to": borrower, "flavor": r.flavor, "resource": r.resource, "amount": fmt(r.resource, amount)}
        for r in figures.resources
        for lender, borrower, amount in r.lending
    ]


def cohort(p: Projection, name: str) -> dict[str, Any] | None:
    """A cohort: its members, totals, and who lends to whom (see `cohort_figures`)."""
    figures = cohort_figures(p, name)
    return cohort_view(p, figures) if figures is not None else None


def cohorts(p: Projection) -> list[dict[str, Any]]:
    return [cohort_view(p, f) for f in all_cohort_figures(p)]


# -- ResourceFlavors ----------------------------------------------------------------------------
def resource_flavor(p: Projection, name: str) -> dict[str, Any] | None:
    """A ResourceFlavor as applied, and which ClusterQueues and cohorts name it (Kueue writes no
    status for a flavor; `status` here is quotaflow's)."""
    flavor = p.flavors.get(name)
    if flavor is None:
        return None
    raw = p.flavor_raw.get(name, {})
    return {
        "apiVersion": raw.get("apiVersion") or KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": _metadata(p, "ResourceFlavor", name),
        "spec": _spec_of(raw),
        "status": {
            "clusterQueues": [n for n in sorted(p.cluster_queues) if name in p.cluster_queues[n].spec.flavor_names()],
        },
    }


def resource_flavors(p: Projection) -> list[dict[str, Any]]:
    return [v for n in sorted(p.flavors) if (v := resource_flavor(p, n)) is not None]


# -- pending workloads (Kueue's visibility API) ------------------------------------------------
def _pending_item(p: Projection, wv: WorkloadView, in_cq: int, in_lq: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": wv.spec.name,
            "namespace": wv.spec.namespace,
            "creationTimestamp": format_time(wv.created_us),
        },
        "priority": wv.priority,
        "localQueueName": wv.spec.queue_name,
        "positionInClusterQueue": in_cq,
        "positionInLocalQueue": in_lq,
    }


def _bounds(offset: int, limit: int) -> tuple[int, int]:
    return max(0, offset), max(0, min(limit, MAX_PENDING_LIMIT))


def _summary(items: list[dict[str, Any]], api_version: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "PendingWorkloadsSummary", "metadata": {}, "items": items}


def visibility_resources(version: str) -> dict[str, Any]:
    """The discovery document of one version of Kueue's visibility group (its
    pkg/visibility/storage NewStorage: clusterqueues, localqueues and their pendingworkloads)."""
    resources = []
    for plural, singular, kind, namespaced in (("clusterqueues", "clusterqueue", "ClusterQueue", False), ("localqueues", "localqueue", "LocalQueue", True)):
        resources.append({"name": plural, "singularName": singular, "namespaced": namespaced, "kind": kind, "verbs": []})
        resources.append({"name": f"{plural}/pendingworkloads", "singularName": "", "namespaced": namespaced, "kind": "PendingWorkloadsSummary", "verbs": ["get"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{VISIBILITY_GROUP}/{version}", "resources": resources}


def visibility_group() -> dict[str, Any]:
    versions = [{"groupVersion": f"{VISIBILITY_GROUP}/{v}", "version": v} for v in VISIBILITY_VERSIONS]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": VISIBILITY_GROUP, "versions": versions, "preferredVersion": versions[0]}


def pending_in_cluster_queue(p: Projection, name: str, offset: int = 0, limit: int = DEFAULT_PENDING_LIMIT, api_version: str = VISIBILITY_API) -> dict[str, Any] | None:
    """Kueue's pendingWorkloadsInCqREST.Get: positions counted over the whole queue."""
    cq = p.cluster_queues.get(name)
    if cq is None:
        return None
    offset, limit = _bounds(offset, limit)
    items = []
    lq_positions: dict[LQKey, int] = {}
    for index, key in enumerate(cq.pending):
        if index >= offset + limit:
            break
        wv = p.workloads[key[3]]
        in_lq = lq_positions.get(wv.lq, 0)
        lq_positions[wv.lq] = in_lq + 1
        if index >= offset:
            items.append(_pending_item(p, wv, index, in_lq))
    return _summary(items, api_version)


def pending_in_local_queue(p: Projection, namespace: str, name: str, offset: int = 0, limit: int = DEFAULT_PENDING_LIMIT, api_version: str = VISIBILITY_API) -> dict[str, Any] | None:
    """Kueue's pendingWorkloadsInLqREST.Get."""
    key = (namespace, name)
    lq = p.local_queues.get(key)
    if lq is None:
        return None
    offset, limit = _bounds(offset, limit)
    cq = p.cluster_queues.get(lq.cluster_queue)
    queued = p.lq_pending.get(key)
    items = []
    if cq is not None and queued is not None:
        for in_lq in range(offset, min(len(queued), offset + limit)):
            order = queued[in_lq]
            wv = p.workloads[order[3]]
            if wv.queued_in != cq.name:
                continue
            items.append(_pending_item(p, wv, int(cq.pending.index(order)), in_lq))
    return _summary(items, api_version)


def pending(p: Projection) -> dict[str, Any]:
    """Every queued workload, by ClusterQueue, with positions."""
    return {name: (pending_in_cluster_queue(p, name, 0, MAX_PENDING_LIMIT) or {}).get("items", []) for name in sorted(p.cluster_queues)}


# -- workloads ----------------------------------------------------------------------------------
def workload_state(p: Projection, key: str) -> dict[str, Any] | None:
    wv = p.workloads.get(key)
    if wv is None:
        if key in p.finished:
            return {"workload": key, "phase": "Finished"}
        return None
    if wv.holding:
        phase = "Evicted" if wv.evicted else ("Admitted" if wv.admitted else "QuotaReserved")
    elif not wv.active:
        phase = "Inactive"
    else:
        phase = "Pending"
    out: dict[str, Any] = {
        "workload": key,
        "phase": phase,
        "localQueue": wv.spec.queue_name,
        "priority": wv.priority,
        "priorityClassName": wv.spec.priority_class,
        "active": wv.active,
        "creationTimestamp": format_time(wv.created_us),
    }
    if wv.holding:
        assert wv.usage is not None
        out["clusterQueue"] = wv.cluster_queue
        out["usage"] = [{"flavor": f, "resource": r, "amount": fmt(r, v)} for (f, r), v in sorted(wv.usage.items())]
    else:
        lq = p.local_queues.get(wv.lq)
        out["clusterQueue"] = wv.queued_in or (lq.cluster_queue if lq is not None else None)
        out["queued"] = wv.queued_in is not None
        positions = p.position_of(key)
        if positions is not None:
            out["positionInClusterQueue"], out["positionInLocalQueue"] = positions
        if wv.reason is not None:
            out["reason"] = wv.reason
            out["message"] = wv.message
    return out


def workload(p: Projection, key: str) -> dict[str, Any] | None:
    """A workload as Kueue's Workload object: its spec as submitted (pod sets with per-pod
    requests) and, as `status`, its state (`workload_state`, less the key)."""
    state = workload_state(p, key)
    if state is None:
        return None
    namespace, _, name = key.partition("/")
    status = {k: v for k, v in state.items() if k not in ("workload", "creationTimestamp")}
    wv = p.workloads.get(key)
    if wv is None:  # finished: the fold keeps no more than that
        return {"apiVersion": KUEUE_API, "kind": "Workload", "metadata": {"namespace": namespace, "name": name}, "spec": {}, "status": status}
    spec = wv.spec
    metadata: dict[str, Any] = {"namespace": namespace, "name": name, "creationTimestamp": state["creationTimestamp"]}
    if spec.uid is not None:
        metadata["uid"] = spec.uid
    if spec.labels:
        metadata["labels"] = dict(spec.labels)
    pod_sets = []
    for ps in spec.pod_sets:
        item: dict[str, Any] = {"name": ps.name, "count": ps.count}
        if ps.min_count is not None:
            item["minCount"] = ps.min_count
        item["requests"] = {r: fmt(r, v) for r, v in (ps.requested if ps.requested is not None else ps.per_pod)}
        pod_sets.append(item)
    body: dict[str, Any] = {"queueName": spec.queue_name, "active": spec.active}
    if spec.priority_class is not None:
        body["priorityClassName"] = spec.priority_class
    if spec.priority is not None:
        body["priority"] = spec.priority
    body["podSets"] = pod_sets
    return {"apiVersion": KUEUE_API, "kind": "Workload", "metadata": metadata, "spec": body, "status": status}


def _event_json(value: bytes | None) -> Any:
    if value is None:
        return None
    try:
        return _json.decode(value)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return {"raw": value.decode("utf-8", errors="replace")}


def history_entries(
    pairs: Iterable[tuple[int, int]],
    decisions: Mapping[int, tuple[bytes | None, int]],
    inputs: Mapping[int, tuple[bytes | None, int]],
) -> list[dict[str, Any]]:
    """[(decision offset, cause offset)] with the records fetched -> history entries."""
    out = []
    for doff, coff in pairs:
        dvalue = decisions.get(doff, (None, 0))[0]
        ivalue, its = inputs.get(coff, (None, 0))
        decision = _event_json(dvalue)
        out.append({
            "decisionOffset": doff,
            "decision": decision,
            "cause": decision.get("cause") if isinstance(decision, dict) else {"offset": coff},
            "event": _event_json(ivalue),
            "eventTime": format_time(its * 1000) if its else None,
        })
    return out


def history_pairs(p: Projection, key: str) -> list[tuple[int, int]]:
    hist = p.history.get(key)
    if hist is None:
        return []
    return [(hist[i], hist[i + 1]) for i in range(0, len(hist), 2)]
