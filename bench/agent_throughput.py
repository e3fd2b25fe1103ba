"""End-to-end throughput of the agent on Kafka against a raw aiokafka passthrough.

    python -m bench.agent_throughput [--events 50000] [--rounds 3] [--bootstrap HOST:PORT]

Both read the same input topic on the same broker in the same run:

- **passthrough**: an aiokafka consumer (assigned partition, read_committed, like the agent's)
  and an idempotent `acks=all` producer copy every input record to another topic, batch by
  batch (`getmany`, send all, wait for the acks). No engine, no transactions: the floor cost of
  moving these messages through Kafka from Python.
- **agent**: `streams.agent.loop.Agent` on `KafkaLog` -- what `quotaflow agent` runs, minus the Faust
  shell -- from an empty decision log to the decision of the last input event committed:
  engine, CloudEvents envelopes, one transaction per batch, snapshots every 10,000 events.
  Logs at warning (`--log-level info` writes the per-decision lines to a file instead).
  Run in both engine modes (`--modes`): `process`, the engine in a child process pipelined with
  the shell (`--engine-process`), and `inprocess` (`--no-engine-process`).

Rounds rotate the order. Reported per round and as medians: events/s on the wall clock, the
agent/passthrough ratio, and CPU seconds: this process's, and the engine process's (the broker
is another process, not counted). For context, the engine alone is timed too (the agent cannot
be faster than its engine): `Engine.apply` over the same bytes in-process, and the same batches
(2,000 events) through an engine process with no log at all -- its CPU in this process is the
pipe's cost (encoding, copying, decoding and building the decision messages).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import resource
import statistics
import tempfile
import time
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from bench.agent_common import append_all, bench_topics, kafka_bootstrap, messages
from domain.engine import Engine
from streams.agent import structured_logs as logs
from streams.agent.engine_host import Batch, ChildEngine, Shell
from streams.agent.loop import Agent, AgentConfig
from streams.log import Message, Record, Topics, TopicSpec
from streams.log.kafka import KafkaLog

MODES = ("inprocess", "process")


def children_cpu() -> float:
    """CPU seconds of this process's terminated, reaped children (the engine processes)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def passthrough(bootstrap: str, source: str, target: str, n: int) -> tuple[float, float]:
    began, cpu = time.perf_counter(), time.process_time()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level="read_committed", auto_offset_reset="earliest"
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    await consumer.start()
    await producer.start()
    tp = TopicPartition(source, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    done = 0
    try:
        while done < n:
            batch = (await consumer.getmany(tp, timeout_ms=500, max_records=2000)).get(tp, [])
            futures = [
                await producer.send(target, value=r.value, key=r.key, headers=list(r.headers or ()), partition=0)
                for r in batch
            ]
            if futures:
                await asyncio.gather(*futures)
            done += len(batch)
    finally:
        await producer.stop()
        await consumer.stop()
    return time.perf_counter() - began, time.process_time() - cpu


async def agent_run(bootstrap: str, topics: Topics, n: int, mode: str) -> tuple[float, float, float, float]:
    log = KafkaLog(bootstrap)
    agent = Agent(log, AgentConfig(topics, snapshot_every_events=10_000, engine_process=mode == "process"))
    began, cpu, child_cpu = time.perf_counter(), time.process_time(), children_cpu()
    task = asyncio.create_task(agent.run())
    while agent.status.role != "active":
        await asyncio.sleep(0.001)
    ready = time.perf_counter()
    await agent.wait_processed(n - 1, timeout=600)
    end, cpu_used = time.perf_counter(), time.process_time() - cpu
    agent.stop()
    await task
    await log.close()
    return end - began, end - ready, cpu_used, children_cpu() - child_cpu


def engine_only(msgs: list[Message]) -> tuple[float, float]:
    engine = Engine()
    began, cpu = time.perf_counter(), time.process_time()
    for offset, m in enumerate(msgs):
        engine.apply(m.value or b"", offset)
    return time.perf_counter() - began, time.process_time() - cpu


async def engine_process_only(msgs: list[Message], batch: int = 2000) -> tuple[float, float, float]:
    """The engine in a child process, fed batches as the agent feeds it, two in flight; no log.
    (wall s, this process's CPU s, the child's CPU s)"""
    records = [Record("in", offset, m.value, m.key, m.headers) for offset, m in enumerate(msgs)]
    child_cpu = children_cpu()
    engine = await ChildEngine.start(Shell("out", b"/quotaflow/bench", keep_decided=False))
    await engine.restore(None)
    began, cpu = time.perf_counter(), time.process_time()
    pending: collections.deque[asyncio.Future[Batch]] = collections.deque()
    for i in range(0, len(records), batch):
        pending.append(asyncio.ensure_future(engine.apply(records[i : i + batch], snapshot=False, time=b"now")))
        if len(pending) >= engine.depth:
            await pending.popleft()
    while pending:
        await pending.popleft()
    wall, cpu_used = time.perf_counter() - began, time.process_time() - cpu
    await engine.close()
    return wall, cpu_used, children_cpu() - child_cpu


async def main(args: argparse.Namespace) -> None:
    if args.log_level == "info":
        path = Path(tempfile.gettempdir()) / "quotaflow-bench-agent.log"
        logs.configure("info", stream=path.open("w"))
        print(f"agent logs: {path}")
    else:
        logs.configure(args.log_level)
    n = args.events
    msgs = messages(n, seed=args.seed)
    with kafka_bootstrap(args.bootstrap) as bootstrap:
        log = KafkaLog(bootstrap)
        base = bench_topics("thr")
        await log.ensure_topics([TopicSpec(base.input)])
        produce_s = await append_all(log, base.input, msgs)
        await log.close()
        print(f"broker {bootstrap}; {n} input events written in {produce_s:.1f} s ({n / produce_s:,.0f}/s)")
        modes = [m for m in args.modes.split(",") if m]
        assert modes and all(m in MODES for m in modes), f"--modes: a comma-separated subset of {MODES}"
        sides = ["passthrough", *modes]
        rows: list[dict[str, tuple[float, ...]]] = []
        for r in range(args.rounds):
            order = sides[r % len(sides) :] + sides[: r % len(sides)]
            got: dict[str, tuple[float, ...]] = {}
            for what in order:
                if what == "passthrough":
                    got[what] = await passthrough(bootstrap, base.input, bench_topics("copy").input, n)
                else:
                    fresh = bench_topics("thr-agent")
                    topics = Topics(base.input, fresh.decisions, fresh.snapshots)
                    got[what] = await agent_run(bootstrap, topics, n, what)
            rows.append(got)
            p_wall, p_cpu = got["passthrough"]
            line = f"round {r + 1}: passthrough {n / p_wall:8,.0f} ev/s ({p_cpu:.1f} s CPU)"
            for mode in modes:
                a_total, a_proc, a_cpu, a_child = got[mode]
                line += (
                    f" | {mode} {n / a_proc:8,.0f} ev/s ({n / a_total:,.0f} incl. startup; CPU {a_cpu:.1f} s"
                    f" + engine process {a_child:.1f} s) ratio {p_wall / a_proc:.2f}"
                )
            print(line, flush=True)
        engine_s, engine_cpu = engine_only(msgs)
        child_s, child_parent_cpu, child_cpu = await engine_process_only(msgs)
    us = 1e6 / n
    pt = statistics.median(n / r["passthrough"][0] for r in rows)
    pt_cpu = statistics.median(r["passthrough"][1] for r in rows)
    print()
    print(f"median passthrough            {pt:10,.0f} events/s   CPU {pt_cpu * us:5.1f} µs/event (this process)")
    for mode in modes:
        ag = statistics.median(n / r[mode][1] for r in rows)
        ag_total = statistics.median(n / r[mode][0] for r in rows)
        ag_cpu = statistics.median(r[mode][2] for r in rows)
        ag_child = statistics.median(r[mode][3] for r in rows)
        ratios = [r["passthrough"][0] / r[mode][1] for r in rows]
        print(
            f"median agent {mode:<10} {ag:10,.0f} events/s   CPU {ag_cpu * us:5.1f} µs/event here + "
            f"{ag_child * us:5.1f} in the engine process; incl. startup and recovery: {ag_total:,.0f} events/s"
        )
        print(
            f"  agent {mode} / passthrough {statistics.median(ratios):6.2f} median of per-round ratios "
            f"({', '.join(f'{x:.2f}' for x in ratios)}); goal >= 0.5"
        )
        print(f"  agent {mode} / engine alone {ag / (n / engine_s):6.2f}")
    print(f"engine alone, in-process      {n / engine_s:10,.0f} events/s   CPU {engine_cpu * us:5.1f} µs/event")
    print(
        f"engine alone, in a process    {n / child_s:10,.0f} events/s   CPU {child_parent_cpu * us:5.1f} µs/event here "
        f"(the pipe and the messages) + {child_cpu * us:5.1f} in the engine process"
    )

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--log-level", default="warning", choices=("warning", "info"))
    parser.add_argument("--modes", default=",".join(MODES), help=f"engine modes of the agent, comma-separated: {MODES}")
    asyncio.run(main(parser.parse_args()))
