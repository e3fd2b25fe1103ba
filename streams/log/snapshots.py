"""Engine snapshots in the snapshot log.

A snapshot is `domain.snapshot.dump(engine)` (msgspec) taken right after input offset N,
zlib-compressed and cut into chunks of at most `CHUNK_BYTES`, so that no record comes near
Kafka's default 1 MB message limit however large the state grows. All chunks of a snapshot are
written in the agent's transaction together with the decisions of the same batch, so a snapshot
in the log is always one of a state whose decisions are all in the decision log too; the
snapshot's offset therefore also records progress for input events that decided nothing.

Chunk `i` has key `engine/<i>`: in a compacted topic (Kafka's cleanup.policy=compact, or the
SQLite log's eager compaction) only the newest record per key is kept, and the newest snapshot's
chunks are always the newest for their keys, so it survives compaction whole. Headers say which
snapshot a chunk belongs to:

| header | value |
| --- | --- |
| `qf_snapshot_offset` | N: the last input offset folded into this state |
| `qf_chunk`, `qf_chunks` | this chunk's index, and how many there are |
| `qf_encoding` | `zlib+msgspec` |
| `ce_*` | the CloudEvents envelope (`ce_type: dev.quotaflow.snapshot`, `ce_id: <N>.<i>`) |
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from domain.engine import Engine
from streams.log import EventLog, Message, Record
from streams.log.envelope import SNAPSHOT_TYPE, SPECVERSION, now_rfc3339

CHUNK_BYTES = 512 * 1024
ENCODING = b"zlib+msgspec"


class SnapshotUnusable(Exception):
    """The snapshot log's newest entry cannot be restored (see the message)."""


@dataclass(frozen=True)
class Restored:
    offset: int  # the last input offset folded into `engine`
    engine: Engine
    size: int  # compressed bytes


def snapshot_data(engine: Engine) -> list[bytes]:
    """The engine's state as snapshot chunks (compressed, cut): what the snapshot records carry."""
    from domain.snapshot import dump

    data = zlib.compress(dump(engine), 1)
    return [data[i : i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)] or [b""]


def chunk_messages(chunks: list[bytes], offset: int, *, source: str) -> list[Message]:
    """Snapshot chunks (`snapshot_data`) taken right after input `offset`, as log messages."""
    time = now_rfc3339().encode()
    out = []
    for i, chunk in enumerate(chunks):
        headers = (
            ("ce_specversion", SPECVERSION),
            ("ce_type", SNAPSHOT_TYPE.encode()),
            ("ce_id", f"{offset}.{i}".encode()),
            ("ce_time", time),
            ("ce_source", source.encode()),
            ("content-type", b"application/octet-stream"),
            ("qf_snapshot_offset", str(offset).encode()),
            ("qf_chunk", str(i).encode()),
            ("qf_chunks", str(len(chunks)).encode()),
            ("qf_encoding", ENCODING),
        )
        out.append(Message(value=chunk, key=f"engine/{i}".encode(), headers=headers))
    return out


def _int_header(record: Record, name: str) -> int:
    raw = record.header(name)
    if raw is None:
        raise SnapshotUnusable(f"snapshot record at offset {record.offset} has no {name} header")
    try:
        return int(raw)
    except ValueError:
        raise SnapshotUnusable(f"snapshot record at offset {record.offset}: bad {name} {raw!r}") from None


@dataclass(frozen=True)
class Stored:
    """The newest snapshot as it sits in the log: its chunks joined, still compressed."""

    offset: int  # the last input offset folded into the state
    data: bytes


async def read_latest(log: EventLog, topic: str) -> Stored | None:
    """The newest snapshot's bytes; None when there is none. Raises `SnapshotUnusable`."""
    last = await log.read_last(topic, 1)
    if not last:
        return None
    offset = _int_header(last[0], "qf_snapshot_offset")
    count = _int_header(last[0], "qf_chunks")
    records = await log.read_last(topic, count) if count > 1 else last
    chunks = [
        (_int_header(r, "qf_chunk"), r.value or b"")
        for r in records
        if _int_header(r, "qf_snapshot_offset") == offset
    ]
    if [i for i, _ in chunks] != list(range(count)):
        raise SnapshotUnusable(f"snapshot after offset {offset}: chunks {[i for i, _ in chunks]} of {count}")
    if last[0].header("qf_encoding") != ENCODING:
        raise SnapshotUnusable(f"snapshot after offset {offset}: unknown encoding {last[0].header('qf_encoding')!r}")
    return Stored(offset, b"".join(chunk for _, chunk in chunks))


def restore(data: bytes, offset: int) -> Engine:
    """The engine of a stored snapshot's bytes. Raises `SnapshotUnusable`."""
    from domain.snapshot import SnapshotError, load

    try:
        return load(zlib.decompress(data))
    except (zlib.error, SnapshotError) as exc:
        raise SnapshotUnusable(f"snapshot after offset {offset}: {exc}") from exc


async def load_latest(log: EventLog, topic: str) -> Restored | None:
    """The newest snapshot, restored; None when there is none. Raises `SnapshotUnusable`."""
    stored = await read_latest(log, topic)
    if stored is None:
        return None
    return Restored(stored.offset, restore(stored.data, stored.offset), len(stored.data))
