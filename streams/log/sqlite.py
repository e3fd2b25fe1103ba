"""The embedded log: quotaflow's topics in one SQLite file, for one machine and no broker.

`sqlite:///quotaflow.db` (the default broker URL) selects it. It keeps the contract of
`streams.log.interface` (see there) with SQLite's own guarantees:

- the file is in WAL mode with `synchronous=FULL`: an append or a commit is on disk (fsync of
  the write-ahead log) when it returns, and readers in other processes never block the writer;
- each topic's offsets come from a per-topic counter in the same database, so they are dense,
  start at 0 and are never reused, even in a compacted topic whose old records were removed;
- a transaction is one SQLite transaction (`BEGIN IMMEDIATE` ... `COMMIT`) over every topic it
  touches: a process killed in the middle leaves nothing behind (the WAL is rolled back);
- compaction is eager: appending a keyed record to a compacted topic (the snapshot log) deletes
  the older records with the same key in the same transaction;
- tail reads poll with a short sleep (a few milliseconds), which is cheap on a local file;
- writer exclusivity is an exclusive `flock` on `<db>.<writer name>.lock`: the kernel drops it
  when the holder exits, however it exits, so a standby takes over at once. On top, each
  `acquire()` bumps the writer's epoch in the database and every write transaction checks it,
  so even a writer whose lock file was deleted under it is fenced instead of writing twice.

All SQLite calls run on one worker thread per connection, so the event loop never waits on the
disk or on another process's write lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from streams.log import (
    EventLog,
    Fenced,
    Message,
    Reader,
    Record,
    TopicSpec,
    Transaction,
    TransactionalWriter,
)

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS topics (
    name TEXT PRIMARY KEY,
    next_offset INTEGER NOT NULL DEFAULT 0,
    compacted INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS records (
    topic TEXT NOT NULL,
    offset INTEGER NOT NULL,
    key BLOB,
    value BLOB,
    headers BLOB,
    ts INTEGER NOT NULL,
    PRIMARY KEY (topic, offset)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS writers (
    name TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL
);
"""

_headers_enc = msgspec.msgpack.Encoder()
_headers_dec = msgspec.msgpack.Decoder(list[tuple[str, bytes]])


_BUSY_TIMEOUT_S = 60.0


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=_BUSY_TIMEOUT_S, check_same_thread=False)
    _use_wal(conn)
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(f"PRAGMA busy_timeout={int(_BUSY_TIMEOUT_S * 1000)}")
    return conn


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to write-ahead logging, once: the mode is kept in the file. Switching
    takes an exclusive lock, and SQLite answers "database is locked" at once, without waiting
    on its busy handler, when another connection opens the new file at the same moment (an
    agent and a client starting together), so the switch is retried until the busy timeout."""
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() not in ("wal", "memory"):
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


class _Worker:
    """One SQLite connection and the one thread it is used on."""

    def __init__(self, path: str, name: str) -> None:
        self._path = path
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=name)
        self.conn: sqlite3.Connection | None = None

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def run() -> T:
            if self.conn is None:
                self.conn = _connect(self._path)
            return fn(self.conn)

        return await asyncio.get_running_loop().run_in_executor(self._executor, run)

    async def close(self) -> None:
        def shut() -> None:
            if self.conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    if self.conn.in_transaction:
                        self.conn.execute("ROLLBACK")
                self.conn.close()
                self.conn = None

        with contextlib.suppress(RuntimeError):
            await asyncio.get_running_loop().run_in_executor(self._executor, shut)
        self._executor.shutdown(wait=False)


def _row_to_record(topic: str, row: tuple[Any, ...]) -> Record:
    offset, key, value, headers, ts = row
    return Record(
        topic=topic,
        offset=offset,
        key=key,
        value=value,
        headers=tuple(_headers_dec.decode(headers)) if headers else (),
        timestamp_ms=ts,
    )


def _insert(conn: sqlite3.Connection, items: Sequence[tuple[str, Message]]) -> list[int]:
    """Append inside the caller's transaction; returns the offsets."""
    now = int(time.time() * 1000)
    next_offsets: dict[str, tuple[int, bool]] = {}
    offsets: list[int] = []
    for topic, message in items:
        if topic not in next_offsets:
            conn.execute("INSERT OR IGNORE INTO topics (name) VALUES (?)", (topic,))
            row = conn.execute("SELECT next_offset, compacted FROM topics WHERE name = ?", (topic,)).fetchone()
            next_offsets[topic] = (row[0], bool(row[1]))
        offset, compacted = next_offsets[topic]
        if compacted and message.key is not None:
            conn.execute("DELETE FROM records WHERE topic = ? AND key = ? AND offset < ?", (topic, message.key, offset))
        conn.execute(
            "INSERT INTO records (topic, offset, key, value, headers, ts) VALUES (?, ?, ?, ?, ?, ?)",
            (
                topic,
                offset,
                message.key,
                message.value,
                _headers_enc.encode(list(message.headers)) if message.headers else None,
                now,
            ),
        )
        offsets.append(offset)
        next_offsets[topic] = (offset + 1, compacted)
    for topic, (offset, _) in next_offsets.items():
        conn.execute("UPDATE topics SET next_offset = ? WHERE name = ?", (offset, topic))
    return offsets


class SqliteLog(EventLog):
    def __init__(self, path: str | os.PathLike[str], *, poll_interval: float = 0.002) -> None:
        self.path = str(path)
        self.url = f"sqlite:///{self.path}"
        self.poll_interval = poll_interval
        self._worker = _Worker(self.path, "sqlite-log")
        self._started = False

    async def start(self) -> None:
        if self._started:
            return
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        await self._worker.call(lambda c: c.executescript(_SCHEMA))
        self._started = True

    async def close(self) -> None:
        await self._worker.close()
        self._started = False

    async def ensure_topics(self, specs: Sequence[TopicSpec], *, single_partition: Sequence[str] = ()) -> None:
        # An SQLite topic is one ordered table range: it has exactly one partition by design.
        def create(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for spec in specs:
                    conn.execute(
                        "INSERT OR IGNORE INTO topics (name, compacted) VALUES (?, ?)",
                        (spec.name, int(spec.compacted)),
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

        await self._worker.call(create)

    async def append(self, topic: str, messages: Sequence[Message]) -> list[int]:
        def write(conn: sqlite3.Connection) -> list[int]:
            conn.execute("BEGIN IMMEDIATE")
            try:
                offsets = _insert(conn, [(topic, m) for m in messages])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return offsets

        return await self._worker.call(write)

    async def end_offset(self, topic: str) -> int:
        def query(conn: sqlite3.Connection) -> int:
            row = conn.execute("SELECT next_offset FROM topics WHERE name = ?", (topic,)).fetchone()
            return int(row[0]) if row else 0

        return await self._worker.call(query)

    async def read_last(self, topic: str, n: int) -> list[Record]:
        def query(conn: sqlite3.Connection) -> list[Record]:
            rows = conn.execute(
                "SELECT offset, key, value, headers, ts FROM records WHERE topic = ? ORDER BY offset DESC LIMIT ?",
                (topic, n),
            ).fetchall()
            return [_row_to_record(topic, row) for row in reversed(rows)]

        return await self._worker.call(query)

    async def _read_from(self, topic: str, start: int, limit: int) -> list[Record]:
        def query(conn: sqlite3.Connection) -> list[Record]:
            rows = conn.execute(
                "SELECT offset, key, value, headers, ts FROM records WHERE topic = ? AND offset >= ? "
                "ORDER BY offset LIMIT ?",
                (topic, start, limit),
            ).fetchall()
            return [_row_to_record(topic, row) for row in rows]

        return await self._worker.call(query)

    async def reader(self, topic: str, start: int = 0) -> Reader:
        return SqliteReader(self, topic, start)

    def writer(self, name: str, *, standby_topic: str | None = None) -> TransactionalWriter:
        return SqliteWriter(self, name)


class SqliteReader(Reader):
    def __init__(self, log: SqliteLog, topic: str, start: int) -> None:
        self._log = log
        self.topic = topic
        self.position = start

    async def read(self, limit: int = 1000, timeout: float = 0.0) -> list[Record]:
        deadline = time.monotonic() + timeout
        delay = self._log.poll_interval
        while True:
            records = await self._log._read_from(self.topic, self.position, limit)
            if records:
                self.position = records[-1].offset + 1
                return records
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.02)

    async def close(self) -> None:
        pass


def _lock_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


class SqliteWriter(TransactionalWriter):
    def __init__(self, log: SqliteLog, name: str, *, retry_interval: float = 0.05) -> None:
        self._log = log
        self.name = name
        self.lock_path = f"{log.path}.{_lock_name(name)}.lock"
        self._retry = retry_interval
        self._fd: int | None = None
        self._epoch: int | None = None
        self._worker = _Worker(log.path, f"sqlite-writer-{_lock_name(name)}")

    @property
    def active(self) -> bool:
        return self._fd is not None and self._epoch is not None

    @property
    def epoch(self) -> int | None:
        return self._epoch

    async def acquire(self) -> None:
        if self.active:
            return
        if self._fd is None:  # (after being fenced we still hold the lock)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        await asyncio.sleep(self._retry)
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd

        def bump(conn: sqlite3.Connection) -> int:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("INSERT OR IGNORE INTO writers (name, epoch) VALUES (?, 0)", (self.name,))
                conn.execute("UPDATE writers SET epoch = epoch + 1 WHERE name = ?", (self.name,))
                (epoch,) = conn.execute("SELECT epoch FROM writers WHERE name = ?", (self.name,)).fetchone()
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return int(epoch)

        try:
            await self._log.start()
            self._epoch = await self._worker.call(bump)
        except BaseException:
            self._release_lock()
            raise

    def _release_lock(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        if not self.active:
            raise Fenced(f"writer {self.name!r} is not active (call acquire first)")
        tx = _SqliteTransaction(self)
        try:
            yield tx
        except BaseException:
            await tx.rollback()
            raise
        await tx.commit()

    def _check_epoch(self, conn: sqlite3.Connection) -> None:
        row = conn.execute("SELECT epoch FROM writers WHERE name = ?", (self.name,)).fetchone()
        if row is None or row[0] != self._epoch:
            conn.execute("ROLLBACK")
            self._epoch = None
            raise Fenced(f"writer {self.name!r} was fenced: epoch {row[0] if row else None} is not ours")

    async def close(self) -> None:
        await self._worker.close()
        self._epoch = None
        self._release_lock()


class _SqliteTransaction(Transaction):
    def __init__(self, writer: SqliteWriter) -> None:
        self._writer = writer
        self._pending: list[tuple[str, Message]] = []
        self._open = False
        self.offsets: list[int] = []

    async def append(self, topic: str, message: Message) -> None:
        self._pending.append((topic, message))

    def _write_pending(self, conn: sqlite3.Connection) -> None:
        if not self._open:
            conn.execute("BEGIN IMMEDIATE")
            self._open = True
            self._writer._check_epoch(conn)
        self.offsets.extend(_insert(conn, self._pending))
        self._pending = []

    async def flush(self) -> None:
        def run(conn: sqlite3.Connection) -> None:
            try:
                self._write_pending(conn)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                self._open = False
                raise

        await self._writer._worker.call(run)

    async def commit(self) -> None:
        def run(conn: sqlite3.Connection) -> None:
            try:
                self._write_pending(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                self._open = False

        if self._pending or self._open:
            await self._writer._worker.call(run)

    async def rollback(self) -> None:
        def run(conn: sqlite3.Connection) -> None:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._open = False

        self._pending = []
        self.offsets = []
        if self._open:
            await self._writer._worker.call(run)
