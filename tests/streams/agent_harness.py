"""Helpers for the agent tests: input streams, `quotaflow replay`, agent processes, checks."""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devtools.generate import generated_events
from domain.decisions import encode
from domain.engine import Engine
from streams.agent.loop import cause_of
from streams.log import EventLog, Message, Topics
from streams.log.envelope import event_message
from streams.settings import (
    ENV_DECISIONS_TOPIC,
    ENV_INPUT_TOPIC,
    ENV_LOG_LEVEL,
    ENV_SNAPSHOTS_TOPIC,
)

PR_SET_PDEATHSIG = 1
# Always decides something (Rejected), so "the last event's decision is in" means "all are in".
SENTINEL = b"end-of-test: not JSON"


def _die_with_parent() -> None:
    # A killed pytest must not leave agents behind: the kernel SIGKILLs them too.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def as_message(event: bytes | dict[str, Any]) -> Message:
    """What a producer would write: contract JSON with CloudEvents headers; garbage as it is."""
    if isinstance(event, dict):
        return event_message(event, source="/quotaflow/tests")
    try:
        parsed = json.loads(event)
    except ValueError:
        return Message(event)  # garbage goes in raw, without an envelope
    if isinstance(parsed, dict):
        return event_message(event, source="/quotaflow/tests")
    return Message(event)


async def write_input(
    log: EventLog, topic: str, events: Iterable[bytes | dict[str, Any]], chunk: int = 2000, start: int = 0
) -> int:
    """Append events; asserts they land at dense offsets from `start`. Returns the next offset."""
    batch: list[Message] = []
    count = start
    for event in events:
        batch.append(as_message(event))
        if len(batch) >= chunk:
            offsets = await log.append(topic, batch)
            assert offsets == list(range(count, count + len(batch))), "input offsets must be dense from 0"
            count += len(batch)
            batch = []
    if batch:
        offsets = await log.append(topic, batch)
        assert offsets == list(range(count, count + len(batch)))
        count += len(batch)
    return count


def write_jsonl(path: Path, events: Iterable[bytes | dict[str, Any]]) -> int:
    count = 0
    with path.open("wb") as f:
        for event in events:
            raw = event if isinstance(event, bytes) else json.dumps(event).encode()
            assert b"\n" not in raw and raw.strip(), raw
            f.write(raw + b"\n")
            count += 1
    return count


def decided(events: Iterable[bytes | dict[str, Any]]) -> list[bytes]:
    """The encoded decisions a fresh in-process engine gives these events, offsets from 0."""
    engine = Engine()
    return [encode(d) for offset, e in enumerate(events) for d in engine.apply(e, offset)]


def stream_and_replay(n: int, seed: int, tmp_path: Path) -> tuple[list[bytes | dict[str, Any]], asyncio.Task[list[bytes]]]:
    """A generated stream of n events ending in SENTINEL, and `quotaflow replay` of it already
    running in a thread (the expected decision log, awaited when the agent is done)."""
    events: list[bytes | dict[str, Any]] = [*generated_events(n - 1, seed=seed), SENTINEL]
    events_file = tmp_path / "events.jsonl"
    write_jsonl(events_file, events)
    return events, asyncio.create_task(asyncio.to_thread(replay, events_file))


def replay(events_file: Path) -> list[bytes]:
    """`quotaflow replay EVENTS_FILE`, as a user runs it: one decision per output line."""
    result = subprocess.run(
        [sys.executable, "-m", "streams.cli.main", "replay", str(events_file)],
        capture_output=True,
        check=False,
        timeout=300,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.splitlines()


def causes(values: list[bytes]) -> list[tuple[int, int]]:
    return [(d["cause"]["offset"], d["cause"]["index"]) for d in map(json.loads, values)]


def assert_exactly_once(actual: list[bytes], expected: list[bytes]) -> None:
    """No duplicate and no gap in `cause`, and the same decisions as replay, in order."""
    got = causes(actual)
    duplicates = len(got) - len(set(got))
    assert duplicates == 0, f"{duplicates} duplicate causes in the decision log"
    for (o1, i1), (o2, i2) in zip(got, got[1:], strict=False):
        assert (o2, i2) > (o1, i1), f"cause order broken: {(o1, i1)} then {(o2, i2)}"
        assert (o2 == o1 and i2 == i1 + 1) or (o2 > o1 and i2 == 0), f"gap in causes: {(o1, i1)} then {(o2, i2)}"
    assert len(actual) == len(expected), f"{len(actual)} decisions in the log, replay gives {len(expected)}"
    for n, (a, e) in enumerate(zip(actual, expected, strict=True)):
        assert a == e, f"decision {n} differs:\n log:    {a!r}\n replay: {e!r}"


async def last_cause_offset(log: EventLog, topic: str) -> int:
    last = await log.read_last(topic, 1)
    return cause_of(last[0]).offset if last else -1


async def wait_for_cause(log: EventLog, topic: str, offset: int, timeout: float, agents: list[AgentProcess] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while True:
        current = await last_cause_offset(log, topic)
        if current >= offset:
            return
        if time.monotonic() > deadline:
            for a in agents or []:
                a.dump_tasks()
            await asyncio.sleep(2.0)
            tails = "\n".join(a.tail(200) for a in agents or [])
            raise AssertionError(f"decisions reached input offset {current}, not {offset}, in {timeout} s\n{tails}")
        await asyncio.sleep(0.1)


# The crash tests' agent settings: small transactions and a snapshot every few of them put the
# kills at every kind of point (mid-transaction, right after a commit, between snapshots); small
# engine steps split every read into several (some of a read committed, some not).
SNAPSHOT_EVERY = 3000
MAX_BATCH = 500
STEP_BYTES = 16 * 1024
CRASH_ARGS = ["--snapshot-every", str(SNAPSHOT_EVERY), "--max-batch", str(MAX_BATCH), "--step-bytes", str(STEP_BYTES)]


# The agent's two engine modes (streams/agent/engine_host.py), as `quotaflow agent` flags.
ENGINE_MODES = {"process": "--engine-process", "inprocess": "--no-engine-process"}


def engine_pids(agent: AgentProcess) -> list[int]:
    """The engine processes the agent started, in order (its `engine process` log lines)."""
    return [int(line["pid"]) for line in agent.lines() if line.get("event") == "engine process"]


async def wait_for_engine(agent: AgentProcess, count: int, timeout: float) -> int:
    """The pid of the agent's `count`-th engine process, once it logged it."""
    deadline = time.monotonic() + timeout
    while len(pids := engine_pids(agent)) < count:
        assert agent.alive, agent.tail()
        assert time.monotonic() < deadline, f"no engine process #{count} in {timeout} s\n{agent.tail()}"
        await asyncio.sleep(0.05)
    return pids[count - 1]


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie is not: it is dead, waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def kill_points(seed: int, count: int, span: int) -> list[int]:
    """`count` input offsets in [0, span), one in each of `count` equal slices, away from edges."""
    rng = random.Random(seed)
    width = span // count
    return sorted(rng.randrange(k * width + width // 4, (k + 1) * width - width // 4) for k in range(count))


async def run_with_kills(agent: AgentProcess, log: EventLog, decisions: str, points: list[int], last: int) -> int | None:
    """Start the agent, SIGKILL it once decisions reach each point and start it again, wait for
    the decision of input offset `last`, stop it; returns its exit code. `agent.interrupted`
    counts the kills that hit an agent with work left to do."""
    try:
        agent.start()
        for point in points:
            await wait_for_cause(log, decisions, point, timeout=60, agents=[agent])
            unfinished = await last_cause_offset(log, decisions) < last
            agent.kill()
            agent.interrupted += unfinished
            agent.start()
        await wait_for_cause(log, decisions, last, timeout=90, agents=[agent])
        # The last kill may have come after everything was decided: let the last start finish
        # starting before it is asked to stop, so that its exit code means something.
        await agent.wait_recovered(timeout=60)
    finally:
        code = agent.stop()
    return code


def check_recoveries(agent: AgentProcess) -> None:
    """Every start recovered, and from a snapshot once there was one: no restart folds more than
    a snapshot interval plus a batch."""
    recoveries = [line for line in agent.lines() if line.get("event") == "recovered"]
    # A start killed before it finished recovering (its kill point was already behind it) logs none.
    assert 0 < len(recoveries) <= agent.starts, agent.tail()
    bound = SNAPSHOT_EVERY + MAX_BATCH
    assert all(r["snapshot_offset"] is not None for r in recoveries if r["processed"] >= bound), recoveries
    assert max(r["replay_events"] for r in recoveries) <= bound, "a restart must not fold the whole log"
    assert any(r["replay_events"] > 0 for r in recoveries), "some restart should have folded events after a snapshot"


def agent_env(topics: Topics, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        ENV_INPUT_TOPIC: topics.input,
        ENV_DECISIONS_TOPIC: topics.decisions,
        ENV_SNAPSHOTS_TOPIC: topics.snapshots,
        "PYTHONHASHSEED": "random",
        # Per-decision log lines are debug: the tests read them to see which agent decided.
        ENV_LOG_LEVEL: "debug",
    }
    env.update(extra)
    return env


@dataclass
class AgentProcess:
    """`quotaflow agent` as a subprocess, restartable; every run appends to one log file."""

    broker_url: str
    topics: Topics
    log_path: Path
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    kills: int = 0
    interrupted: int = 0

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None
        with self.log_path.open("ab") as log:
            log.write(f"--- start {self.starts}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "streams.cli.main", "agent", "--broker", self.broker_url, "--http-port", "0", *self.args],
                env=agent_env(self.topics, **self.env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        self.starts += 1

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no cleanup, no graceful anything."""
        assert self.proc is not None
        with_suppress(lambda: os.killpg(self.proc.pid, signal.SIGKILL))  # type: ignore[union-attr]
        self.proc.wait(10)
        self.kills += 1

    def stop(self, grace: float = 20.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with_suppress(lambda: os.killpg(self.proc.pid, signal.SIGTERM))  # type: ignore[union-attr]
            try:
                return self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                with_suppress(lambda: os.killpg(self.proc.pid, signal.SIGKILL))  # type: ignore[union-attr]
                self.proc.wait(5)
        return self.proc.returncode

    def wait_recovered_sync(self, timeout: float) -> None:
        """`wait_recovered` for synchronous fixtures: the agent's signal handlers are in place once
        it has recovered, so a SIGTERM after this stops it cleanly (exit 0)."""
        deadline = time.monotonic() + timeout
        marker = f"--- start {self.starts - 1}\n".encode()
        while b'"event":"recovered"' not in self.log_path.read_bytes().rpartition(marker)[2]:
            assert self.alive, self.tail()
            assert time.monotonic() < deadline, f"no recovery in {timeout} s\n{self.tail()}"
            time.sleep(0.05)

    async def wait_recovered(self, timeout: float) -> None:
        """Wait for the current run's `recovered` log line."""
        deadline = time.monotonic() + timeout
        marker = f"--- start {self.starts - 1}\n".encode()
        while b'"event":"recovered"' not in self.log_path.read_bytes().rpartition(marker)[2]:
            assert self.alive, self.tail()
            assert time.monotonic() < deadline, f"no recovery in {timeout} s\n{self.tail()}"
            await asyncio.sleep(0.05)

    def dump_tasks(self) -> None:
        """Ask the agent's worker (mode) to print every thread's stack and asyncio task (SIGUSR1)."""
        if self.alive:
            with_suppress(lambda: os.kill(self.proc.pid, signal.SIGUSR1))  # type: ignore[union-attr]

    def lines(self) -> list[dict[str, Any]]:
        out = []
        for raw in self.log_path.read_bytes().splitlines():
            if raw.startswith(b"{"):
                try:
                    out.append(json.loads(raw))
                except ValueError:
                    pass
        return out

    def tail(self, n: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        interesting = [line for line in text if '"decision"' not in line and '"input event"' not in line]
        return f"== {self.log_path.name} ==\n" + "\n".join(interesting[-n:])


def with_suppress(fn: Any) -> None:
    try:
        fn()
    except (ProcessLookupError, PermissionError):
        pass
