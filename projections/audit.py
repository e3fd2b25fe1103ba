"""Proving the decisions: replay the input log through a fresh engine and compare, byte for byte.

The agent records `domain.decisions.encode(decision)` as each decision record's value
(streams/agent/loop.py; the CloudEvents headers are informational), so a fresh `Engine()` fed the same
input records must give exactly those bytes, in the same order. The audit streams both logs
(memory stays flat however long they are) and stops at the first divergence: a decision that
differs, one the log has and the replay does not, or one the replay gives and the log lacks.

Only the decided part of the input log is audited: events after the last one the decision log
(or the newest snapshot) accounts for may simply not be processed yet.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from domain.decisions import encode
from domain.engine import Engine
from projections.follower import decode_decision, snapshot_offset
from streams.log import EventLog, Topics


@dataclass
class Divergence:
    input_offset: int  # the input event whose decisions differ
    index: int  # which of its decisions
    decision_offset: int | None  # where in the decision log (None: the log has no such record)
    recorded: bytes | None
    replayed: bytes | None

    def describe(self) -> str:
        where = f"decision log offset {self.decision_offset}" if self.decision_offset is not None else "end of the decision log"
        return (
            f"divergence at input offset {self.input_offset}, decision #{self.index} ({where}):\n"
            f"  recorded: {self.recorded.decode(errors='replace') if self.recorded is not None else '(none)'}\n"
            f"  replayed: {self.replayed.decode(errors='replace') if self.replayed is not None else '(none)'}"
        )


@dataclass
class AuditResult:
    events: int  # input events replayed
    verified: int  # decisions compared equal
    audited_upto: int  # last input offset audited
    input_end: int
    divergence: Divergence | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.divergence is None

    def describe(self) -> str:
        if self.divergence is not None:
            return self.divergence.describe()
        tail = ""
        if self.audited_upto < self.input_end - 1:
            tail = f"; input offsets {self.audited_upto + 1}..{self.input_end - 1} are not decided yet"
        return (
            f"{self.verified} decisions verified (input offsets 0..{self.audited_upto}, "
            f"{self.events} events replayed in {self.seconds:.1f} s){tail}"
        )


async def audit(
    log: EventLog, topics: Topics, *, batch: int = 5000, progress: Callable[[int, int], None] | None = None
) -> AuditResult:
    """`progress(events, of)`, when given, hears of each replayed event: how many so far, of how many."""
    began = time.monotonic()
    snapshots = []
    try:
        snapshots = await log.read_last(topics.snapshots, 1)
    except Exception:
        snapshots = []
    snap = snapshot_offset(snapshots[0]) if snapshots else None
    decisions_end = await log.end_offset(topics.decisions)
    input_end = await log.end_offset(topics.input)
    last = await log.read_last(topics.decisions, 1) if decisions_end else []
    last_cause = decode_decision(last[0].offset, last[0].value).cause_offset if last else -1
    upto = min(max(last_cause, -1 if snap is None else snap), input_end - 1)

    engine = Engine()
    verified = 0
    events = 0
    divergence: Divergence | None = None
    async with await log.reader(topics.decisions, 0) as dreader, await log.reader(topics.input, 0) as ireader:
        recorded: list[tuple[int, bytes]] = []  # (decision log offset, value), not yet compared
        rpos = 0

        async def next_recorded() -> tuple[int, bytes] | None:
            nonlocal recorded, rpos
            while rpos >= len(recorded):
                if dreader.position >= decisions_end:
                    return None
                recorded = [(r.offset, r.value or b"") for r in await dreader.read(limit=batch, timeout=1.0) if r.offset < decisions_end]
                rpos = 0
            item = recorded[rpos]
            rpos += 1
            return item

        while divergence is None and ireader.position <= upto:
            records = await ireader.read(limit=batch, timeout=1.0)
            for record in records:
                if record.offset > upto:
                    break
                events += 1
                if progress is not None:
                    progress(events, upto + 1)
                replayed = engine.apply(record.value if record.value is not None else b"", record.offset, record.log_time)
                for index, decision in enumerate(replayed):
                    mine = encode(decision)
                    theirs = await next_recorded()
                    if theirs is None or theirs[1] != mine:
                        divergence = Divergence(record.offset, index, theirs[0] if theirs else None, theirs[1] if theirs else None, mine)
                        break
                    verified += 1
                if divergence is not None:
                    break
                # nothing recorded may claim this event beyond what the replay gave
                if rpos < len(recorded) or dreader.position < decisions_end:
                    peek = await next_recorded()
                    if peek is not None:
                        rpos -= 1
                        cause = decode_decision(peek[0], peek[1])
                        if cause.cause_offset <= record.offset:
                            divergence = Divergence(record.offset, len(replayed), peek[0], peek[1], None)
                            break
        if divergence is None:
            extra = await next_recorded()
            if extra is not None:
                cause = decode_decision(extra[0], extra[1])
                divergence = Divergence(cause.cause_offset, cause.cause_index, extra[0], extra[1], None)
    return AuditResult(events, verified, upto, input_end, divergence, time.monotonic() - began)
