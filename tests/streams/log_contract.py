"""The log contract (streams/log/interface.py), written once, run against every implementation.

Like the `eventsourcing` library's abstract recorder tests: `LogContract` holds the tests, and a
subclass per implementation (test_log_sqlite.py, test_log_kafka.py) provides the fixtures:

- `make_log()`: a started log over the implementation's storage; called twice it gives two
  independent handles on the same storage (two processes, or a reopen);
- `topics`: three unique topic names;
- `takeover(log, name)`: a writer for `name` that takes over without waiting for the current
  holder -- what a stale holder must be fenced against.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from streams.log import EventLog, Fenced, Message, Record, TransactionalWriter

MakeLog = Callable[[], Awaitable[EventLog]]
CHILD = Path(__file__).with_name("log_writer_child.py")


@contextlib.asynccontextmanager
async def log_opener(new_log: Callable[[], EventLog]) -> AsyncIterator[MakeLog]:
    """A `make_log` that starts `new_log()` handles and closes them all afterwards."""
    opened: list[EventLog] = []

    async def make() -> EventLog:
        log = new_log()
        await log.start()
        opened.append(log)
        return log

    try:
        yield make
    finally:
        for log in opened:
            await log.close()


def values(records: list[Record]) -> list[bytes | None]:
    return [r.value for r in records]


async def read_until(log: EventLog, topic: str, count: int, start: int = 0, timeout: float = 15.0) -> list[Record]:
    out: list[Record] = []
    async with await log.reader(topic, start) as reader:
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            out.extend(await reader.read(timeout=0.5))
    return out


class LogContract:
    """Subclasses supply `make_log`, `topics`, `takeover` and `child_env` fixtures."""

    async def test_append_gives_dense_offsets_from_zero_in_order(self, make_log: MakeLog, topics: list[str]) -> None:
        log = await make_log()
        topic = topics[0]
        assert await log.end_offset(topic) == 0
        first = await log.append(topic, [Message(f"v{i}".encode()) for i in range(5)])
        second = await log.append(topic, [Message(f"v{i}".encode()) for i in range(5, 8)])
        assert first + second == list(range(8))
        assert await log.end_offset(topic) == 8
        records = await log.read_all(topic)
        assert [r.offset for r in records] == list(range(8))
        assert values(records) == [f"v{i}".encode() for i in range(8)]

    async def test_reader_starts_at_an_offset(self, make_log: MakeLog, topics: list[str]) -> None:
        log = await make_log()
        await log.append(topics[0], [Message(bytes([i])) for i in range(10)])
        records = await log.read_all(topics[0], start=6)
        assert [r.offset for r in records] == [6, 7, 8, 9]
        async with await log.reader(topics[0], 9) as reader:
            assert [r.offset for r in await reader.read(timeout=5)] == [9]
            assert reader.position == 10

    async def test_keys_headers_and_arbitrary_bytes_round_trip(self, make_log: MakeLog, topics: list[str]) -> None:
        log = await make_log()
        sent = [
            Message(b'{"type":"X"}', b"team-a/wl", (("ce_type", b"quotaflow.X"), ("ce_id", b"1"))),
            Message(b"\x00\xff\xfe garbage", None, ()),
            Message(None, b"k", ()),
        ]
        await log.append(topics[0], sent)
        records = await log.read_all(topics[0])
        assert [(r.value, r.key, r.headers) for r in records] == [(m.value, m.key, m.headers) for m in sent]
        assert records[0].header("ce_type") == b"quotaflow.X"
        assert records[0].timestamp_ms > 0

    async def test_durable_across_reopen(self, make_log: MakeLog, topics: list[str]) -> None:
        log = await make_log()
        await log.append(topics[0], [Message(b"a"), Message(b"b")])
        writer = log.writer(f"{topics[0]}.durable")
        await writer.acquire()
        await writer.commit([(topics[1], Message(b"c"))])
        await writer.close()
        await log.close()
        reopened = await make_log()
        assert values(await reopened.read_all(topics[0])) == [b"a", b"b"]
        assert values(await reopened.read_all(topics[1])) == [b"c"]
        assert await reopened.end_offset(topics[0]) == 2

    async def test_transaction_is_visible_all_or_nothing(self, make_log: MakeLog, topics: list[str]) -> None:
        writing, watching = await make_log(), await make_log()
        a, b = topics[0], topics[1]
        writer = writing.writer(f"{topics[0]}.atomic")
        await writer.acquire()
        try:
            async with writer.transaction() as tx:
                await tx.append(a, Message(b"a1"))
                await tx.append(b, Message(b"b1"))
                await tx.append(a, Message(b"a2"))
                await tx.flush()  # in the log, but not committed
                assert await watching.read_all(a) == []
                assert await watching.read_all(b) == []
            assert values(await watching.read_all(a)) == [b"a1", b"a2"]
            assert values(await watching.read_all(b)) == [b"b1"]
        finally:
            await writer.close()

    async def test_aborted_transaction_leaves_nothing(self, make_log: MakeLog, topics: list[str]) -> None:
        log = await make_log()
        a, b = topics[0], topics[1]
        writer = log.writer(f"{topics[0]}.abort")
        await writer.acquire()
        try:
            with pytest.raises(RuntimeError, match="boom"):
                async with writer.transaction() as tx:
                    await tx.append(a, Message(b"lost-a"))
                    await tx.append(b, Message(b"lost-b"))
                    await tx.flush()
                    raise RuntimeError("boom")
            offsets = await writer.commit([(a, Message(b"kept-a")), (b, Message(b"kept-b"))])
        finally:
            await writer.close()
        kept_a, kept_b = await log.read_all(a), await log.read_all(b)
        assert values(kept_a) == [b"kept-a"]
        assert values(kept_b) == [b"kept-b"]
        assert offsets == [kept_a[0].offset, kept_b[0].offset]
        assert [r.value for r in await log.read_last(a, 5)] == [b"kept-a"]

    async def test_writer_killed_mid_transaction_leaves_nothing(
        self, make_log: MakeLog, topics: list[str], child_env: dict[str, str], log_url: str
    ) -> None:
        a, b = topics[0], topics[1]
        child = subprocess.Popen(
            [sys.executable, str(CHILD), log_url, f"{a}.killed", a, b],
            env=child_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert child.stdout is not None
            line = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), 60)
            assert line.strip() == b"flushed", child.stderr.read() if child.stderr else b""
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        log = await make_log()
        writer = log.writer(f"{a}.killed")
        await writer.acquire()  # a successor resolves the dead writer's open transaction
        try:
            await writer.commit([(a, Message(b"after"))])
        finally:
            await writer.close()
        assert values(await log.read_all(a)) == [b"after"]
        assert values(await log.read_all(b)) == []

    async def test_tail_read_waits_for_new_records(self, make_log: MakeLog, topics: list[str]) -> None:
        tailing, appending = await make_log(), await make_log()
        await appending.append(topics[0], [Message(b"old")])
        async with await tailing.reader(topics[0], 1) as reader:
            assert await reader.read(timeout=0.2) == []
            pending = asyncio.create_task(reader.read(timeout=10))
            await asyncio.sleep(0.3)
            assert not pending.done()
            began = time.monotonic()
            await appending.append(topics[0], [Message(b"new")])
            records = await pending
            assert values(records) == [b"new"]
            assert time.monotonic() - began < 2.0
            # a committed transaction wakes a tail too
            writer = appending.writer(f"{topics[0]}.tail")
            await writer.acquire()
            try:
                follow = asyncio.create_task(reader.read(timeout=10))
                await writer.commit([(topics[0], Message(b"tx"))])
                assert values(await follow) == [b"tx"]
            finally:
                await writer.close()

    async def test_read_last(self, make_log: MakeLog, topics: list[str]) -> None:
        log = await make_log()
        assert await log.read_last(topics[0], 3) == []
        await log.append(topics[0], [Message(str(i).encode()) for i in range(10)])
        last = await log.read_last(topics[0], 3)
        assert values(last) == [b"7", b"8", b"9"]
        assert [r.offset for r in last] == [7, 8, 9]
        assert values(await log.read_last(topics[0], 50)) == [str(i).encode() for i in range(10)]

    async def test_second_writer_waits_then_takes_over(self, make_log: MakeLog, topics: list[str]) -> None:
        first_log, second_log = await make_log(), await make_log()
        first = first_log.writer(f"{topics[0]}.solo", standby_topic=topics[2])
        second = second_log.writer(f"{topics[0]}.solo", standby_topic=topics[2])
        await first.acquire()
        try:
            waiting = asyncio.create_task(second.acquire())
            await asyncio.sleep(2.0)
            assert not waiting.done(), "a second writer became active while the first was"
            await first.commit([(topics[0], Message(b"first"))])
            await first.close()
            await asyncio.wait_for(waiting, 30)
            assert second.active
            await second.commit([(topics[0], Message(b"second"))])
        finally:
            await first.close()
            await second.close()
        assert values(await first_log.read_all(topics[0])) == [b"first", b"second"]

    async def test_stale_writer_is_fenced(
        self,
        make_log: MakeLog,
        topics: list[str],
        takeover: Callable[[EventLog, str], Awaitable[TransactionalWriter]],
    ) -> None:
        old_log, new_log = await make_log(), await make_log()
        old = old_log.writer(f"{topics[0]}.fence")
        await old.acquire()
        await old.commit([(topics[0], Message(b"old-1"))])
        new = await takeover(new_log, f"{topics[0]}.fence")
        try:
            with pytest.raises(Fenced):
                await old.commit([(topics[0], Message(b"old-2")), (topics[1], Message(b"old-2"))])
            assert not old.active
            await new.commit([(topics[0], Message(b"new-1"))])
        finally:
            await old.close()
            await new.close()
        assert values(await new_log.read_all(topics[0])) == [b"old-1", b"new-1"]
        assert values(await new_log.read_all(topics[1])) == []
