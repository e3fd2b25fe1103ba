"""Real time: Kueue's performance run against `quotaflow agent` on a Kafka broker, on the wall clock.

The agent runs as its own process, as deployed (`quotaflow agent --broker kafka://...`, logs at
warning). This process plays Kueue's runner: the generator appends the setup and then, at each
arrival's time, the due `WorkloadSubmitted` events; a reader follows the decision log
(read_committed) and feeds every decision, stamped with the time it was read, to the recorder
and to the executor, whose releases and finishes are appended when due. Events due at the same
moment go as one `Batch`, as in the simulation (`batching.py`).

`time_scale` < 1 compresses the schedule (intervals and runtimes) for quick runs; every figure
is reported in the scenario's own time (wall-clock ms / time_scale). The agent's processing
cost is not scaled, so a compressed run is harder on it than the real one.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.agent_common import AgentProcess, bench_topics, percentile
from bench.timing import frozen_setup
from devtools.kueue_perf.batching import DEFAULT_WINDOW, Batcher
from devtools.kueue_perf.executor import Executor
from devtools.kueue_perf.generator import SOURCE, Scenario, submitted
from devtools.kueue_perf.recorder import Recorder, Summary
from domain.decisions import decode
from streams.log import Message, Topics
from streams.log.envelope import event_message
from streams.log.kafka import KafkaLog

RUNNER_GC_THRESHOLD = (50_000, 50, 100)
READY = b"kueue-perf: setup published (not JSON: decides Rejected)"


@dataclass
class RealRun:
    summary: Summary
    cpu_s: float  # this process: generator, executor, recorder, Kafka clients
    agent_cpu_s: float | None  # the agent process (user + system) during the run, when it could be read
    wall_s: float  # from the first arrival's schedule start to the end, real seconds
    events: int  # input events appended (a Batch counts once)
    lag_ms: dict[str, float] = field(default_factory=dict)  # append -> decision read, scenario ms
    timed_out: bool = False
    engine_cpu_s: float | None = None  # the agent's engine process (its children) during the run


def _stat(path: Path) -> tuple[int, float] | None:
    """(parent pid, CPU seconds user + system) of the process whose /proc stat file this is."""
    try:
        fields = path.read_text().rsplit(")", 1)[1].split()
        return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _proc_cpu_s(pid: int) -> float | None:
    stat = _stat(Path(f"/proc/{pid}/stat"))
    return None if stat is None else stat[1]


def _children_cpu_s(pid: int) -> float | None:
    """CPU of the live child processes of pid (the agent's engine process), user + system."""
    children = [cpu for ppid, cpu in filter(None, map(_stat, Path("/proc").glob("[0-9]*/stat"))) if ppid == pid]
    return sum(children) if children else None


def _since(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else end - start


def _rfc3339_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class _Run:
    def __init__(self, scenario: Scenario, log: KafkaLog, topics: Topics, time_scale: float, batch: bool,
                 window: int) -> None:
        self.scenario = scenario
        self.log = log
        self.topics = topics
        self.scale = time_scale
        self.batcher = Batcher(scenario, batch)
        self.recorder: Recorder
        self.executor = Executor({a.key: a.runtime_ms for a in scenario.arrivals})
        # Built before the clock starts, stamped when sent: building 50,000 workloads during the
        # burst would take CPU from the agent on the same machine.
        self.submissions = [submitted(a, "") for a in scenario.arrivals]
        self.t0 = 0.0
        self.t0_epoch_ms = 0.0  # time.time() at t0, for the records' timestamps
        self.appended = 0
        self.sent_at: dict[int, float] = {}  # input offset -> scenario ms when it was appended
        self.lags: list[float] = []
        self.wake = asyncio.Event()
        self.finished = asyncio.Event()
        self.ready_offset = -1
        # Flow control (window > 0): at most `window` of this runner's records undecided; what
        # falls due meanwhile waits here and goes as one append when the agent catches up.
        self.window = window
        self.queued: list[dict[str, Any]] = []
        self.undecided: collections.deque[int] = collections.deque()  # appended offsets, in order
        self.decided_upto = -1  # the agent decides in log order: every offset up to it is decided
        self.may_send = asyncio.Event()

    def now(self) -> float:
        """Scenario milliseconds since t0."""
        return (time.perf_counter() - self.t0) * 1000.0 / self.scale

    async def _sleep_until(self, scenario_ms: float) -> None:
        delay = self.t0 + scenario_ms * self.scale / 1000.0 - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)

    async def append(self, events: list[dict[str, Any]]) -> None:
        messages: list[Message] = []
        for chunk in self.batcher(events):
            messages.append(event_message(chunk, source=SOURCE))
        at = self.now()
        offsets = await self.log.append(self.topics.input, messages)
        self.appended += len(offsets)
        for o in offsets:
            self.sent_at[o] = at
            if o > self.decided_upto:
                self.undecided.append(o)

    async def send(self, events: list[dict[str, Any]]) -> None:
        """Append now, or with flow control queue for the sender."""
        if not self.window:
            await self.append(events)
            return
        self.queued.extend(events)
        self.may_send.set()

    async def sender(self) -> None:
        """With flow control: append everything queued as one step whenever fewer than `window`
        of this runner's records wait for the agent. Kueue's scheduler sees at once whatever
        changed while it was busy; an agent that is still deciding earlier records would only
        reach these after them anyway, and gets them as one Batch (one scheduling pass)."""
        while not self.finished.is_set():
            await self.may_send.wait()
            self.may_send.clear()
            if self.queued and len(self.undecided) < self.window:
                events, self.queued = self.queued, []
                await self.append(events)
                self.may_send.set()  # more may have been queued during the append

    def _decided(self, offset: int) -> None:
        if offset <= self.decided_upto:
            return
        self.decided_upto = offset
        undecided = self.undecided
        while undecided and undecided[0] <= offset:
            undecided.popleft()
        self.may_send.set()  # the sender decides whether that is room enough

    async def generate(self) -> None:
        arrivals = self.scenario.arrivals
        i = 0
        while i < len(arrivals):
            at = arrivals[i].at_ms
            await self._sleep_until(at)
            first = i
            while i < len(arrivals) and arrivals[i].at_ms <= at:
                i += 1
            # Arrivals whose time has passed while the previous append ran go now, together.
            horizon = self.now()
            while i < len(arrivals) and arrivals[i].at_ms <= horizon:
                i += 1
            created = _rfc3339_now()
            now = self.now()
            for a in arrivals[first:i]:
                self.recorder.created(a, now)
            due = self.submissions[first:i]
            for event in due:
                event["workload"]["metadata"]["creationTimestamp"] = created
            await self.send(due)

    async def execute(self) -> None:
        while not self.finished.is_set():
            due = self.executor.next_due()
            self.wake.clear()
            if due is None or due > self.now():
                timeout = None if due is None else max(0.0, self.t0 + due * self.scale / 1000.0 - time.perf_counter())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), timeout)
                continue
            events = self.executor.pop_due(self.now())
            if events:
                await self.send(events)

    async def read(self) -> None:
        async with await self.log.reader(self.topics.decisions, 0) as reader:
            while not self.finished.is_set():
                records = await reader.read(limit=5000, timeout=0.05)
                if not records:
                    continue
                now = self.now()
                for r in records:
                    d = decode(r.value or b"")
                    sent = self.sent_at.pop(d.cause.offset, None) if d.cause.index == 0 else None
                    if sent is not None:
                        self.lags.append(now - sent)
                    if self.window:
                        self._decided(d.cause.offset)
                    if d.cause.offset == self.ready_offset:
                        continue
                    decided = (r.timestamp_ms - self.t0_epoch_ms) / self.scale if r.timestamp_ms else None
                    self.recorder.decision(d, now, decided)
                    self.executor.on_decision(d, now)
                self.wake.set()
                if self.recorder.done:
                    self.finished.set()

    async def wait_ready(self, timeout: float) -> None:
        """Until the agent has decided the sentinel appended after the setup."""
        deadline = time.monotonic() + timeout
        async with await self.log.reader(self.topics.decisions, 0) as reader:
            while time.monotonic() < deadline:
                for r in await reader.read(timeout=0.5):
                    if decode(r.value or b"").cause.offset == self.ready_offset:
                        return
        raise TimeoutError(f"the agent did not decide the setup in {timeout} s")


async def run(scenario: Scenario, bootstrap: str, *, time_scale: float = 1.0, batch: bool = True,
              max_wall_s: float = 7200.0, agent_log: Path | None = None, window: int = DEFAULT_WINDOW) -> RealRun:
    topics = bench_topics("kueueperf")
    log = KafkaLog(bootstrap)
    await log.ensure_topics(topics.specs(), single_partition=[topics.input, topics.decisions])
    log_path = agent_log or Path(tempfile.gettempdir()) / f"quotaflow-kueue-perf-{topics.input}.log"
    agent = AgentProcess(f"kafka://{bootstrap}", topics, log_path, "--log-level", "warning")
    state = _Run(scenario, log, topics, time_scale, batch, window)
    agent_cpu = engine_cpu = None
    try:
        setup = [event_message(e, source=SOURCE) for e in scenario.setup]
        offsets = await log.append(topics.input, [*setup, Message(READY)])
        state.ready_offset = offsets[-1]
        await state.wait_ready(180)
        state.recorder = Recorder(scenario)
        with _quiet_collector():
            cpu0 = time.process_time()
            agent0, engine0 = _proc_cpu_s(agent.proc.pid), _children_cpu_s(agent.proc.pid)
            state.t0 = time.perf_counter()
            state.t0_epoch_ms = time.time() * 1000.0
            tasks = [asyncio.create_task(c) for c in (state.generate(), state.execute(), state.read(), state.sender())]
            timed_out = False
            try:
                deadline = time.monotonic() + max_wall_s
                pending: set[asyncio.Task[Any]] = {*tasks, asyncio.create_task(state.finished.wait())}
                while not state.finished.is_set() and time.monotonic() < deadline:
                    done, pending = await asyncio.wait(pending, timeout=deadline - time.monotonic(),
                                                       return_when=asyncio.FIRST_COMPLETED)
                    for t in done:
                        if t.exception() is not None:
                            raise t.exception()  # type: ignore[misc]
                    if not pending:
                        break
                timed_out = not state.finished.is_set()
            finally:
                state.finished.set()
                state.wake.set()
                state.may_send.set()
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            wall_s = time.perf_counter() - state.t0
            cpu_s = time.process_time() - cpu0
        agent_cpu = _since(agent0, _proc_cpu_s(agent.proc.pid))
        engine_cpu = _since(engine0, _children_cpu_s(agent.proc.pid))
    finally:
        agent.stop()
        await log.close()
    lags = sorted(state.lags)
    lag = {"p50": percentile(lags, 50), "p99": percentile(lags, 99), "max": lags[-1] if lags else float("nan")}
    return RealRun(state.recorder.summary(), cpu_s, agent_cpu, wall_s, state.appended, lag, timed_out, engine_cpu)


@contextlib.contextmanager
def _quiet_collector() -> Iterator[None]:
    """The runner without collector pauses while the clock runs. Its heap is the scenario (50,000
    prebuilt submissions in large-scale) and aiokafka's buffers, none of it garbage: with Python's
    thresholds a full collection walked it all in the middle of a run (190 ms in one large-scale
    run, during which no finish went out and no decision was read). Frozen, the collector skips
    that setup; at the engine process's thresholds it also runs a tenth as often."""
    with frozen_setup(RUNNER_GC_THRESHOLD):
        yield
