"""`quotaflow explain NS/NAME`: a workload's history and, while it is pending, why, in Kueue's terms.

The history comes from the projection (every decision about the workload, with the input event
that caused it). The "why" needs the quota tree as the engine sees it, which the views do not
keep (they never re-run the scheduler): an engine is rebuilt at the projection's input offset --
from the newest snapshot in the snapshot log when it is not past that offset, else by replaying
the input log -- and `domain.flavor_assigner.FlavorAssigner` is run against it read-only, with
no preemption oracle (the engine's oracle tries victims by changing usage and putting it back;
this one only reads). It reports which flavors were tried for each pod set, per flavor and
resource what was requested, available and short, who holds that quota (the workloads admitted
in the ClusterQueue's cohort tree using those flavors), and the workload's queue positions.
"""

from __future__ import annotations

from typing import Any

from domain.engine import Engine
from domain.flavor_assigner import (
    FIT,
    NO_CANDIDATES,
    NO_FIT,
    PREEMPT,
    RECLAIM,
    FlavorAssigner,
)
from domain.objects import STOP_NONE
from domain.quantity import format_amount
from domain.state import State
from projections import views
from projections.fold import Projection
from projections.follower import rebuild
from streams.log import EventLog, Topics
from streams.log.snapshots import load_latest

MODES = {FIT: "Fit", RECLAIM: "Reclaim", PREEMPT: "Preempt", NO_CANDIDATES: "NoCandidates", NO_FIT: "NoFit"}


async def engine_at(log: EventLog, topics: Topics, offset: int) -> tuple[Engine, str]:
    """An engine that has folded input offsets 0..offset, and how it was built."""
    engine: Engine | None = None
    start = 0
    source = "replay from offset 0"
    try:
        restored = await load_latest(log, topics.snapshots)
    except Exception:  # an unusable snapshot (SnapshotUnusable or worse) only costs a longer replay
        restored = None
    if restored is not None and restored.offset <= offset:
        engine, start = restored.engine, restored.offset + 1
        source = f"snapshot after input offset {restored.offset}, then replay"
    if engine is None:
        engine = Engine()
    if start <= offset:
        async with await log.reader(topics.input, start) as reader:
            while reader.position <= offset:
                records = await reader.read(limit=5000, timeout=1.0)
                if not records:
                    break
                for r in records:
                    if r.offset > offset:
                        break
                    engine.apply(r.value if r.value is not None else b"", r.offset, r.log_time)
    return engine, source


def _fmt(res: str, v: int) -> str:
    return format_amount(res, v)


def why_pending(state: State, key: str) -> dict[str, Any] | None:
    """Why a pending workload is not admitted, from the engine's state; changes nothing."""
    ws = state.workloads.get(key)
    if ws is None or ws.admission is not None:
        return None
    out: dict[str, Any] = {}
    if ws.last_status is not None:
        out["reason"], out["message"] = ws.last_status
    if not ws.spec.active:
        out["explanation"] = "the workload is deactivated (spec.active: false)"
        return out
    if not ws.queued:
        lq = state.local_queues.get((ws.spec.namespace, ws.spec.queue_name))
        if lq is None:
            out["explanation"] = f"LocalQueue {ws.spec.namespace}/{ws.spec.queue_name} does not exist"
        elif lq.stop_policy != STOP_NONE:
            out["explanation"] = f"LocalQueue {ws.spec.namespace}/{ws.spec.queue_name} is stopped ({lq.stop_policy})"
        else:
            out["explanation"] = f"ClusterQueue {lq.cluster_queue} does not exist (or is being deleted)"
        return out
    cq = state.cluster_queues[ws.cluster_queue]  # type: ignore[index]
    out["clusterQueue"] = cq.name
    out["cohort"] = cq.spec.cohort
    out["queueingStrategy"] = cq.spec.queueing_strategy
    pre = cq.spec.preemption
    out["preemption"] = {
        "withinClusterQueue": pre.within_cluster_queue,
        "reclaimWithinCohort": pre.reclaim_within_cohort,
        "borrowWithinCohort": pre.borrow_within_cohort,
    }
    if not cq.active:
        out["explanation"] = f"ClusterQueue {cq.name} is inactive: {cq.inactive_message}"
        return out
    if cq.queue.strict:
        head = cq.queue.head() or next(cq.queue.keys(), None)
        if head is not None and head[3] != key:
            out["blockedBy"] = head[3]
    assigner = FlavorAssigner(cq.spec, cq.node, cq.groups, state.flavors, quotas=cq.quotas)
    assignment = assigner.assign(ws.spec)
    out["assignment"] = {
        "mode": assignment.mode,  # Kueue's representative mode (Preempt includes "no candidates")
        "fitsWithoutPreemption": assignment.mode == "Fit",
        "borrowing": assignment.borrowing,
        "message": assignment.message(),
    }
    pod_sets = []
    interesting: list[tuple[str, str]] = []
    for ps in assignment.pod_sets:
        tried: dict[str, list[str]] = {}
        for res in ps.requests:
            group = cq.groups.get(res)
            if group is None:
                continue
            tried[res] = [f.name for f in group.flavors]
            for f in group.flavors:
                if (f.name, res) not in interesting:
                    interesting.append((f.name, res))
        pod_sets.append({
            "name": ps.name,
            "count": ps.count,
            "requests": {res: _fmt(res, v) for res, v in sorted(ps.requests.items())},
            "flavorsTried": tried,
            "assigned": dict(sorted(ps.flavors.items())),
            "modes": {res: MODES.get(m, str(m)) for res, m in sorted(ps.modes.items())},
            "fits": ps.fits and assignment.mode == "Fit",
            "reasons": sorted(ps.reasons),
        })
    out["podSets"] = pod_sets
    requested: dict[str, int] = {}
    for ps in assignment.pod_sets:
        for res, v in ps.requests.items():
            requested[res] = requested.get(res, 0) + v
    quota = []
    node = cq.node
    for fr in interesting:
        flavor, res = fr
        q = cq.quotas.get(fr)
        available = max(0, node.available(fr))
        need = requested.get(res, 0)
        quota.append({
            "flavor": flavor,
            "resource": res,
            "requested": _fmt(res, need),
            "nominalQuota": _fmt(res, q.nominal if q else 0),
            "borrowingLimit": None if q is None or q.borrowing_limit is None else _fmt(res, q.borrowing_limit),
            "lendingLimit": None if q is None or q.lending_limit is None else _fmt(res, q.lending_limit),
            "usedByClusterQueue": _fmt(res, node.usage.get(fr, 0)),
            "available": _fmt(res, available),
            "maximumCapacity": _fmt(res, node.potential_available(fr)),
            "short": _fmt(res, max(0, need - available)),
        })
    out["quota"] = quota
    holders = []
    root = node.root()
    for leaf in root.leaves():
        member = state.cluster_queues.get(leaf.name)
        if member is None:
            continue
        for wl in member.admitted:
            other = state.workloads[wl]
            adm = other.admission
            if adm is None:
                continue
            uses = {f"{f}/{r}": _fmt(r, v) for (f, r), v in sorted(adm.usage.items()) if (f, r) in interesting and v}
            if not uses:
                continue
            holders.append({
                "workload": wl,
                "clusterQueue": member.name,
                "priority": other.priority,
                "state": "Evicted" if other.evicted else ("Admitted" if adm.admitted else "QuotaReserved"),
                "borrowing": any(leaf.usage.get(fr, 0) > leaf.subtree.get(fr, 0) for fr in adm.usage),
                "uses": uses,
            })
    out["heldBy"] = holders
    return out


async def explain(log: EventLog, topics: Topics, key: str, *, as_of: int | None = None) -> dict[str, Any]:
    proj, follower = await rebuild(log, topics, as_of=as_of, focus=key, history=False)
    out: dict[str, Any] = {
        "workload": key,
        "asOf": views.as_of(proj, max(0, follower.status.input_end_seen - 1 - proj.position)),
        "state": views.workload_state(proj, key),
        "history": focus_history(proj),
    }
    wv = proj.workloads.get(key)
    if wv is not None and not wv.holding:
        engine, source = await engine_at(log, topics, proj.position)
        out["engine"] = source
        out["why"] = why_pending(engine.state, key)
    return out


def focus_history(proj: Projection) -> list[dict[str, Any]]:
    """The history a projection collected for its `focus` workload."""
    records = proj.focus_records
    decisions = {rec.offset: (rec.value, 0) for rec, _, _ in records}
    inputs = {rec.cause_offset: (value, ts) for rec, value, ts in records}
    return views.history_entries([(rec.offset, rec.cause_offset) for rec, _, _ in records], decisions, inputs)
