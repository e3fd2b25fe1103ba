"""Bounds on one input record, checked before anything recursive reads it.

msgspec, json and the engine's own readers walk nested values recursively, so a small record
such as `[` * 1000 + `]` * 1000 would end in a RecursionError. Every record is measured here
first, in linear time and without recursion, and one that is too large, too deep or carries too
many Batch events is rejected whole.

The limits are generous for real Kueue objects: a Workload with full pod templates nests about
20 deep, and Kafka refuses messages over 1 MiB by default anyway.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

# Kafka's default message.max.bytes is 1 MiB plus a little framing.
MAX_RECORD_BYTES: Final = 1024 * 1024
# One encoded decision: just under Kafka's default 1 MiB message limit, which also counts the
# record's framing and headers.
MAX_DECISION_BYTES: Final = 1_000_000
# Nesting of arrays and objects; a Workload with pod templates needs about 20.
MAX_DEPTH: Final = 64
# Inner events of one Batch.
MAX_BATCH_EVENTS: Final = 10_000
# Values in one decoded document: YAML aliases can make a small text a huge tree.
MAX_VALUES: Final = 1_000_000

# A JSON string, escapes included, written so that the regex engine never backtracks.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# One innermost pair; each substitution pass peels one level of nesting.
_INNERMOST = re.compile(rb"\[\]|\{\}")
# Every byte but the four brackets, deleted by bytes.translate.
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")


_TOO_DEEP: Final = f"record nests arrays and objects more than {MAX_DEPTH} deep"


def record_error(data: bytes) -> str | None:
    """Why the raw record `data` is refused, or None. At most MAX_DEPTH + 1 passes of C-level
    scans over it, never recursive."""
    if len(data) > MAX_RECORD_BYTES:
        return f"record is {len(data)} bytes, over the limit of {MAX_RECORD_BYTES} bytes"
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return None  # cannot nest deeper than the brackets it has
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    peeled_levels = 0
    while brackets:
        peeled = _INNERMOST.sub(b"", brackets)
        if len(peeled) == len(brackets):
            # Unbalanced: invalid JSON, but the decoder still recurses into the brackets it opens
            # before it notices, so those count as nesting too.
            opened = brackets.count(b"[") + brackets.count(b"{")
            return None if peeled_levels + opened <= MAX_DEPTH else _TOO_DEEP
        peeled_levels += 1
        if peeled_levels > MAX_DEPTH:
            return _TOO_DEEP
        brackets = peeled
    return None


def value_error(value: object) -> str | None:
    """`record_error` for an already decoded value (a YAML document): depth and Batch size."""
    stack: list[tuple[object, int]] = [(value, 1)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            return f"record holds more than {MAX_VALUES} values"
        if isinstance(item, Mapping):
            children: list[Any] = list(item.values())
        elif isinstance(item, (list, tuple)):
            children = list(item)
        else:
            continue
        if depth > MAX_DEPTH:
            return f"record nests arrays and objects more than {MAX_DEPTH} deep"
        for child in children:
            stack.append((child, depth + 1))
    return None


def batch_error(count: int) -> str | None:
    if count > MAX_BATCH_EVENTS:
        return f"events: {count} events, over the limit of {MAX_BATCH_EVENTS} in one Batch"
    return None


__all__ = ["MAX_BATCH_EVENTS", "MAX_DECISION_BYTES", "MAX_DEPTH", "MAX_RECORD_BYTES", "MAX_VALUES", "batch_error", "record_error", "value_error"]
