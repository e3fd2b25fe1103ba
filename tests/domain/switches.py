"""Differential tests of the engine's speed-up switches, shared by the classical and the
fair-sharing search shortcut tests: fold a stream with the shortcuts on and off, compare every
decision byte for byte, and count what the shortcuts did while on.

A test module supplies `shortcuts(on, seen)`, a context manager that switches its shortcuts on
(checking each answer they give against the work they spare) or off, counting into `seen`:
"asked" targets() calls, "searched" searches made, "assigned" `Scheduler.assign` calls, "reused"
entries given again without one (`Scheduler._kept_assign`), "bounded" / "unbounded" the
shortfall bound's answers (cannot fit / might fit), and "across" answers kept across events.
The helpers here patch only while they are used and put back what was there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import msgspec
import test_hierarchy_properties as hp

from domain import scheduler
from domain.engine import Engine

Seen = dict[str, int]
Shortcuts = Callable[[bool, Seen], AbstractContextManager[None]]


def fresh() -> Seen:
    return {"asked": 0, "searched": 0, "assigned": 0, "reused": 0, "bounded": 0, "unbounded": 0, "across": 0}


@contextmanager
def patched(*changes: tuple[Any, str, Any]) -> Iterator[None]:
    """Each (owner, name) set to value for the while; what was there is put back after."""
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in changes]
    for owner, name, value in changes:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)


@contextmanager
def counted_switch(switch: tuple[Any, str], on: bool, counted: tuple[Any, str], original: Callable[..., bool],
                   counts: list[int]) -> Iterator[None]:
    """The switch (owner, name) set to `on` for the while, and `counted` (owner, name) replaced
    by `original` counting its true answers into counts[0]."""

    def counting(*a: Any) -> bool:
        answer = original(*a)
        counts[0] += answer
        return answer

    with patched((*switch, on), (*counted, counting)):
        yield


def entry_counts(seen: Seen) -> tuple[tuple[Any, str, Any], ...]:
    """Patches counting `Scheduler.assign` calls ("assigned") and the entries
    `Scheduler._kept_assign` gives again without one ("reused")."""
    assign = scheduler.Scheduler.assign
    kept_assign = scheduler.Scheduler._kept_assign

    def assigning(self: Any, *a: Any) -> Any:
        seen["assigned"] += 1
        return assign(self, *a)

    def reusing(self: Any, *a: Any) -> Any:
        before = seen["assigned"]
        entry = kept_assign(self, *a)
        if seen["assigned"] == before:
            seen["reused"] += 1
        return entry

    return ((scheduler.Scheduler, "assign", assigning), (scheduler.Scheduler, "_kept_assign", reusing))


def counted_bound(bound: Callable[..., bool], seen: Seen, said: list[bool]) -> Callable[..., bool]:
    """The shortfall bound, its answers counted and appended to `said`."""
    def counting(*a: Any) -> bool:
        answer = bound(*a)
        said.append(answer)
        seen["bounded" if answer else "unbounded"] += 1
        return answer

    return counting


def bound_agrees(search: Callable[[], list[Any]], unbounded: Callable[[], AbstractContextManager[None]],
                 key: str, name: str, deferred: dict[str, Any], before: bool) -> None:
    """The bound said a search for workload `key` of ClusterQueue `name` cannot fit: the search
    made now without the bound (`unbounded`) finds nothing, and defers the ClusterQueue exactly
    when the bound's answer did (`before`: it was deferred before the answer)."""
    was = name in deferred
    if not before:
        deferred.pop(name, None)
    with unbounded():
        again = search()
    assert not again, f"{key}: the bound says it cannot fit, the search found {again}"
    assert (name in deferred) == was, f"{key}: deferred {was} by the bound, not by the search"


def decide(stream: list[Any]) -> list[bytes]:
    engine = Engine()
    encode = msgspec.json.encode
    return [encode(engine.apply(event, offset)) for offset, event in enumerate(stream)]


def both_ways(stream: list[Any], shortcuts: Shortcuts) -> Seen:
    """The stream decides alike with the shortcuts on and off; their counts while on. Off,
    every search and every assignment is made and the bound is not asked."""
    seen = fresh()
    with shortcuts(True, seen):
        fast = decide(stream)
    off = fresh()
    with shortcuts(False, off):
        assert decide(stream) == fast
    assert off["asked"] == off["searched"]  # switched off: every search is made
    assert not off["reused"] and not off["bounded"] + off["unbounded"]  # and every assignment
    return seen


def trees_alike(tree: hp.Tree, ops_: list[Any], shortcuts: Shortcuts) -> None:
    """A cohort tree's replay decides alike with the shortcuts on and off."""
    def decisions() -> list[Any]:
        return [d for *_, d, _where in hp.replay(tree, ops_)]

    with shortcuts(True, fresh()):
        fast = decisions()
    with shortcuts(False, fresh()):
        assert decisions() == fast
