"""The agent: folds the input log through the engine and writes the decision log, exactly once.

It runs the same on both logs (`streams.log.interface`); the Kafka and embedded runtimes differ only in the
log they hand it and the process shell around it (`streams.agent.process`).

## The guarantee, and why it holds

Every decision carries `cause = {offset, index}`: the input offset that caused it and its rank
among that event's decisions. The decision log must hold, for every input event, exactly the
decisions the engine gives for it -- none twice, none missing -- in input order. By construction:

1. **Atomic per event.** The decisions of one input event are written in one transaction (a
   Kafka transaction over the decision and snapshot topics; one SQLite transaction on the
   embedded log). A batch of consecutive events shares a transaction, which keeps each event's
   decisions all-or-nothing. Readers use read_committed, so a crash mid-write leaves nothing
   visible, and the successor's fencing aborts the open transaction.
2. **Progress lives in the output.** The agent keeps no offsets anywhere else (no consumer group
   commits): the last committed decision's `cause.offset` says which input events are done. An
   event that decides nothing (most config changes, a duplicate `id`) leaves no trace there, so
   snapshots record their input offset too, and they are written in the same transaction as the
   decisions of the batch they close. The last fully processed offset is therefore
   `P = max(last decision's cause.offset, newest snapshot's offset)`. Events after P that decided
   nothing may have been processed before a crash; folding them again is harmless because the
   engine is deterministic and they decide nothing again.
3. **Restart.** A new agent first becomes the single active writer (`acquire()`: fences the old
   one and resolves its open transaction), then reads P from the logs (read_committed), restores
   the engine from the newest snapshot (its offset S <= P, being committed), folds input events
   S+1..P without emitting -- checking that the engine gives again exactly the last decision in
   the log, which catches a snapshot or determinism bug instead of writing a divergent history --
   and resumes emitting at P+1. If the snapshot cannot be loaded (e.g. an older format), it folds
   from offset 0 instead: the input log keeps everything for this reason.
4. **One writer.** A second agent for the same logs waits in `acquire()` (Kafka: the standby
   consumer group; SQLite: the lock file). A stale one (paused, partitioned) is fenced by the
   transactional.id epoch (Kafka) or the writer epoch (SQLite) and cannot commit; it drops its
   state, waits to be active again and recovers from the logs as above.

Any error whose outcome is unknown (a commit that timed out, the broker going away) is handled
the same way: close the writer, wait, acquire again and recover from the logs. The engine state
in memory is never trusted past a failed write.

Snapshots are taken every `snapshot_every_events` processed events or `snapshot_every_seconds`
(whichever first, and only when something changed), so a restart folds at most that many events.

Logs (structlog, JSON): `input event` and `decision` per input event and per decision at debug,
with offsets (the decision log already holds every decision: repeating each one at info would
cost the agent about as much CPU as the rest of its shell); `recovered`, `snapshot`, `standby`, `active`,
`engine process` (its pid) and failures at info/warning.

## The engine in a process of its own (`engine_process`, the default with two or more cores)

The engine can run in a child process (`streams/agent/engine_host.py`, `streams/agent/engine_child.py`) fed
whole batches of raw input values, answering with encoded decision payloads (and snapshot
chunks), so that while it folds batch N this process commits batch N-1 and reads batch N+1: the
engine's CPU and the shell's overlap instead of adding up. A batch is at most `step_bytes` of one
read's input (one record at least), so that the decisions of a read's first large records are
committed while the engine folds the rest. Nothing above changes: the child is
part of the engine state that is never trusted past a failure. Recovery restores the snapshot
into the child, folds S+1..P there without emitting and checks the last decision; the child's
state runs ahead of what is committed, which is harmless because progress is read from the
output. If the child dies, that is one more error of unknown outcome (close the writer,
acquire, recover with a new child); if the agent dies, the child dies with it (the kernel's
parent-death signal, and end-of-file on its input). If the engine raises, the child says so and
the agent stops with `EngineFailure`, as in-process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec
import structlog

from domain.decisions import Cause
from streams.agent.admission_attempts import Attempts
from streams.agent.engine_host import (
    Batch,
    ChildEngine,
    EngineFailure,
    EngineHost,
    EngineProcessDied,
    LocalEngine,
    Shell,
)
from streams.log import EventLog, Fenced, LogError, LogUnavailable, Record, Topics
from streams.log.envelope import agent_source, ce_type, event_message, now_rfc3339
from streams.log.snapshots import SnapshotUnusable, chunk_messages, read_latest
from streams.settings import (
    DEFAULT_MAX_BATCH,
    DEFAULT_SNAPSHOT_EVERY,
    DEFAULT_SNAPSHOT_INTERVAL_S,
    DEFAULT_STEP_BYTES,
    DEFAULT_TICK_INTERVAL_S,
    default_engine_process,
)

T = TypeVar("T")


class Nondeterminism(LogError):
    """Folding the input log again did not reproduce the decision log: refuse to go on."""


__all__ = ["Agent", "AgentConfig", "AgentStatus", "EngineFailure", "Nondeterminism", "cause_of"]


class _CauseOnly(msgspec.Struct):
    cause: Cause


_cause_decoder = msgspec.json.Decoder(_CauseOnly)


def cause_of(record: Record) -> Cause:
    try:
        return _cause_decoder.decode(record.value or b"").cause
    except msgspec.DecodeError as exc:
        raise LogError(f"decision log record at offset {record.offset} has no cause: {exc}") from None


@dataclass
class AgentConfig:
    topics: Topics
    name: str | None = None  # writer name: Kafka transactional.id and standby group
    snapshot_every_events: int = DEFAULT_SNAPSHOT_EVERY
    snapshot_every_seconds: float = DEFAULT_SNAPSHOT_INTERVAL_S
    max_batch: int = DEFAULT_MAX_BATCH
    # One read's live records go to the engine in steps of about this many bytes (each at least
    # one record), so that the decisions of a large record are committed while the engine folds
    # the next, instead of every record of the read waiting for the last one.
    step_bytes: int = DEFAULT_STEP_BYTES
    poll_timeout: float = 0.2
    # Append a Tick to the input log after this many seconds without a record (0: never).
    tick_interval: float = DEFAULT_TICK_INTERVAL_S
    standby: bool = True
    retry_backoff: float = 0.5
    max_retry_backoff: float = 10.0
    operation_timeout: float = 60.0  # topic setup and recovery reads; past it: retry
    # The engine in a child process, pipelined with the shell (streams/agent/engine_host.py).
    engine_process: bool = field(default_factory=default_engine_process)

    @property
    def writer_name(self) -> str:
        return self.name or f"quotaflow-agent.{self.topics.input}"


@dataclass
class AgentStatus:
    role: str = "starting"  # starting, standby, recovering, active, retrying, stopped
    position: int = 0  # next input offset to process
    processed: int = -1  # last input offset whose decisions are committed
    events: int = 0  # processed live since start
    decisions: int = 0  # written since start
    transactions: int = 0
    last_snapshot_offset: int | None = None
    snapshots: int = 0
    recoveries: int = 0
    last_recovery: dict[str, Any] = field(default_factory=dict)
    last_error: str | None = None
    engine_pid: int | None = None  # the engine process, when the engine runs in one


@dataclass
class _Step:
    """One batch handed to the engine; collected in the order handed over."""

    result: Awaitable[Any] | None  # fold: list[bytes] | None (to verify); apply: Batch
    live: bool = False  # an apply: its Batch is committed
    events: int = 0  # live events in it
    last: int = -1  # offset of the last live event (-1: none)
    snapshot_at: int | None = None
    recovered: bool = False  # reading went past the recovery point with this batch
    release: bool = False  # the last step of one read: frees its read slot


class _Group:
    """Consecutive live batches committed in one transaction."""

    def __init__(self, batch: Batch, step: _Step) -> None:
        self.batch = batch
        self.step = _Step(None, live=True, events=step.events, last=step.last, snapshot_at=step.snapshot_at)

    @property
    def closed(self) -> bool:
        # A snapshot closes its transaction: a later batch's snapshot would share its chunk keys.
        return self.step.snapshot_at is not None

    def takes(self, step: _Step | BaseException | None, max_events: int) -> bool:
        return (
            isinstance(step, _Step)
            and step.live
            and not step.recovered
            and isinstance(step.result, asyncio.Future)
            and step.result.done()  # folded already: joining costs no wait
            and self.step.events + step.events <= max_events
        )

    def add(self, batch: Batch, step: _Step) -> None:
        self.batch.out.extend(batch.out)
        self.batch.decided.extend(batch.decided)
        self.batch.decisions += batch.decisions
        self.batch.attempts.extend(batch.attempts)
        self.batch.snapshot = batch.snapshot
        self.step.events += step.events
        if step.last >= 0:
            self.step.last = step.last
        self.step.snapshot_at = step.snapshot_at


def _steps(records: list[Record], step_bytes: int) -> list[list[Record]]:
    """Consecutive runs of records of about `step_bytes` each (one record at least); [[]] for
    none, which a snapshot alone still needs."""
    parts: list[list[Record]] = []
    part: list[Record] = []
    size = 0
    for r in records:
        n = len(r.value or b"")
        if part and size + n > step_bytes:
            parts.append(part)
            part, size = [], 0
        part.append(r)
        size += n
    parts.append(part)
    return parts


def _enabled(log: Any, level: int) -> bool:
    check = getattr(log, "is_enabled_for", None)
    return bool(check(level)) if check is not None else True


class Agent:
    def __init__(self, log: EventLog, config: AgentConfig) -> None:
        self.log = log
        self.config = config
        self.topics = config.topics
        self.status = AgentStatus()
        self.attempts = Attempts()  # Kueue's admission attempt metrics (admission_attempts.py)
        self._stop = asyncio.Event()
        self._progress = asyncio.Condition()
        self._source = agent_source(self.topics.input)
        self._source_header = self._source.encode()
        self._log: Any = structlog.get_logger("quotaflow.agent")
        self._recoveries_done = 0

    # -- control ---------------------------------------------------------------------------------
    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    async def wait_processed(self, offset: int, timeout: float | None = None) -> None:
        """Wait until input `offset` is processed and its decisions committed."""

        async def wait() -> None:
            async with self._progress:
                await self._progress.wait_for(lambda: self.status.processed >= offset)

        await asyncio.wait_for(wait(), timeout)

    async def _notify(self) -> None:
        async with self._progress:
            self._progress.notify_all()

    async def _unless_stopped(self, aw: Awaitable[T]) -> tuple[bool, T | None]:
        """Await `aw` unless stop() comes first (then cancel it): (done, result)."""
        task = asyncio.ensure_future(aw)
        stopper = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        if task.done():
            return True, task.result()
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        return False, None

    # -- main loop -------------------------------------------------------------------------------
    async def run(self) -> None:
        """Run until stop(). Raises only for errors that retrying cannot fix."""
        cfg = self.config
        # Bound here, not in __init__, so that it follows the logging configuration in force.
        self._log = structlog.get_logger("quotaflow.agent").bind(input=self.topics.input)
        backoff = cfg.retry_backoff
        topics_ready = False
        try:
            while not self.stopping:
                recovered = self._recoveries_done
                writer = self.log.writer(cfg.writer_name, standby_topic=self.topics.input if cfg.standby else None)
                try:
                    if not topics_ready:  # inside the retry loop: the broker may not be up yet
                        self._log.info("starting", log=self.log.url, writer=cfg.writer_name)
                        await self.log.start()
                        await asyncio.wait_for(
                            self.log.ensure_topics(
                                self.topics.specs(), single_partition=[self.topics.input, self.topics.decisions]
                            ),
                            cfg.operation_timeout,
                        )
                        topics_ready = True
                    self.status.role = "standby"
                    self._log.info("standby", writer=cfg.writer_name)
                    done, _ = await self._unless_stopped(writer.acquire())
                    if not done:
                        break
                    self._log.info("active", writer=cfg.writer_name)
                    await self._serve(writer)
                    backoff = cfg.retry_backoff
                except (Nondeterminism, EngineFailure):
                    raise
                except Fenced as exc:
                    self._retrying("fenced: another agent is active", exc)
                except LogUnavailable as exc:
                    self._retrying("log unavailable", exc)
                except LogError:
                    raise
                except EngineProcessDied as exc:
                    self._retrying("engine process died", exc)
                except Exception as exc:  # a broker restart, a timeout, a lost connection, ...
                    self._retrying("error", exc)
                finally:
                    with contextlib.suppress(Exception):
                        await writer.close()
                if not self.stopping:
                    if self._recoveries_done > recovered:
                        backoff = cfg.retry_backoff  # it had recovered: a new failure, not a repeated one
                    await self._unless_stopped(asyncio.sleep(backoff))
                    backoff = min(backoff * 2, cfg.max_retry_backoff)
        finally:
            self.status.role = "stopped"
            self._log.info("stopped", processed=self.status.processed)

    def _retrying(self, what: str, exc: BaseException) -> None:
        self.status.role = "retrying"
        self.status.last_error = f"{what}: {exc!r}"
        self._log.warning(what, error=repr(exc))

    async def _recover(self, engine: EngineHost) -> tuple[int, int, Record | None]:
        """Restore `engine`; (first offset to fold, last processed offset P, last decision record)."""
        topics = self.topics
        began = time.monotonic()
        last = await self.log.read_last(topics.decisions, 1)
        last_decision = last[0] if last else None
        decided_upto = cause_of(last_decision).offset if last_decision else -1
        try:
            stored = await read_latest(self.log, topics.snapshots)
            await engine.restore(stored)
        except SnapshotUnusable as exc:
            # Without it, events after the last decision that decided nothing are folded again
            # from offset 0 and decide nothing again: slower, still exact.
            self._log.warning("snapshot unusable; folding the input log from 0", error=str(exc))
            stored = None
            await engine.restore(None)
        start, restored_from = (0, None) if stored is None else (stored.offset + 1, stored.offset)
        processed = max(decided_upto, -1 if restored_from is None else restored_from)
        input_end = await self.log.end_offset(topics.input)
        if processed >= input_end:
            raise LogError(
                f"the decision/snapshot logs say input offset {processed} was processed, but the input "
                f"log {topics.input!r} ends at {input_end}: they do not belong together"
            )
        self.status.recoveries += 1
        self.status.last_recovery = {
            "processed": processed,
            "snapshot_offset": restored_from,
            "replay_from": start,
            "replay_events": max(0, processed - start + 1),
            "read_s": round(time.monotonic() - began, 3),
        }
        self.status.last_snapshot_offset = restored_from
        return start, processed, last_decision

    async def _engine(self, shell: Shell) -> EngineHost:
        if not self.config.engine_process:
            self.status.engine_pid = None
            return LocalEngine(shell)
        engine = await ChildEngine.start(shell)
        self.status.engine_pid = engine.pid
        self._log.info("engine process", pid=engine.pid)
        return engine

    async def _serve(self, writer: Any) -> None:
        cfg, topics, log = self.config, self.topics, self._log
        self.status.role = "recovering"
        began = time.monotonic()
        # Per-decision log lines are built at commit time only when someone will read them.
        shell = Shell(topics.decisions, self._source_header, keep_decided=_enabled(log, logging.DEBUG))
        engine = await self._engine(shell)
        try:
            start, processed, last_decision = await asyncio.wait_for(self._recover(engine), cfg.operation_timeout)
            self.status.processed = processed
            self.status.position = processed + 1
            await self._notify()
            if start > processed:
                self._recovered(log, began)
            async with await self.log.reader(topics.input, start) as reader:
                await self._pipeline(writer, reader, engine, processed, last_decision, began)
        finally:
            await engine.close()

    async def _pipeline(
        self, writer: Any, reader: Any, engine: EngineHost, processed: int, last_decision: Record | None, began: float
    ) -> None:
        """Read batches and hand them to the engine (`_feed`, a task) while the results come
        back in order and are committed here, one transaction at a time. With the engine in its
        own process, it folds batch N while this process commits N-1 and reads N+1."""
        steps: asyncio.Queue[_Step | BaseException | None] = asyncio.Queue()
        slots = asyncio.Semaphore(engine.depth)  # reads handed over and not yet collected
        feeder = asyncio.create_task(self._feed(writer, reader, engine, processed, last_decision, steps, slots))
        inflight: asyncio.Task[None] | None = None  # the previous batch's commit
        carry: _Step | BaseException | None = None  # taken from `steps` but not merged
        have_carry = False
        log = self._log

        async def collect(step: _Step) -> Any:
            result = await step.result if step.result is not None else None
            if step.release:
                slots.release()
            return result

        try:
            while True:
                if have_carry:
                    step, carry, have_carry = carry, None, False
                else:
                    step = await steps.get()
                if step is None:
                    break
                if isinstance(step, BaseException):
                    raise step
                result = await collect(step)
                if not step.live:
                    if result is not None:
                        self._verify(result, last_decision)
                    if step.recovered:
                        self._recovered(log, began)
                    continue
                if step.recovered:
                    self._recovered(log, began)
                group = _Group(result, step)
                waited = inflight is None
                while True:
                    # Batches already folded join this transaction (up to max_batch events):
                    # while a commit is in flight the engine process may have answered several,
                    # and committing them one by one would queue each behind the other.
                    while not group.closed:
                        if not have_carry:
                            if steps.empty():
                                break
                            carry, have_carry = steps.get_nowait(), True
                        if not group.takes(carry, self.config.max_batch):
                            break
                        assert isinstance(carry, _Step)
                        nxt, carry, have_carry = carry, None, False
                        group.add(await collect(nxt), nxt)
                    if waited:
                        break
                    # Transactions stay strictly ordered: this batch's commit starts when the
                    # previous one is done, and meanwhile the next batch is read and folded.
                    assert inflight is not None
                    await inflight
                    waited = True
                inflight = asyncio.create_task(self._commit(writer, group.batch, group.step, log))
            if inflight is not None:
                await inflight
        finally:
            feeder.cancel()
            with contextlib.suppress(BaseException):
                await feeder
            left = [carry] if have_carry else []
            while not steps.empty():
                left.append(steps.get_nowait())
            for item in left:  # handed over, never collected: the engine's state goes too
                if isinstance(item, _Step):
                    if asyncio.iscoroutine(item.result):
                        item.result.close()
                    elif isinstance(item.result, asyncio.Future):
                        item.result.cancel()
            if inflight is not None and not inflight.done():
                inflight.cancel()
                with contextlib.suppress(BaseException):
                    await inflight

    async def _feed(
        self,
        writer: Any,
        reader: Any,
        engine: EngineHost,
        processed: int,
        last_decision: Record | None,
        steps: asyncio.Queue[_Step | BaseException | None],
        slots: asyncio.Semaphore,
    ) -> None:
        cfg, log = self.config, self._log
        debug = _enabled(log, logging.DEBUG)
        verify_at = cause_of(last_decision).offset if last_decision is not None else -1
        replaying = reader.position <= processed
        last_snap = self.status.last_snapshot_offset
        since_snapshot = processed - (last_snap if last_snap is not None else -1)
        last_snapshot_time = time.monotonic()
        folded = processed  # the last input offset handed to the engine
        last_record = time.monotonic()  # when a record last moved the log's time
        try:
            while not self.stopping:
                if not writer.active:
                    raise Fenced("lost the active role")
                engine.check()
                await slots.acquire()
                done, got = await self._unless_stopped(reader.read(limit=cfg.max_batch, timeout=cfg.poll_timeout))
                if not done:
                    break
                records: list[Record] = got or []
                if records:
                    last_record = time.monotonic()
                elif not replaying and cfg.tick_interval > 0 and time.monotonic() - last_record >= cfg.tick_interval:
                    await self._tick()
                    last_record = time.monotonic()
                handed: list[_Step] = []
                live = records
                if replaying:
                    split = 0
                    while split < len(records) and records[split].offset <= processed:
                        split += 1
                    if split:
                        handed.append(_Step(engine.fold(records[:split], verify_at)))
                    live = records[split:]
                if records:
                    folded = records[-1].offset
                recovered = replaying and reader.position > processed
                if recovered:
                    replaying = False
                since_snapshot += len(live)
                snapshot = (
                    since_snapshot > 0
                    and not replaying
                    and (
                        since_snapshot >= cfg.snapshot_every_events
                        or time.monotonic() - last_snapshot_time >= cfg.snapshot_every_seconds
                    )
                )
                if debug:
                    for record in live:
                        log.debug("input event", offset=record.offset, type=ce_type(record), key=record.key)
                if live or snapshot:
                    parts = _steps(live, cfg.step_bytes)
                    now = now_rfc3339().encode()
                    for k, part in enumerate(parts):
                        last_part = k == len(parts) - 1
                        handed.append(
                            _Step(
                                engine.apply(part, snapshot=snapshot and last_part, time=now),
                                live=True,
                                events=len(part),
                                last=part[-1].offset if part else -1,
                                snapshot_at=folded if snapshot and last_part else None,
                            )
                        )
                if snapshot:
                    since_snapshot = 0
                    last_snapshot_time = time.monotonic()
                if not handed:
                    if not recovered:
                        slots.release()
                        continue
                    handed.append(_Step(None))
                handed[-1].recovered = recovered
                handed[-1].release = True
                for step in handed:
                    steps.put_nowait(step)
            steps.put_nowait(None)
        except BaseException as exc:
            steps.put_nowait(exc)
            raise

    async def _tick(self) -> None:
        """Append a Tick: the log's time moves on an idle log, and the timers it reaches fire
        (domain/clock.py). It carries no `time`: its time is the log's (the broker's append
        time on Kafka), not this machine's clock."""
        tick = event_message({"type": "Tick"}, source=self._source)
        await self.log.append(self.topics.input, [tick])
        self._log.debug("tick appended")

    async def _commit(self, writer: Any, batch: Batch, step: _Step, log: Any) -> None:
        out = batch.out
        chunks = 0
        if batch.snapshot is not None and step.snapshot_at is not None:
            snap = chunk_messages(batch.snapshot, step.snapshot_at, source=self._source)
            chunks = len(snap)
            out.extend((self.topics.snapshots, m) for m in snap)
        offsets = await writer.commit(out) if out else []
        status = self.status
        if out:
            status.transactions += 1
        for (kind, workload, cause_offset, cause_index), offset in zip(batch.decided, offsets, strict=False):
            log.debug(
                "decision",
                type=kind,
                workload=workload,
                cause_offset=cause_offset,
                cause_index=cause_index,
                offset=offset,
            )
        status.decisions += batch.decisions
        record = self.attempts.record
        for success, seconds in batch.attempts:
            record(success, seconds)
        if step.snapshot_at is not None:
            status.last_snapshot_offset = step.snapshot_at
            status.snapshots += 1
            log.info("snapshot", offset=step.snapshot_at, chunks=chunks)
        if step.last >= 0:
            status.events += step.events
            status.processed = step.last
            status.position = step.last + 1
            await self._notify()

    def _recovered(self, log: Any, began: float) -> None:
        self._recoveries_done += 1
        self.status.role = "active"
        self.status.last_recovery["total_s"] = round(time.monotonic() - began, 3)
        log.info("recovered", **self.status.last_recovery)

    def _verify(self, decisions: list[bytes], last: Record | None) -> None:
        """`decisions`: the encoded decisions the engine gave again for the last decision's cause."""
        if last is None:
            return
        stored = last.value or b""
        cause = cause_of(last)
        again = decisions[-1] if decisions else b"(no decision)"
        if len(decisions) != cause.index + 1 or again != stored:
            raise Nondeterminism(
                f"folding input offset {cause.offset} again gave {len(decisions)} decision(s) ending in "
                f"{again.decode(errors='replace')}, but the decision log ends with "
                f"{stored.decode(errors='replace')} (index {cause.index}); the snapshot or the engine "
                "is not deterministic -- refusing to write a divergent history"
            )
