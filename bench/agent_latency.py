"""Decision latency of the agent on Kafka at a steady input rate.

    python -m bench.agent_latency [--rate 1000] [--seconds 30] [--bootstrap HOST:PORT]

`quotaflow agent` runs as its own process (as deployed: Faust shell, standby group, transactions,
logs at warning). A producer appends the generated input stream at a steady `--rate` events/s
(paced on the clock, one send per event, not waiting for acks). Latency of an input event that
decides something is measured two ways, both on the broker's clock (the topics are created with
`message.timestamp.type=LogAppendTime`, so every record carries the time the broker appended it):

- **append -> append**: the first decision's append time minus the input event's append time;
- **append -> visible**: when a read_committed consumer of the decision log received that
  decision (its transaction committed) minus the input event's append time (same host, so the
  broker's clock and ours are the same clock).

The first `--warmup` seconds are left out. The goal is p99 < 50 ms at 1,000 events/s.
`--engine process|inprocess` runs the agent with `--engine-process` or `--no-engine-process`
(default: the agent's own default).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import TopicPartition

from bench.agent_common import (
    AgentProcess,
    bench_topics,
    kafka_bootstrap,
    messages,
    percentile,
)
from streams.log.kafka import COMPACTED, UNLIMITED, KafkaLog


async def create_topics(bootstrap: str, names: list[str], compacted: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [
                NewTopic(n, 1, 1, topic_configs={**(COMPACTED if n == compacted else UNLIMITED), "message.timestamp.type": "LogAppendTime"})
                for n in names
            ]
        )
    finally:
        await admin.close()


async def main(args: argparse.Namespace) -> None:
    n = int(args.rate * args.seconds)
    msgs = messages(n, seed=args.seed)
    with kafka_bootstrap(args.bootstrap) as bootstrap:
        topics = bench_topics("lat")
        await create_topics(bootstrap, [topics.input, topics.decisions, topics.snapshots], topics.snapshots)
        log_path = Path(tempfile.gettempdir()) / f"quotaflow-bench-latency-{topics.input}.log"
        flags = {"process": ["--engine-process"], "inprocess": ["--no-engine-process"], "default": []}[args.engine]
        agent = AgentProcess(f"kafka://{bootstrap}", topics, log_path, "--log-level", "info", *flags)
        try:
            await asyncio.to_thread(agent.wait_for, "recovered", 120)
            visible: dict[tuple[int, int], float] = {}
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False)
            await consumer.start()
            dtp = TopicPartition(topics.decisions, 0)
            consumer.assign([dtp])
            consumer.seek(dtp, 0)
            decision_ts: dict[int, int] = {}  # input offset -> append time of its first decision
            done = asyncio.Event()

            async def watch() -> None:
                while not done.is_set():
                    batch = await consumer.getmany(dtp, timeout_ms=100)
                    now = time.time()
                    for r in batch.get(dtp, ()):
                        cause = json.loads(r.value)["cause"]
                        key = (cause["offset"], cause["index"])
                        visible[key] = now
                        if cause["index"] == 0:
                            decision_ts[cause["offset"]] = r.timestamp
                        if cause["offset"] == n - 1:
                            done.set()

            watcher = asyncio.create_task(watch())
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=0)
            await producer.start()
            futures = []
            began = time.perf_counter()
            for i, m in enumerate(msgs):
                delay = began + i / args.rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                futures.append(await producer.send(topics.input, value=m.value, key=m.key, headers=list(m.headers), partition=0))
            metas = await asyncio.gather(*futures)
            produce_s = time.perf_counter() - began
            await producer.stop()
            await asyncio.wait_for(done.wait(), 120)
            watcher.cancel()
            await consumer.stop()
        finally:
            agent.stop()
        offsets = [m.offset for m in metas]
        assert offsets == list(range(n)), "input offsets are not 0..n-1"
        log = KafkaLog(bootstrap)
        inputs = {r.offset: r.timestamp_ms for r in await log.read_all(topics.input)}
        await log.close()
    t_start = inputs[0] + args.warmup * 1000
    a2a = sorted(float(decision_ts[o] - ts) for o, ts in inputs.items() if o in decision_ts and ts >= t_start)
    a2v = sorted(visible[(o, 0)] * 1000 - ts for o, ts in inputs.items() if (o, 0) in visible and ts >= t_start)
    print(f"engine: {args.engine}")
    print(f"{n} events at {args.rate:.0f}/s (sent in {produce_s:.1f} s, i.e. {n / produce_s:.0f}/s); "
          f"{len(a2a)} measured after a {args.warmup:.0f} s warm-up")
    for name, values in (("append -> append ", a2a), ("append -> visible", a2v)):
        print(
            f"{name}: p50 {percentile(values, 50):6.1f} ms  p90 {percentile(values, 90):6.1f} ms  "
            f"p99 {percentile(values, 99):6.1f} ms  max {max(values):6.1f} ms"
        )
    print("goal: p99 < 50 ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--engine", default="default", choices=("default", "process", "inprocess"))
    asyncio.run(main(parser.parse_args()))
