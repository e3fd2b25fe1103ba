"""Where the engine's time goes in Kueue's performance run, by what each head evaluation came to.

    QUOTAFLOW_PURE_PYTHON=1 python -m bench.kueue_perf.evaluations --config large-scale

Runs the zero-latency simulation (virtual.py; deterministic, so the counts reproduce exactly) and
sorts every evaluation of a head by the scheduler (`Scheduler.assign`: flavor assignment, and
the preemption searches it makes) by its outcome in its cycle: admitted; fitted but lost its room
to an entry ranked before it; no room and no target (after losing its room in the cycle before,
or otherwise); victims found, or victims another entry of the cycle had already chosen; and the
re-check such an entry gets. Heads parked again without an evaluation are counted apart. Each
category's time is an upper bound on what any shortcut that avoids those evaluations could save,
which is what "how close to the limit" asks (README; bench/figures.md, "How close to the limit").

It wraps the scheduler's methods, so it needs the interpreted engine (compiled callers would not
see the wrappers): run it with QUOTAFLOW_PURE_PYTHON=1, which it checks. The times are those of
the interpreted engine: the counts hold for the compiled one, the shares only roughly (compiled,
work made of many small calls shrinks most; bench/figures.md has an example). A
diagnostic: it prints a table and never fails on the numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from devtools.kueue_perf import config as config_mod
from devtools.kueue_perf import generator, virtual
from domain._engine_form import running_compiled

ADMITTED = "fit: admitted"
LOST_ROOM = "fit, then lost its room to an entry ranked before it"
NO_TARGET_AFTER_LOSS = "no room, no target: re-evaluated after losing its room"
NO_TARGET = "no room, no target: other"
PREEMPTS = "victims found: preempts, or waits for those it preempted"
OVERLAPPING = "victims found, already chosen by an entry ranked before it"
RECHECK = "re-check of such an entry once those victims are gone"
CATEGORIES = (ADMITTED, LOST_ROOM, NO_TARGET_AFTER_LOSS, NO_TARGET, PREEMPTS, OVERLAPPING, RECHECK)
PARKED_AGAIN = "parked again without an evaluation"


@dataclass
class Tally:
    count: int = 0
    seconds: float = 0.0

    def add(self, seconds: float) -> None:
        self.count += 1
        self.seconds += seconds


@dataclass
class Breakdown:
    engine_s: float  # perf_counter time inside Engine.apply, the wrappers' own cost included
    admitted_decisions: int
    evaluations: dict[str, Tally]  # by category, in CATEGORIES' order
    parked_again: Tally

    def to_json(self) -> dict[str, Any]:
        return {
            "engineS": self.engine_s,
            "admittedDecisions": self.admitted_decisions,
            "evaluations": {k: {"count": t.count, "seconds": t.seconds} for k, t in self.evaluations.items()},
            "parkedAgain": {"count": self.parked_again.count, "seconds": self.parked_again.seconds},
        }


def _classify(entry: Any, fit_only: bool, previous_message: str | None) -> str:
    """The category of one evaluation, read once its cycle is over."""
    from domain import reasons
    from domain.flavor_assigner import MODE_FIT

    if fit_only:
        return RECHECK
    ws = entry.ws
    if entry.assignment.mode == MODE_FIT:
        # A head is pending when evaluated: holding quota after its cycle means that cycle admitted it.
        return ADMITTED if ws.admission is not None else LOST_ROOM
    if not entry.targets:
        return NO_TARGET_AFTER_LOSS if previous_message == reasons.MSG_NO_LONGER_FITS else NO_TARGET
    status = ws.last_status
    overlapped = status is not None and status[1] in (reasons.MSG_OVERLAPPING_TARGETS, reasons.MSG_DEFERRED_FIT)
    return OVERLAPPING if overlapped else PREEMPTS


def measure(scenario: generator.Scenario) -> Breakdown:
    if running_compiled():
        raise SystemExit("bench.kueue_perf.evaluations wraps the scheduler: run it with QUOTAFLOW_PURE_PYTHON=1")
    from domain.decisions import Admitted
    from domain.engine import Engine
    from domain.scheduler import Scheduler

    pending: list[tuple[Any, bool, str | None, float]] = []
    tallies = {c: Tally() for c in CATEGORIES}
    parked_again = Tally()
    engine_s = 0.0
    admitted = 0
    real_assign, real_run_cycle = Scheduler.assign, Scheduler.run_cycle
    real_still_hopeless, real_apply = Scheduler._still_hopeless, Engine.apply

    def assign(self: Scheduler, cq: Any, ws: Any, fit_only: bool = False) -> Any:
        previous = ws.last_status[1] if ws.last_status is not None else None
        t0 = time.perf_counter()
        entry = real_assign(self, cq, ws, fit_only)
        pending.append((entry, fit_only, previous, time.perf_counter() - t0))
        return entry

    def run_cycle(self: Scheduler, out: Any, batch: Any) -> None:
        real_run_cycle(self, out, batch)
        for entry, fit_only, previous, seconds in pending:
            tallies[_classify(entry, fit_only, previous)].add(seconds)
        pending.clear()

    def still_hopeless(self: Scheduler, cq: Any, ws: Any) -> Any:
        t0 = time.perf_counter()
        needs = real_still_hopeless(self, cq, ws)
        if needs is not None:
            parked_again.add(time.perf_counter() - t0)
        return needs

    def apply(self: Engine, event: Any, offset: int) -> Any:
        nonlocal engine_s, admitted
        t0 = time.perf_counter()
        out = real_apply(self, event, offset)
        engine_s += time.perf_counter() - t0
        admitted += sum(1 for d in out if type(d) is Admitted)
        return out

    patches: list[tuple[type, str, Callable[..., Any], Callable[..., Any]]] = [
        (Scheduler, "assign", assign, real_assign), (Scheduler, "run_cycle", run_cycle, real_run_cycle),
        (Scheduler, "_still_hopeless", still_hopeless, real_still_hopeless), (Engine, "apply", apply, real_apply),
    ]
    for cls, name, wrapper, _ in patches:
        setattr(cls, name, wrapper)
    try:
        virtual.run(scenario)
    finally:
        for cls, name, _, real in patches:
            setattr(cls, name, real)
    return Breakdown(engine_s, admitted, tallies, parked_again)


def table(b: Breakdown) -> str:
    rows = ["| head evaluations | count | time | µs each | share of the engine's time |", "|---|---|---|---|---|"]

    def row(label: str, t: Tally) -> str:
        each = t.seconds / t.count * 1e6 if t.count else 0.0
        return f"| {label} | {t.count:,} | {t.seconds:.2f} s | {each:.0f} | {t.seconds / b.engine_s:.1%} |"

    for c in CATEGORIES:
        rows.append(row(c, b.evaluations[c]))
    total = Tally(sum(t.count for t in b.evaluations.values()), sum(t.seconds for t in b.evaluations.values()))
    rows.append(row("**all evaluations**", total))
    rows.append(row(PARKED_AGAIN, b.parked_again))
    rest = b.engine_s - total.seconds - b.parked_again.seconds
    rows.append(f"| the rest: applying events, heads, ordering, admitting, parking, decisions | | {rest:.2f} s | | "
                f"{rest / b.engine_s:.1%} |")
    rows.append(f"| **the engine** ({b.admitted_decisions:,} admissions) | | {b.engine_s:.2f} s | | 100% |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="large-scale", help="baseline, large-scale, mini or a generator.yaml path")
    p.add_argument("--json", dest="json_path", default=None, help="also write the figures to this file (- for stdout)")
    args = p.parse_args(argv)
    breakdown = measure(generator.generate(config_mod.load(args.config)))
    if args.json_path == "-":
        json.dump(breakdown.to_json(), sys.stdout)
        return
    print(f"## {args.config}: the zero-latency simulation, interpreted engine\n")
    print(table(breakdown))
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(breakdown.to_json(), f, indent=2)


if __name__ == "__main__":
    main()
