"""Projection rebuild rate: folding the logs from offset 0 against reading them raw.

    python -m bench.projection_bench [--workloads 20000] [--rounds 3] [--logs kafka,sqlite]
                                     [--bootstrap HOST:PORT] [--json]

Setup (untimed): the engine benchmark's Kueue-like stream, devtools/cluster_stream.py (10 cohorts x 10 ClusterQueues,
full Workload objects with pod templates, Poisson arrivals, every workload admitted once and
finished once; `--workloads` of them) is written to a fresh input log with the CloudEvents
envelope a producer adds, and the real agent (`streams.agent.loop.Agent`) folds it into the decision
log and snapshot log, exactly as in production.

Timed, in the same process and run, rounds alternating the order:

- **raw consume**: a reader on the input log and one on the decision log (`streams.log.interface`
  readers, batches of 5,000, as the projection uses them) read every record to the end offsets
  and touch its value. The floor cost of getting these records out of the log from Python.
- **rebuild**: `projections.follower.rebuild` from offset 0 into a fresh `Projection` -- both
  readers, the merge by cause offset, decoding, the fold of every input event and decision
  (configuration, workloads, quota, queue positions, history index, counters): what
  `quotaflow serve` does when it starts.
- **rebuild, views only**: the same without the per-workload history index: what one-shot
  `quotaflow status` / `pending` do.

Reported: input events/s (input records / seconds; the decision records come with them) on the
wall clock and on this process's CPU time (the broker is another process; on a shared machine
CPU time is the steadier figure), records/s, and rebuild/raw ratios (goal: >= 0.5). The fold
alone (same records already in memory) is timed too, for context.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import msgspec

from bench.agent_common import kafka_bootstrap
from devtools.cluster_stream import generate, render, setup_events
from projections.fold import Projection
from projections.follower import decode_decision, rebuild
from streams.agent.loop import Agent, AgentConfig
from streams.log import EventLog, Message, Topics
from streams.log.envelope import event_message

SENTINEL = b"end of benchmark: not JSON"  # always decides (Rejected): the agent's last decision
BATCH = 5000
GOAL = 0.5


def stream(workloads: int, seed: int, kind: str = "kueue") -> list[bytes]:
    """`kueue`: the engine benchmark's stream, full Workload objects with pod templates. `compact`: the
    same simulation with the contract's compact pod sets (`requests` per pod), no labels."""
    gen = generate(workloads, seed=seed)
    encode = msgspec.json.Encoder().encode
    events = [render(r) for r in gen.records]
    if kind == "compact":
        for e in events:
            wl = e.get("workload")
            if wl is None:
                continue
            wl["metadata"].pop("labels", None)
            for ps in wl["spec"]["podSets"]:
                ps["requests"] = ps.pop("template")["spec"]["containers"][0]["resources"]["requests"]
    return [encode(e) for e in setup_events(gen.cohorts)] + [encode(e) for e in events]


async def prepare(log: EventLog, topics: Topics, events: list[bytes]) -> dict[str, Any]:
    """Write the input log and let the real agent write the decision and snapshot logs."""
    await log.start()
    await log.ensure_topics(topics.specs(), single_partition=[topics.input, topics.decisions])
    msgs = [event_message(e, source="/quotaflow/bench") for e in events] + [Message(SENTINEL)]
    last = -1
    for i in range(0, len(msgs), BATCH):
        last = (await log.append(topics.input, msgs[i : i + BATCH]))[-1]
    agent = Agent(log, AgentConfig(topics, standby=False))
    task = asyncio.create_task(agent.run())
    began = time.perf_counter()
    try:
        await agent.wait_processed(last, timeout=3600)
    finally:
        agent.stop()
        await task
    return {
        "input_records": last + 1,
        "decision_records": await log.end_offset(topics.decisions),
        "agent_s": round(time.perf_counter() - began, 2),
        "snapshots": agent.status.snapshots,
    }


@dataclass
class Timing:
    kind: str
    wall_s: float
    cpu_s: float
    input_records: int
    decision_records: int

    @property
    def records(self) -> int:
        return self.input_records + self.decision_records


async def raw_consume(log: EventLog, topics: Topics) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    counts = []
    for topic in (topics.input, topics.decisions):
        end = await log.end_offset(topic)
        n = 0
        size = 0
        async with await log.reader(topic, 0) as reader:
            while reader.position < end:
                for r in await reader.read(limit=BATCH, timeout=1.0):
                    if r.offset < end:
                        n += 1
                        size += len(r.value or b"")
        counts.append(n)
    return Timing("raw", time.perf_counter() - wall, time.process_time() - cpu, counts[0], counts[1])


async def rebuild_once(log: EventLog, topics: Topics, history: bool = True) -> tuple[Timing, Projection]:
    wall, cpu = time.perf_counter(), time.process_time()
    proj, follower = await rebuild(log, topics, history=history)
    kind = "rebuild" if history else "rebuild-views"
    t = Timing(kind, time.perf_counter() - wall, time.process_time() - cpu, proj.events, proj.decisions)
    assert not proj.anomalies, proj.anomalies
    return t, proj


async def fold_only(log: EventLog, topics: Topics) -> Timing:
    """The fold alone: the same records, already read, folded from memory."""
    inputs = await log.read_all(topics.input)
    decisions = await log.read_all(topics.decisions)
    wall, cpu = time.perf_counter(), time.process_time()
    proj = Projection()
    j = 0
    n = len(decisions)
    for rec in inputs:
        group = []
        while j < n:
            d = decode_decision(decisions[j].offset, decisions[j].value)
            if d.cause_offset != rec.offset:
                break
            group.append(d)
            j += 1
        proj.apply(rec.offset, rec.value, group, rec.timestamp_ms)
    return Timing("fold", time.perf_counter() - wall, time.process_time() - cpu, len(inputs), len(decisions))


async def measure(log: EventLog, topics: Topics, rounds: int) -> list[Timing]:
    out: list[Timing] = []
    for i in range(rounds):
        order = ["raw", "rebuild", "rebuild-views"]
        order = order[i % 3 :] + order[: i % 3]
        for kind in order:
            gc.collect()
            if kind == "raw":
                out.append(await raw_consume(log, topics))
            else:
                out.append((await rebuild_once(log, topics, history=kind == "rebuild"))[0])
    gc.collect()
    out.append(await fold_only(log, topics))
    return out


def summarize(timings: list[Timing]) -> dict[str, Any]:
    def rate(kind: str, clock: str) -> float:
        values = [t.input_records / getattr(t, clock) for t in timings if t.kind == kind]
        return statistics.median(values) if values else float("nan")

    raws = [t for t in timings if t.kind == "raw"]

    def paired(kind: str, clock: str) -> list[float]:
        runs = [t for t in timings if t.kind == kind]
        return [r.input_records / getattr(r, clock) / (w.input_records / getattr(w, clock)) for r, w in zip(runs, raws, strict=False)]

    out: dict[str, Any] = {}
    for clock in ("wall_s", "cpu_s"):
        raw, reb, views = rate("raw", clock), rate("rebuild", clock), rate("rebuild-views", clock)
        out[clock] = {
            "raw_events_per_s": round(raw),
            "rebuild_events_per_s": round(reb),
            "rebuild_views_events_per_s": round(views),
            "fold_events_per_s": round(rate("fold", clock)),
            "ratio_of_medians": round(reb / raw, 3),
            "ratio_per_round": [round(x, 3) for x in paired("rebuild", clock)],
            "views_ratio_of_medians": round(views / raw, 3),
        }
    return out


def command_line(args: argparse.Namespace) -> str:
    parts = ["python -m bench.projection_bench", f"--workloads {args.workloads}", f"--rounds {args.rounds}",
             f"--seed {args.seed}", f"--stream {args.stream}", f"--logs {','.join(args.logs)}"]
    if args.bootstrap:
        parts.append(f"--bootstrap {args.bootstrap}")
    if args.json:
        parts.append("--json")
    return " ".join(parts)


async def run_log(name: str, log: EventLog, events: list[bytes], rounds: int) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    topics = Topics(f"bench-proj.{tag}.events", f"bench-proj.{tag}.decisions", f"bench-proj.{tag}.snapshots")
    try:
        setup = await prepare(log, topics, events)
        timings = await measure(log, topics, rounds)
    finally:
        await log.close()
    return {"log": name, "setup": setup, "timings": [asdict(t) for t in timings], "summary": summarize(timings)}


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]projection rebuild vs raw consume[/bold] — {report['events']} input events "
                  f"({report['workloads']} workloads, {report['stream']} stream), {report['rounds']} rounds, python {report['python']}, {report['cpus']} cpus, git {report['git']}")
    table = Table(title_justify="left")
    for col in ("log", "clock", "raw ev/s", "rebuild ev/s", "rebuild/raw", "per round", "goal ≥ 0.5", "views-only ev/s", "views/raw", "fold only ev/s"):
        table.add_column(col, justify="left" if col in ("log", "clock", "per round") else "right")
    for res in report["results"]:
        for clock, label in (("cpu_s", "cpu"), ("wall_s", "wall")):
            s = res["summary"][clock]
            ok = s["ratio_of_medians"] >= GOAL
            table.add_row(res["log"], label, f"{s['raw_events_per_s']:,}", f"{s['rebuild_events_per_s']:,}",
                          f"{s['ratio_of_medians']:.2f}", " ".join(f"{x:.2f}" for x in s["ratio_per_round"]),
                          "[green]met[/green]" if ok else "[red]not met[/red]",
                          f"{s['rebuild_views_events_per_s']:,}", f"{s['views_ratio_of_medians']:.2f}", f"{s['fold_events_per_s']:,}")
    console.print(table)
    for res in report["results"]:
        st = res["setup"]
        console.print(f"{res['log']}: {st['input_records']:,} input + {st['decision_records']:,} decision records; "
                      f"agent wrote them in {st['agent_s']} s ({st['snapshots']} snapshots)", style="dim")
    console.print(f"command: {report['command']}", style="dim")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.projection_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stream", choices=("kueue", "compact"), default="kueue",
                        help="kueue: Workloads with pod templates (default); compact: per-pod requests")
    parser.add_argument("--logs", type=lambda s: [x for x in s.split(",") if x], default=["kafka", "sqlite"])
    parser.add_argument("--bootstrap", default=None, help="Kafka host:port (default: $QUOTAFLOW_KAFKA_BOOTSTRAP or a local broker)")
    parser.add_argument("--json", action="store_true", help="print the whole report as JSON")
    args = parser.parse_args(argv)
    from streams.agent import structured_logs

    structured_logs.configure("warning")
    events = stream(args.workloads, args.seed, args.stream)
    report: dict[str, Any] = {
        "command": command_line(args),
        "workloads": args.workloads,
        "stream": args.stream,
        "events": len(events) + 1,
        "rounds": args.rounds,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "git": _git(),
        "results": [],
    }
    if "kafka" in args.logs:
        from streams.log.kafka import KafkaLog

        with kafka_bootstrap(args.bootstrap) as bootstrap:
            report["results"].append(asyncio.run(run_log("kafka", KafkaLog(bootstrap), events, args.rounds)))
    if "sqlite" in args.logs:
        from streams.log.sqlite import SqliteLog

        with tempfile.TemporaryDirectory(prefix="qf-proj-bench-") as tmp:
            report["results"].append(asyncio.run(run_log("sqlite", SqliteLog(Path(tmp) / "bench.db"), events, args.rounds)))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


def _git() -> str:
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "projections"], capture_output=True, text=True, timeout=10,
                               cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}{' + uncommitted projections/ changes' if dirty else ''}"


if __name__ == "__main__":
    sys.exit(main())
