"""Shared pieces of the agent benchmarks: a broker, topics, the input stream, agent processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from devtools.generate import generated_events
from streams.log import EventLog, Message, Topics
from streams.log.envelope import event_message
from streams.settings import (
    ENV_DECISIONS_TOPIC,
    ENV_INPUT_TOPIC,
    ENV_KAFKA_BOOTSTRAP,
    ENV_SNAPSHOTS_TOPIC,
)

SENTINEL = b"end-of-benchmark: not JSON"  # always decides something (Rejected)


@contextlib.contextmanager
def kafka_bootstrap(explicit: str | None = None) -> Iterator[str]:
    """--bootstrap, else $QUOTAFLOW_KAFKA_BOOTSTRAP, else a local broker for this run."""
    given = explicit or os.environ.get(ENV_KAFKA_BOOTSTRAP)
    if given:
        yield given
        return
    from devtools import local_broker

    broker = local_broker.start_broker(owner_pid=os.getpid())
    try:
        yield broker.bootstrap
    finally:
        local_broker.stop_broker(broker)


def bench_topics(prefix: str = "bench") -> Topics:
    tag = uuid.uuid4().hex[:8]
    return Topics(f"{prefix}.{tag}.events", f"{prefix}.{tag}.decisions", f"{prefix}.{tag}.snapshots")


def messages(n: int, seed: int = 1) -> list[Message]:
    """n input events (the last one a sentinel that always decides), as producers write them."""
    out = []
    for raw in generated_events(n - 1, seed=seed):
        out.append(event_message(raw, source="/quotaflow/bench") if raw.startswith(b"{") else Message(raw))
    out.append(Message(SENTINEL))
    return out


async def append_all(log: EventLog, topic: str, msgs: list[Message], chunk: int = 5000) -> float:
    began = time.perf_counter()
    for i in range(0, len(msgs), chunk):
        await log.append(topic, msgs[i : i + chunk])
    return time.perf_counter() - began


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


class AgentProcess:
    """`quotaflow agent` as a subprocess, its JSON log in a file."""

    def __init__(self, broker_url: str, topics: Topics, log_path: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.log_path = log_path
        self.started = time.time()
        full_env = {
            **os.environ,
            ENV_INPUT_TOPIC: topics.input,
            ENV_DECISIONS_TOPIC: topics.decisions,
            ENV_SNAPSHOTS_TOPIC: topics.snapshots,
            **(env or {}),
        }
        with log_path.open("ab") as sink:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "streams.cli.main", "agent", "--broker", broker_url, "--http-port", "0", *args],
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                # A process group of its own (stop() signals the agent and its engine process
                # together), but not a session of its own: with the kernel's autogroup
                # scheduling (sched_autogroup_enabled, on here) a new session is a new CPU
                # group, so on a loaded machine the agent and its engine process would share one
                # group's slice while the in-process runs and the passthrough they are compared
                # with get the bench's: the CLI agent measured 1.2-2x slower in wall time for
                # the same CPU, all of it run-queue wait (bench/figures.md, "The CLI agent's wait, explained").
                process_group=0,
            )

    def lines(self) -> list[dict[str, Any]]:
        out = []
        for raw in self.log_path.read_bytes().splitlines():
            if raw.startswith(b"{"):
                with contextlib.suppress(ValueError):
                    out.append(json.loads(raw))
        return out

    def wait_for(self, event: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines():
                if line.get("event") == event:
                    return line
            if self.proc.poll() is not None:
                raise RuntimeError(f"agent exited with {self.proc.returncode}; see {self.log_path}")
            time.sleep(0.05)
        raise TimeoutError(f"no {event!r} line from the agent in {timeout} s; see {self.log_path}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        return self.proc.returncode


def iso_to_epoch(ts: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
