"""End-to-end throughput of the agent on Kafka against a raw aiokafka passthrough.

    python -m bench.agent_throughput [--events 50000] [--rounds 3] [--bootstrap HOST:PORT]

Both read the same input topic on the same broker in the same run:

- **passthrough**: an aiokafka consumer (assigned partition, read_committed, like the agent's)
  and an idempotent `acks=all` producer copy every input record to another topic, batch by
  batch (`getmany`, send all, wait for the acks). No engine, no transactions: the floor cost of
  moving these messages through Kafka from Python.
- **agent**: `streams.agent.Agent` on `KafkaLog` -- what `quotaflow agent` runs, minus the Faust
  shell -- from an empty decision log to the decision of the last input event committed:
  engine, CloudEvents envelopes, one transaction per batch, snapshots every 10,000 events.
  Logs at warning (`--log-level info` writes the per-decision lines to a file instead).

Rounds alternate the order. Reported per round and as medians: events/s on the wall clock, the
agent/passthrough ratio, and the CPU seconds this process spent (the broker is another
process). For context, the engine alone (`Engine.apply` over the same bytes, in-process) is
timed too: the agent cannot be faster than its engine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from bench.agent_common import append_all, bench_topics, kafka_bootstrap, messages
from domain.engine import Engine
from streams import logs
from streams.agent import Agent, AgentConfig
from streams.kafka_log import KafkaLog
from streams.log import Message, TopicSpec, Topics


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


async def agent_run(bootstrap: str, topics: Topics, n: int) -> tuple[float, float, float]:
    log = KafkaLog(bootstrap)
    agent = Agent(log, AgentConfig(topics, snapshot_every_events=10_000))
    began, cpu = time.perf_counter(), time.process_time()
    task = asyncio.create_task(agent.run())
    while agent.status.role != "active":
        await asyncio.sleep(0.001)
    ready = time.perf_counter()
    await agent.wait_processed(n - 1, timeout=600)
    end, cpu_used = time.perf_counter(), time.process_time() - cpu
    agent.stop()
    await task
    await log.close()
    return end - began, end - ready, cpu_used


def engine_only(msgs: list[Message]) -> tuple[float, float]:
    engine = Engine()
    began, cpu = time.perf_counter(), time.process_time()
    for offset, m in enumerate(msgs):
        engine.apply(m.value or b"", offset)
    return time.perf_counter() - began, time.process_time() - cpu


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
        rows = []
        for r in range(args.rounds):
            order = ("passthrough", "agent") if r % 2 == 0 else ("agent", "passthrough")
            got: dict[str, tuple[float, ...]] = {}
            for what in order:
                if what == "passthrough":
                    got[what] = await passthrough(bootstrap, base.input, bench_topics("copy").input, n)
                else:
                    fresh = bench_topics("thr-agent")
                    topics = Topics(base.input, fresh.decisions, fresh.snapshots)
                    got[what] = await agent_run(bootstrap, topics, n)
            p_wall, p_cpu = got["passthrough"]
            a_total, a_proc, a_cpu = got["agent"]
            rows.append((n / p_wall, n / a_proc, n / a_total, p_cpu, a_cpu))
            print(
                f"round {r + 1}: passthrough {n / p_wall:8,.0f} ev/s ({p_cpu:.1f} s CPU) | agent {n / a_proc:8,.0f} ev/s "
                f"processing, {n / a_total:8,.0f} ev/s incl. startup ({a_cpu:.1f} s CPU) | ratio {p_wall / a_proc:.2f}"
            )
        engine_s, engine_cpu = engine_only(msgs)
    pt = statistics.median(r[0] for r in rows)
    ag = statistics.median(r[1] for r in rows)
    ag_total = statistics.median(r[2] for r in rows)
    pt_cpu = statistics.median(r[3] for r in rows)
    ag_cpu = statistics.median(r[4] for r in rows)
    us = 1e6 / n
    print()
    print(f"median passthrough        {pt:10,.0f} events/s   CPU {pt_cpu * us:5.1f} µs/event (this process)")
    print(f"median agent (processing) {ag:10,.0f} events/s   CPU {ag_cpu * us:5.1f} µs/event; incl. startup and recovery: {ag_total:,.0f} events/s")
    print(f"engine alone, in-process  {n / engine_s:10,.0f} events/s   CPU {engine_cpu * us:5.1f} µs/event")
    print(f"agent / passthrough       {ag / pt:10.2f}   (goal >= 0.5)")
    print(f"agent / engine alone      {ag / (n / engine_s):10.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--log-level", default="warning", choices=("warning", "info"))
    asyncio.run(main(parser.parse_args()))
