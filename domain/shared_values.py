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
# Variable-length tuple annotations throughout, as quota.FR: under mypyc a fixed-length tuple is
# a C struct, boxed into a new tuple wherever it is returned or stored, which would undo the
# sharing (and an int is unboxed the same way: -priority is kept inside a tuple).
_LABELS: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
_STATUSES: dict[tuple[str, ...], tuple[str, ...]] = {}
_ORDER_PRIORITIES: dict[int, tuple[int, ...]] = {}


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


def shared_status(status: tuple[str, ...]) -> tuple[str, ...]:
    """A (reason, message) a workload waits with: pending workloads of a shape read the same."""
    found = _STATUSES.get(status)
    if found is None:
        if len(_STATUSES) >= _LIMIT:
            _STATUSES.clear()
        found = _STATUSES[status] = status
    return found


def order_key(priority: int, queue_time: int, seq: int, key: str) -> tuple[int | str, ...]:
    """A workload's queue order key (queues.OrderKey) with its -priority shared: a cluster has
    few priorities, and an int beyond CPython's small ones is an object per workload."""
    prefix = _ORDER_PRIORITIES.get(priority)
    if prefix is None:
        if len(_ORDER_PRIORITIES) >= _LIMIT:
            _ORDER_PRIORITIES.clear()
        prefix = _ORDER_PRIORITIES[priority] = (-priority,)
    return prefix + (queue_time, seq, key)
