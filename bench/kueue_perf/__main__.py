"""Kueue's scheduler performance suite against quotaflow, in virtual time and in real time on Kafka.

    python -m bench.kueue_perf                                   # baseline, virtual time
    python -m bench.kueue_perf --config large-scale --mode both  # + the agent on Kafka, wall clock
    python -m bench.kueue_perf --mode real --time-scale 0.2      # a quick real-time run (5x faster)
    python -m bench.kueue_perf --config large-scale --mode both --engine-clock  # + the engine's own bound

`--config` takes `baseline`, `large-scale` (copies of Kueue's configs) or a path to any
generator.yaml in Kueue's format. Real time uses `--bootstrap` or $QUOTAFLOW_KAFKA_BOOTSTRAP,
else starts a local broker (devtools/local_broker.py) for the run. A benchmark: it prints
numbers next to Kueue's calibrated means and never fails on them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

from bench.kueue_perf import engine_clock
from bench.kueue_perf.reference import MEANS, KueueMeans
from bench.timing import gc_threshold, gc_thresholds
from devtools.kueue_perf import config as config_mod
from devtools.kueue_perf import generator, virtual
from devtools.kueue_perf.batching import DEFAULT_WINDOW
from devtools.kueue_perf.recorder import Summary
from streams.settings import DEFAULT_STEP_BYTES, ENV_STEP_BYTES

CLASS_ORDER = ("large", "medium", "small")


def _commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "domain", "streams", "bench/kueue_perf"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + (" (with uncommitted edits)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _classes(names: list[str]) -> list[str]:
    return [c for c in CLASS_ORDER if c in names] + sorted(c for c in names if c not in CLASS_ORDER)


def _row(label: str, s: Summary, extra: str) -> str:
    usage = " / ".join(f"{v.usage:.1f}%" for v in s.cluster_queue_classes.values())
    names = _classes(list(s.workload_classes))
    tta = " / ".join(f"{s.workload_classes[c].avg_time_to_admission_ms / 1000:.1f}" for c in names)
    ev = sum(v.total_evictions for v in s.workload_classes.values())
    done = "" if s.complete else "  INCOMPLETE"
    return f"| {label} | {s.wall_ms / 1000:,.1f} s | {usage} | {tta} s | {ev:,} | {extra}{done} |"


def _kueue_row(m: KueueMeans, names: list[str]) -> str:
    usage = " / ".join(f"{v:.1f}%" for v in m.usage_percent.values())
    tta = " / ".join(f"{m.time_to_admission_ms[c] / 1000:.1f}" for c in names if c in m.time_to_admission_ms)
    return f"| Kueue (calibrated means) | {m.wall_ms / 1000:,.1f} s | {usage} | {tta} s | — | — |"


def _beats(s: Summary, m: KueueMeans) -> list[str]:
    """The columns where this run is not better than Kueue's mean."""
    worse = []
    if s.wall_ms > m.wall_ms:
        worse.append("wall")
    for c, v in s.cluster_queue_classes.items():
        if c in m.usage_percent and v.usage < m.usage_percent[c]:
            worse.append(f"usage {c}")
    for c, w in s.workload_classes.items():
        if c in m.time_to_admission_ms and w.avg_time_to_admission_ms > m.time_to_admission_ms[c]:
            worse.append(f"time to admission {c}")
    return worse


def held_line(mode: str, s: Summary) -> str:
    """How long the finished runs held their quota past their runtimes: the round trip every run
    pays in real time (zero in virtual time unless --latency-ms models one)."""
    names = _classes(list(s.workload_classes))
    past = " / ".join(f"{s.workload_classes[c].avg_held_past_runtime_ms:.0f}" for c in names)
    return (f"{mode}: quota held past the runtime, avg {' / '.join(names)}: {past} ms; "
            f"held / runtime {s.held_per_runtime:.3f} (request-weighted)")


def rejected_line(mode: str, summary: Summary) -> str | None:
    """A warning when the engine rejected input of the run: the runner sent something it should
    not have (every event of a correct run is accepted)."""
    if not summary.rejected:
        return None
    return f"{mode}: WARNING {len(summary.rejected):,} input events were Rejected, the first: {summary.rejected[0]}"


_LABELS = {"virtual": "virtual", "real": "real", "engineClock": "engine clock"}


def ratio_line(over: dict[str, Any], under: dict[str, Any], over_label: str, under_label: str) -> str:
    """Wall and usage of one run over another's (each a run's JSON figures)."""
    ou = {c: x["usagePercent"] for c, x in over["clusterQueueClasses"].items()}
    uu = {c: x["usagePercent"] for c, x in under["clusterQueueClasses"].items()}
    usage = ", ".join(f"{c} {ou[c] / uu[c]:.3f}" for c in uu if uu[c])
    return f"{over_label} / {under_label}: wall {over['wallMs'] / under['wallMs']:.3f}, usage {usage}"


# The warm-up runs the scenario this much faster: it has to exercise the broker's paths, not
# take as long as the measured run (a baseline run lasts 77 s).
WARMUP_TIME_SCALE = 0.25


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", action="append", help="baseline, large-scale or a path (repeatable; default baseline)")
    p.add_argument("--mode", choices=("virtual", "real", "both"), default="virtual")
    p.add_argument("--time-scale", type=float, default=1.0, help="real time: multiply every interval and runtime by this on the wall clock (0.25: 4x faster); figures are reported in scenario time")
    p.add_argument("--latency-ms", type=float, default=0.0,
                   help="virtual time: the executor sees each decision this much later (a model of the real-time round trip)")
    p.add_argument("--no-batch", action="store_true", help="send simultaneous events one by one instead of as one Batch")
    p.add_argument("--window", type=int, default=DEFAULT_WINDOW,
                   help="real time: at most this many of the runner's records undecided; what falls due "
                        "meanwhile goes as one append when the agent catches up (0: append as due; default %(default)s)")
    p.add_argument("--warmup", type=int, default=1,
                   help="real time: runs of the same scenario (4x faster) on the same broker before the measured "
                        "one, on topics and an agent of their own, their figures discarded (default %(default)s: "
                        "a freshly started broker's JVM is not in the steady state a deployed one is)")
    p.add_argument("--bootstrap", default=None, help="Kafka bootstrap HOST:PORT (default: $QUOTAFLOW_KAFKA_BOOTSTRAP or a local broker)")
    p.add_argument("--max-wall", type=float, default=7200.0, help="real time: give up after this many seconds")
    p.add_argument("--gc-threshold", default="default",
                   help="virtual time: collector thresholds during the run: default (Python's), engine-process "
                        "(what the agent's engine process sets) or a,b,c")
    p.add_argument("--engine-clock", action="store_true",
                   help="also run with a clock that only the engine's CPU time advances (no broker, no transport): "
                        "what real time would reach on this machine if nothing but the engine took time")
    p.add_argument("--engine-speedup", type=float, default=1.0,
                   help="with --engine-clock: count each engine step as this many times shorter (what-if: how much "
                        "faster the engine would have to be)")
    p.add_argument("--progress", action="store_true", help="virtual time: print progress to stderr")
    p.add_argument("--json", dest="json_path", default=None, help="also write every figure to this file")
    args = p.parse_args(argv)
    names = args.config or ["baseline"]
    batch = not args.no_batch
    report: dict[str, Any] = {"commit": _commit(), "batch": batch, "timeScale": args.time_scale,
                              "latencyMs": args.latency_ms, "window": args.window, "warmupRuns": args.warmup,
                              "gcThreshold": args.gc_threshold,
                              # The agent of a real run reads its settings from the environment.
                              "agentStepBytes": int(os.environ.get(ENV_STEP_BYTES, DEFAULT_STEP_BYTES)),
                              "runs": {}}
    threshold = gc_threshold(args.gc_threshold)
    gc_note = "" if threshold is None else f"; virtual time with GC thresholds {','.join(map(str, threshold))}"
    print(f"quotaflow at {report['commit']}; simultaneous events {'as one Batch' if batch else 'one by one'}{gc_note}")
    for name in names:
        cfg = config_mod.load(name)
        scenario = generator.generate(cfg)
        means = MEANS.get(name)
        wl_names = _classes(sorted({a.class_name for a in scenario.arrivals}))
        print(f"\n## {name}: {len(scenario.queues)} ClusterQueues, {len(scenario.arrivals):,} workloads, "
              f"last created at {scenario.last_arrival_ms / 1000:.1f} s")
        print("\n| | wall | CQ usage | avg time to admission " + " / ".join(wl_names) + " | evictions | cost |")
        print("|---|---|---|---|---|---|")
        if means is not None:
            print(_kueue_row(means, wl_names), flush=True)
        runs: dict[str, Any] = {}
        summaries: dict[str, Summary] = {}
        if args.mode in ("virtual", "both"):
            def progress(now: float, created: int, events: int, cpu: float) -> None:
                print(f"  virtual {now / 1000:8.1f} s: {created:,} created, {events:,} events, {cpu:.1f} s CPU",
                      file=sys.stderr, flush=True)

            with gc_thresholds(threshold):
                v = virtual.run(scenario, batch=batch, latency_ms=args.latency_ms,
                                progress=progress if args.progress else None)
            extra = f"{v.cpu_s:.2f} s CPU ({v.engine_cpu_s:.2f} s in the engine), {v.events:,} input events"
            label = "quotaflow, virtual time" + (f" (runner latency {args.latency_ms:g} ms)" if args.latency_ms else "")
            print(_row(label, v.summary, extra), flush=True)
            summaries["virtual"] = v.summary
            runs["virtual"] = {**v.summary.to_json(), "cpuS": v.cpu_s, "engineCpuS": v.engine_cpu_s, "events": v.events,
                               "realS": v.wall_s}
        if args.engine_clock:
            e = engine_clock.run(scenario, batch=batch, speedup=args.engine_speedup)
            extra = f"engine busy {e.engine_s:.2f} s in {e.steps:,} steps, {e.records:,} input events"
            faster = "" if args.engine_speedup == 1 else f", engine {args.engine_speedup:g}x faster"
            print(_row(f"quotaflow, engine clock (no I/O{faster})", e.summary, extra), flush=True)
            summaries["engine clock"] = e.summary
            runs["engineClock"] = {**e.summary.to_json(), "engineS": e.engine_s, "speedup": args.engine_speedup,
                                   "steps": e.steps, "events": e.records, "realS": e.wall_s}
        if args.mode in ("real", "both"):
            from bench.agent_common import kafka_bootstrap
            from bench.kueue_perf import realtime

            with kafka_bootstrap(args.bootstrap) as bootstrap:
                for k in range(args.warmup):
                    w = asyncio.run(realtime.run(scenario, bootstrap, time_scale=args.time_scale * WARMUP_TIME_SCALE,
                                                   batch=batch, max_wall_s=args.max_wall, window=args.window))
                    print(f"  (warm-up run {k + 1} of {args.warmup}: {w.wall_s:.1f} s, discarded)", flush=True)
                began = time.perf_counter()
                r = asyncio.run(realtime.run(scenario, bootstrap, time_scale=args.time_scale, batch=batch,
                                               max_wall_s=args.max_wall, window=args.window))
            agent_cpu = f"{r.agent_cpu_s:.1f} s" if r.agent_cpu_s is not None else "?"
            if r.engine_cpu_s is not None:
                agent_cpu += f" + engine process {r.engine_cpu_s:.1f} s"
            scale = "" if args.time_scale == 1 else f" at time scale {args.time_scale}"
            extra = (f"agent {agent_cpu} CPU, runner {r.cpu_s:.1f} s CPU, {r.events:,} input events; "
                     f"append→decision p50 {r.lag_ms['p50']:.0f} / p99 {r.lag_ms['p99']:.0f} / max {r.lag_ms['max']:.0f} ms")
            summaries["real"] = r.summary
            print(_row(f"quotaflow, real time on Kafka{scale}", r.summary, extra + (" TIMED OUT" if r.timed_out else "")), flush=True)
            runs["real"] = {**r.summary.to_json(), "runnerCpuS": r.cpu_s, "agentCpuS": r.agent_cpu_s,
                            "engineProcessCpuS": r.engine_cpu_s, "events": r.events,
                            "realS": r.wall_s, "lagMs": r.lag_ms, "timedOut": r.timed_out,
                            "totalS": time.perf_counter() - began}
        print()
        for mode, summary in summaries.items():
            print(held_line(mode, summary))
        for mode, summary in summaries.items():
            line = rejected_line(mode, summary)
            if line is not None:
                print(line)
        if means is not None:
            for mode, summary in summaries.items():
                worse = _beats(summary, means)
                print(f"{mode}: " + ("better than Kueue's means on every column" if not worse else "not better on: " + ", ".join(worse)))
        for over, under in (("real", "virtual"), ("engineClock", "virtual"), ("real", "engineClock")):
            if over in runs and under in runs:
                print(ratio_line(runs[over], runs[under], _LABELS[over], _LABELS[under]))
        report["runs"][name] = runs
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
