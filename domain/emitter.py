"""Collects the decisions of one input event and stamps each with its cause."""

from __future__ import annotations

from typing import Any

from domain.decisions import Cause, Decision


class Emitter:
    __slots__ = ("offset", "decisions", "touched")

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.decisions: list[Decision] = []
        # Workloads that got a decision from this event, so that each submission gets an outcome.
        self.touched: dict[str, None] = {}

    def emit(self, cls: type[Decision], workload: str | None = None, **fields: Any) -> None:
        cause = Cause(self.offset, len(self.decisions))
        self.decisions.append(cls(workload=workload, cause=cause, **fields))
        if workload is not None:
            self.touched[workload] = None

    @property
    def next_index(self) -> int:
        return len(self.decisions)
