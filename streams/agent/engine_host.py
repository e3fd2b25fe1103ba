"""Where the agent's engine runs: in the agent's process, or in a child process of its own.

The agent (streams/agent/loop.py) drives either through the same three calls -- `restore` a stored
snapshot, `fold` events already decided (recovery, with the check of the last decision), and
`apply` live events (decision messages out, optionally snapshot chunks) -- and awaits their
results in the order it made them.

- `LocalEngine` folds in the agent's own process, when its result is awaited.
- `ChildEngine` runs the engine in `python -m streams.agent.engine_child`: `fold` and `apply` send the
  batch at once and return a future, so while the child folds batch N the agent commits batch
  N-1 and reads batch N+1 -- on two cores the engine's and the shell's CPU overlap instead of
  adding up. It costs a copy of every input value and decision payload through a pipe
  (bench/figures.md gives the measured overhead). The child's death (or its parent's) is an
  ordinary failure for the agent: it closes its writer and recovers from the logs, as after any
  error whose outcome is unknown; the child dies with the agent however the agent dies.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import contextlib
import os
import sys
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter

from domain.decisions import encode
from domain.engine import Engine
from streams.agent import engine_wire as wire
from streams.agent.admission_attempts import attempt_of
from streams.log import Message, Record
from streams.log.envelope import decision_message, decision_message_of
from streams.log.snapshots import SnapshotUnusable, Stored, restore, snapshot_data

# (type, workload, cause offset, cause index) of a decision, for its debug log line.
Decided = tuple[str, str | None, int, int]


class EngineFailure(RuntimeError):
    """The engine raised (it must not, whatever the input): a bug, not a transient error."""


class EngineProcessDied(RuntimeError):
    """The engine process is gone: its state with it. The agent recovers from the logs."""


@dataclass
class Batch:
    """What one batch of live input events writes: its decisions (and a snapshot)."""

    out: list[tuple[str, Message]] = field(default_factory=list)
    decided: list[Decided] = field(default_factory=list)  # only when asked (debug logging)
    decisions: int = 0
    snapshot: list[bytes] | None = None  # snapshot_data chunks, taken after the batch's last event
    # (success, seconds) of each event that was an admission attempt (admission_attempts.py)
    attempts: list[tuple[bool, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Shell:
    """What the agent's envelopes need, fixed for an engine's lifetime."""

    decisions_topic: str
    source: bytes  # ce_source
    keep_decided: bool  # fill Batch.decided


class EngineHost(abc.ABC):
    #: how many batches the agent may have handed over and not yet collected
    depth: int

    def __init__(self, shell: Shell) -> None:
        self.shell = shell

    @abc.abstractmethod
    async def restore(self, stored: Stored | None) -> None:
        """Start over from a snapshot, or empty. Raises `SnapshotUnusable` (and is then empty)."""

    @abc.abstractmethod
    def fold(self, records: Sequence[Record], verify_at: int) -> Awaitable[list[bytes] | None]:
        """Apply decided events; the result: the encoded decisions of `verify_at` if it is here."""

    @abc.abstractmethod
    def apply(self, records: Sequence[Record], *, snapshot: bool, time: bytes) -> Awaitable[Batch]:
        """Apply live events: their decisions as messages, with ce_time `time`."""

    def check(self) -> None:
        """Raise if the engine can no longer be used (its process died)."""

    @property
    def pid(self) -> int | None:
        return None

    async def close(self) -> None:
        return None


class LocalEngine(EngineHost):
    depth = 1

    def __init__(self, shell: Shell) -> None:
        super().__init__(shell)
        self.engine = Engine()

    async def restore(self, stored: Stored | None) -> None:
        self.engine = Engine()
        if stored is not None:
            self.engine = restore(stored.data, stored.offset)

    def fold(self, records: Sequence[Record], verify_at: int) -> Awaitable[list[bytes] | None]:
        return self._fold(records, verify_at)

    def apply(self, records: Sequence[Record], *, snapshot: bool, time: bytes) -> Awaitable[Batch]:
        return self._apply(records, snapshot, time)

    async def _fold(self, records: Sequence[Record], verify_at: int) -> list[bytes] | None:
        apply = self.engine.apply
        verify = None
        for n, record in enumerate(records):
            if n % 256 == 255:
                await asyncio.sleep(0)  # let the previous batch's commit make progress
            offset = record.offset
            try:
                decisions = apply(record.value or b"", offset, record.log_time)
            except Exception as exc:
                raise EngineFailure(f"engine raised on input offset {offset}: {exc!r}") from exc
            if offset == verify_at:
                verify = [encode(d) for d in decisions]
        return verify

    async def _apply(self, records: Sequence[Record], snapshot: bool, time: bytes) -> Batch:
        shell = self.shell
        topic, source = shell.decisions_topic, shell.source
        apply = self.engine.apply
        batch = Batch()
        out = batch.out
        attempts = batch.attempts
        clock = perf_counter
        for n, record in enumerate(records):
            if n % 256 == 255:
                await asyncio.sleep(0)
            offset = record.offset
            try:
                began = clock()
                decisions = apply(record.value or b"", offset, record.log_time)
                seconds = clock() - began
            except Exception as exc:
                raise EngineFailure(f"engine raised on input offset {offset}: {exc!r}") from exc
            if decisions:
                success = attempt_of([type(d).__name__ for d in decisions])
                if success is not None:
                    attempts.append((success, seconds))
            for decision in decisions:
                out.append((topic, decision_message(decision, encode(decision), source=source, time=time)))
            if shell.keep_decided:
                batch.decided.extend(
                    (type(d).__name__, d.workload, d.cause.offset, d.cause.index) for d in decisions
                )
            batch.decisions += len(decisions)
        if snapshot:
            batch.snapshot = snapshot_data(self.engine)
        return batch


def _project_root() -> str:
    # The child must import this very `streams` package, wherever the agent was started from.
    return str(Path(__file__).resolve().parents[1])


class ChildEngine(EngineHost):
    # One batch folding in the child, one queued behind it: the child never waits for the agent.
    depth = 2

    def __init__(self, shell: Shell, proc: asyncio.subprocess.Process) -> None:
        super().__init__(shell)
        self._proc = proc
        self._waiting: collections.deque[asyncio.Future[wire.Reply]] = collections.deque()
        self._dead: EngineProcessDied | None = None
        self._reader = asyncio.create_task(self._read_replies(), name="quotaflow-engine-replies")

    @classmethod
    async def start(cls, shell: Shell) -> ChildEngine:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_project_root(), env.get("PYTHONPATH")) if p)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "streams.agent.engine_child",
            str(os.getpid()),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
            # Replies (a snapshot's chunks, a batch's decisions) are read whole: never pause the pipe.
            limit=1 << 30,
        )
        return cls(shell, proc)

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    def check(self) -> None:
        if self._dead is not None:
            raise self._dead

    async def _read_replies(self) -> None:
        stdout = self._proc.stdout
        assert stdout is not None
        decode = wire.reply_decoder.decode
        try:
            while True:
                head = await stdout.readexactly(wire.LENGTH_BYTES)
                reply = decode(await stdout.readexactly(int.from_bytes(head, "big")))
                waiter = self._waiting.popleft()
                if not waiter.done():
                    waiter.set_result(reply)
        except (asyncio.IncompleteReadError, ConnectionError, IndexError) as exc:
            code = None
            with contextlib.suppress(asyncio.TimeoutError):
                code = await asyncio.wait_for(self._proc.wait(), 1.0)
            self._dead = EngineProcessDied(f"the engine process {self._proc.pid} died (exit code {code}; {exc!r})")
        except BaseException as exc:  # cancelled by close(), or a reply that does not decode
            self._dead = EngineProcessDied(f"the engine process {self._proc.pid} cannot be used: {exc!r}")
            raise
        finally:
            while self._waiting:
                waiter = self._waiting.popleft()
                if not waiter.done():
                    waiter.set_exception(self._dead or EngineProcessDied("closed"))
                    waiter.exception()  # retrieved: nobody may be left to await it

    def _send(self, request: wire.Request) -> asyncio.Future[wire.Reply]:
        self.check()
        stdin = self._proc.stdin
        assert stdin is not None
        body = wire.request_encoder.encode(request)
        stdin.write(len(body).to_bytes(wire.LENGTH_BYTES, "big"))
        stdin.write(body)
        waiter: asyncio.Future[wire.Reply] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        return waiter

    @staticmethod
    def _failed(reply: wire.Failed) -> Exception:
        if reply.kind == "snapshot":
            return SnapshotUnusable(reply.message)
        return EngineFailure(f"engine raised on input offset {reply.offset}: {reply.message}")

    async def restore(self, stored: Stored | None) -> None:
        request = wire.Restore(None, -1) if stored is None else wire.Restore(stored.data, stored.offset)
        reply = await self._send(request)
        if isinstance(reply, wire.Failed):
            raise self._failed(reply)

    def fold(self, records: Sequence[Record], verify_at: int) -> Awaitable[list[bytes] | None]:
        return self._folded(self._send(wire.Fold([r.offset for r in records], [r.value for r in records], verify_at, [r.log_time for r in records])))

    def apply(self, records: Sequence[Record], *, snapshot: bool, time: bytes) -> Awaitable[Batch]:
        offsets = [r.offset for r in records]
        waiter = self._send(wire.Apply(offsets, [r.value for r in records], snapshot, [r.log_time for r in records]))
        # A task, not a bare coroutine: the messages are built as soon as the reply is in, and
        # the agent can tell a batch that is ready (done()) from one still folding.
        return asyncio.ensure_future(self._applied(waiter, offsets, time))

    async def _folded(self, waiter: asyncio.Future[wire.Reply]) -> list[bytes] | None:
        reply = await waiter
        if isinstance(reply, wire.Folded):
            return reply.verify
        raise self._failed(reply) if isinstance(reply, wire.Failed) else EngineProcessDied(f"unexpected {reply!r}")

    async def _applied(self, waiter: asyncio.Future[wire.Reply], offsets: list[int], time: bytes) -> Batch:
        reply = await waiter
        if not isinstance(reply, wire.Applied):
            raise self._failed(reply) if isinstance(reply, wire.Failed) else EngineProcessDied(f"unexpected {reply!r}")
        shell = self.shell
        topic, source = shell.decisions_topic, shell.source
        values, types, workloads = reply.values, reply.types, reply.workloads
        out: list[tuple[str, Message]] = []
        decided: list[Decided] = []
        attempts: list[tuple[bool, float]] = []
        k = 0
        for offset, count, seconds in zip(offsets, reply.counts, reply.seconds, strict=True):
            if count:
                success = attempt_of(types[k:k + count])
                if success is not None:
                    attempts.append((success, seconds))
            for index in range(count):
                out.append(
                    (topic, decision_message_of(types[k], workloads[k], offset, index, values[k], source=source, time=time))
                )
                if shell.keep_decided:
                    decided.append((types[k], workloads[k], offset, index))
                k += 1
        return Batch(out, decided, k, reply.snapshot, attempts)

    async def close(self) -> None:
        """Kill the child (it holds nothing durable) and reap it."""
        with contextlib.suppress(ProcessLookupError):
            self._proc.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._proc.wait(), 10)
        self._reader.cancel()
        with contextlib.suppress(BaseException):
            await self._reader
