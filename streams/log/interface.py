"""The log interface: the one abstraction the agent, the client and the CLI are written against.

quotaflow keeps three logs (topics):

- the **input log** (`quotaflow.events`, exactly one partition): every event anyone ever sent,
  in one total order. It is the source of truth: the engine's state is a pure fold of it, so it
  is kept forever (unlimited retention, never compacted). Anything else -- the decision log,
  snapshots, every projection -- can be rebuilt from it, and `quotaflow replay` of an export of it
  must reproduce the decision log exactly; with a finite retention the oldest events would be
  lost and neither would hold. One partition, because admission depends on the order of events
  across all queues and workloads (a cohort spans queues), and Kafka orders only within a
  partition.
- the **decision log** (`quotaflow.decisions`, one partition): the engine's output, each record
  carrying the input offset that caused it. Its tail is also the agent's progress marker.
- the **snapshot log** (`quotaflow.snapshots`, compacted): periodic engine snapshots, so that a
  restart does not fold the whole input log again.

Two implementations, picked by a broker URL (`open_log`):

- `kafka://host:port[,host:port...]` -- `streams.log.kafka.KafkaLog` (aiokafka);
- `sqlite:///relative/path.db` or `sqlite:////absolute/path.db` -- `streams.log.sqlite.SqliteLog`,
  a durable embedded log for one machine with no broker.

Both satisfy the same contract, which `tests/streams/log_contract.py` checks for each:

- `append` is durable when it returns and gives each record the next offset of its topic;
  offsets only grow (Kafka may skip some: transaction markers take offsets too).
- readers see only committed records, in offset order; `Reader.read` waits (up to a timeout)
  for new records, which is how tails (`watch`, the agent) follow a log.
- a `TransactionalWriter` writes records to several topics atomically: after a crash in the
  middle, readers see all of a transaction or none of it.
- at most one writer per name is active: `acquire()` waits while another holds the name, and
  fences the one before it, so a stale writer (a paused process, a network partition) can no
  longer commit (Kafka: `transactional.id` epochs plus a consumer group for standby; SQLite: an
  exclusive file lock plus an epoch checked inside every write transaction).
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Self

import msgspec

from streams.settings import ENV_KAFKA_BOOTSTRAP, Settings

Headers = tuple[tuple[str, bytes], ...]


# Message and Record are msgspec Structs, not dataclasses: the agent makes one per input event and
# per decision, and a Struct is built several times faster; gc=False keeps them out of the cyclic
# collector (they hold only bytes, str, ints and tuples of those, so they cannot be in a cycle),
# which otherwise rescans every live one on each young collection.
class Message(msgspec.Struct, frozen=True, gc=False):
    """What a producer hands to the log."""

    value: bytes | None
    key: bytes | None = None
    headers: Headers = ()


class Record(msgspec.Struct, frozen=True, gc=False):
    """What a reader gets back: a message plus where it sits."""

    topic: str
    offset: int
    value: bytes | None
    key: bytes | None = None
    headers: Headers = ()
    timestamp_ms: int = 0

    @property
    def log_time(self) -> int | None:
        """The record's time in the log, in µs, as the engine reads it (domain/clock.py): the
        broker's append time on Kafka, the SQLite log's stamp; None when the log gave none."""
        return self.timestamp_ms * 1000 if self.timestamp_ms > 0 else None

    def header(self, name: str) -> bytes | None:
        for k, v in self.headers:
            if k == name:
                return v
        return None


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    compacted: bool = False
    # Records stamped with the broker's append time (Kafka `message.timestamp.type=
    # LogAppendTime`): the input log's time, which no producer can set (domain/clock.py).
    log_append_time: bool = False


@dataclass(frozen=True)
class Topics:
    """The three logs of one quotaflow installation."""

    input: str
    decisions: str
    snapshots: str

    @classmethod
    def from_settings(cls, settings: Settings) -> Topics:
        return cls(settings.input_topic, settings.decisions_topic, settings.snapshots_topic)

    def specs(self) -> list[TopicSpec]:
        return [
            TopicSpec(self.input, log_append_time=True),
            TopicSpec(self.decisions),
            TopicSpec(self.snapshots, compacted=True),
        ]


class LogError(RuntimeError):
    """The log cannot be used as asked (a wrong topic layout, a bad URL, ...)."""


class Fenced(LogError):
    """A newer writer holds this writer's name; this one must not write again."""


class LogUnavailable(LogError):
    """The log could not be reached or an operation's outcome is unknown; retry later."""


class Reader(abc.ABC):
    """Reads one topic in offset order from a start offset, committed records only."""

    position: int

    @abc.abstractmethod
    async def read(self, limit: int = 1000, timeout: float = 0.0) -> list[Record]:
        """Up to `limit` records from `position` on; waits up to `timeout` s for the first."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def follow(self, poll: float = 1.0) -> AsyncIterator[Record]:
        """Every record from `position` on, waiting for new ones forever."""
        while True:
            for record in await self.read(timeout=poll):
                yield record


class Transaction(abc.ABC):
    """Records appended here become visible together when the transaction commits."""

    #: after a commit: the offset of every appended record, in append order
    offsets: list[int]

    @abc.abstractmethod
    async def append(self, topic: str, message: Message) -> None: ...

    @abc.abstractmethod
    async def flush(self) -> None:
        """Hand everything appended so far to the log, still uncommitted (invisible)."""


class TransactionalWriter(abc.ABC):
    """The single active writer of a name (see the module doc)."""

    @abc.abstractmethod
    async def acquire(self) -> None:
        """Wait until this writer is the only active one for its name, fencing older ones."""

    @property
    @abc.abstractmethod
    def active(self) -> bool:
        """False once the writer knows it lost (or never had) its exclusivity."""

    @abc.abstractmethod
    def transaction(self) -> contextlib.AbstractAsyncContextManager[Transaction]:
        """`async with writer.transaction() as tx: await tx.append(...)`; commits on exit,
        aborts if the block raises. Raises `Fenced` when a newer writer took over."""

    async def commit(self, items: Sequence[tuple[str, Message]]) -> list[int]:
        """Append `items` in one transaction; returns their offsets."""
        async with self.transaction() as tx:
            for topic, message in items:
                await tx.append(topic, message)
        return tx.offsets

    @abc.abstractmethod
    async def close(self) -> None:
        """Give up exclusivity (an open transaction is aborted)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class EventLog(abc.ABC):
    """A set of topics, each one ordered log of records."""

    url: str

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @abc.abstractmethod
    async def ensure_topics(self, specs: Sequence[TopicSpec], *, single_partition: Sequence[str] = ()) -> None:
        """Create missing topics with the right settings. Raises `LogError` when an existing topic
        named in `single_partition` has more than one partition."""

    @abc.abstractmethod
    async def append(self, topic: str, messages: Sequence[Message]) -> list[int]:
        """Durably append, in order, without a transaction; returns the offsets."""

    @abc.abstractmethod
    async def end_offset(self, topic: str) -> int:
        """One past the last committed record's offset (0 for an empty topic)."""

    @abc.abstractmethod
    async def read_last(self, topic: str, n: int) -> list[Record]:
        """The last `n` committed records of `topic` (fewer if it has fewer), oldest first."""

    @abc.abstractmethod
    async def reader(self, topic: str, start: int = 0) -> Reader: ...

    @abc.abstractmethod
    def writer(self, name: str, *, standby_topic: str | None = None) -> TransactionalWriter:
        """The transactional writer called `name`. On Kafka, `standby_topic` is the topic whose
        consumer group decides which of several waiting writers becomes active."""

    async def read_all(self, topic: str, start: int = 0) -> list[Record]:
        """Every committed record from `start` to the current end."""
        end = await self.end_offset(topic)
        out: list[Record] = []
        async with await self.reader(topic, start) as reader:
            while reader.position < end:
                batch = await reader.read(limit=10_000, timeout=1.0)
                out.extend(r for r in batch if r.offset < end)
        return out


@dataclass(frozen=True)
class BrokerUrl:
    scheme: str  # "kafka" or "sqlite"
    location: str  # bootstrap servers or a file path

    @classmethod
    def parse(cls, url: str, settings: Settings | None = None) -> BrokerUrl:
        scheme, sep, rest = url.partition("://")
        if not sep:
            raise LogError(f"broker URL {url!r}: expected kafka://host:port or sqlite:///path")
        if scheme == "kafka":
            from streams.log.kafka_config import KafkaConfigError

            named = rest.strip("/")
            bootstrap = named or (settings or Settings.from_env()).kafka_bootstrap
            problem = _bootstrap_problem(bootstrap)
            if problem:
                # Else aiokafka and Faust fail on it with a ValueError deep in their start.
                source = f"broker URL {url!r}" if named else f"{ENV_KAFKA_BOOTSTRAP}={bootstrap!r}"
                raise KafkaConfigError(f"{source}: {problem}")
            return cls("kafka", bootstrap)
        if scheme == "sqlite":
            if not rest.startswith("/") or rest == "/":
                raise LogError(f"broker URL {url!r}: expected sqlite:///relative.db or sqlite:////abs/path.db")
            return cls("sqlite", rest[1:])
        raise LogError(f"broker URL {url!r}: unknown scheme {scheme!r} (kafka or sqlite)")


def _bootstrap_problem(bootstrap: str) -> str | None:
    """What aiokafka cannot parse in a bootstrap list (host[:port],... with IPv6 addresses in
    brackets when a port follows); None when it can."""
    import socket

    for server in bootstrap.split(","):
        server = server.strip()
        if server.startswith("["):
            host, bracket, rest = server[1:].partition("]")
            if not bracket or (rest and not rest.startswith(":")):
                return f"{server!r} is not [IPv6 address] or [IPv6 address]:port"
            port = rest[1:] if rest else None
        elif server.count(":") > 1:
            try:
                socket.inet_pton(socket.AF_INET6, server)
                host, port = server, None
            except OSError:
                host, _, port = server.rpartition(":")
        else:
            host, _, port = server.partition(":")
            port = port if ":" in server else None
        if not host:
            return f"no host in {server!r}" if server else "an empty host in the list"
        if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
            return f"the port of {server!r} is not a number from 1 to 65535"
    return None


def open_log(url: str, settings: Settings | None = None) -> EventLog:
    """An (unstarted) log for a broker URL."""
    parsed = BrokerUrl.parse(url, settings)
    if parsed.scheme == "kafka":
        from streams.log.kafka import KafkaLog

        return KafkaLog(parsed.location)
    from streams.log.sqlite import SqliteLog

    return SqliteLog(parsed.location)
