"""The decision stream, live, as server-sent events.

The follower calls `notify` after each fold step; the hub then reads the decisions folded since
it last looked from the follower's recent-records window (the decision records the server keeps
anyway for workload histories) and hands each one to every connected page. A page is one bounded
queue: a page that cannot keep up (a background tab, a slow link) loses its backlog and is told
to reload its views instead of growing the server's memory, so live updates cost one encode per
decision plus one queue step per page, whatever the number of workloads.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import msgspec

from projections.follower import RecentRecords

PAGE_QUEUE = 1000  # events kept for a page that has not read them yet
HEARTBEAT_SECONDS = 15.0  # a comment line now and then, so proxies keep the stream open


class Hub:
    def __init__(self, recent: RecentRecords, max_pages: int = 100) -> None:
        self.recent = recent
        self.max_pages = max_pages
        self.pages: list[asyncio.Queue[bytes | None]] = []
        self.last_sent = max(recent.values, default=-1)
        self.position = -1
        self.sent = 0

    def notify(self, position: int = -1) -> None:
        """New records were folded: forward the decisions not sent yet (newest offsets last)."""
        self.position = max(self.position, position)
        fresh: list[tuple[int, bytes | None]] = []
        for offset in reversed(self.recent.values):
            if offset <= self.last_sent:
                break
            fresh.append((offset, self.recent.values[offset][0]))
        if not fresh:
            if position >= 0:
                self._broadcast(_event("position", {"inputOffset": self.position}))
            return
        fresh.reverse()
        self.last_sent = fresh[-1][0]
        for offset, value in fresh:
            self._broadcast(_decision_event(offset, value))
        self._broadcast(_event("position", {"inputOffset": self.position, "decisionOffset": self.last_sent}))

    def _broadcast(self, message: bytes) -> None:
        self.sent += 1
        for queue in self.pages:
            try:
                queue.put_nowait(message)
            except asyncio.QueueFull:
                _drain(queue)
                queue.put_nowait(_event("resync", {"reason": "the page fell behind the decision stream"}))

    def open(self) -> asyncio.Queue[bytes | None] | None:
        if len(self.pages) >= self.max_pages:
            return None
        queue: asyncio.Queue[bytes | None] = asyncio.Queue(PAGE_QUEUE)
        self.pages.append(queue)
        return queue

    def close(self, queue: asyncio.Queue[bytes | None]) -> None:
        with contextlib.suppress(ValueError):
            self.pages.remove(queue)

    def shutdown(self) -> None:
        for queue in self.pages:
            _drain(queue)
            queue.put_nowait(None)


def _drain(queue: asyncio.Queue[bytes | None]) -> None:
    while not queue.empty():
        queue.get_nowait()


_decoder = msgspec.json.Decoder()
_encode = msgspec.json.Encoder().encode


def _decode(value: bytes | None) -> Any:
    if value is None:
        return None
    try:
        return _decoder.decode(value)
    except msgspec.DecodeError:
        return {"raw": value.decode("utf-8", errors="replace")}


def _decision_event(offset: int, value: bytes | None) -> bytes:
    """The decision record spliced in as it is (it is the engine's JSON), not decoded and
    encoded again: forwarding costs a copy, not a parse."""
    if value is None or not value.startswith(b"{") or b"\n" in value:
        return _event("decision", {"offset": offset, "decision": _decode(value)})
    return b"event: decision\ndata: {\"offset\":" + str(offset).encode() + b",\"decision\":" + value + b"}\n\n"


def _event(kind: str, data: Any) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + _encode(data) + b"\n\n"
