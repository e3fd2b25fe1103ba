"""Restart time of the agent with a long input log, with and without snapshots.

    python -m bench.agent_restart [--events 1000000] [--snapshot-every 10000] [--broker kafka|sqlite]

1. `--events` input events are appended (the generated stream, `devtools.generate`).
2. `quotaflow agent` (a subprocess, as deployed) processes all of them with a snapshot every
   `--snapshot-every` events, and is stopped (SIGTERM). Then `--tail` more events (half a
   snapshot interval by default: the average distance from the last snapshot) are processed by
   an agent that takes no snapshot.
3. **with snapshots**: the agent is started again on the same logs. Timed: from spawning the
   process to its `recovered` log line (it has found its position, restored the newest snapshot
   and folded the events after it; it is ready for new input), and the `total_s` it reports for
   the recovery itself (without process start-up).
4. **without snapshots**: the same, pointed at an empty snapshot topic
   (`QUOTAFLOW_SNAPSHOTS_TOPIC`), so it must fold the whole input log to find its state.

Also printed: how long step 2 took (end-to-end throughput of a long run, snapshots included) and
how many events each restart folded.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from bench.agent_common import (
    AgentProcess,
    append_all,
    bench_topics,
    iso_to_epoch,
    kafka_bootstrap,
    messages,
)
from streams.agent.loop import cause_of
from streams.log import EventLog, Topics, open_log


async def wait_decided(log: EventLog, topic: str, offset: int, timeout: float, agent: AgentProcess) -> None:
    deadline = time.monotonic() + timeout
    while True:
        last = await log.read_last(topic, 1)
        if last and cause_of(last[0]).offset >= offset:
            return
        if agent.proc.poll() is not None:
            raise RuntimeError(f"agent exited with {agent.proc.returncode}; see {agent.log_path}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"not done in {timeout} s")
        await asyncio.sleep(0.5)


def restart(url: str, topics: Topics, log_path: Path) -> dict[str, float]:
    agent = AgentProcess(url, topics, log_path, "--log-level", "info", "--snapshot-every", "100000000")
    try:
        line = agent.wait_for("recovered", 3600)
    finally:
        agent.stop()
    return {
        "ready_s": iso_to_epoch(line["timestamp"]) - agent.started,
        "recovery_s": float(line["total_s"]),
        "replayed": float(line["replay_events"]),
    }


async def main(args: argparse.Namespace) -> None:
    n = args.events
    tmp = Path(tempfile.mkdtemp(prefix="quotaflow-bench-restart-"))
    print(f"generating {n:,} events ...", flush=True)
    msgs = messages(n, seed=args.seed)
    with kafka_bootstrap(args.bootstrap) if args.broker == "kafka" else _nothing() as bootstrap:
        url = f"kafka://{bootstrap}" if args.broker == "kafka" else f"sqlite:///{tmp / 'restart.db'}"
        topics = bench_topics("restart")
        log = open_log(url)
        await log.start()
        await log.ensure_topics(topics.specs())
        append_s = await append_all(log, topics.input, msgs, chunk=10_000)
        print(f"{url}: {n:,} events appended in {append_s:.1f} s", flush=True)

        began = time.monotonic()
        agent = AgentProcess(url, topics, tmp / "first.log", "--log-level", "warning", "--snapshot-every", str(args.snapshot_every))
        try:
            await wait_decided(log, topics.decisions, n - 1, 7200, agent)
        finally:
            agent.stop()
        first_s = time.monotonic() - began
        print(f"first run: all {n:,} events processed in {first_s:.1f} s ({n / first_s:,.0f} events/s, process start included)", flush=True)
        if args.tail:
            # Half a snapshot interval more, processed without taking a snapshot: a restart must
            # then fold them after restoring the snapshot, as it would on average.
            await append_all(log, topics.input, messages(args.tail, seed=args.seed + 1))
            agent = AgentProcess(url, topics, tmp / "tail.log", "--log-level", "warning", "--snapshot-every", "100000000")
            try:
                await wait_decided(log, topics.decisions, n + args.tail - 1, 3600, agent)
            finally:
                agent.stop()
            print(f"then {args.tail:,} more events processed without a snapshot", flush=True)

        with_snap = restart(url, topics, tmp / "with.log")
        print(f"restart with snapshots:    ready after {with_snap['ready_s']:.2f} s "
              f"(recovery {with_snap['recovery_s']:.2f} s, {with_snap['replayed']:,.0f} events folded)", flush=True)
        empty = Topics(topics.input, topics.decisions, bench_topics("empty").snapshots)
        await log.ensure_topics(empty.specs())
        without = restart(url, empty, tmp / "without.log")
        print(f"restart without snapshots: ready after {without['ready_s']:.2f} s "
              f"(recovery {without['recovery_s']:.2f} s, {without['replayed']:,.0f} events folded)", flush=True)
        await log.close()
    print(f"logs in {tmp}")


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--snapshot-every", type=int, default=10_000)
    parser.add_argument("--tail", type=int, default=None, help="events after the last snapshot (default: half of --snapshot-every)")
    parser.add_argument("--broker", choices=("kafka", "sqlite"), default="kafka")
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--seed", type=int, default=1)
    parsed = parser.parse_args()
    if parsed.tail is None:
        parsed.tail = parsed.snapshot_every // 2
    asyncio.run(main(parsed))
