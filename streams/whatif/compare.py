"""The comparison of two worlds: per group (ClusterQueue, LocalQueue, cohort, priority) the
measures of `measure.py` side by side, over one window (from the first event to the later of
the two worlds' ends), and the workloads whose first admission moved most."""

from __future__ import annotations

import bisect
import math
from typing import Any

from domain.quantity import format_amount
from projections.statistics import WAIT_BUCKETS
from streams.whatif.measure import GROUPS, Measure

US = 1_000_000


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest rank."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


def wait_stats(waits: list[float]) -> dict[str, Any]:
    s = sorted(waits)
    # Kueue's wait-time histogram buckets (seconds; upper bounds, the last open-ended).
    counts = [0] * (len(WAIT_BUCKETS) + 1)
    for v in s:
        counts[bisect.bisect_left(WAIT_BUCKETS, v)] += 1
    return {
        "histogram": {"le": list(WAIT_BUCKETS), "counts": counts},
        "count": len(s),
        "mean": sum(s) / len(s) if s else 0.0,
        "p50": percentile(s, 0.5),
        "p90": percentile(s, 0.9),
        "p99": percentile(s, 0.99),
        "max": s[-1] if s else 0.0,
    }


def world_groups(m: Measure, start: int, end: int, bins: int) -> dict[str, dict[str, dict[str, Any]]]:
    """group kind -> name -> measures."""
    out: dict[str, dict[str, dict[str, Any]]] = {g: {} for g in GROUPS}

    def entry(kind: str, name: str) -> dict[str, Any]:
        e = out[kind].get(name)
        if e is None:
            e = out[kind][name] = {"workloads": 0, "admitted": 0, "neverAdmitted": 0, "admissions": 0,
                                   "preemptions": 0, "evictions": 0, "_waits": [], "_used": {}, "_series": {}}
        return e

    for _, rec in m.all_workloads():
        for kind, name in m.groups_of(rec):
            e = entry(kind, name)
            e["workloads"] += 1
            e["admissions"] += rec.admissions
            e["preemptions"] += rec.preemptions
            e["evictions"] += rec.evictions
            if rec.first_admitted is None:
                e["neverAdmitted"] += 1
            else:
                e["admitted"] += 1
                e["_waits"].append((rec.first_admitted - rec.submitted) / US)
    span = max(end - start, 1)
    width = span / bins
    # An interval's bins and its four groups' accumulators are worked out once, not per group.
    sinks: dict[tuple[str, str, str, str], list[tuple[dict[str, float], dict[str, list[float]]]]] = {}
    for iv in m.intervals:
        s, t = max(iv.start, start), min(iv.end, end)
        if t <= s:
            continue
        first_bin = min(int((s - start) / width), bins - 1)
        last_bin = min(int((t - start) / width), bins - 1)
        overlaps = []
        for b in range(first_bin, last_bin + 1):
            b0 = start + b * width
            overlap = min(t, b0 + width) - max(s, b0)
            if overlap > 0:
                overlaps.append((b, overlap))
        per_res: dict[str, int] = {}
        for (_, res), v in iv.usage.items():
            per_res[res] = per_res.get(res, 0) + v
        key = (iv.cluster_queue, iv.local_queue, iv.cohort, iv.priority)
        targets = sinks.get(key)
        if targets is None:
            targets = sinks[key] = [(e["_used"], e["_series"]) for e in (
                entry("ClusterQueue", iv.cluster_queue), entry("LocalQueue", iv.local_queue),
                entry("Cohort", iv.cohort), entry("Priority", iv.priority))]
        held = t - s
        for res, v in per_res.items():
            for used, series in targets:
                used[res] = used.get(res, 0) + v * held
                row = series.get(res)
                if row is None:
                    row = series[res] = [0.0] * bins
                for b, overlap in overlaps:
                    row[b] += v * overlap / width
    for kind, names in out.items():
        for name, e in names.items():
            e["timeToAdmission"] = wait_stats(e.pop("_waits"))
            used = e.pop("_used")
            series = e.pop("_series")
            usage: dict[str, Any] = {}
            for res in sorted(set(used) | set(series)):
                mean = used.get(res, 0) / span
                item: dict[str, Any] = {"mean": format_amount(res, int(mean)), "meanAmount": mean,
                                        "series": [round(x, 3) for x in series.get(res, [0.0] * bins)]}
                if kind == "ClusterQueue":
                    nominal = m.cq_nominal.get(name, {}).get(res)
                    if nominal:
                        item["ofNominal"] = mean / nominal
                usage[res] = item
            e["usage"] = usage
    return out


def totals(m: Measure) -> dict[str, Any]:
    waits = []
    admitted = never = admissions = preemptions = evictions = 0
    for _, rec in m.all_workloads():
        admissions += rec.admissions
        preemptions += rec.preemptions
        evictions += rec.evictions
        if rec.first_admitted is None:
            never += 1
        else:
            admitted += 1
            waits.append((rec.first_admitted - rec.submitted) / US)
    return {"workloads": admitted + never, "admitted": admitted, "neverAdmitted": never, "admissions": admissions,
            "preemptions": preemptions, "evictions": evictions, "timeToAdmission": wait_stats(waits)}


def moved(recorded: Measure, changed: Measure, top: int) -> dict[str, list[dict[str, Any]]]:
    """The workloads whose first admission moved most: earlier, later, never (admitted in the
    recorded world, not in the changed one) and newly (the other way round)."""
    earlier: list[tuple[float, str, dict[str, Any]]] = []
    later: list[tuple[float, str, dict[str, Any]]] = []
    never: list[dict[str, Any]] = []
    newly: list[dict[str, Any]] = []
    for w, rec in recorded.workloads.items():
        other = changed.workloads.get(w)
        if other is None or not rec.accepted:
            continue
        a, b = rec.first_admitted, other.first_admitted
        if a is None and b is None:
            continue
        row: dict[str, Any] = {"workload": w, "localQueue": rec.local_queue, "priority": rec.priority,
                               "recordedWait": None if a is None else (a - rec.submitted) / US,
                               "whatIfWait": None if b is None else (b - other.submitted) / US}
        if a is not None and b is None:
            never.append(row)
        elif a is None:
            newly.append(row)
        else:
            delta = (b - a) / US
            row["moved"] = delta
            if delta < 0:
                earlier.append((delta, w, row))
            elif delta > 0:
                later.append((-delta, w, row))
    earlier.sort(key=lambda x: (x[0], x[1]))
    later.sort(key=lambda x: (x[0], x[1]))
    return {"earlier": [r for _, _, r in earlier[:top]], "later": [r for _, _, r in later[:top]],
            "never": never[:top], "newlyAdmitted": newly[:top],
            "counts": {"earlier": len(earlier), "later": len(later), "never": len(never), "newlyAdmitted": len(newly)}}


def window(*measures: Measure) -> tuple[int, int]:
    starts = [m.start for m in measures if m.start is not None]
    start = min(starts) if starts else 0
    return start, max([m.end for m in measures] + [start])


def world(m: Measure, start: int, end: int, bins: int) -> dict[str, Any]:
    return {"end": end, "totals": totals(m), "groups": world_groups(m, start, end, bins), "decisions": dict(sorted(m.decisions.items()))}
