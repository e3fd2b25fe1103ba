"""The engine benchmarks' timing harness: a fresh Engine, an untimed prelude, then the measured
stream through `Engine.apply`, timed chunk by chunk on the wall clock and on this process's CPU
time; what the decisions of a run say (`Tally`); the collector's settings during a run; a
cProfile of one run; the environment a report names.
"""

from __future__ import annotations

import contextlib
import cProfile
import gc
import io
import os
import platform
import pstats
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from bench.engine_variants import Variant
from devtools.cluster_stream import GPU_HOLDERS, NOMINAL, expect_no_rejections
from domain._engine_form import running_compiled
from domain.decisions import Admitted, Decision, Deleted, Finished, Pending
from domain.engine import Engine
from domain.quantity import amount

_NOMINAL_AMOUNTS = {(f, r): amount(r, v) for f, res in NOMINAL.items() for r, v in res.items()}


class Tally:
    """What the decisions of one run say: counts, borrowing (from decisions + config), backlog."""

    def __init__(self, window: int = 0) -> None:
        self.window = window
        self.counts: Counter[str] = Counter()  # measured stream only
        self.window_counts: Counter[str] | None = None  # counts after the first `window` events
        self.pending: set[str] = set()  # workloads whose latest decision is Pending
        self.held: dict[str, tuple[str, list[tuple[tuple[str, str], int]]]] = {}  # key -> (cq, usage)
        self.cq_usage: dict[str, dict[tuple[str, str], int]] = {}
        self.admitted_keys: Counter[str] = Counter()
        self.finished_keys: Counter[str] = Counter()
        self.ever_pending: set[str] = set()
        self.borrowed = 0
        self.spot = 0
        self.preload_pending = 0
        self.preload_admitted = 0
        self.holders_admitted = 0
        self.pending_sum = 0
        self.pending_max = 0
        self.events = 0
        self._amounts: dict[tuple[str, str], int] = {}

    def start_measuring(self) -> None:
        self.preload_pending = len(self.pending)

    def feed(self, decisions: Sequence[Decision], measured: bool) -> None:
        for d in decisions:
            kind = type(d)
            key = d.workload or ""
            if measured:
                self.counts[kind.__name__] += 1
            if kind is Pending:
                self.pending.add(key)
                if measured:
                    self.ever_pending.add(key)
            elif kind is Admitted:
                self.pending.discard(key)
                name = key.split("/", 1)[1]
                if name.startswith("backlog-"):
                    self.preload_admitted += 1
                elif name.startswith("gpu-train-"):
                    self.holders_admitted += 1
                if measured:
                    self._admit(key, d)  # type: ignore[arg-type]
            elif kind is Finished or kind is Deleted:
                self.pending.discard(key)
                if measured:
                    self.finished_keys[key] += 1
                held = self.held.pop(key, None)
                if held is not None:
                    usage = self.cq_usage[held[0]]
                    for fr, value in held[1]:
                        usage[fr] -= value
        if measured:
            self.events += 1
            stream_pending = len(self.pending) - self.preload_pending
            self.pending_sum += stream_pending
            self.pending_max = max(self.pending_max, stream_pending)
            if self.events == self.window:
                self.window_counts = Counter(self.counts)

    def _admit(self, key: str, d: Admitted) -> None:
        self.admitted_keys[key] += 1
        usage = self.cq_usage.setdefault(d.clusterQueue, {})
        added: list[tuple[tuple[str, str], int]] = []
        for ps in d.podSetAssignments:
            for res, flavor in ps.flavors.items():
                text = ps.resourceUsage[res]
                value = self._amounts.get((res, text))
                if value is None:
                    value = self._amounts[(res, text)] = amount(res, text)
                added.append(((flavor, res), value))
        borrowed = False
        for fr, value in added:
            usage[fr] = usage.get(fr, 0) + value
            if usage[fr] > _NOMINAL_AMOUNTS[fr]:
                borrowed = True
        self.held[key] = (d.clusterQueue, added)
        self.borrowed += borrowed
        self.spot += any(fr[0] == "spot" for fr, _ in added)

    def summary(self, variant: Variant, workloads: int) -> dict[str, Any]:
        expected = workloads * variant.copies
        admitted_once = sum(1 for v in self.admitted_keys.values() if v == 1)
        finished_after_admission = sum(1 for k in self.admitted_keys if self.finished_keys.get(k) == 1)
        return {
            "decisions": dict(sorted(self.counts.items())),
            "window_decisions": dict(sorted(self.window_counts.items())) if self.window_counts is not None else None,
            "workloads": expected if variant.complete else None,
            "admitted_once": admitted_once,
            "finished_after_admission": finished_after_admission,
            "all_admitted_and_finished": (
                admitted_once == expected == finished_after_admission == len(self.admitted_keys)
                if variant.complete
                else None
            ),
            "workloads_that_waited": len(self.ever_pending),
            "borrowed_admissions": self.borrowed,
            "spot_admissions": self.spot,
            "stream_pending_mean": self.pending_sum / max(1, self.events),
            "stream_pending_max": self.pending_max,
            "preloaded_pending": self.preload_pending,
            "preloaded_admitted": self.preload_admitted,
            "gpu_holders_admitted": self.holders_admitted,
            "gpu_holders_expected": len(GPU_HOLDERS) * variant.cqs if variant.preload_per_cq else 0,
        }


# -- measuring --------------------------------------------------------------------------------

CHUNK = 20_000  # events handed to the timed loop at a time (decoded to dicts untimed in dict mode)
MODES = ("bytes", "dict")


CLOCKS = ("wall", "cpu")  # time.perf_counter, and this process's CPU time (time.process_time)


@dataclass
class Run:
    variant: str
    mode: str
    round: int
    events: int
    seconds: dict[str, float]  # clock -> seconds in the timed loop
    window_events: int = 0
    window_seconds: dict[str, float] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)

    def rate(self, clock: str = "wall", window: bool = False) -> float:
        """Input events per second on this clock, over the whole stream or its first window."""
        if window:
            spent = self.window_seconds.get(clock, 0.0)
            return self.window_events / spent if spent else 0.0
        return self.events / self.seconds[clock]

    @property
    def events_per_s(self) -> float:
        return self.rate("wall")


def run_once(
    variant: Variant, mode: str, workloads: int, round_: int = 0, profiler: cProfile.Profile | None = None,
    gc_freeze: bool = False,
) -> Run:
    """A fresh engine, the prelude untimed, then the measured stream, timed chunk by chunk."""
    engine = Engine()
    apply = engine.apply
    tally = Tally(variant.window)
    offset = 0
    for ev in variant.prelude:
        out = apply(ev, offset)
        expect_no_rejections(out, ev)
        tally.feed(out, measured=False)
        offset += 1
    tally.start_measuring()
    decode = msgspec.json.decode
    stream = variant.stream
    bounds = sorted({*range(0, len(stream), CHUNK), len(stream), *([variant.window] if variant.window else [])})
    wall = cpu = 0.0
    window: dict[str, float] = {}
    perf_counter, process_time = time.perf_counter, time.process_time
    gc.collect()
    if gc_freeze:
        # What an agent may do once it has loaded its state: everything alive now (the pre-load,
        # and this process's own data) leaves the collector's generations for good.
        gc.freeze()
    for start, stop in zip(bounds, bounds[1:]):
        chunk: list[Any] = stream[start:stop]
        if mode == "dict":
            chunk = [decode(b) for b in chunk]
        results: list[list[Decision]] = []
        append = results.append
        if profiler is not None:
            profiler.enable()
        c0 = process_time()
        t0 = perf_counter()
        for off, ev in enumerate(chunk, offset):
            append(apply(ev, off))
        wall += perf_counter() - t0
        cpu += process_time() - c0
        if profiler is not None:
            profiler.disable()
        if stop == variant.window:
            window = {"wall": wall, "cpu": cpu}
        offset += len(chunk)
        for out in results:
            tally.feed(out, measured=True)
        del results, chunk
    if gc_freeze:
        gc.unfreeze()
    run = Run(variant.name, mode, round_, len(stream), {"wall": wall, "cpu": cpu}, variant.window, window)
    run.summary = tally.summary(variant, workloads)
    return run


def gc_threshold(choice: str) -> tuple[int, int, int] | None:
    """--gc-threshold: `default` (None: Python's), `engine-process` (what the agent's engine
    process sets, streams.agent.engine_child.ENGINE_GC_THRESHOLD) or three integers `a,b,c`."""
    if choice == "default":
        return None
    if choice == "engine-process":
        from streams.agent.engine_child import ENGINE_GC_THRESHOLD

        return ENGINE_GC_THRESHOLD
    a, b, c = (int(x) for x in choice.split(","))
    return a, b, c


@contextlib.contextmanager
def gc_thresholds(threshold: tuple[int, int, int] | None) -> Iterator[None]:
    """The collector at these thresholds (None: as it is) inside, as it was after."""
    old = gc.get_threshold()
    if threshold is not None:
        gc.set_threshold(*threshold)
    try:
        yield
    finally:
        gc.set_threshold(*old)


@contextlib.contextmanager
def frozen_setup(threshold: tuple[int, int, int] | None) -> Iterator[None]:
    """What was built before is not garbage: collect once, freeze it so that no collection walks
    it again, and run at these thresholds inside; thawed and as it was after."""
    gc.collect()
    gc.freeze()
    try:
        with gc_thresholds(threshold):
            yield
    finally:
        gc.unfreeze()


def measure(
    variants: dict[str, Variant], modes: Sequence[str], repeat: int, workloads: int, progress: bool,
    gc_freeze: bool = False, threshold: tuple[int, int, int] | None = None,
) -> list[Run]:
    with gc_thresholds(threshold):
        return _measure(variants, modes, repeat, workloads, progress, gc_freeze)


def _measure(
    variants: dict[str, Variant], modes: Sequence[str], repeat: int, workloads: int, progress: bool,
    gc_freeze: bool,
) -> list[Run]:
    runs: list[Run] = []
    names = list(variants)
    for r in range(repeat):
        order = names[r % len(names) :] + names[: r % len(names)]
        mode_order = list(modes) if r % 2 == 0 else list(reversed(modes))
        for name in order:
            for mode in mode_order:
                run = run_once(variants[name], mode, workloads, r, gc_freeze=gc_freeze)
                runs.append(run)
                if progress:
                    extra = (
                        f"  (first {run.window_events:,}: {run.rate('wall', True):,.0f}/s wall, "
                        f"{run.rate('cpu', True):,.0f}/s CPU)"
                        if run.window_events and run.window_events < run.events
                        else ""
                    )
                    print(
                        f"  round {r + 1}/{repeat}  {name:<9} {mode:<5} {run.events:>9,} events "
                        f"{run.seconds['wall']:8.2f} s {run.rate('wall'):>9,.0f} events/s wall "
                        f"{run.rate('cpu'):>9,.0f} events/s CPU{extra}",
                        file=sys.stderr,
                        flush=True,
                    )
                gc.collect()
    return runs



def _git_version() -> str:
    """The commit measured, and whether domain/ had uncommitted changes (the engine moves fast)."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "domain"], cwd=root, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}{' + uncommitted domain/ changes' if dirty else ''}" if head else "unknown"


def environment() -> dict[str, Any]:
    return {
        "git": _git_version(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "engine": "compiled (mypyc)" if running_compiled() else "sources",
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "gc_enabled": gc.isenabled(),
        "gc_threshold": list(gc.get_threshold()),
    }




def profile(variant: Variant, mode: str, workloads: int, top: int = 25) -> str:
    prof = cProfile.Profile()
    run = run_once(variant, mode, workloads, profiler=prof)
    buf = io.StringIO()
    buf.write(
        f"cProfile of the measured stream of '{variant.name}' ({mode} mode, {variant.description}): "
        f"{run.events:,} events in {run.seconds['wall']:.1f} s under the profiler "
        f"({run.rate('wall'):,.0f} events/s, profiler overhead included)\n"
    )
    stats = pstats.Stats(prof, stream=buf)
    stats.strip_dirs()
    buf.write(f"\n=== top {top} by cumulative time ===\n")
    stats.sort_stats("cumulative").print_stats(top)
    buf.write(f"\n=== top {top} by own time (tottime) ===\n")
    stats.sort_stats("tottime").print_stats(top)
    return buf.getvalue()


def cpu_rounds(streams: dict[str, list[bytes]], rounds: int) -> tuple[dict[str, float], dict[str, int]]:
    """Each stream through a fresh Engine `rounds` times, the order rotated each round so no
    variant always runs first on a warm or cold machine: the best CPU seconds per stream, and
    how many Admitted decisions it made (the same every round)."""
    names = list(streams)
    cpu: dict[str, list[float]] = {n: [] for n in names}
    admitted: dict[str, int] = {}
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            seconds, admitted[name] = _run_cpu(streams[name])
            cpu[name].append(seconds)
    return {n: min(v) for n, v in cpu.items()}, admitted


def _run_cpu(events: list[bytes]) -> tuple[float, int]:
    engine = Engine()
    apply = engine.apply
    count = 0
    gc.collect()
    c0 = time.process_time()
    for offset, ev in enumerate(events):
        for d in apply(ev, offset):
            if type(d) is Admitted:
                count += 1
    return time.process_time() - c0, count
