"""The dashboard's data endpoints on a big cluster: 1,000 ClusterQueues, 100,000 pending workloads.

    python -m bench.dashboard_bench [--cohorts 100] [--pending-per-cq 100] [--pages 10] [--json]

Setup (untimed): 100 cohorts of 10 ClusterQueues (10 CPUs each, BestEffortFIFO), one LocalQueue
each; every ClusterQueue first fills its own quota with 10 one-CPU workloads, then gets
`--pending-per-cq` more that wait (1,000 x 100 = 100,000 pending). The events go through the
engine and the decisions into a `Projection`, as `quotaflow serve` folds them; the process's
resident memory is read before and after (Linux /proc).

Timed (wall clock, best of 5, in one run): what each endpoint does per request -- the view
function plus its JSON encoding -- for `/api/overview` (the whole configuration with usage),
`/api/workloads` pages of pending workloads at the start, middle and end of the cluster-wide
list and of one ClusterQueue's, and a page of admitted ones; and the live stream's cost per
decision (`Hub.notify` with `--pages` connected pages: one encode per decision, one queue step per
page). The page itself renders at most 100 rows at a time, so these are what a click costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

import msgspec

from domain.decisions import encode
from domain.engine import Engine
from projections.dashboard import data
from projections.dashboard.live import Hub
from projections.fold import Projection
from projections.follower import RecentRecords, decode_decision

API = "kueue.x-k8s.io/v1beta1"
CQS_PER_COHORT = 10
NOMINAL_CPU = 10
_encode = msgspec.json.Encoder().encode


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cq(c: int, q: int) -> str:
    return f"cq-{c:03d}-{q}"


def events(cohorts: int, pending_per_cq: int) -> list[bytes]:
    out: list[dict[str, Any]] = [{"type": "ConfigApplied", "object": {
        "apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}}}]
    queues = [(c, q) for c in range(cohorts) for q in range(CQS_PER_COHORT)]
    config = []
    for c, q in queues:
        config.append({"type": "ConfigApplied", "object": {
            "apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": cq(c, q)},
            "spec": {"cohort": f"cohort-{c:03d}", "namespaceSelector": {}, "resourceGroups": [
                {"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
                    {"name": "cpu", "nominalQuota": NOMINAL_CPU}]}]}]}}})
        config.append({"type": "ConfigApplied", "object": {
            "apiVersion": API, "kind": "LocalQueue", "metadata": {"namespace": f"team-{c:03d}-{q}", "name": "q"},
            "spec": {"clusterQueue": cq(c, q)}}})
    out.append({"type": "Batch", "events": config})

    def submit(c: int, q: int, name: str, t: int) -> dict[str, Any]:
        return {"type": "WorkloadSubmitted", "workload": {
            "apiVersion": API, "kind": "Workload",
            "metadata": {"namespace": f"team-{c:03d}-{q}", "name": name,
                         "creationTimestamp": f"2026-01-01T{t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d}Z"},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "1"}}]}}}

    t = 0
    for round_ in range(NOMINAL_CPU):  # every queue fills its own quota first
        out.append({"type": "Batch", "events": [submit(c, q, f"run-{round_}", t) for c, q in queues]})
        t += 1
    for i in range(pending_per_cq):
        out.append({"type": "Batch", "events": [submit(c, q, f"wait-{i:05d}", t) for c, q in queues]})
        t += 1
    return [msgspec.json.encode(e) for e in out]


def fold(raw: list[bytes]) -> tuple[Projection, list[bytes]]:
    engine = Engine()
    proj = Projection(history=False)
    doff = 0
    decisions: list[bytes] = []
    for i, event in enumerate(raw):
        recs = []
        for d in engine.apply(event, i):
            value = encode(d)
            decisions.append(value)
            recs.append(decode_decision(doff, value))
            doff += 1
        proj.apply(i, event, recs, timestamp_ms=1_767_225_600_000 + i)
    return proj, decisions


def best_ms(run: Callable[[], Any], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - began)
    return best * 1000


def live_cost_us(decisions: list[bytes], pages: int, per_step: int = 20, steps: int = 200) -> float:
    """Wall time per decision of forwarding `per_step` new decisions to `pages` pages."""

    async def go() -> float:
        recent = RecentRecords(20_000)
        hub = Hub(recent)
        queues = [hub.open() for _ in range(pages)]
        offset = 0
        began = time.perf_counter()
        for _ in range(steps):
            for _ in range(per_step):
                recent.add(offset, decisions[offset % len(decisions)])
                offset += 1
            hub.notify(offset)
            for q in queues:  # the pages read what they were sent
                assert q is not None
                while not q.empty():
                    q.get_nowait()
        return (time.perf_counter() - began) / (steps * per_step) * 1e6

    return asyncio.run(go())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard_bench")
    parser.add_argument("--cohorts", type=int, default=100)
    parser.add_argument("--pending-per-cq", type=int, default=100)
    parser.add_argument("--pages", type=int, default=10, help="connected pages for the live stream")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    raw = events(args.cohorts, args.pending_per_cq)
    rss0 = _rss_mb()
    began = time.perf_counter()
    proj, decisions = fold(raw)
    setup_s = time.perf_counter() - began
    rss1 = _rss_mb()
    n_cqs = len(proj.cluster_queues)
    pending = sum(len(c.pending) for c in proj.cluster_queues.values())
    total = pending
    one = cq(args.cohorts // 2, 0)

    def page(state: str, offset: int, cluster_queue: str | None = None) -> Callable[[], bytes]:
        return lambda: _encode(data.workloads(proj, state, cluster_queue=cluster_queue, offset=offset, limit=100))

    timings = {
        "overview": best_ms(lambda: _encode(data.overview(proj))),
        "pending, first page": best_ms(page("pending", 0)),
        "pending, middle page": best_ms(page("pending", total // 2)),
        "pending, last page": best_ms(page("pending", max(0, total - 100))),
        "pending in one ClusterQueue, last page": best_ms(page("pending", max(0, args.pending_per_cq - 100), one)),
        "admitted, middle page": best_ms(page("admitted", n_cqs * NOMINAL_CPU // 2)),
    }
    overview_bytes = len(_encode(data.overview(proj)))
    live = live_cost_us(decisions, args.pages)
    result = {
        "clusterQueues": n_cqs,
        "pending": pending,
        "setupSeconds": round(setup_s, 1),
        "projectionMB": round(rss1 - rss0, 1),
        "overviewKB": round(overview_bytes / 1024, 1),
        "endpointsMs": {k: round(v, 2) for k, v in timings.items()},
        "livePerDecisionUs": round(live, 2),
        "livePages": args.pages,
    }
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"{n_cqs} ClusterQueues, {pending} pending workloads (setup {setup_s:.1f} s; "
          f"projection {rss1 - rss0:.0f} MB resident)")
    print(f"{'endpoint':<42} {'ms (best of 5)':>15}")
    for name, ms in timings.items():
        print(f"{name:<42} {ms:>15.2f}")
    print(f"overview response: {overview_bytes / 1024:.0f} KB")
    print(f"live stream: {live:.1f} µs per decision with {args.pages} pages connected")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
