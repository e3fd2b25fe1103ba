"""Feeding a projection from the logs: input event N, then the decisions it caused.

The two logs are read with `streams.log.interface` readers (Kafka or SQLite alike) and merged by the
decisions' `cause.offset`. The one question a merge must answer is when input event N is
*decided*, i.e. when every decision it caused has been read, so that N and its decisions can be
folded together. Every event has a decision of its own (a configuration change its `Applied`)
but a producer's retry, which has none, so the fold follows the agent's own progress rule
(streams/agent/loop.py):

- a decision caused by input offset C means every input event before C is decided (the agent
  processes the input log in order and commits each event's decisions atomically);
- when the decision reader has read everything committed (its position reached the decision
  log's end), the last cause offset read is decided too;
- the newest snapshot's input offset S is decided as well (a snapshot is committed in the same
  transaction as the decisions of the batch it closes), once the decision reader has read past
  the point where S was observed.

The fold therefore stands at the *decided watermark* W = max(those); input events after W wait
(they are `undecided` in the views' `asOf`). `as_of` caps W for time travel.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from projections.fold import Projection
from projections.records import (
    DecisionRecord as DecisionRecord,  # (re-exported, as the three below)
)
from projections.records import ProjectionError as ProjectionError
from projections.records import decode_decision as decode_decision
from projections.records import decode_records
from streams.log import EventLog, Reader, Record, Topics

_NO_DECISIONS: list[DecisionRecord] = []
_NEVER = 1 << 63  # past any offset


def snapshot_offset(record: Record) -> int | None:
    raw = record.header("qf_snapshot_offset")
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return None


@contextlib.contextmanager
def bulk_gc(threshold: int = 50_000) -> Iterator[None]:
    """Collect garbage less often during a bulk fold. It allocates mostly objects that live on
    (workloads, specs, history), which the default thresholds (700 allocations) rescan over and
    over; the rebuild runs about a fifth faster this way. The thresholds are restored after."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], threshold), max(old[1], 50), max(old[2], 100))
    try:
        yield
    finally:
        gc.set_threshold(*old)


class RecentRecords:
    """The last `size` records of a topic that went through the fold, by offset (for history)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.values: OrderedDict[int, tuple[bytes | None, int]] = OrderedDict()

    def add(self, offset: int, value: bytes | None, timestamp_ms: int = 0) -> None:
        if self.size <= 0:
            return
        self.values[offset] = (value, timestamp_ms)
        if len(self.values) > self.size:
            self.values.popitem(last=False)

    def get(self, offset: int) -> tuple[bytes | None, int] | None:
        return self.values.get(offset)


@dataclass
class FollowStatus:
    input_end_seen: int = 0  # one past the highest input offset read
    decisions_read: int = 0
    watermark: int = -1  # the decided watermark (see the module doc)
    snapshot_offset: int | None = None
    caught_up: bool = False
    last_error: str | None = None


class Follower:
    """Reads the two logs and folds them into `projection` (from where it stands)."""

    def __init__(
        self,
        log: EventLog,
        topics: Topics,
        projection: Projection,
        *,
        as_of: int | None = None,
        batch: int = 5000,
        recent: int = 0,
        buffer_limit: int = 50_000,
    ) -> None:
        self.log = log
        self.topics = topics
        self.projection = projection
        self.as_of = as_of
        self.batch = batch
        self.buffer_limit = buffer_limit
        self.status = FollowStatus()
        self.recent_inputs = RecentRecords(recent)
        self.recent_decisions = RecentRecords(recent)
        self._inputs: deque[Record] = deque()
        # decisions read and not yet folded, grouped by cause offset, in order
        self._groups: deque[tuple[int, list[DecisionRecord]]] = deque()
        self._buffered = 0
        self._complete = projection.position  # highest input offset whose decisions are all read
        self._snapshot_wm = -1
        self._snapshot_seen: int | None = None  # observed, not yet confirmed by the decision reader
        self._input_reader: Reader | None = None
        self._decision_reader: Reader | None = None
        self._listeners: list[Callable[[], None]] = []
        self.progress = asyncio.Event()

    # -- lifecycle -------------------------------------------------------------------------------
    async def open(self) -> None:
        p = self.projection
        self._input_reader = await self.log.reader(self.topics.input, p.position + 1)
        self._decision_reader = await self.log.reader(self.topics.decisions, p.next_decision_offset)

    async def close(self) -> None:
        for reader in (self._input_reader, self._decision_reader):
            if reader is not None:
                await reader.close()
        self._input_reader = self._decision_reader = None

    async def __aenter__(self) -> Follower:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def on_progress(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    # -- the watermark ---------------------------------------------------------------------------
    @property
    def watermark(self) -> int:
        w = max(self._complete, self._snapshot_wm)
        if self.as_of is not None:
            w = min(w, self.as_of)
        return w

    async def _observe_snapshot(self) -> None:
        try:
            last = await self.log.read_last(self.topics.snapshots, 1)
        except Exception:  # no snapshot topic yet: nothing to learn from it
            return
        if last:
            offset = snapshot_offset(last[0])
            if offset is not None and offset > self._snapshot_wm:
                self._snapshot_seen = offset
                self.status.snapshot_offset = offset

    # -- reading ---------------------------------------------------------------------------------
    async def _read_decisions(self, timeout: float) -> int:
        reader = self._decision_reader
        assert reader is not None
        records = await reader.read(limit=self.batch, timeout=timeout)
        groups = self._groups
        last = groups[-1] if groups else None
        recent = self.recent_decisions if self.recent_decisions.size else None
        for rec in decode_records(records):
            cause = rec.cause_offset
            if last is not None and last[0] == cause:
                last[1].append(rec)
            else:
                if cause - 1 > self._complete:
                    # every input event before this decision's cause is decided
                    self._complete = cause - 1
                last = (cause, [rec])
                groups.append(last)
        if recent is not None:
            for r in records:
                recent.add(r.offset, r.value, r.timestamp_ms)
        self._buffered += len(records)
        self.status.decisions_read += len(records)
        return len(records)

    def _decisions_caught_up(self) -> None:
        """Everything committed in the decision log has been read."""
        if self._groups:
            self._complete = max(self._complete, self._groups[-1][0])
        if self._snapshot_seen is not None:
            self._snapshot_wm = max(self._snapshot_wm, self._snapshot_seen)
            self._snapshot_seen = None

    async def _read_inputs(self, timeout: float) -> int:
        reader = self._input_reader
        assert reader is not None
        records = await reader.read(limit=self.batch, timeout=timeout)
        self._inputs.extend(records)
        if records:
            self.status.input_end_seen = records[-1].offset + 1
        return len(records)

    # -- folding ---------------------------------------------------------------------------------
    def _fold_ready(self) -> int:
        w = self.watermark
        inputs = self._inputs
        groups = self._groups
        apply = self.projection.apply
        recent = self.recent_inputs if self.recent_inputs.size else None
        before = len(inputs)
        folded_decisions = 0
        # the next decided group's cause offset (an input event without one folds no decisions)
        next_cause = groups[0][0] if groups else _NEVER
        while inputs and inputs[0].offset <= w:
            record = inputs.popleft()
            offset = record.offset
            group = _NO_DECISIONS  # (apply never changes the list it is given)
            if next_cause <= offset:
                cause, group = groups.popleft()
                if cause < offset:
                    raise ProjectionError(
                        f"decision log offset {group[0].offset} was caused by input offset {cause}, "
                        f"which is not in the input log {self.topics.input!r} (next input offset {offset})"
                    )
                folded_decisions += len(group)
                next_cause = groups[0][0] if groups else _NEVER
            apply(offset, record.value, group, record.timestamp_ms)
            if recent is not None:
                recent.add(offset, record.value, record.timestamp_ms)
        n = before - len(inputs)
        if n:
            self._buffered -= folded_decisions
            self.status.watermark = self.projection.position
            self.progress.set()
            for listener in self._listeners:
                listener()
        return n

    async def catch_up(self) -> int:
        """Fold everything decided in the logs now (one pass; for one-shot rebuilds). Returns
        the number of input events folded."""
        if self._input_reader is None:
            await self.open()
        await self._observe_snapshot()
        decisions_end = await self.log.end_offset(self.topics.decisions)
        input_end = await self.log.end_offset(self.topics.input)
        if self.as_of is not None:
            input_end = min(input_end, self.as_of + 1)
        with bulk_gc():
            folded = await self._catch_up(decisions_end, input_end)
        self.status.caught_up = True
        return folded

    async def _catch_up(self, decisions_end: int, input_end: int) -> int:
        folded = 0
        dreader, ireader = self._decision_reader, self._input_reader
        assert dreader is not None and ireader is not None
        while True:
            decisions_done = dreader.position >= decisions_end
            if decisions_done:
                self._decisions_caught_up()
            elif self._buffered < self.buffer_limit:
                await self._read_decisions(timeout=1.0)
            w = self.watermark
            if (
                ireader.position < input_end
                and (not self._inputs or self._inputs[-1].offset < w)
                and len(self._inputs) < self.buffer_limit
            ):
                await self._read_inputs(timeout=1.0)
            folded += self._fold_ready()
            if decisions_done and self.projection.position >= min(self.watermark, input_end - 1):
                return folded

    async def run(self, stop: asyncio.Event | None = None, poll: float = 0.25, snapshot_every: float = 2.0) -> None:
        """Tail both logs and fold as they grow, until `stop` is set."""
        if self._input_reader is None:
            await self.open()
        stop = stop or asyncio.Event()
        dreader, ireader = self._decision_reader, self._input_reader
        assert dreader is not None and ireader is not None
        last_snapshot_check = 0.0
        unconfirmed = False  # decisions read since the decision log was last known read to its end
        while not stop.is_set():
            got = 0
            if self._buffered < self.buffer_limit:
                got = await self._read_decisions(timeout=0 if self._inputs_behind() else poll / 2)
                unconfirmed = unconfirmed or got > 0
            if got == 0 and (unconfirmed or self._snapshot_seen is not None):
                # Quiet: have we read all that is committed? (one end-offset query per quiet spell)
                if dreader.position >= await self.log.end_offset(self.topics.decisions):
                    self._decisions_caught_up()
                    unconfirmed = False
            w = self.watermark
            if (not self._inputs or self._inputs[-1].offset < w) and len(self._inputs) < self.buffer_limit:
                await self._read_inputs(timeout=0 if got else poll / 2)
            folded = self._fold_ready()
            undecided = self._inputs and self._inputs[-1].offset > self.projection.position
            if (
                not folded
                and undecided
                and self._snapshot_seen is None
                and time.monotonic() - last_snapshot_check >= snapshot_every
            ):
                last_snapshot_check = time.monotonic()
                await self._observe_snapshot()
            self.status.caught_up = not undecided and got == 0

    def _inputs_behind(self) -> bool:
        return bool(self._inputs) and self._inputs[0].offset <= self.watermark

    @property
    def undecided(self) -> int:
        """Input events read but not yet decided (0 when folding only up to `as_of`)."""
        if self.as_of is not None:
            return 0
        return max(0, self.status.input_end_seen - 1 - self.projection.position)

    # -- random access (history of a workload) ---------------------------------------------------
    async def fetch(self, topic: str, offsets: Iterable[int]) -> dict[int, tuple[bytes | None, int]]:
        """Records by offset: from the recent window when there, else read from the log."""
        recent = self.recent_inputs if topic == self.topics.input else self.recent_decisions
        out: dict[int, tuple[bytes | None, int]] = {}
        missing = []
        for offset in sorted(set(offsets)):
            hit = recent.get(offset)
            if hit is not None:
                out[offset] = hit
            else:
                missing.append(offset)
        out.update(await fetch_records(self.log, topic, missing))
        return out


async def fetch_records(log: EventLog, topic: str, offsets: list[int], gap: int = 2000) -> dict[int, tuple[bytes | None, int]]:
    """Read the records at `offsets` (sorted), one reader per cluster of nearby offsets."""
    out: dict[int, tuple[bytes | None, int]] = {}
    if not offsets:
        return out
    clusters: list[list[int]] = [[offsets[0]]]
    for offset in offsets[1:]:
        if offset - clusters[-1][-1] <= gap:
            clusters[-1].append(offset)
        else:
            clusters.append([offset])
    for cluster in clusters:
        wanted = set(cluster)
        last = cluster[-1]
        async with await log.reader(topic, cluster[0]) as reader:
            while reader.position <= last:
                records = await reader.read(limit=min(gap + 1, last - reader.position + 1), timeout=1.0)
                if not records:
                    break
                for r in records:
                    if r.offset in wanted:
                        out[r.offset] = (r.value, r.timestamp_ms)
    return out


async def rebuild(
    log: EventLog,
    topics: Topics,
    *,
    as_of: int | None = None,
    projection: Projection | None = None,
    focus: str | None = None,
    history: bool = True,
) -> tuple[Projection, Follower]:
    """A projection folded from offset 0 (or `as_of`) over everything decided now."""
    proj = projection or Projection(history=history, focus=focus)
    follower = Follower(log, topics, proj, as_of=as_of)
    try:
        await follower.catch_up()
    finally:
        await follower.close()
    return proj, follower

