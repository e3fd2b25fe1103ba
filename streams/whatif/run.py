"""One `quotaflow whatif` run: the recorded world once, then each change of the sweep, and the
report that compares them (JSON-ready)."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from domain.timestamps import format_time
from streams.whatif.changes import Change, ChangeError
from streams.whatif.compare import moved, window, world
from streams.whatif.simulation import (
    Lifecycle,
    Sim,
    index_at,
    record,
    rewrite,
    simulate,
)
from streams.whatif.source import TimedRecord


def check_changes(records: list[TimedRecord], changes: list[Change]) -> None:
    """Every change meets the log before anything is replayed, so a bad one stops the run at
    once (what the change meets is the configuration, not the launcher's lifecycle)."""
    for change in changes:
        if records and index_at(records, change) >= len(records):
            raise ChangeError(f"{change.at.describe()} is after the log's last event (offset {records[-1].offset}, "
                              f"{format_time(records[-1].time)}): the change would change nothing")
        rewrite(records, change, Lifecycle())


def run(records: list[TimedRecord], changes: list[Change], *, bins: int = 60, top: int = 10,
        write_events: str | None = None, progress: Callable[[str], None] | None = None,
        decisions: dict[int, list[Any]] | None = None) -> dict[str, Any]:
    if not records:
        raise ChangeError("the log holds no event: nothing to replay")
    say = progress or (lambda _: None)
    # The records (a decoded object per event) live for the whole run; frozen, the collector
    # stops walking them on every full collection the engines' allocations trigger (the cost
    # would grow with the log). The thresholds are the agent's engine process's.
    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
    try:
        return _run(records, changes, bins=bins, top=top, write_events=write_events, say=say, decisions=decisions)
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _run(records: list[TimedRecord], changes: list[Change], *, bins: int, top: int, write_events: str | None,
         say: Callable[[str], None], decisions: dict[int, list[Any]] | None) -> dict[str, Any]:
    check_changes(records, changes)
    t0 = time.perf_counter()
    # A sweep's worlds share their change point: the recorded world keeps its prefix up to it.
    points = {index_at(records, change) for change in changes}
    recorded = record(records, decisions=decisions, keep_prefix=points.pop() if len(points) == 1 else 0)
    how = "read from the decision log" if decisions is not None else "replayed"
    say(f"recorded world: {len(records)} events {how} in {time.perf_counter() - t0:.1f} s")
    sims: list[tuple[Change, Sim]] = []
    for i, change in enumerate(changes):
        t1 = time.perf_counter()
        sim = simulate(records, recorded, change, keep_log=write_events is not None)
        if sim.rejected_change:
            raise ChangeError(f"change {change.name!r} was rejected by the engine: {sim.rejected_change[0]}")
        say(f"what-if {change.name!r}: {sim.events} events in {time.perf_counter() - t1:.1f} s")
        if write_events is not None and sim.log is not None:
            path = Path(write_events)
            if len(changes) > 1:
                path = path.with_name(f"{path.stem}.{i}{path.suffix}")
            _write(path, sim.log, sim.log_times or [])
        sims.append((change, sim))
    start, end = window(recorded.measure, *(s.measure for _, s in sims))
    warnings = []
    if records[0].time == records[-1].time:
        warnings.append("the log's events carry no times (or all the same one): every run takes no time, "
                        "and times to admission and usage over time say nothing")
    return {
        "warnings": warnings,
        "window": {"start": format_time(start), "end": format_time(end), "seconds": (end - start) / 1e6, "bins": bins},
        "events": len(records),
        "recorded": world(recorded.measure, start, end, bins),
        "whatIf": [
            {
                "name": change.name,
                "at": change.at.describe(),
                "change": [op.describe() for op in change.ops],
                "events": sim.events,
                **world(sim.measure, start, end, bins),
                "moved": moved(recorded.measure, sim.measure, top),
            }
            for change, sim in sims
        ],
    }


def _write(path: Path, log: list[Any], log_times: list[int | None]) -> None:
    """As `quotaflow export` writes a log: each record with the log time the engine was given."""
    from streams.log.event_files import export_line

    enc = msgspec.json.Encoder()
    with path.open("wb") as f:
        for event, log_time in zip(log, log_times, strict=True):
            raw = event if isinstance(event, bytes) else enc.encode(event) if isinstance(event, dict) else b""
            f.write(export_line(raw, log_time) + b"\n")
