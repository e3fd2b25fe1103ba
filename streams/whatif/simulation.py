"""The what-if simulation: the engine fed event by event on a simulated clock.

**The recorded world** (`record`) is the input log replayed as it is. Each event happens at its
time (`source.py`); what a launcher did is read from it next to the decisions:

- a *run* is a workload's `Admitted` decision up to the `WorkloadFinished` that ended it (the
  workload held an admission when the finish came): its runtime is the time between them. A run
  cut short by preemption or eviction restarts from zero when the workload is admitted again; a
  workload never finished keeps running to the end of the log and beyond;
- a *release* is a `WorkloadReleased` of an evicted workload: its delay is the time from the
  eviction (the k-th of that workload) to it;
- a *clean-up* is a `WorkloadDeleted` of a workload whose run had finished: its delay is the time
  from the finish to it;
- a *pods-ready report* is the first `WorkloadPodsReady` (ready) of a run: its delay is the time
  from the run's `Admitted` decision to it (`waitForPodsReady` times it).

Every other event (submissions, configuration, updates, finishes of workloads that held no
admission, deletions of running or pending workloads, admission-check reports) is the outside
world's, and happens at its recorded time in every world.

**The changed world** (`simulate`) replays the outside world's events with the change applied
(`changes.py`), and drops the recorded finishes, releases and clean-ups: they are synthesized
from what the engine decides there. A workload admitted at t finishes at t + its runtime (unless
it is preempted or evicted first, which cancels the finish); an eviction the engine does not
release itself (`evictionRelease: Immediate`, a workload that only reserved quota) is released
after the delay of the matching recorded release (the k-th eviction of that workload), or after
the median recorded delay when the recorded world had no such eviction (and never when it had
one that was not released); a finished workload is
cleaned up after its recorded delay; the k-th admission of a workload has its pods reported ready
after the delay of the recorded k-th run's report (none when that run had none; a run the
recorded world did not have, after the delay of the workload's last recorded report, if any).

**Time.** Each event reaches the engine with its log time, as in a replay: a recorded record with
its own (so time-driven rules, `Tick`s included, see the times they saw), a synthesized one
with its simulated time (its place in the log of the changed world).

**Order and identity.** Events are ordered by (time, anchor, phase, sequence). A recorded event
at input offset o anchors at o. A synthesized event that falls at exactly the time of the
recorded event it stands for takes that event's place (its anchor, and inside a `Batch` its
position among the batch's events): so with no change every event is where it was recorded, the
engine is given the same input, and the decisions are the recorded ones byte for byte. Any other
synthesized event sorts before the recorded events of its instant (phase 0, anchor -1), or, when
it is due at the instant of the event that caused it, right after that event (its anchor, phase
1). Sequence numbers (the order in which the simulation scheduled them) break the remaining ties,
so a run is deterministic.

**Ids and offsets of synthesized events.** A synthesized event that stands for a recorded one is
that event, with its `id` (the recorded one is dropped, so the engine never sees the id twice);
its `time` is rewritten when it moved. A release with no recorded counterpart gets the id
`whatif/WorkloadReleased/<namespace>/<name>/<k>` (its k-th eviction), a pods-ready report
`whatif/WorkloadPodsReady/<namespace>/<name>/<k>` (its k-th admission). Offsets in the changed
world are positions in its own input log, from 0, as `quotaflow replay` of that log (written by
`--write-events`) would number them; `Sim.origins` maps each back to the recorded offset it
comes from (-1 for synthesized events that stand for none).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from domain.decisions import (
    Admitted,
    Decision,
    Deleted,
    Evicted,
    Finished,
    Preempted,
    QuotaReleased,
    QuotaReserved,
)
from domain.engine import Engine
from domain.timestamps import format_time
from streams.whatif.changes import (
    Change,
    ChangeError,
    Op,
    check_object,
    default_configuration,
    key_of_object,
)
from streams.whatif.changes import object_key as config_key
from streams.whatif.measure import Measure
from streams.whatif.source import Event, TimedRecord

Pos = tuple[int, int]  # (recorded offset, index inside its Batch; -1 for a plain event)

LIVE = ("pending", "reserved", "running", "evicted")
_NAMED = frozenset(("WorkloadSubmitted", "WorkloadUpdated", "WorkloadFinished", "WorkloadDeleted", "WorkloadReleased",
                    "AdmissionCheckStateChanged", "WorkloadPodsReady"))  # the events workload_of names a workload of


def workload_of(value: dict[str, Any]) -> str | None:
    t = value.get("type")
    if t in ("WorkloadSubmitted", "WorkloadUpdated"):
        wl = value.get("workload")
        meta = wl.get("metadata") if isinstance(wl, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            ns = meta.get("namespace")
            return f"{ns if isinstance(ns, str) else 'default'}/{meta['name']}"
        return None
    if t in ("WorkloadFinished", "WorkloadDeleted", "WorkloadReleased", "AdmissionCheckStateChanged", "WorkloadPodsReady"):
        name = value.get("name")
        ns = value.get("namespace", "default")
        if isinstance(name, str) and isinstance(ns, str):
            return f"{ns}/{name}"
    return None


@dataclass(slots=True)
class Synth:
    """A lifecycle event of the recorded world, to be re-synthesized in the changed one."""

    pos: Pos
    time: int  # when it happened in the recorded world
    delay: int  # after its run's start (finish), its eviction (release) or its finish (clean-up)
    event: Event  # as recorded (bytes for a plain record, the decoded dict inside a Batch)
    value: dict[str, Any]
    log_time: int | None  # its record's time in the log


@dataclass
class Lifecycle:
    """What the recorded world's launcher did, per incarnation (the position of the submission
    that created it)."""

    runs: dict[Pos, Synth] = field(default_factory=dict)  # the finish that ended its last run
    releases: dict[tuple[Pos, int], Synth] = field(default_factory=dict)  # (incarnation, k-th eviction)
    cleanups: dict[Pos, Synth] = field(default_factory=dict)
    evictions: set[tuple[Pos, int]] = field(default_factory=set)  # (incarnation, k-th eviction), all of them
    ready: dict[tuple[Pos, int], Synth] = field(default_factory=dict)  # (incarnation, k-th admission)
    last_ready: dict[Pos, Synth] = field(default_factory=dict)  # an incarnation's last one
    admissions: dict[Pos, int] = field(default_factory=dict)  # an incarnation's recorded admissions
    dropped: set[Pos] = field(default_factory=set)  # the positions of all of them

    @property
    def release_delay(self) -> int:
        """For an eviction the recorded world did not have: the median recorded release delay
        (0 when it released nothing). Never zero when the launcher took time: at zero delay a
        victim that retakes the room its preemptor freed would churn without the clock moving."""
        delays = sorted(s.delay for s in self.releases.values())
        return delays[len(delays) // 2] if delays else 0


class Tracker:
    """Each workload's state as the decisions tell it, and its incarnation."""

    __slots__ = ("state", "incarnation", "admitted_at", "admissions", "evictions", "evicted_at", "finished_at")

    def __init__(self) -> None:
        self.state: dict[str, str] = {}
        self.incarnation: dict[str, Pos] = {}
        self.admitted_at: dict[str, int] = {}
        self.admissions: dict[str, int] = {}  # of its incarnation
        self.evictions: dict[str, int] = {}
        self.evicted_at: dict[str, int] = {}
        self.finished_at: dict[str, int] = {}

    def submitted(self, w: str, pos: Pos) -> None:
        if self.state.get(w) not in LIVE:
            self.incarnation[w] = pos
            self.state[w] = "pending"
            self.evictions[w] = 0
            self.admissions[w] = 0

    def decided(self, d: Decision, now: int) -> str | None:
        """Update from one decision; returns what happened to the workload, if anything."""
        w = d.workload
        if w is None:
            return None
        kind = type(d)
        if kind is Admitted:
            self.state[w] = "running"
            self.admitted_at[w] = now
            self.admissions[w] = self.admissions.get(w, 0) + 1
            return "admitted"
        if kind is QuotaReserved:
            self.state[w] = "reserved"
            return None
        if kind is Preempted or kind is Evicted:
            if self.state.get(w) in ("running", "reserved"):
                self.state[w] = "evicted"
                self.evictions[w] = self.evictions.get(w, 0) + 1
                self.evicted_at[w] = now
                return "evicted"
            return None
        if kind is QuotaReleased:
            if self.state.get(w) == "evicted":
                self.state[w] = "pending"
            return "released"
        if kind is Finished or kind is Deleted:
            self.state[w] = "done"
            self.finished_at[w] = now
            return "finished" if kind is Finished else "deleted"
        return None  # Pending, Rejected, and decision types this version does not know


def items_of(rec: TimedRecord) -> list[tuple[int, dict[str, Any]]]:
    """(index in the Batch, inner event) of a record; a plain event is index -1."""
    v = rec.value
    if v is None:
        return []
    if v.get("type") == "Batch":
        inner = v.get("events")
        if isinstance(inner, list):
            return [(i, e) for i, e in enumerate(inner) if isinstance(e, dict)]
        return []
    return [(-1, v)]


@dataclass
class Prefix:
    """The recorded world up to a change point (`records[:index]`): its decisions by offset, and
    the engine's snapshot there. A changed world is the recorded one until its change point, so
    it takes these decisions instead of deciding them again, and its engine starts from the
    snapshot: the prefix is folded once for both worlds."""

    index: int
    decisions: dict[int, list[Decision]]
    snapshot: bytes


@dataclass
class Recorded:
    lifecycle: Lifecycle
    measure: Measure
    events: int
    tracker: Tracker | None = None  # each workload's state at the end of the log
    prefix: Prefix | None = None


def record(records: list[TimedRecord], *, engine_factory: Callable[[], Engine] = Engine,
           decisions: dict[int, list[Decision]] | None = None, keep_prefix: int = 0) -> Recorded:
    """Replay the recorded log as it is, measure it, and read its launcher's lifecycle. With
    `decisions` (the decision log, by input offset: what the agent decided) nothing is replayed.
    `keep_prefix`: a change point (an index in `records`) whose `Prefix` to keep, when the
    records before it hold all their offsets (a log with gaps numbers its changed world apart)."""
    engine = engine_factory() if decisions is None else None
    tracker = Tracker()
    life = Lifecycle()
    measure = Measure()
    seen_ids: set[str] = set()
    prefix: Prefix | None = None
    if engine is not None and 0 < keep_prefix < len(records) and records[keep_prefix - 1].offset == keep_prefix - 1:
        prefix = Prefix(keep_prefix, {}, b"")
    for i, rec in enumerate(records):
        now = rec.time
        if prefix is not None and i == prefix.index:
            from domain.snapshot import dump

            prefix.snapshot = dump(engine)  # type: ignore[arg-type]
        for idx, item in items_of(rec):
            eid = item.get("id")
            if isinstance(eid, str):
                if eid in seen_ids:
                    continue  # a producer's retry: it changes nothing
                seen_ids.add(eid)
            t = item.get("type")
            w = workload_of(item) if t in _NAMED else None
            if w is None:
                if t == "ConfigApplied" or measure.start is None:
                    measure.item(item, now)
                continue
            pos = (rec.offset, idx)
            state = tracker.state.get(w)
            inc = tracker.incarnation.get(w)
            event = rec.event if idx < 0 else item
            if t == "WorkloadFinished" and state == "running" and inc is not None:
                life.runs[inc] = Synth(pos, now, now - tracker.admitted_at[w], event, item, rec.log_time)
                life.dropped.add(pos)
            elif t == "WorkloadReleased" and state == "evicted" and inc is not None:
                k = tracker.evictions.get(w, 0)
                life.releases[(inc, k)] = Synth(pos, now, now - tracker.evicted_at[w], event, item, rec.log_time)
                life.dropped.add(pos)
            elif t == "WorkloadDeleted" and state == "done" and inc is not None and inc in life.runs \
                    and inc not in life.cleanups and tracker.finished_at.get(w) == life.runs[inc].time:
                life.cleanups[inc] = Synth(pos, now, now - tracker.finished_at[w], event, item, rec.log_time)
                life.dropped.add(pos)
            elif t == "WorkloadPodsReady" and state == "running" and inc is not None and item.get("ready", True) is True \
                    and (inc, tracker.admissions.get(w, 0)) not in life.ready:
                life.ready[(inc, tracker.admissions.get(w, 0))] = life.last_ready[inc] = \
                    Synth(pos, now, now - tracker.admitted_at[w], event, item, rec.log_time)
                life.dropped.add(pos)
            elif t == "WorkloadSubmitted":
                tracker.submitted(w, pos)
                measure.item(item, now, w)
                continue
            if measure.start is None:
                measure.item(item, now, w)
        made = engine.apply(rec.event, rec.offset, rec.log_time) if engine is not None else decisions.get(rec.offset, ())  # type: ignore[union-attr]
        if prefix is not None and i < prefix.index:
            prefix.decisions[rec.offset] = list(made)
        for d in made:
            what = tracker.decided(d, now)
            if what == "evicted" or what == "admitted":
                w = d.workload
                inc = tracker.incarnation.get(w)  # type: ignore[arg-type]
                if inc is not None and what == "evicted":
                    life.evictions.add((inc, tracker.evictions.get(w, 0)))  # type: ignore[arg-type]
                elif inc is not None:
                    life.admissions[inc] = tracker.admissions.get(w, 0)  # type: ignore[arg-type]
            measure.decision(d, now)
    measure.close(records[-1].time if records else 0)
    return Recorded(life, measure, len(records), tracker, prefix)


# -- the changed world ---------------------------------------------------------------------------


@dataclass(slots=True)
class Slot:
    """One event of the changed world's outside stream: a recorded record with the change
    applied and its lifecycle events taken out, or an event the change inserts."""

    key: tuple[int, int, int]  # (time, anchor, phase)
    rec: TimedRecord | None  # None: inserted by the change
    items: list[tuple[int, dict[str, Any]]]  # what is left of it (index in its Batch, event)
    unchanged: bool  # items are exactly the record's: give the engine its bytes
    batch: bool
    touched: bool = False  # the change replaced a configuration object in it


def index_at(records: list[TimedRecord], change: Change) -> int:
    at = change.at
    if at.offset is not None:
        return next((i for i, r in enumerate(records) if r.offset >= at.offset), len(records))
    if at.time is not None:
        return next((i for i, r in enumerate(records) if r.time >= at.time), len(records))
    return 0


def _compose(ops: list[Op], base: dict[str, Any] | None) -> dict[str, Any] | None:
    obj = base
    for op in ops:
        if op.action == "apply":
            obj = op.obj
        elif op.action == "delete":
            obj = None
        elif op.patch is not None:
            if obj is None:
                return None
            obj = op.patch(obj)
    return obj


def rewrite(records: list[TimedRecord], change: Change, life: Lifecycle) -> list[Slot]:
    """The changed world's outside stream (see changes.py for how a change meets the log).
    Raises ChangeError for a change that cannot be applied to this log."""
    by_key: dict[str, list[Op]] = {}
    for op in change.ops:
        by_key.setdefault(op.key, []).append(op)
    start = index_at(records, change)
    exists: dict[str, dict[str, Any]] = {}  # recorded objects that exist at the change point
    applied_later: set[str] = set()
    for i, rec in enumerate(records):
        for _, item in items_of(rec):
            t = item.get("type")
            if t == "ConfigApplied" and isinstance(item.get("object"), dict):
                k = key_of_object(item["object"])
                if i < start:
                    exists[k] = item["object"]
                else:
                    applied_later.add(k)
            elif t == "ConfigDeleted" and i < start:
                exists.pop(config_key(str(item.get("kind")), str(item.get("name", "")), item.get("namespace")), None)
    slots: list[Slot] = []
    checked: dict[int, None] = {}

    def changed(obj: dict[str, Any] | None, where: str) -> dict[str, Any] | None:
        if obj is not None and id(obj) not in checked:
            check_object(obj, f"change {change.name!r} ({where})")
            checked[id(obj)] = None
        return obj

    inserted: list[dict[str, Any]] = []
    for k, ops in by_key.items():
        if k in exists:
            obj = _compose(ops, exists[k])
        elif k in applied_later:
            continue  # replaced where the log applies it
        else:
            base = default_configuration() if k == "Configuration" else None
            if base is None and any(op.action != "apply" for op in ops[:1]):
                verb = "delete" if ops[0].action == "delete" else "change"
                raise ChangeError(f"change {change.name!r}: cannot {verb} {k}: the log never applies it"
                                  f"{' before ' + change.at.describe() if start else ''}")
            obj = _compose(ops, base)
        if obj is None:
            op = ops[-1]
            ev: dict[str, Any] = {"type": "ConfigDeleted", "kind": op.kind, "name": op.name}
            if op.namespace:
                ev["namespace"] = op.namespace
            inserted.append(ev)
        else:
            inserted.append({"type": "ConfigApplied", "object": changed(obj, "at " + change.at.describe())})
    t0 = records[start].time if start < len(records) else (records[-1].time if records else 0)
    if change.at.time is not None:
        t0 = max(change.at.time, records[start - 1].time if start > 0 else change.at.time)
    anchor0 = records[start].offset if start < len(records) else (records[-1].offset + 1 if records else 0)
    ins_slots = [Slot((t0, anchor0, -1), None, [(-1, {**ev, "time": format_time(t0)})], False, False) for ev in inserted]
    for i, rec in enumerate(records):
        if i == start:
            slots.extend(ins_slots)
        items = items_of(rec)
        batch = rec.value is not None and rec.value.get("type") == "Batch"
        kept: list[tuple[int, dict[str, Any]]] = []
        same = True
        touched = False
        for idx, item in items:
            if (rec.offset, idx) in life.dropped:
                same = False
                continue
            if i >= start and by_key:
                t = item.get("type")
                if t == "ConfigApplied" and isinstance(item.get("object"), dict):
                    k = key_of_object(item["object"])
                    if k in by_key:
                        obj = changed(_compose(by_key[k], item["object"]), f"offset {rec.offset}")
                        same = False
                        touched = True
                        if obj is not None:
                            kept.append((idx, {**item, "object": obj}))
                        continue
                elif t == "ConfigDeleted":
                    k = config_key(str(item.get("kind")), str(item.get("name", "")), item.get("namespace"))
                    if k in by_key and _compose(by_key[k], {}) is None:
                        same = False
                        continue
            kept.append((idx, item))
        if not items:  # not an object: the engine rejects it in every world
            slots.append(Slot((rec.time, rec.offset, 0), rec, [], True, False))
        elif kept or batch:
            slots.append(Slot((rec.time, rec.offset, 0), rec, kept, same, batch, touched))
    if start >= len(records):
        slots.extend(ins_slots)
    return slots


@dataclass
class Sim:
    measure: Measure
    events: int  # engine events applied
    origins: list[int]  # recorded offset each changed-world event comes from (-1: none)
    log: list[Event] | None = None  # the changed world's input log (write_events)
    log_times: list[int | None] | None = None  # each of its events' log time
    rejected_change: list[str] = field(default_factory=list)


class Stalled(RuntimeError):
    """The changed world does not settle: the simulation stops instead of running forever."""


class _Pending:
    """A synthesized event waiting on the heap, as (key, seq, _Pending): the tuple compares in C."""

    __slots__ = ("kind", "workload", "token", "event", "value", "pos", "origin", "log_time")

    def __init__(self, kind: str, workload: str, token: int, event: Event, value: dict[str, Any], pos: Pos | None,
                 origin: int, log_time: int) -> None:
        self.kind = kind
        self.workload = workload
        self.token = token
        self.event = event  # what the engine is given: the recorded bytes, or the event encoded
        self.value = value  # the same event decoded (measures, and merging into a Batch)
        self.pos = pos
        self.origin = origin
        self.log_time = log_time  # the recorded record's, in its place; else its simulated time


_encode = msgspec.json.encode
_days: dict[int, str] = {}  # "YYYY-MM-DDT" of a day since the epoch


def event_time_text(micros: int) -> str:
    """`format_time(micros)`, the same text, without a datetime per call: a moved event's
    `time` is written once per synthesized event, which would otherwise cost a tenth of a replay."""
    seconds, micro = divmod(micros, 1_000_000)
    day, second = divmod(seconds, 86_400)
    prefix = _days.get(day)
    if prefix is None:
        prefix = _days[day] = format_time(day * 86_400_000_000)[:11]
    hour, second = divmod(second, 3600)
    minute, second = divmod(second, 60)
    return f"{prefix}{hour:02d}:{minute:02d}:{second:02d}.{micro:06d}Z" if micro else \
        f"{prefix}{hour:02d}:{minute:02d}:{second:02d}Z"


def simulate(records: list[TimedRecord], recorded: Recorded, change: Change, *, keep_log: bool = False,
             engine_factory: Callable[[], Engine] = Engine, stall_limit: int = 10_000,
             max_events: int | None = None) -> Sim:
    life = recorded.lifecycle
    slots = rewrite(records, change, life)
    # Until its change point the changed world is the recorded one: its decisions are read from
    # the recorded world's prefix, and the engine starts there from its snapshot.
    prefix = recorded.prefix
    if prefix is not None and index_at(records, change) != prefix.index:
        prefix = None
    boundary: tuple[int, int, int] | None = None
    engine: Engine | None
    if prefix is not None:
        start = records[prefix.index]
        t0 = max(change.at.time, records[prefix.index - 1].time) if change.at.time is not None else start.time
        boundary = (t0, start.offset, -1)  # the first key at or after the change point
        engine = None
    else:
        engine = engine_factory()
    tracker = Tracker()
    measure = Measure()
    heap: list[tuple[tuple[int, int, int], int, _Pending]] = []
    seq = 0
    tokens: dict[str, int] = {}  # a workload's current run; a scheduled event of an older one is void
    released: dict[str, int] = {}  # releases synthesized per workload (ids of ones with no counterpart)
    origins: list[int] = []
    log: list[Event] | None = [] if keep_log else None
    log_times: list[int | None] = []
    rejected_change: list[str] = []
    seen_ids: set[str] = set()
    offset = 0
    cur: tuple[int, int, int] = (records[0].time if records else 0, -1, 0)
    default_delay = life.release_delay
    max_events = max_events if max_events is not None else 20 * len(records) + 100_000

    def schedule(kind: str, w: str, when: int, info: Synth | None, fresh: Callable[[], dict[str, Any]] | None = None) -> None:
        """`info`: the recorded event this one stands for; `fresh`: the event when there is none."""
        nonlocal seq
        pos: Pos | None = None
        log_time = when
        if info is not None and when == info.time and (when, info.pos[0], 0) > cur:
            key = (when, info.pos[0], 0)
            ev: Event = info.event
            value = info.value
            pos = info.pos
            if info.log_time is not None:
                log_time = info.log_time
        else:
            key = (when, cur[1], 1) if when == cur[0] else (when, -1, 0)
            # Moved or new: encoded, so the engine reads it as it reads the recorded bytes.
            value = {**info.value, "time": event_time_text(when)} if info is not None else fresh()  # type: ignore[misc]
            ev = _encode(value)
        heapq.heappush(heap, (key, seq, _Pending(kind, w, tokens.get(w, 0), ev, value, pos, info.pos[0] if info else -1,
                                                 log_time)))
        seq += 1

    def valid(p: _Pending) -> bool:
        if tokens.get(p.workload, 0) != p.token:
            return False
        state = tracker.state.get(p.workload)
        if p.kind == "finish" or p.kind == "ready":
            return state == "running"
        if p.kind == "release":
            return state == "evicted"
        return state == "done"  # clean-up

    def apply(event: Event, items: list[tuple[int, dict[str, Any]]], now: int, origin: int, from_change: bool,
              log_time: int | None) -> None:
        nonlocal offset
        for idx, item in items:
            eid = item.get("id")
            if isinstance(eid, str):
                if eid in seen_ids:
                    continue
                seen_ids.add(eid)
            # Only submissions and configuration are measured (and the first event: the start).
            t = item.get("type")
            if t == "WorkloadSubmitted":
                w = workload_of(item)
                if w is not None:
                    tracker.submitted(w, (origin, idx))
                measure.item(item, now, w)
            elif t == "ConfigApplied" or measure.start is None:
                measure.item(item, now)
        if log is not None:
            log.append(event)
            log_times.append(log_time)
        origins.append(origin)
        evicted: list[str] = []
        made = engine.apply(event, offset, log_time) if engine is not None else prefix.decisions.get(origin, ())  # type: ignore[union-attr]
        for d in made:
            what = tracker.decided(d, now)
            measure.decision(d, now)
            w = d.workload
            if w is None:
                if from_change and type(d).__name__ == "Rejected":
                    rejected_change.append(getattr(d, "message", ""))
                continue
            if what == "admitted":
                tokens[w] = tokens.get(w, 0) + 1
                inc = tracker.incarnation.get(w)
                if inc is None:
                    continue
                k = tracker.admissions.get(w, 0)
                ready = life.ready.get((inc, k))
                if ready is not None:
                    schedule("ready", w, now + ready.delay, ready)
                elif inc in life.last_ready and k > life.admissions.get(inc, 0):  # a run the log never had
                    when = now + life.last_ready[inc].delay

                    def fresh_ready(w: str = w, k: int = k, when: int = when) -> dict[str, Any]:
                        ns, _, name = w.partition("/")
                        return {"type": "WorkloadPodsReady", "namespace": ns, "name": name, "time": event_time_text(when),
                                "id": f"whatif/WorkloadPodsReady/{ns}/{name}/{k}"}

                    schedule("ready", w, when, None, fresh_ready)
                run = life.runs.get(inc)
                if run is not None:
                    schedule("finish", w, now + run.delay, run)
            elif what == "evicted":
                tokens[w] = tokens.get(w, 0) + 1
                evicted.append(w)
            elif what == "finished":
                inc = tracker.incarnation.get(w)
                clean = life.cleanups.get(inc) if inc is not None else None
                if clean is not None:
                    tokens[w] = tokens.get(w, 0) + 1
                    schedule("cleanup", w, now + clean.delay, clean)
        for w in evicted:
            if tracker.state.get(w) != "evicted":
                continue  # released in the same event (Immediate, or a reservation only)
            inc = tracker.incarnation.get(w)
            k = tracker.evictions.get(w, 0)
            info = life.releases.get((inc, k)) if inc is not None else None
            if info is None and (inc, k) in life.evictions:
                continue  # the recorded launcher never released this eviction: nor does this one
            n = released[w] = released.get(w, 0) + 1
            when = now + (info.delay if info is not None else default_delay)

            def fresh(w: str = w, n: int = n, when: int = when) -> dict[str, Any]:
                ns, _, name = w.partition("/")
                return {"type": "WorkloadReleased", "namespace": ns, "name": name, "time": event_time_text(when),
                        "id": f"whatif/WorkloadReleased/{ns}/{name}/{n}"}

            schedule("release", w, when, info, fresh)
        offset += 1

    i = 0
    same_instant = 0
    last_time = None
    while True:
        while heap and not valid(heap[0][2]):
            heapq.heappop(heap)
        slot = slots[i] if i < len(slots) else None
        if slot is None and not heap:
            break
        if boundary is not None and min(slot.key if slot is not None else boundary, heap[0][0] if heap else boundary) >= boundary:
            from domain.snapshot import load

            engine = load(prefix.snapshot)  # type: ignore[union-attr]
            boundary = None
        if slot is not None and (not heap or slot.key <= heap[0][0]):
            cur = slot.key
            now = slot.key[0]
            items = list(slot.items)
            merged = False
            while heap and heap[0][0] == slot.key:
                entry = heapq.heappop(heap)
                p = entry[2]
                if valid(p) and p.pos is not None and slot.batch:
                    items.append((p.pos[1], p.value))
                    merged = True
                elif valid(p):
                    heapq.heappush(heap, entry)  # cannot merge (not a Batch): after the slot
                    break
            i += 1
            same_instant = 0  # the outside world moved on: not a stall
            rec = slot.rec
            if rec is None:
                event: Event = items[0][1]
                apply(event, items, now, -1, True, now)
                continue
            if merged:
                items.sort(key=lambda x: x[0])
            if slot.batch:
                full = items_of(rec)
                if len(items) == len(full) and all(a[1] is b[1] for a, b in zip(items, full, strict=True)):
                    event = rec.event
                elif not items:
                    continue  # a Batch whose every event moved
                else:
                    assert rec.value is not None
                    event = {**rec.value, "events": [e for _, e in items]}
            else:
                event = rec.event if slot.unchanged else items[0][1]
            apply(event, items, now, rec.offset, slot.touched, rec.log_time)
        else:
            key, _, p = heapq.heappop(heap)
            cur = key
            now = key[0]
            if now == last_time:
                same_instant += 1
                if same_instant > stall_limit:
                    raise Stalled(f"{stall_limit} events at {format_time(now)} without the clock moving: workloads keep "
                                  "preempting each other at one instant in the changed world")
            else:
                last_time, same_instant = now, 0
            if offset > max_events:
                raise Stalled(f"the changed world ran {offset} events ({len(records)} recorded): workloads keep "
                              f"preempting each other (last at {format_time(now)}); try the feature gate "
                              "PrioritizePreemptorWorkloads (configuration.featureGates.PrioritizePreemptorWorkloads=true)")
            apply(p.event, [(-1, p.value)], now, p.origin, False, p.log_time)
    measure.close(max(cur[0], records[-1].time if records else 0))
    return Sim(measure, offset, origins, log, log_times if log is not None else None, rejected_change)
