"""A Kueue cluster's history as an input log, from `kubectl get clusterqueues,localqueues,
resourceflavors,cohorts,workloadpriorityclasses,workloads -A -o yaml` (a `List`, or documents).

The configuration comes first, at the earliest workload's creation time: ResourceFlavors,
WorkloadPriorityClasses, Cohorts, ClusterQueues, LocalQueues (and any AdmissionCheck or
Namespace in the dump), each reduced to what `kubectl apply` would send (no `status`, no
server-set metadata). Then each Workload is submitted at its `metadata.creationTimestamp`.

The history is played forward through the engine in simulated time, as a launcher would have
run it: when the engine admits a workload that Kueue ran to completion, its `WorkloadFinished`
falls one Kueue runtime later — from its `Admitted` condition's `lastTransitionTime` (else
`QuotaReserved`'s, else its creation) to its `Finished` condition's — so that `quotaflow whatif`
reads Kueue's runtimes from the log; a preempted or evicted workload is released at once; a
workload Kueue never finished keeps running. The recorded world of the log is therefore
quotaflow's decisions on Kueue's arrivals and runtimes: where Kueue's rules and timing agree,
its admissions are Kueue's.

What a dump cannot give back: workloads already deleted (Kueue keeps no record of them), the
configuration's history (only the objects as they are now, applied at the start), the times of
earlier admissions and evictions (a condition keeps only its last transition), admission-check
states, and the jobs' pods (a workload's pod sets are taken as they are).
"""

from __future__ import annotations

import heapq
from typing import Any

from domain.decisions import Admitted, Evicted, Preempted
from domain.engine import Engine
from domain.timestamps import TimestampError, format_time, parse_time

CONFIG_ORDER = ("Namespace", "ResourceFlavor", "WorkloadPriorityClass", "AdmissionCheck", "Cohort", "ClusterQueue", "LocalQueue")
KEEP_METADATA = ("name", "namespace", "labels", "annotations")
SERVER_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


class KueueDumpError(ValueError):
    pass


def objects(docs: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        if doc.get("kind") == "List" or (isinstance(doc.get("items"), list) and "kind" not in doc):
            out.extend(i for i in doc.get("items") or [] if isinstance(i, dict))
        else:
            out.append(doc)
    return out


def _metadata(meta: dict[str, Any], extra: tuple[str, ...] = ()) -> dict[str, Any]:
    kept = {k: meta[k] for k in KEEP_METADATA + extra if k in meta}
    if isinstance(kept.get("annotations"), dict):
        kept["annotations"] = {k: v for k, v in kept["annotations"].items() if k not in SERVER_ANNOTATIONS}
        if not kept["annotations"]:
            del kept["annotations"]
    return kept


def config_object(obj: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in obj.items() if k not in ("status", "metadata")}
    out["metadata"] = _metadata(obj.get("metadata") or {})
    return out


def _condition_time(wl: dict[str, Any], kind: str, status: str = "True") -> int | None:
    for c in (wl.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == kind and c.get("status") == status:
            try:
                return parse_time(c.get("lastTransitionTime"))
            except TimestampError:
                return None
    return None


def convert(docs: list[Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """(events, notes): the input log, and what could not be taken over."""
    items = objects(docs)
    notes: list[str] = []
    config = sorted((o for o in items if o.get("kind") in CONFIG_ORDER),
                    key=lambda o: (CONFIG_ORDER.index(o["kind"]), (o.get("metadata") or {}).get("namespace", ""),
                                   (o.get("metadata") or {}).get("name", "")))
    workloads: list[tuple[int, str, dict[str, Any], int | None]] = []  # created, key, submission, runtime
    finished_at: dict[str, int] = {}
    for o in items:
        if o.get("kind") != "Workload":
            if o.get("kind") not in CONFIG_ORDER:
                notes.append(f"skipped a {o.get('kind')!r}: not a Kueue object quotaflow reads")
            continue
        meta = o.get("metadata") or {}
        key = f"{meta.get('namespace', 'default')}/{meta.get('name')}"
        try:
            created = parse_time(meta.get("creationTimestamp"))
        except TimestampError:
            notes.append(f"skipped workload {key}: no creationTimestamp")
            continue
        spec = dict(o.get("spec") or {})
        wl = {"apiVersion": o.get("apiVersion", "kueue.x-k8s.io/v1beta1"), "kind": "Workload",
              "metadata": _metadata(meta, ("uid", "creationTimestamp")), "spec": spec}
        finished = _condition_time(o, "Finished")
        runtime = None
        if finished is not None:
            finished_at[key] = finished
            started = _condition_time(o, "Admitted") or _condition_time(o, "QuotaReserved") or created
            runtime = max(0, finished - started) if started <= finished else max(0, finished - created)
        workloads.append((created, key, wl, runtime))
    if not workloads and not config:
        raise KueueDumpError("the dump holds no Kueue object (expected the output of kubectl get ... -A -o yaml)")
    workloads.sort(key=lambda w: (w[0], w[1]))
    t0 = workloads[0][0] if workloads else 0
    engine = Engine()
    events: list[dict[str, Any]] = []

    def emit(event: dict[str, Any], now: int) -> list[Any]:
        event["time"] = format_time(now)
        events.append(event)
        return engine.apply(event, len(events) - 1)

    for o in config:
        emit({"type": "ConfigApplied", "object": config_object(o)}, t0)
    runtimes = {key: runtime for _, key, _, runtime in workloads}
    heap: list[tuple[int, int, str, str, int]] = []  # time, seq, kind, workload, token
    seq = 0
    token: dict[str, int] = {}
    for created, key, wl, _ in workloads:
        heapq.heappush(heap, (created, seq, "submit", key, 0))
        seq += 1
    by_key = {key: wl for _, key, wl, _ in workloads}
    while heap:
        now, _, kind, key, tok = heapq.heappop(heap)
        ns, _, name = key.partition("/")
        if kind == "submit":
            decisions = emit({"type": "WorkloadSubmitted", "workload": by_key[key]}, now)
        elif token.get(key) != tok:
            continue  # a run that was preempted
        elif kind == "finish":
            decisions = emit({"type": "WorkloadFinished", "namespace": ns, "name": name}, now)
        else:
            decisions = emit({"type": "WorkloadReleased", "namespace": ns, "name": name}, now)
        for d in decisions:
            w = d.workload
            if w is None:
                continue
            if isinstance(d, Admitted) and runtimes.get(w) is not None:
                token[w] = token.get(w, 0) + 1
                heapq.heappush(heap, (now + runtimes[w], seq, "finish", w, token[w]))
                seq += 1
            elif isinstance(d, (Preempted, Evicted)):
                token[w] = token.get(w, 0) + 1
                heapq.heappush(heap, (now, seq, "release", w, token[w]))
                seq += 1
    return events, notes
