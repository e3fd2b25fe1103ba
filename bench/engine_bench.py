"""Engine throughput benchmark: input events per second of the engine alone, and how it holds up
among 10x the ClusterQueues and behind 10x the pending backlog.

    python -m bench.engine_bench [--workloads N] [--repeat K] [--json] [--profile]

What is timed: `Engine.apply(event, offset)` over a pre-generated, deterministic stream of input
events, reported as input events per second and µs per event, with the events given as JSON
bytes (the real agent path: the engine decodes them) and as dicts, on the wall clock and on this
process's CPU time (goals are judged on CPU time: the machines are shared, and other processes'
load inflates wall time). Generation, JSON encoding,
decoding into dicts for the dict mode, the pre-load and the analysis of the decisions all happen
outside the timed loop.

The stream (`generate`, seeded; nothing else is random):
- 2 ResourceFlavors, on-demand and spot, in one resource group; 10 cohorts × 10 ClusterQueues,
  BestEffortFIFO, no preemption (withinClusterQueue and reclaimWithinCohort Never); each
  ClusterQueue has on-demand 16 cpu / 64Gi / 4 GPUs and spot 8 cpu / 32Gi / 4 GPUs; one namespace
  and one LocalQueue per ClusterQueue.
- N workloads (default 100,000) of four cpu/memory sizes (1, 4, 12 and 16 cpu in all; 50/30/15/5%),
  arriving per ClusterQueue as a Poisson process whose rate is the ClusterQueue's load factor
  (0.3 to 1.6 of its own cpu quota) times a per-cohort wave (±35%, period 2 virtual hours), so
  hot queues borrow from cold ones in their cohort and bursts build a pending backlog that later
  drains. Submissions are full Kueue Workload objects (pod template with container requests).
- Each workload finishes an exponentially distributed run time (mean 10 virtual minutes) after
  it was admitted. The generator knows when that is because it folds the stream through an
  Engine while writing it (untimed): a finish is only emitted for an admitted workload, and every
  workload is eventually admitted and finished. The measured runs replay exactly these events in
  fresh engines; the decision counts of every run are checked against each other.

Variants, measured interleaved within one process (each round rotates the order) so that their
ratios are not at the mercy of a noisy shared machine:
- base: the stream above, alone. Its pending backlog is its own: N workloads on average.
- cq10-same: the goal's "same stream with 10× the ClusterQueues (in more cohorts)": the base
  stream, unchanged, in a cluster of 1,000 ClusterQueues. The 900 others (90 more cohorts, copies
  of the base cohorts) hold what a running cluster holds - admitted, waiting and finished
  workloads, from replaying the stream's first tenth in each, untimed and stamped before the
  stream starts - and the measured stream never touches them. It must decide exactly what base
  decides (checked). This is the goal's variant: cost must not grow with what an event does not
  touch.
- cq10 (diagnostic): 10× the ClusterQueues (100 cohorts × 10) at the same per-ClusterQueue load: every base
  cohort appears 10 times under new names, each copy shifted in time so that the copies
  interleave. Cohorts never interact, so each copy decides exactly what its base cohort did
  (checked). By default cq10 replays the first 1/10 of the stream's virtual time
  (`--cq10-window`), about as many events as base, and is compared with base's events/s over
  that same window (timed separately inside every base run); `--cq10-window 1` replays it all.
  This is 10× the whole cluster at work: every event touches the same amount of state as in base
  (the same calls per event), but the state the stream keeps touching is 10× larger and no longer
  stays in the CPU caches, so it measures the memory hierarchy as much as the engine.
- backlog10: exactly the base stream after a pre-loaded backlog (below) of P ≥ 9N workloads, so
  that on average at least 10× as many workloads are pending as in base.
- backlog1: the same with P/10 pre-loaded: same kinds of pending workloads as backlog10, a tenth
  as many. backlog10 against backlog1 isolates the number of pending workloads from their kinds.

The pre-loaded backlog (applied untimed before the measured stream): GPU jobs in the same
LocalQueues/ClusterQueues as the stream. Two holder jobs per ClusterQueue take every GPU of the
cohort in both flavors and never finish; behind them wait the pre-loaded GPU jobs (four shapes in
turn: 1, 2, 2×2 and 4 GPUs; priority -1) for quota that does not free up during the measured
stream. They are real inadmissible workloads: Kueue re-tries such workloads whenever their
cohort's usage changes, i.e. after nearly every event, and so does the engine. They ask for GPUs
only, so the stream's own cpu/memory decisions are exactly those without them (checked against
the generator), and the message they wait with never changes, so every variant decides the same.
(The stream's own workloads cannot serve as a pre-load: any extra workload that could be
admitted would change what the stream does.)
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import cProfile
import gc
import heapq
import io
import json
import math
import os
import platform
import pstats
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import msgspec

from domain.decisions import Admitted, Decision, Deleted, Finished, Pending
from domain.engine import Engine
from domain.quantity import amount
from domain.timestamps import format_time
from domain._engine_form import running_compiled

# -- the cluster ------------------------------------------------------------------------------

FLAVORS = ("on-demand", "spot")
GPU = "nvidia.com/gpu"
RESOURCES = ("cpu", "memory", GPU)
NOMINAL: dict[str, dict[str, str]] = {
    "on-demand": {"cpu": "16", "memory": "64Gi", GPU: "4"},
    "spot": {"cpu": "8", "memory": "32Gi", GPU: "4"},
}
CQS_PER_COHORT = 10
BASE_COHORTS = 10
CQ_SCALE = 10  # cq10: this many times the base cohorts
BACKLOG_SCALE = 10  # backlog10: this many times the base mean pending backlog

# Load of each ClusterQueue of a cohort as a fraction of its own cpu quota (mean 0.94); cohort c
# rotates the list by c so that different queues are hot in different cohorts.
LOAD_FACTORS = (1.6, 1.4, 1.2, 1.1, 1.0, 0.9, 0.8, 0.6, 0.5, 0.3)
WAVE = 0.35  # amplitude of the per-cohort arrival-rate wave
MEAN_RUNTIME_S = 600.0
WAVE_PERIOD_S = 12 * MEAN_RUNTIME_S
START_US = int(datetime(2025, 1, 1, tzinfo=timezone.utc).timestamp()) * 1_000_000
COPY_SHIFT_US = 7_919_000  # cq10: copy k of a cohort runs k × this later


@dataclass(frozen=True, slots=True)
class Shape:
    name: str
    count: int
    cpu: str  # per pod
    memory: str  # per pod
    weight: float

    @property
    def total_cpu(self) -> float:
        return self.count * amount("cpu", self.cpu) / 1000


SHAPES = (
    Shape("small", 1, "1", "2Gi", 0.50),
    Shape("medium", 2, "2", "4Gi", 0.30),
    Shape("large", 4, "3", "12Gi", 0.15),
    Shape("xlarge", 4, "4", "16Gi", 0.05),  # a whole on-demand nominal quota
)
MEAN_CPU = sum(s.weight * s.total_cpu for s in SHAPES)
CQ_CPU = sum(amount("cpu", NOMINAL[f]["cpu"]) for f in FLAVORS) / 1000

# The pre-loaded backlog: GPU_HOLDERS, admitted first, take every GPU of the cohort in both
# flavors and never finish; the GPU_SHAPES jobs (pods, GPUs per pod) queue behind them.
GPU_HOLDERS = (("gpu-train-a", NOMINAL["on-demand"][GPU]), ("gpu-train-b", NOMINAL["spot"][GPU]))
GPU_SHAPES = ((1, "1"), (1, "2"), (2, "2"), (1, "4"))
BACKLOG_PRIORITY = -1
LOCAL_QUEUE = "jobs"


def cohort_name(c: int) -> str:
    return f"cohort-{c:03d}"


def cq_name(c: int, q: int) -> str:
    return f"cq-{c:03d}-{q}"


def namespace(c: int, q: int) -> str:
    return f"team-{c:03d}-{q}"


def job_name(n: int) -> str:
    return f"job-{n:07d}"


# -- rendering events -------------------------------------------------------------------------


def setup_events(cohorts: int) -> list[dict[str, Any]]:
    ts = format_time(START_US)
    events: list[dict[str, Any]] = []
    for flavor in FLAVORS:
        events.append(
            {
                "type": "ConfigApplied",
                "id": f"rf/{flavor}",
                "time": ts,
                "object": {
                    "apiVersion": "kueue.x-k8s.io/v1beta1",
                    "kind": "ResourceFlavor",
                    "metadata": {"name": flavor},
                    "spec": {"nodeLabels": {"instance-type": flavor}},
                },
            }
        )
    for c in range(cohorts):
        for q in range(CQS_PER_COHORT):
            events.append(
                {
                    "type": "ConfigApplied",
                    "id": f"cq/{cq_name(c, q)}",
                    "time": ts,
                    "object": {
                        "apiVersion": "kueue.x-k8s.io/v1beta1",
                        "kind": "ClusterQueue",
                        "metadata": {"name": cq_name(c, q)},
                        "spec": {
                            "cohort": cohort_name(c),
                            "namespaceSelector": {},
                            "queueingStrategy": "BestEffortFIFO",
                            "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"},
                            "resourceGroups": [
                                {
                                    "coveredResources": list(RESOURCES),
                                    "flavors": [
                                        {
                                            "name": flavor,
                                            "resources": [
                                                {"name": res, "nominalQuota": NOMINAL[flavor][res]}
                                                for res in RESOURCES
                                            ],
                                        }
                                        for flavor in FLAVORS
                                    ],
                                }
                            ],
                        },
                    },
                }
            )
            events.append(
                {
                    "type": "ConfigApplied",
                    "id": f"lq/{namespace(c, q)}/{LOCAL_QUEUE}",
                    "time": ts,
                    "object": {
                        "apiVersion": "kueue.x-k8s.io/v1beta1",
                        "kind": "LocalQueue",
                        "metadata": {"namespace": namespace(c, q), "name": LOCAL_QUEUE},
                        "spec": {"clusterQueue": cq_name(c, q)},
                    },
                }
            )
    return events


def workload_event(
    t_us: int,
    c: int,
    q: int,
    name: str,
    count: int,
    requests: dict[str, str],
    labels: dict[str, str],
    priority: int | None = None,
) -> dict[str, Any]:
    """A WorkloadSubmitted event carrying a full Kueue Workload (pod template form)."""
    ns = namespace(c, q)
    spec: dict[str, Any] = {
        "queueName": LOCAL_QUEUE,
        "podSets": [
            {
                "name": "main",
                "count": count,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "main",
                                "image": "registry.example.com/batch/job:1.0",
                                "resources": {"requests": requests},
                            }
                        ],
                    }
                },
            }
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    return {
        "type": "WorkloadSubmitted",
        "id": f"submit/{ns}/{name}",
        "time": format_time(t_us),
        "workload": {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {
                "namespace": ns,
                "name": name,
                "labels": {"kueue.x-k8s.io/queue-name": LOCAL_QUEUE, **labels},
            },
            "spec": spec,
        },
    }


def finish_event(t_us: int, c: int, q: int, name: str) -> dict[str, Any]:
    ns = namespace(c, q)
    return {
        "type": "WorkloadFinished",
        "id": f"finish/{ns}/{name}",
        "time": format_time(t_us),
        "namespace": ns,
        "name": name,
    }


SUBMIT, FINISH = 0, 1
Record = tuple[int, int, int, int, int, int]  # (time µs, SUBMIT|FINISH, cohort, cq, workload n, shape)


def render(rec: Record, cohort_offset: int = 0, shift_us: int = 0) -> dict[str, Any]:
    t, kind, c, q, n, s = rec
    if kind == SUBMIT:
        shape = SHAPES[s]
        return workload_event(
            t + shift_us,
            c + cohort_offset,
            q,
            job_name(n),
            shape.count,
            {"cpu": shape.cpu, "memory": shape.memory},
            {"size": shape.name},
        )
    return finish_event(t + shift_us, c + cohort_offset, q, job_name(n))


def preload_events(cohorts: int, per_cq: int) -> list[dict[str, Any]]:
    """GPU holders that take every GPU of every cohort, then per_cq GPU jobs per ClusterQueue
    (the GPU_SHAPES in turn) that wait behind them for the whole measured stream."""
    ts = START_US + 1_000_000
    events = []
    for holder, gpus in GPU_HOLDERS:  # all of the first kind, then all of the second: both flavors
        for c in range(cohorts):
            for q in range(CQS_PER_COHORT):
                events.append(workload_event(ts, c, q, holder, 1, {GPU: gpus}, {"kind": "gpu-holder"}))
    for i in range(per_cq):
        pods, gpus = GPU_SHAPES[i % len(GPU_SHAPES)]
        for c in range(cohorts):
            for q in range(CQS_PER_COHORT):
                events.append(
                    workload_event(
                        ts, c, q, f"backlog-{i:05d}", pods, {GPU: gpus}, {"kind": "gpu-backlog"}, BACKLOG_PRIORITY
                    )
                )
    return events


# -- generating the stream --------------------------------------------------------------------


@dataclass
class Generated:
    workloads: int
    cohorts: int
    seed: int
    records: list[Record]  # sorted by time
    decision_counts: Counter[str]  # what the generator's own engine decided for the stream
    natural_pending_mean: float  # pending stream workloads after each event, all queues, mean
    natural_pending_max: int

    @property
    def cqs(self) -> int:
        return self.cohorts * CQS_PER_COHORT

    @property
    def duration_s(self) -> float:
        return (self.records[-1][0] - self.records[0][0]) / 1e6 if self.records else 0.0


def _next_arrival(rng: random.Random, t_us: float, rate_per_us: float, phase: float) -> float:
    """Next arrival of a Poisson process with a sinusoidally modulated rate (by thinning)."""
    peak = rate_per_us * (1 + WAVE)
    period_us = WAVE_PERIOD_S * 1e6
    while True:
        t_us += rng.expovariate(peak)
        if rng.random() * (1 + WAVE) <= 1 + WAVE * math.sin(2 * math.pi * t_us / period_us + phase):
            return t_us


def generate(workloads: int, cohorts: int = BASE_COHORTS, seed: int = 1) -> Generated:
    """Simulate the cluster and write down its events, folding them through an Engine as it goes."""
    rng = random.Random(seed)
    engine = Engine()
    offset = 0
    for ev in setup_events(cohorts):
        _expect_no_rejections(engine.apply(ev, offset), ev)
        offset += 1
    arrive, end = 0, 1
    heap: list[tuple[float, int, int, int, int, int, int]] = []  # (t, tick, arrive|end, c, q, n, s)
    tick = 0
    cum_weights = list(_accumulate(s.weight for s in SHAPES))
    rates: dict[tuple[int, int], float] = {}
    phases = [2 * math.pi * rng.random() for _ in range(cohorts)]
    mean_runtime_us = MEAN_RUNTIME_S * 1e6
    t0 = START_US + 2_000_000
    for c in range(cohorts):
        for q in range(CQS_PER_COHORT):
            load = LOAD_FACTORS[(q + c) % len(LOAD_FACTORS)]
            rate = load * CQ_CPU / (MEAN_CPU * mean_runtime_us)  # arrivals per µs
            rates[(c, q)] = rate
            heap.append((_next_arrival(rng, t0, rate, phases[c]), tick, arrive, c, q, -1, -1))
            tick += 1
    heapq.heapify(heap)
    running: dict[str, tuple[int, int, int, int, float]] = {}  # key -> (c, q, n, s, runtime µs)
    records: list[Record] = []
    counts: Counter[str] = Counter()
    submitted = admitted = pending_sum = pending_max = 0
    last_t = 0
    while heap:
        t, _, kind, c, q, n, s = heapq.heappop(heap)
        t_us = max(int(t), last_t)
        last_t = t_us
        if kind == arrive:
            if submitted >= workloads:
                continue  # arrivals are over; this queue's process stops
            n = submitted
            submitted += 1
            s = rng.choices(range(len(SHAPES)), cum_weights=cum_weights)[0]
            runtime = max(30e6, rng.expovariate(1 / mean_runtime_us))
            running[f"{namespace(c, q)}/{job_name(n)}"] = (c, q, n, s, runtime)
            rec: Record = (t_us, SUBMIT, c, q, n, s)
            heapq.heappush(heap, (_next_arrival(rng, t, rates[(c, q)], phases[c]), tick, arrive, c, q, -1, -1))
            tick += 1
        else:
            rec = (t_us, FINISH, c, q, n, s)
        ev = render(rec)
        decisions = engine.apply(ev, offset)
        offset += 1
        records.append(rec)
        _expect_no_rejections(decisions, ev)
        for d in decisions:
            counts[type(d).__name__] += 1
            if type(d) is Admitted:
                admitted += 1
                ac, aq, an, as_, runtime = running.pop(d.workload)  # type: ignore[arg-type]
                heapq.heappush(heap, (t_us + runtime, tick, end, ac, aq, an, as_))
                tick += 1
        pending = submitted - admitted
        pending_sum += pending
        pending_max = max(pending_max, pending)
    if running:
        raise RuntimeError(f"generator: {len(running)} workloads were never admitted")
    return Generated(
        workloads=workloads,
        cohorts=cohorts,
        seed=seed,
        records=records,
        decision_counts=counts,
        natural_pending_mean=pending_sum / max(1, len(records)),
        natural_pending_max=pending_max,
    )


def _accumulate(values: Iterable[float]) -> Iterator[float]:
    total = 0.0
    for v in values:
        total += v
        yield total


def _expect_no_rejections(decisions: Sequence[Decision], event: Any) -> None:
    for d in decisions:
        if type(d).__name__ == "Rejected":
            raise RuntimeError(f"benchmark event was rejected: {d!r}\nevent: {event!r}")


# -- variants ---------------------------------------------------------------------------------

VARIANTS = ("base", "cq10-same", "cq10", "backlog10", "backlog1")
# (variant, compared with, over the compared variant's window only)
COMPARISONS = (("cq10-same", "base", False), ("cq10", "base", True), ("backlog10", "base", False),
               ("backlog1", "base", False), ("backlog10", "backlog1", False))
# The comparisons with a goal (>= 0.8 of base); the others are diagnostics (see the module docstring).
GOAL_COMPARISONS = {("cq10-same", "base"), ("backlog10", "base")}


@dataclass
class Variant:
    name: str
    description: str
    cohorts: int
    preload_per_cq: int
    prelude: list[Any]  # setup + pre-loaded state (event dicts or JSON bytes), applied untimed
    stream: list[bytes]  # the measured input events, JSON-encoded
    copies: int = 1  # how many copies of (a prefix of) the base stream `stream` holds
    window: int = 0  # base: its first `window` events are also timed on their own (cq10's baseline)
    complete: bool = True  # every workload of the stream is submitted and finished within it

    @property
    def cqs(self) -> int:
        return self.cohorts * CQS_PER_COHORT


def build_variants(
    gen: Generated, names: Sequence[str] = VARIANTS, cq10_window: float = 1 / CQ_SCALE
) -> tuple[dict[str, Variant], dict[str, Any]]:
    encode = msgspec.json.Encoder().encode
    records = gen.records
    base_stream = [encode(render(rec)) for rec in records]
    nat_per_cq = gen.natural_pending_mean / gen.cqs
    # ≥ 9N: mean pending ≥ 10× base's; ≥ 10 of each GPU shape so that backlog1 has one of each
    p = max(math.ceil((BACKLOG_SCALE - 1) * nat_per_cq), BACKLOG_SCALE * len(GPU_SHAPES))
    p1 = p // BACKLOG_SCALE
    # cq10 replays the records before t_cut (the first `cq10_window` of the virtual time)
    window = _prefix_length(records, cq10_window)
    info = {
        "natural_pending_per_cq": nat_per_cq,
        "preload_backlog10_per_cq": p,
        "preload_backlog1_per_cq": p1,
        "cq10_window": min(1.0, cq10_window),
        "cq10_window_base_events": window,
    }
    setup = setup_events(gen.cohorts)
    cqs = gen.cohorts * CQS_PER_COHORT
    out: dict[str, Variant] = {}
    out["base"] = Variant("base", f"{cqs} CQs, the stream alone", gen.cohorts, 0, setup, base_stream, window=window)
    if "cq10-same" in names:
        # The base stream itself, unchanged, among 10× the ClusterQueues: CQ_SCALE - 1 more copies
        # of every base cohort hold what a running cluster holds - admitted, pending and finished
        # workloads, from replaying the stream's first tenth in each (untimed, stamped before the
        # stream starts) - and the measured stream never touches them.
        head = records[: _prefix_length(records, 1 / CQ_SCALE)]
        shift = (START_US - 60_000_000) - (head[-1][0] if head else START_US)
        others = heapq.merge(*(_shifted(head, k) for k in range(1, CQ_SCALE)))
        state = [encode(render(head[i], k * gen.cohorts, shift)) for _, k, i in others]
        out["cq10-same"] = Variant(
            "cq10-same",
            f"{cqs * CQ_SCALE} CQs: the base stream unchanged, {cqs * (CQ_SCALE - 1)} more CQs in "
            f"{gen.cohorts * (CQ_SCALE - 1)} more cohorts holding a running cluster's state "
            f"({len(state):,} untimed events) that the stream never touches",
            gen.cohorts * CQ_SCALE, 0, setup_events(gen.cohorts * CQ_SCALE) + state, base_stream,
        )
    if "cq10" in names:
        cohorts = gen.cohorts * CQ_SCALE
        head = records[:window]
        merged = heapq.merge(*(_shifted(head, k) for k in range(CQ_SCALE)))
        stream = [encode(render(head[i], k * gen.cohorts, k * COPY_SHIFT_US)) for _, k, i in merged]
        share = "the whole stream" if window == len(records) else f"the first {cq10_window:.0%} of its virtual time"
        out["cq10"] = Variant(
            "cq10",
            f"{cohorts * CQS_PER_COHORT} CQs, same per-CQ load, {CQ_SCALE} copies of {share}",
            cohorts, 0, setup_events(cohorts), stream, copies=CQ_SCALE, complete=window == len(records),
        )
    for name, per_cq in (("backlog10", p), ("backlog1", p1)):
        if name in names:
            out[name] = Variant(
                name,
                f"{cqs} CQs, the same stream after {per_cq} pre-loaded pending GPU jobs per CQ",
                gen.cohorts, per_cq, setup + preload_events(gen.cohorts, per_cq), base_stream,
            )
    return out, info


def _prefix_length(records: list[Record], share: float) -> int:
    """How many records fall in the first `share` of the stream's virtual time."""
    if share >= 1 or not records:
        return len(records)
    t_cut = records[0][0] + share * (records[-1][0] - records[0][0])
    return bisect.bisect_left(records, (int(t_cut),))


def _shifted(records: list[Record], k: int) -> Iterator[tuple[int, int, int]]:
    shift = k * COPY_SHIFT_US
    for i, rec in enumerate(records):
        yield rec[0] + shift, k, i


# -- reading the decisions --------------------------------------------------------------------

_NOMINAL_AMOUNTS = {(f, r): amount(r, v) for f, res in NOMINAL.items() for r, v in res.items()}


class Tally:
    """What the decisions of one run say: counts, borrowing (from decisions + config), backlog."""

    def __init__(self, window: int = 0) -> None:
        self.window = window
        self.counts: Counter[str] = Counter()  # measured stream only
        self.window_counts: Counter[str] | None = None  # counts after the first `window` events
        self.pending: set[str] = set()  # workloads whose latest decision is Pending
        self.held: dict[str, tuple[str, list[tuple[tuple[str, str], int]]]] = {}  # key -> (cq, usage)
        self.cq_usage: dict[str, dict[tuple[str, str], int]] = {}
        self.admitted_keys: Counter[str] = Counter()
        self.finished_keys: Counter[str] = Counter()
        self.ever_pending: set[str] = set()
        self.borrowed = 0
        self.spot = 0
        self.preload_pending = 0
        self.preload_admitted = 0
        self.holders_admitted = 0
        self.pending_sum = 0
        self.pending_max = 0
        self.events = 0
        self._amounts: dict[tuple[str, str], int] = {}

    def start_measuring(self) -> None:
        self.preload_pending = len(self.pending)

    def feed(self, decisions: Sequence[Decision], measured: bool) -> None:
        for d in decisions:
            kind = type(d)
            key = d.workload or ""
            if measured:
                self.counts[kind.__name__] += 1
            if kind is Pending:
                self.pending.add(key)
                if measured:
                    self.ever_pending.add(key)
            elif kind is Admitted:
                self.pending.discard(key)
                name = key.split("/", 1)[1]
                if name.startswith("backlog-"):
                    self.preload_admitted += 1
                elif name.startswith("gpu-train-"):
                    self.holders_admitted += 1
                if measured:
                    self._admit(key, d)  # type: ignore[arg-type]
            elif kind is Finished or kind is Deleted:
                self.pending.discard(key)
                if measured:
                    self.finished_keys[key] += 1
                held = self.held.pop(key, None)
                if held is not None:
                    usage = self.cq_usage[held[0]]
                    for fr, value in held[1]:
                        usage[fr] -= value
        if measured:
            self.events += 1
            stream_pending = len(self.pending) - self.preload_pending
            self.pending_sum += stream_pending
            self.pending_max = max(self.pending_max, stream_pending)
            if self.events == self.window:
                self.window_counts = Counter(self.counts)

    def _admit(self, key: str, d: Admitted) -> None:
        self.admitted_keys[key] += 1
        usage = self.cq_usage.setdefault(d.clusterQueue, {})
        added: list[tuple[tuple[str, str], int]] = []
        for ps in d.podSetAssignments:
            for res, flavor in ps.flavors.items():
                text = ps.resourceUsage[res]
                value = self._amounts.get((res, text))
                if value is None:
                    value = self._amounts[(res, text)] = amount(res, text)
                added.append(((flavor, res), value))
        borrowed = False
        for fr, value in added:
            usage[fr] = usage.get(fr, 0) + value
            if usage[fr] > _NOMINAL_AMOUNTS[fr]:
                borrowed = True
        self.held[key] = (d.clusterQueue, added)
        self.borrowed += borrowed
        self.spot += any(fr[0] == "spot" for fr, _ in added)

    def summary(self, variant: Variant, workloads: int) -> dict[str, Any]:
        expected = workloads * variant.copies
        admitted_once = sum(1 for v in self.admitted_keys.values() if v == 1)
        finished_after_admission = sum(1 for k in self.admitted_keys if self.finished_keys.get(k) == 1)
        return {
            "decisions": dict(sorted(self.counts.items())),
            "window_decisions": dict(sorted(self.window_counts.items())) if self.window_counts is not None else None,
            "workloads": expected if variant.complete else None,
            "admitted_once": admitted_once,
            "finished_after_admission": finished_after_admission,
            "all_admitted_and_finished": (
                admitted_once == expected == finished_after_admission == len(self.admitted_keys)
                if variant.complete
                else None
            ),
            "workloads_that_waited": len(self.ever_pending),
            "borrowed_admissions": self.borrowed,
            "spot_admissions": self.spot,
            "stream_pending_mean": self.pending_sum / max(1, self.events),
            "stream_pending_max": self.pending_max,
            "preloaded_pending": self.preload_pending,
            "preloaded_admitted": self.preload_admitted,
            "gpu_holders_admitted": self.holders_admitted,
            "gpu_holders_expected": len(GPU_HOLDERS) * variant.cqs if variant.preload_per_cq else 0,
        }


# -- measuring --------------------------------------------------------------------------------

CHUNK = 20_000  # events handed to the timed loop at a time (decoded to dicts untimed in dict mode)
MODES = ("bytes", "dict")


CLOCKS = ("wall", "cpu")  # time.perf_counter, and this process's CPU time (time.process_time)


@dataclass
class Run:
    variant: str
    mode: str
    round: int
    events: int
    seconds: dict[str, float]  # clock -> seconds in the timed loop
    window_events: int = 0
    window_seconds: dict[str, float] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)

    def rate(self, clock: str = "wall", window: bool = False) -> float:
        """Input events per second on this clock, over the whole stream or its first window."""
        if window:
            spent = self.window_seconds.get(clock, 0.0)
            return self.window_events / spent if spent else 0.0
        return self.events / self.seconds[clock]

    @property
    def events_per_s(self) -> float:
        return self.rate("wall")


def run_once(
    variant: Variant, mode: str, workloads: int, round_: int = 0, profiler: cProfile.Profile | None = None,
    gc_freeze: bool = False,
) -> Run:
    """A fresh engine, the prelude untimed, then the measured stream, timed chunk by chunk."""
    engine = Engine()
    apply = engine.apply
    tally = Tally(variant.window)
    offset = 0
    for ev in variant.prelude:
        out = apply(ev, offset)
        _expect_no_rejections(out, ev)
        tally.feed(out, measured=False)
        offset += 1
    tally.start_measuring()
    decode = msgspec.json.decode
    stream = variant.stream
    bounds = sorted({*range(0, len(stream), CHUNK), len(stream), *([variant.window] if variant.window else [])})
    wall = cpu = 0.0
    window: dict[str, float] = {}
    perf_counter, process_time = time.perf_counter, time.process_time
    gc.collect()
    if gc_freeze:
        # What an agent may do once it has loaded its state: everything alive now (the pre-load,
        # and this process's own data) leaves the collector's generations for good.
        gc.freeze()
    for start, stop in zip(bounds, bounds[1:]):
        chunk: list[Any] = stream[start:stop]
        if mode == "dict":
            chunk = [decode(b) for b in chunk]
        results: list[list[Decision]] = []
        append = results.append
        if profiler is not None:
            profiler.enable()
        c0 = process_time()
        t0 = perf_counter()
        for off, ev in enumerate(chunk, offset):
            append(apply(ev, off))
        wall += perf_counter() - t0
        cpu += process_time() - c0
        if profiler is not None:
            profiler.disable()
        if stop == variant.window:
            window = {"wall": wall, "cpu": cpu}
        offset += len(chunk)
        for out in results:
            tally.feed(out, measured=True)
        del results, chunk
    if gc_freeze:
        gc.unfreeze()
    run = Run(variant.name, mode, round_, len(stream), {"wall": wall, "cpu": cpu}, variant.window, window)
    run.summary = tally.summary(variant, workloads)
    return run


def gc_threshold(choice: str) -> tuple[int, int, int] | None:
    """--gc-threshold: `default` (None: Python's), `engine-process` (what the agent's engine
    process sets, streams.agent.engine_child.ENGINE_GC_THRESHOLD) or three integers `a,b,c`."""
    if choice == "default":
        return None
    if choice == "engine-process":
        from streams.agent.engine_child import ENGINE_GC_THRESHOLD

        return ENGINE_GC_THRESHOLD
    a, b, c = (int(x) for x in choice.split(","))
    return a, b, c


@contextlib.contextmanager
def gc_thresholds(threshold: tuple[int, int, int] | None) -> Iterator[None]:
    """The collector at these thresholds (None: as it is) inside, as it was after."""
    old = gc.get_threshold()
    if threshold is not None:
        gc.set_threshold(*threshold)
    try:
        yield
    finally:
        gc.set_threshold(*old)


@contextlib.contextmanager
def frozen_setup(threshold: tuple[int, int, int] | None) -> Iterator[None]:
    """What was built before is not garbage: collect once, freeze it so that no collection walks
    it again, and run at these thresholds inside; thawed and as it was after."""
    gc.collect()
    gc.freeze()
    try:
        with gc_thresholds(threshold):
            yield
    finally:
        gc.unfreeze()


def measure(
    variants: dict[str, Variant], modes: Sequence[str], repeat: int, workloads: int, progress: bool,
    gc_freeze: bool = False, threshold: tuple[int, int, int] | None = None,
) -> list[Run]:
    with gc_thresholds(threshold):
        return _measure(variants, modes, repeat, workloads, progress, gc_freeze)


def _measure(
    variants: dict[str, Variant], modes: Sequence[str], repeat: int, workloads: int, progress: bool,
    gc_freeze: bool,
) -> list[Run]:
    runs: list[Run] = []
    names = list(variants)
    for r in range(repeat):
        order = names[r % len(names) :] + names[: r % len(names)]
        mode_order = list(modes) if r % 2 == 0 else list(reversed(modes))
        for name in order:
            for mode in mode_order:
                run = run_once(variants[name], mode, workloads, r, gc_freeze=gc_freeze)
                runs.append(run)
                if progress:
                    extra = (
                        f"  (first {run.window_events:,}: {run.rate('wall', True):,.0f}/s wall, "
                        f"{run.rate('cpu', True):,.0f}/s CPU)"
                        if run.window_events and run.window_events < run.events
                        else ""
                    )
                    print(
                        f"  round {r + 1}/{repeat}  {name:<9} {mode:<5} {run.events:>9,} events "
                        f"{run.seconds['wall']:8.2f} s {run.rate('wall'):>9,.0f} events/s wall "
                        f"{run.rate('cpu'):>9,.0f} events/s CPU{extra}",
                        file=sys.stderr,
                        flush=True,
                    )
                gc.collect()
    return runs


# -- reporting --------------------------------------------------------------------------------

GOAL_EVENTS_PER_S = 20_000
GOAL_RATIO = 0.8
GOAL_CLOCK = "cpu"  # goals are judged on this clock; both are always reported


def _rates(runs: list[Run], window: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for clock in CLOCKS:
        samples = [x.rate(clock, window) for x in runs]
        med = statistics.median(samples)
        out[clock] = {
            "samples_events_per_s": [round(s, 1) for s in samples],
            "median_events_per_s": round(med, 1),
            "median_us_per_event": round(1e6 / med, 2),
        }
    return out


def analyse(runs: list[Run], variants: dict[str, Variant], modes: Sequence[str]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name, v in variants.items():
        for mode in modes:
            mine = [x for x in runs if x.variant == name and x.mode == mode]
            entry: dict[str, Any] = {"events": len(v.stream), **_rates(mine), "compared": {}}
            if 0 < v.window < len(v.stream):
                entry["window"] = {"events": v.window, **_rates(mine, window=True)}
            results.setdefault(name, {})[mode] = entry
    for name, against, windowed in COMPARISONS:
        if name not in variants or against not in variants:
            continue
        for mode in modes:
            ref_runs = {x.round: x for x in runs if x.variant == against and x.mode == mode}
            label = against
            if windowed and variants[against].window < len(variants[against].stream):
                label = f"{against}, first {variants[against].window:,}"
            compared: dict[str, Any] = {"label": label}
            for clock in CLOCKS:
                ref_median = statistics.median(x.rate(clock, windowed) for x in ref_runs.values())
                compared[clock] = {
                    "events_per_s": round(ref_median, 1),
                    "ratio": round(results[name][mode][clock]["median_events_per_s"] / ref_median, 3),
                    "paired_ratios": [
                        round(x.rate(clock) / ref_runs[x.round].rate(clock, windowed), 3)
                        for x in runs
                        if x.variant == name and x.mode == mode and x.round in ref_runs
                    ],
                }
            results[name][mode]["compared"][against] = compared
    deterministic = {}
    for name in variants:
        decided = {json.dumps(x.summary["decisions"], sort_keys=True) for x in runs if x.variant == name}
        deterministic[name] = len(decided) == 1
    return {"results": results, "deterministic": deterministic}


def same_decisions(first: dict[str, dict[str, Any]], gen: Generated) -> dict[str, bool]:
    """The checks that make the comparisons fair: every variant decided what it should."""
    out: dict[str, bool] = {}
    base = first["base"]
    out["base = generator"] = base["decisions"] == dict(sorted(gen.decision_counts.items()))
    for name in ("cq10-same", "backlog10", "backlog1"):
        if name in first:
            out[f"{name} = base"] = first[name]["decisions"] == base["decisions"]
    if "cq10" in first:
        ref = base["window_decisions"] if base["window_decisions"] is not None else base["decisions"]
        out[f"cq10 = {CQ_SCALE} × base (same window)"] = first["cq10"]["decisions"] == {
            k: v * CQ_SCALE for k, v in ref.items()
        }
    return out


def goals(analysis: dict[str, Any], modes: Sequence[str]) -> list[dict[str, Any]]:
    """Judged on GOAL_CLOCK (this process's CPU time: a shared machine's other load does not
    count against the engine); the wall-clock figure is given alongside."""
    res = analysis["results"]
    out = []
    for mode in modes:
        r = res["base"][mode]
        value = r[GOAL_CLOCK]["median_events_per_s"]
        out.append(
            {
                "goal": f"base ≥ {GOAL_EVENTS_PER_S:,} events/s ({mode})",
                "value": f"{value:,.0f} events/s CPU ({r[GOAL_CLOCK]['median_us_per_event']:.1f} µs/event); "
                f"wall {r['wall']['median_events_per_s']:,.0f}",
                "met": value >= GOAL_EVENTS_PER_S,
            }
        )
    for name, against, _ in COMPARISONS:
        if name in res and against in res:
            for mode in modes:
                c = res[name][mode]["compared"][against]
                g = c[GOAL_CLOCK]
                out.append(
                    {
                        "goal": f"{name} within 20% of {c['label']} ({mode})"
                        + ("" if (name, against) in GOAL_COMPARISONS else " — diagnostic"),
                        "value": f"CPU ratio {g['ratio']:.3f} (paired {' '.join(f'{p:.2f}' for p in g['paired_ratios'])}); "
                        f"wall {c['wall']['ratio']:.3f}",
                        "met": g["ratio"] >= GOAL_RATIO,
                    }
                )
    return out


def command_line(args: argparse.Namespace) -> str:
    parts = [
        "python -m bench.engine_bench",
        f"--workloads {args.workloads}",
        f"--repeat {args.repeat}",
        f"--seed {args.seed}",
        f"--cohorts {args.cohorts}",
        f"--modes {','.join(args.modes)}",
        f"--variants {','.join(args.variants)}",
        f"--cq10-window {args.cq10_window:g}",
    ]
    if args.profile:
        parts.append("--profile")
        if args.profile_variant != "base":
            parts.append(f"--profile-variant {args.profile_variant}")
    if args.gc_freeze:
        parts.append("--gc-freeze")
    if args.gc_threshold != "default":
        parts.append(f"--gc-threshold {args.gc_threshold}")
    if args.json:
        parts.append("--json")
    return " ".join(parts)


def _git_version() -> str:
    """The commit measured, and whether domain/ had uncommitted changes (the engine moves fast)."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "domain"], cwd=root, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}{' + uncommitted domain/ changes' if dirty else ''}" if head else "unknown"


def environment() -> dict[str, Any]:
    return {
        "git": _git_version(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "engine": "compiled (mypyc)" if running_compiled() else "sources",
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "gc_enabled": gc.isenabled(),
        "gc_threshold": list(gc.get_threshold()),
    }


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(160, Console().width))
    console.print(f"[bold]Command:[/bold] {report['command']}")
    env, gen = report["environment"], report["generator"]
    console.print(
        f"Code {env['git']}, engine {env.get('engine', 'sources')}; Python {env['python']} ({env['implementation']}, {env['machine']}, {env['cpus']} CPUs, "
        f"gc {'on' if env['gc_enabled'] else 'off'}, thresholds {','.join(map(str, env['gc_threshold']))}); seed {gen['seed']}; {gen['workloads']:,} workloads, "
        f"{gen['stream_events']:,} stream events over {gen['virtual_hours']:.1f} virtual hours; "
        f"generation {gen['seconds']:.0f} s (untimed)"
    )
    console.print(
        f"Pending backlog: the stream's own mean {gen['natural_pending_per_cq']:.2f} per CQ "
        f"(max {gen['natural_pending_max']:,} in all {gen['cohorts'] * CQS_PER_COHORT} CQs); pre-loaded GPU jobs per CQ: "
        f"{gen['preload_backlog10_per_cq']} in backlog10, {gen['preload_backlog1_per_cq']} in backlog1"
    )
    for name, v in report["variants"].items():
        console.print(f"  {name}: {v['description']}; {v['events']:,} measured events after {v['prelude_events']:,} untimed")

    t = Table(title="Engine.apply throughput: median over rounds, input events (CPU = this process's CPU time)")
    for col in ("variant", "mode", "events", "events/s CPU", "µs/event CPU", "min–max CPU", "events/s wall",
                "vs", "ratio CPU", "ratio wall", "paired CPU"):
        t.add_column(col, justify="left" if col in ("variant", "mode", "vs", "paired CPU") else "right")

    def row(label: str, mode: str, r: dict[str, Any]) -> None:
        samples = r["cpu"]["samples_events_per_s"]
        compared = list(r.get("compared", {}).values()) or [None]
        for i, c in enumerate(compared):
            head = (
                [label, mode, f"{r['events']:,}",
                 f"{r['cpu']['median_events_per_s']:,.0f}", f"{r['cpu']['median_us_per_event']:.1f}",
                 f"{min(samples):,.0f}–{max(samples):,.0f}", f"{r['wall']['median_events_per_s']:,.0f}"]
                if i == 0
                else [""] * 7
            )
            tail = (
                [c["label"], f"{c['cpu']['ratio']:.3f}", f"{c['wall']['ratio']:.3f}",
                 " ".join(f"{p:.2f}" for p in c["cpu"]["paired_ratios"])]
                if c is not None
                else ["", "", "", ""]
            )
            t.add_row(*head, *tail)

    for name, per_mode in report["results"].items():
        for mode, r in per_mode.items():
            row(name, mode, r)
            if "window" in r:
                row(f"{name}, first {r['window']['events']:,}", mode, r["window"])
    console.print(t)

    s = Table(title="What the measured stream decided (first run of each variant)")
    for col in ("variant", "Admitted", "Pending", "Finished", "other", "waited", "borrowed", "spot",
                "pending mean", "pending max", "pre-loaded", "all admitted+finished", "deterministic"):
        s.add_column(col, justify="right")
    for name, st in report["stream"].items():
        d = dict(st["decisions"])
        other = {k: v for k, v in d.items() if k not in ("Admitted", "Pending", "Finished")}
        complete = st["all_admitted_and_finished"]
        ok = st["preloaded_admitted"] == 0 and st["gpu_holders_admitted"] == st["gpu_holders_expected"]
        s.add_row(
            name,
            f"{d.get('Admitted', 0):,}",
            f"{d.get('Pending', 0):,}",
            f"{d.get('Finished', 0):,}",
            ", ".join(f"{k} {v}" for k, v in other.items()) or "-",
            f"{st['workloads_that_waited']:,}",
            f"{st['borrowed_admissions']:,}",
            f"{st['spot_admissions']:,}",
            f"{st['stream_pending_mean'] + st['preloaded_pending']:,.1f}",
            f"{st['stream_pending_max'] + st['preloaded_pending']:,}",
            f"{st['preloaded_pending']:,}",
            ("n/a (window)" if complete is None else "yes" if complete else "NO") + ("" if ok else ", pre-load NOT as intended"),
            "yes" if report["deterministic"][name] else "NO",
        )
    console.print(s)
    console.print(
        "waited: workloads with at least one Pending decision; borrowed: admissions after which the "
        "ClusterQueue's usage exceeds its nominal quota in some flavor/resource (from the decisions' "
        "resourceUsage and the ClusterQueue config); spot: admissions given the spot flavor; pending "
        "mean/max: pending workloads after each measured event, the pre-loaded ones included."
    )
    checks = report["same_decisions"]
    console.print("Decision checks: " + "; ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in checks.items()))
    g = Table(title=f"Goals (this machine; judged on {GOAL_CLOCK.upper()} time, wall clock alongside)")
    for col in ("goal", "value", "met"):
        g.add_column(col)
    for item in report["goals"]:
        g.add_row(item["goal"], item["value"], "[green]yes[/green]" if item["met"] else "[red]NO[/red]")
    console.print(g)


# -- profiling --------------------------------------------------------------------------------


def profile(variant: Variant, mode: str, workloads: int, top: int = 25) -> str:
    prof = cProfile.Profile()
    run = run_once(variant, mode, workloads, profiler=prof)
    buf = io.StringIO()
    buf.write(
        f"cProfile of the measured stream of '{variant.name}' ({mode} mode, {variant.description}): "
        f"{run.events:,} events in {run.seconds['wall']:.1f} s under the profiler "
        f"({run.rate('wall'):,.0f} events/s, profiler overhead included)\n"
    )
    stats = pstats.Stats(prof, stream=buf)
    stats.strip_dirs()
    buf.write(f"\n=== top {top} by cumulative time ===\n")
    stats.sort_stats("cumulative").print_stats(top)
    buf.write(f"\n=== top {top} by own time (tottime) ===\n")
    stats.sort_stats("tottime").print_stats(top)
    return buf.getvalue()


# -- CLI --------------------------------------------------------------------------------------


def _csv(choices: Sequence[str]) -> Any:
    def parse(text: str) -> list[str]:
        items = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in items if x not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(choices)}")
        return items

    return parse


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.engine_bench",
        description="Engine.apply throughput on a generated Kueue-like event stream (see the module docstring).",
    )
    parser.add_argument("--workloads", type=int, default=100_000, help="workloads in the base stream (default 100000)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; each runs every variant and mode once (default 3)")
    parser.add_argument("--seed", type=int, default=1, help="generator seed (default 1)")
    parser.add_argument("--cohorts", type=int, default=BASE_COHORTS, help="cohorts of 10 CQs in base (default 10)")
    parser.add_argument("--modes", type=_csv(MODES), default=list(MODES), help="bytes,dict (default both)")
    parser.add_argument(
        "--variants", type=_csv(VARIANTS), default=list(VARIANTS),
        help="any of base,cq10,backlog10,backlog1 (default all; base is always run)",
    )
    parser.add_argument(
        "--cq10-window", type=float, default=1 / CQ_SCALE,
        help="share of the stream's virtual time that cq10 replays (default 0.1; 1 = all of it)",
    )
    parser.add_argument(
        "--gc-freeze", action="store_true",
        help="gc.freeze() after each run's untimed pre-load (what an agent may do after loading its state); "
        "default off: GC as the agent runs it today",
    )
    parser.add_argument(
        "--gc-threshold", default="default",
        help="collector thresholds during the runs: default (Python's 700,10,10), engine-process (what the "
        "agent's engine process sets: streams.agent.engine_child.ENGINE_GC_THRESHOLD) or a,b,c",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of tables")
    parser.add_argument(
        "--profile", action="store_true",
        help="instead of the comparison, cProfile the base variant (first of --modes) and print the top 25 functions",
    )
    parser.add_argument(
        "--profile-variant", choices=VARIANTS, default="base", help="the variant --profile profiles (default base)"
    )
    args = parser.parse_args(argv)
    if "base" not in args.variants:
        args.variants.insert(0, "base")
    args.variants = [n for n in VARIANTS if n in args.variants]
    command = command_line(args)

    env = environment()
    t0 = time.perf_counter()
    print(f"generating {args.workloads:,} workloads (seed {args.seed}) ...", file=sys.stderr, flush=True)
    gen = generate(args.workloads, args.cohorts, args.seed)
    variants, info = build_variants(gen, [args.profile_variant] if args.profile else args.variants, args.cq10_window)
    gen_seconds = time.perf_counter() - t0
    print(
        f"generated in {gen_seconds:.1f} s: " + ", ".join(f"{v.name} {len(v.stream):,} events" for v in variants.values()),
        file=sys.stderr,
        flush=True,
    )

    if args.profile:
        print(f"Command: {command}")
        print(profile(variants[args.profile_variant], args.modes[0], args.workloads))
        return 0

    threshold = gc_threshold(args.gc_threshold)
    if threshold is not None:
        env["gc_threshold"] = list(threshold)
    runs = measure(
        variants, args.modes, args.repeat, args.workloads, progress=True, gc_freeze=args.gc_freeze, threshold=threshold
    )
    analysis = analyse(runs, variants, args.modes)
    first: dict[str, dict[str, Any]] = {}
    for run in runs:
        first.setdefault(run.variant, run.summary)
    first = {n: first[n] for n in variants}
    report: dict[str, Any] = {
        "command": command,
        "environment": env,
        "generator": {
            "seed": gen.seed,
            "workloads": gen.workloads,
            "cohorts": gen.cohorts,
            "stream_events": len(gen.records),
            "virtual_hours": gen.duration_s / 3600,
            "seconds": gen_seconds,
            "generator_decisions": dict(sorted(gen.decision_counts.items())),
            "natural_pending_max": gen.natural_pending_max,
            **info,
        },
        "variants": {
            n: {"description": v.description, "cqs": v.cqs, "prelude_events": len(v.prelude), "events": len(v.stream)}
            for n, v in variants.items()
        },
        "results": analysis["results"],
        "deterministic": analysis["deterministic"],
        "stream": first,
        "same_decisions": same_decisions(first, gen),
        "runs": [
            {
                "variant": r.variant,
                "mode": r.mode,
                "round": r.round,
                "events": r.events,
                "seconds": {k: round(v, 4) for k, v in r.seconds.items()},
                "window_events": r.window_events,
                "window_seconds": {k: round(v, 4) for k, v in r.window_seconds.items()},
            }
            for r in runs
        ],
    }
    report["goals"] = goals(analysis, args.modes)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
