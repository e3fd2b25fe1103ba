"""One object for values that many pending workloads repeat.

A backlog of 200,000 pending workloads holds each one's namespace, queue name, labels and
status; decoded per event, each would be its own copy, though a cluster has few namespaces,
queues, label sets and statuses. Sharing them is what keeps a pending workload's memory to
what is its own (its name, its place in the queue). Only identity changes: every value is equal
to the one it replaces, so nothing that compares them (and no decision) can tell.

The memos of tuples are bounded: when full they start again, which costs only sharing."""

from __future__ import annotations

import sys

_intern = sys.intern

_LIMIT = 1 << 16
_LABELS: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
_STATUSES: dict[tuple[str, str], tuple[str, str]] = {}
_ORDER_PRIORITIES: dict[int, int] = {}


def shared_name(value: str) -> str:
    """A namespace, queue or ClusterQueue name: few distinct values, each kept once."""
    return _intern(value)


def shared_labels(labels: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """A workload's labels, sorted pairs: the same set shared by every workload that has it."""
    if not labels:
        return ()
    found = _LABELS.get(labels)
    if found is None:
        if len(_LABELS) >= _LIMIT:
            _LABELS.clear()
        found = _LABELS[labels] = labels
    return found


def shared_status(status: tuple[str, str]) -> tuple[str, str]:
    """A (reason, message) a workload waits with: pending workloads of a shape read the same."""
    found = _STATUSES.get(status)
    if found is None:
        if len(_STATUSES) >= _LIMIT:
            _STATUSES.clear()
        found = _STATUSES[status] = status
    return found


def shared_order_priority(priority: int) -> int:
    """-priority, the first item of a workload's queue order key: a cluster has few priorities,
    and an int beyond CPython's small ones is an object per workload."""
    found = _ORDER_PRIORITIES.get(priority)
    if found is None:
        if len(_ORDER_PRIORITIES) >= _LIMIT:
            _ORDER_PRIORITIES.clear()
        found = _ORDER_PRIORITIES[priority] = -priority
    return found
