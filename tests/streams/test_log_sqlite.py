"""The log contract on the embedded SQLite log."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from log_contract import LogContract, log_opener

from streams.log import EventLog, Message, TransactionalWriter
from streams.log.sqlite import SqliteLog, SqliteWriter

pytestmark = pytest.mark.timeout(60, func_only=True)


class TestSqliteLog(LogContract):
    @pytest.fixture
    def db_path(self, tmp_path: Path) -> Path:
        return tmp_path / "log.db"

    @pytest.fixture
    def log_url(self, db_path: Path) -> str:
        return f"sqlite:///{db_path}"  # an absolute path: sqlite:////tmp/...

    @pytest.fixture
    def child_env(self) -> dict[str, str]:
        return dict(os.environ)

    @pytest.fixture
    async def make_log(self, db_path: Path) -> AsyncIterator[Callable[[], Awaitable[EventLog]]]:
        async with log_opener(lambda: SqliteLog(db_path)) as make:
            yield make

    @pytest.fixture
    def topics(self) -> list[str]:
        return ["t.one", "t.two", "t.three"]

    @pytest.fixture
    def takeover(self) -> Callable[[EventLog, str], Awaitable[TransactionalWriter]]:
        async def take(log: EventLog, name: str) -> TransactionalWriter:
            # The only way two SQLite writers can both believe they hold a name: the lock file
            # was removed under the first one. The epoch check must still fence it.
            writer = log.writer(name)
            assert isinstance(writer, SqliteWriter)
            os.unlink(writer.lock_path)
            await writer.acquire()
            return writer

        return take


async def test_wal_mode_and_full_sync(tmp_path: Path) -> None:
    log = SqliteLog(tmp_path / "x.db")
    await log.start()
    try:
        mode = await log._worker.call(lambda c: c.execute("PRAGMA journal_mode").fetchone()[0])
        sync = await log._worker.call(lambda c: c.execute("PRAGMA synchronous").fetchone()[0])
        assert (mode, sync) == ("wal", 2)
    finally:
        await log.close()


async def test_compacted_topic_keeps_the_latest_record_per_key(tmp_path: Path) -> None:
    from streams.log import TopicSpec

    log = SqliteLog(tmp_path / "c.db")
    await log.start()
    try:
        await log.ensure_topics([TopicSpec("snaps", compacted=True)])
        await log.append("snaps", [Message(b"1", b"k"), Message(b"x", b"other"), Message(b"2", b"k")])
        records = await log.read_all("snaps")
        assert [(r.offset, r.key, r.value) for r in records] == [(1, b"other", b"x"), (2, b"k", b"2")]
        assert await log.end_offset("snaps") == 3
    finally:
        await log.close()


async def test_logs_opened_at_once_on_a_new_file_all_start(tmp_path: Path) -> None:
    """An agent and its clients started together open the same new file at once; each must
    start, however their switches to write-ahead logging interleave (SQLite refuses a
    concurrent switch at once, without waiting)."""
    for round_ in range(150):
        db = tmp_path / f"r{round_}.db"
        logs = [SqliteLog(db) for _ in range(6)]
        try:
            await asyncio.gather(*(log.start() for log in logs))
        finally:
            await asyncio.gather(*(log.close() for log in logs))
