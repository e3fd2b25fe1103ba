"""The log on Apache Kafka, with aiokafka.

`kafka://host:port` selects it. How it keeps the contract of `streams.log.interface`:

- **topics** are created on start (`ensure_topics`) with one partition each: the input and
  decision logs with `cleanup.policy=delete` and unlimited retention (`retention.ms=-1`,
  `retention.bytes=-1`; see `streams.log.interface` for why the input log must keep everything, and the
  decision log's tail is where the agent finds its progress), the snapshot log with
  `cleanup.policy=compact`. An existing input (or decision) topic with more than one partition is
  refused: the order of events across partitions is undefined. The replication factor is
  `QUOTAFLOW_KAFKA_REPLICATION_FACTOR`, by default 3 or the number of brokers if fewer.
- **appends** go through an idempotent producer with `acks=all`: a retried send cannot
  duplicate or reorder a record, and a returned offset is on every in-sync replica.
- **readers** are assigned consumers (no consumer group, no committed offsets) with
  `isolation_level=read_committed`, so they never see records of aborted or open transactions.
  Their `position` is the consumer's, which also steps over transaction markers.
- **transactions** are Kafka transactions of a producer whose `transactional.id` is the writer's
  name. `acquire()` starts that producer, and its InitProducerId bumps the id's epoch: any older
  producer with the same id (a crashed or paused agent) is fenced (`ProducerFenced` on its next
  send or commit) and its open transaction is aborted before we go on.
- **standby**: several writers with the same name also join a consumer group (the writer's name)
  subscribed to the input topic, whose one partition is assigned to exactly one member (sticky
  assignment, so a standby joining does not take it away). `acquire()` returns only on the
  member that holds it; when that member dies, the group reassigns the partition after the
  session timeout (`QUOTAFLOW_KAFKA_SESSION_TIMEOUT_MS`, default 6000, the broker's minimum) and
  the standby's `acquire()` returns. The group only elects; fencing by `transactional.id` is what
  makes two writers impossible even when the group's view is stale. The member never fetches
  (its partition stays paused) and commits no offsets. With `QUOTAFLOW_INSTANCE_ID` set (the
  Kubernetes manifests set it to the pod name), membership is static: a restarted pod takes its
  place back at once instead of waiting for the session timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.coordinator.assignors.sticky.sticky_assignor import (
    StickyPartitionAssignor,
)
from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    IllegalOperation,
    InvalidProducerEpoch,
    KafkaError,
    MessageSizeTooLargeError,
    ProducerFenced,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
)
from aiokafka.producer import sender as _aiokafka_sender
from aiokafka.structs import ConsumerRecord, TopicPartition

from streams.log import (
    EventLog,
    Fenced,
    LogError,
    LogUnavailable,
    Message,
    Reader,
    Record,
    TopicSpec,
    Transaction,
    TransactionalWriter,
)
from streams.log.kafka_config import KafkaSecurity, number_from_env

log = structlog.get_logger("quotaflow.kafka")

# After a commit, the transaction coordinator is still writing the commit markers when the next
# transaction's AddPartitionsToTxn arrives, and answers CONCURRENT_TRANSACTIONS (KAFKA-5477).
# aiokafka then waits a fixed BACKOFF_OVERRIDE of 20 ms before asking again -- once per
# transaction, which was most of the agent's decision latency (measured in bench/figures.md). The
# markers take a millisecond or two on a healthy broker, so ask again after 2 ms; the cost is a
# few more small requests.
_aiokafka_sender.BACKOFF_OVERRIDE = 0.002

ENV_REPLICATION_FACTOR = "QUOTAFLOW_KAFKA_REPLICATION_FACTOR"
ENV_SESSION_TIMEOUT_MS = "QUOTAFLOW_KAFKA_SESSION_TIMEOUT_MS"
ENV_INSTANCE_ID = "QUOTAFLOW_INSTANCE_ID"

# Snapshot chunks stay below this, so no topic or client needs a raised message size limit.
MAX_REQUEST_SIZE = 4 * 1024 * 1024
# One record batch per topic and transaction, typically (brokers accept 1 MB batches by default).
MAX_BATCH_SIZE = 900 * 1024
UNLIMITED = {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}
COMPACTED = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"}
LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}
OP_TIMEOUT_S = 30.0
# How long a plain append keeps trying through a broker outage before it gives up with
# LogUnavailable (env QUOTAFLOW_KAFKA_APPEND_TIMEOUT_S), and its backoff between attempts.
ENV_APPEND_TIMEOUT_S = "QUOTAFLOW_KAFKA_APPEND_TIMEOUT_S"
APPEND_TIMEOUT_S = 120.0
APPEND_BACKOFF_S = (0.2, 5.0)
# Failures no retry can mend: the same append fails the same way on a fresh producer.
_NOT_RETRIED = (MessageSizeTooLargeError, TopicAuthorizationFailedError, ClusterAuthorizationFailedError)
# Messages per second an attempt is given on top of OP_TIMEOUT_S before it counts as failed.
APPEND_RATE_FLOOR = 1000.0
# How far back from the log's end a retry looks for messages of the failed attempt that landed.
LANDED_LOOKBACK = 20_000


def _record(r: ConsumerRecord[bytes, bytes]) -> Record:
    return Record(r.topic, r.offset, r.value, r.key, tuple(r.headers) if r.headers else (), r.timestamp)


async def _start(consumer: AIOKafkaConsumer) -> AIOKafkaConsumer:
    try:
        await consumer.start()
    except BaseException:
        with contextlib.suppress(Exception):
            await consumer.stop()
        raise
    # Let the consumer's own tasks begin: aiokafka's stop() re-raises the cancellation of a task
    # that never ran (NoGroupCoordinator._reset_committed_routine) when stop follows start at once.
    await asyncio.sleep(0)
    return consumer


class KafkaLog(EventLog):
    def __init__(
        self,
        bootstrap: str,
        *,
        security: KafkaSecurity | None = None,
        replication_factor: int | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.url = f"kafka://{bootstrap}"
        self.security = security or KafkaSecurity.from_env()
        # Every number setting is read here, when the log is opened, so a bad one stops the command
        # at start (KafkaConfigError) rather than in the middle of an agent's election.
        if replication_factor is None:
            replication_factor = number_from_env(ENV_REPLICATION_FACTOR, -1)  # 0 or less: 3, or fewer brokers
        self.replication_factor = replication_factor
        self._producer: AIOKafkaProducer | None = None
        self._producer_lock = asyncio.Lock()
        self.append_timeout_s = number_from_env(ENV_APPEND_TIMEOUT_S, APPEND_TIMEOUT_S, positive=True)
        self.session_timeout_ms = number_from_env(ENV_SESSION_TIMEOUT_MS, 6000, positive=True)

    def client_kwargs(self, role: str) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap,
            "client_id": f"{self.security.client_id}-{role}",
            **self.security.client_kwargs(),
        }

    def consumer(self, role: str = "reader", **kwargs: Any) -> AIOKafkaConsumer:
        options: dict[str, Any] = {
            "enable_auto_commit": False,
            "isolation_level": "read_committed",
            "auto_offset_reset": "earliest",
            **kwargs,
        }
        return AIOKafkaConsumer(**self.client_kwargs(role), **options)

    async def start(self) -> None:
        pass  # clients are opened on first use

    async def close(self) -> None:
        if self._producer is not None:
            producer, self._producer = self._producer, None
            with contextlib.suppress(Exception):
                await asyncio.wait_for(producer.stop(), OP_TIMEOUT_S)

    # -- topics ----------------------------------------------------------------------------------
    async def ensure_topics(self, specs: Sequence[TopicSpec], *, single_partition: Sequence[str] = ()) -> None:
        admin = AIOKafkaAdminClient(**self.client_kwargs("admin"))
        await admin.start()
        try:
            existing = set(await admin.list_topics())
            missing = [s for s in specs if s.name not in existing]
            if missing:
                replication = self.replication_factor
                if replication <= 0:
                    brokers = len((await admin.describe_cluster()).get("brokers") or ()) or 1
                    replication = min(3, brokers)
                new = [
                    NewTopic(
                        s.name,
                        num_partitions=1,
                        replication_factor=replication,
                        topic_configs=(COMPACTED if s.compacted else UNLIMITED)
                        | (LOG_APPEND_TIME if s.log_append_time else {}),
                    )
                    for s in missing
                ]
                try:
                    response = await admin.create_topics(new)
                except TopicAlreadyExistsError:
                    response = None  # someone else (a second agent) was faster
                for name, code, message in getattr(response, "topic_errors", ()) or ():
                    if code not in (0, TopicAlreadyExistsError.errno):
                        raise LogError(f"cannot create topic {name}: error {code} {message}")
                    if code == 0:
                        log.info("topic created", topic=name)
            checked = [s.name for s in specs if s.name in single_partition]
            if checked:
                for desc in await admin.describe_topics(checked):
                    name, partitions = desc["topic"], desc.get("partitions") or []
                    if len(partitions) > 1:
                        raise LogError(
                            f"topic {name!r} has {len(partitions)} partitions; quotaflow needs exactly 1 "
                            f"(admission depends on one total order of events, which Kafka keeps only "
                            f"within a partition). Use a new single-partition topic, or set "
                            f"QUOTAFLOW_INPUT_TOPIC / QUOTAFLOW_DECISIONS_TOPIC to one."
                        )
        finally:
            await admin.close()

    # -- plain appends ---------------------------------------------------------------------------
    async def _plain_producer(self) -> AIOKafkaProducer:
        async with self._producer_lock:
            if self._producer is None:
                producer = AIOKafkaProducer(
                    **self.client_kwargs("producer"),
                    enable_idempotence=True,
                    acks="all",
                    max_request_size=MAX_REQUEST_SIZE,
                    max_batch_size=MAX_BATCH_SIZE,
                )
                await producer.start()
                self._producer = producer
            return self._producer

    async def _drop_producer(self, producer: AIOKafkaProducer | None) -> None:
        async with self._producer_lock:
            if producer is not None and self._producer is producer:
                self._producer = None
        if producer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(producer.stop(), 5)

    async def append(self, topic: str, messages: Sequence[Message]) -> list[int]:
        """Append through outages: an idempotent producer whose connection or sequence broke
        never recovers on its own (after a broker restart every send fails with
        OutOfOrderSequenceNumber), so each failed attempt gets a fresh producer, with backoff,
        until `append_timeout_s`. A fresh producer has a new producer id, so the broker cannot
        deduplicate its resends: before resending, the messages of the failed attempt that did
        land are found by their `ce_id` and only the others are sent again."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.append_timeout_s
        delay, max_delay = APPEND_BACKOFF_S
        offsets: list[int | None] = [None] * len(messages)
        attempt = 0
        while True:
            todo = [i for i, o in enumerate(offsets) if o is None]
            producer: AIOKafkaProducer | None = None
            try:
                if attempt:
                    landed = await asyncio.wait_for(self._landed(topic, [messages[i] for i in todo]), OP_TIMEOUT_S)
                    for i, o in zip(todo, landed, strict=True):
                        offsets[i] = o
                    todo = [i for i, o in enumerate(offsets) if o is None]
                if todo:
                    producer = await asyncio.wait_for(self._plain_producer(), OP_TIMEOUT_S)
                    # Bounded: a send whose producer another caller dropped, or whose broker went
                    # away mid-request, may otherwise never complete.
                    sent = await asyncio.wait_for(
                        send_batched(producer, [(topic, messages[i]) for i in todo]),
                        OP_TIMEOUT_S + len(todo) / APPEND_RATE_FLOOR,
                    )
                    for i, o in zip(todo, sent, strict=True):
                        offsets[i] = o
                return [o for o in offsets if o is not None]
            except _NOT_RETRIED as exc:
                raise LogError(f"cannot append to {topic}: {exc!r}") from exc
            except (KafkaError, asyncio.TimeoutError, OSError) as exc:
                await self._drop_producer(producer or self._producer)
                attempt += 1
                if loop.time() + delay > deadline:
                    raise LogUnavailable(
                        f"cannot append to {topic} at {self.bootstrap}: gave up after {attempt} attempt(s) "
                        f"in {self.append_timeout_s:g} s; last error {exc!r}"
                    ) from exc
                log.warning("append_retry", topic=topic, attempt=attempt, error=repr(exc), backoff_s=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, max_delay)

    async def _landed(self, topic: str, messages: Sequence[Message]) -> list[int | None]:
        """The offsets at which these messages already are in `topic`, by their `ce_id` header
        (None where not found), looking back `LANDED_LOOKBACK` records from the end. An event
        `id` repeated by its producer is a duplicate the engine ignores anyway."""
        wanted: dict[bytes, int] = {}
        for i, m in enumerate(messages):
            ce_id = dict(m.headers).get("ce_id")
            if ce_id is not None:
                wanted.setdefault(ce_id, i)
        found: list[int | None] = [None] * len(messages)
        if not wanted:
            return found
        for record in await self.read_last(topic, LANDED_LOOKBACK):
            i = wanted.get(dict(record.headers).get("ce_id", b""))
            if i is not None and found[i] is None:
                found[i] = record.offset
        return found

    # -- reading ---------------------------------------------------------------------------------
    async def end_offset(self, topic: str) -> int:
        consumer = await _start(self.consumer("meta"))
        try:
            tp = TopicPartition(topic, 0)
            return int((await consumer.end_offsets([tp]))[tp])
        finally:
            await consumer.stop()

    async def read_last(self, topic: str, n: int) -> list[Record]:
        if n <= 0:
            return []
        consumer = await _start(self.consumer("tail"))
        tp = TopicPartition(topic, 0)
        try:
            consumer.assign([tp])
            end = int((await consumer.end_offsets([tp]))[tp])
            begin = int((await consumer.beginning_offsets([tp]))[tp])
            window = n + 16
            while True:
                start = max(begin, end - window)
                consumer.seek(tp, start)
                records: list[Record] = []
                while await consumer.position(tp) < end:
                    batch = await consumer.getmany(tp, timeout_ms=1000)
                    records.extend(_record(r) for r in batch.get(tp, ()) if r.offset < end)
                if len(records) >= n or start == begin:
                    return records[-n:]
                window *= 4  # aborted transactions and markers hide in the window
        finally:
            await consumer.stop()

    async def reader(self, topic: str, start: int = 0) -> Reader:
        consumer = await _start(self.consumer("reader"))
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, start)
        return KafkaReader(consumer, tp, start)

    def writer(self, name: str, *, standby_topic: str | None = None) -> TransactionalWriter:
        return KafkaWriter(self, name, standby_topic=standby_topic)


class KafkaReader(Reader):
    def __init__(self, consumer: AIOKafkaConsumer, tp: TopicPartition, start: int) -> None:
        self._consumer = consumer
        self._tp = tp
        self.position = start

    async def read(self, limit: int = 1000, timeout: float = 0.0) -> list[Record]:
        batch = await self._consumer.getmany(self._tp, timeout_ms=int(timeout * 1000), max_records=limit)
        topic = self._tp.topic
        records = [
            Record(topic, r.offset, r.value, r.key, tuple(r.headers) if r.headers else (), r.timestamp)
            for r in batch.get(self._tp, ())
        ]
        if records:
            self.position = records[-1].offset + 1
        # The consumer also moves past transaction markers and aborted records.
        self.position = max(self.position, await self._consumer.position(self._tp))
        return records

    async def close(self) -> None:
        await self._consumer.stop()


class _Membership(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, writer: KafkaWriter) -> None:
        self.writer = writer

    async def on_partitions_revoked(self, revoked: Any) -> None:
        pass  # eager rebalancing revokes everything first; what counts is the new assignment

    async def on_partitions_assigned(self, assigned: Any) -> None:
        w = self.writer
        if w._member is not None:
            # The sticky assignor settles two claims on the partition by the generation each
            # member reports, but aiokafka never tells the assignor its generation: every member
            # reports -1, and a paused member that resumes still claiming the partition could
            # win it back from the one that replaced it. Recording the generation of each
            # assignment makes the newer holder win, so a resumed stale agent stays standby.
            w._assignor.on_generation_assignment(w._member._coordinator.generation)
            if assigned:
                w._member.pause(*assigned)
        holds = w._standby_tp in set(assigned)
        if holds:
            w._elected.set()
        else:
            w._elected.clear()
            if w._producer is not None:
                log.warning("standby: partition moved to another member", writer=w.name)
                w._lost = True


def _own_sticky_assignor() -> type[StickyPartitionAssignor]:
    """aiokafka's sticky assignor keeps the member's last assignment in class attributes, shared
    by every consumer of the process; two members in one process (tests, or two writers) would
    both claim the partition. A subclass per member keeps its own (the protocol name stays)."""
    return type(
        "MemberStickyAssignor",
        (StickyPartitionAssignor,),
        {"member_assignment": None, "generation": StickyPartitionAssignor.DEFAULT_GENERATION_ID},
    )


class KafkaWriter(TransactionalWriter):
    def __init__(self, log_: KafkaLog, name: str, *, standby_topic: str | None = None) -> None:
        self._log = log_
        self.name = name
        self._standby_tp = TopicPartition(standby_topic, 0) if standby_topic else None
        self._member: AIOKafkaConsumer | None = None
        self._assignor = _own_sticky_assignor()
        self._poller: asyncio.Task[None] | None = None
        self._elected = asyncio.Event()
        self._producer: AIOKafkaProducer | None = None
        self._lost = False
        self.session_timeout_ms = log_.session_timeout_ms
        self.instance_id = os.environ.get(ENV_INSTANCE_ID) or None
        self.transaction_timeout_ms = 30_000

    @property
    def active(self) -> bool:
        return self._producer is not None and not self._lost

    async def _join(self) -> None:
        assert self._standby_tp is not None
        member = self._log.consumer(
            "member",
            group_id=self.name,
            session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=max(500, self.session_timeout_ms // 6),
            partition_assignment_strategy=(self._assignor,),
            group_instance_id=self.instance_id,
            isolation_level="read_uncommitted",
        )
        member.subscribe([self._standby_tp.topic], listener=_Membership(self))
        self._member = member
        await member.start()

        async def poll() -> None:
            # Polling keeps the member alive (max.poll.interval) and runs rebalances; the
            # partition is paused, so nothing is fetched.
            while True:
                try:
                    await member.getmany(timeout_ms=500)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the broker may be away for a while
                    log.warning("standby membership poll failed", writer=self.name, error=repr(exc))
                    await asyncio.sleep(1.0)

        self._poller = asyncio.create_task(poll(), name=f"member-{self.name}")

    async def acquire(self) -> None:
        if self.active:
            return
        if self._standby_tp is not None:
            if self._member is None:
                await self._join()
            if not self._elected.is_set():
                log.info("standby: waiting for the active writer to go away", writer=self.name)
            await self._elected.wait()
        producer = AIOKafkaProducer(
            **self._log.client_kwargs("txn"),
            transactional_id=self.name,
            enable_idempotence=True,
            acks="all",
            max_request_size=MAX_REQUEST_SIZE,
            max_batch_size=MAX_BATCH_SIZE,
            transaction_timeout_ms=self.transaction_timeout_ms,
        )
        try:
            # InitProducerId: fences every older producer with this transactional.id and
            # completes or aborts its open transaction.
            await asyncio.wait_for(producer.start(), OP_TIMEOUT_S)
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(producer.stop(), 5)
            if isinstance(exc, (KafkaError, asyncio.TimeoutError, OSError)):
                raise LogUnavailable(f"cannot start the transactional producer: {exc!r}") from exc
            raise
        self._producer = producer
        self._lost = False

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[_KafkaTransaction]:
        producer = self._producer
        if producer is None or self._lost:
            raise Fenced(f"writer {self.name!r} is not active")
        try:
            await producer.begin_transaction()
        except (ProducerFenced, InvalidProducerEpoch) as exc:
            self._lost = True
            raise Fenced(str(exc)) from exc
        tx = _KafkaTransaction(producer)
        try:
            yield tx
            await asyncio.wait_for(tx.flush(), OP_TIMEOUT_S)
            if self._lost:
                raise Fenced(f"writer {self.name!r} lost its partition during the transaction")
            await asyncio.wait_for(producer.commit_transaction(), OP_TIMEOUT_S)
        except BaseException as exc:
            with contextlib.suppress(Exception):
                if producer._txn_manager is not None and producer._txn_manager.is_in_transaction():
                    await asyncio.wait_for(producer.abort_transaction(), 5)
            if isinstance(exc, IllegalOperation):
                # The fencing answer to one batch of a multi-topic send can arrive before the
                # next batch is sent: aiokafka then refuses it as "not in transaction" and the
                # transaction manager holds the real cause.
                exc = _fatal_cause(producer) or exc
            if isinstance(exc, (ProducerFenced, InvalidProducerEpoch)):
                self._lost = True
                raise Fenced(str(exc)) from exc
            if isinstance(exc, (KafkaError, asyncio.TimeoutError, OSError, IllegalOperation)):
                self._lost = True  # the outcome is unknown: acquire again before writing
                raise LogUnavailable(f"transaction failed: {exc!r}") from exc
            raise

    async def commit(self, items: Sequence[tuple[str, Message]]) -> list[int]:
        # The agent's path: the whole batch at once, not one awaited append per record.
        async with self.transaction() as tx:
            tx.extend(items)
        return tx.offsets

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(producer.stop(), 10)
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(BaseException):
                await self._poller
            self._poller = None
        if self._member is not None:
            member, self._member = self._member, None
            with contextlib.suppress(Exception):
                await asyncio.wait_for(member.stop(), 10)
        self._elected.clear()
        self._lost = False


def _fatal_cause(producer: AIOKafkaProducer) -> BaseException | None:
    """The error that put the producer's transaction manager in its fatal state, if it is in one."""
    manager = producer._txn_manager
    if manager is None or not manager.is_fatal_error():
        return None
    waiter = manager._transaction_waiter
    if not waiter.done() or waiter.cancelled():
        return None
    cause: BaseException | None = waiter.exception()
    return cause


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class _KafkaTransaction(Transaction):
    def __init__(self, producer: AIOKafkaProducer) -> None:
        self._producer = producer
        self._pending: list[tuple[str, Message]] = []
        self.offsets: list[int] = []

    async def append(self, topic: str, message: Message) -> None:
        self._pending.append((topic, message))

    def extend(self, items: Sequence[tuple[str, Message]]) -> None:
        self._pending.extend(items)

    async def flush(self) -> None:
        pending, self._pending = self._pending, []
        if pending:
            self.offsets.extend(await send_batched(self._producer, pending))


async def send_batched(producer: AIOKafkaProducer, items: Sequence[tuple[str, Message]]) -> list[int]:
    """Send messages (to partition 0 of their topics) as few record batches as they fit in, and
    return their offsets in the order given. The same bytes on the wire as `send()` per message,
    at a fraction of the Python cost per message."""
    by_topic: dict[str, list[int]] = {}
    for i, (topic, _) in enumerate(items):
        by_topic.setdefault(topic, []).append(i)
    sent: list[tuple[asyncio.Future[Any], list[int]]] = []
    offsets = [0] * len(items)
    try:
        for topic, indices in by_topic.items():
            start = 0
            while start < len(indices):
                batch = producer.create_batch()
                end = start
                while end < len(indices):
                    m = items[indices[end]][1]
                    if batch.append(key=m.key, value=m.value, timestamp=None, headers=list(m.headers)) is None:
                        break
                    end += 1
                if end == start:
                    raise LogError(f"a record of {len(items[indices[start]][1].value or b'')} bytes does not fit in a batch")
                batch.close()
                sent.append((await producer.send_batch(batch, topic, partition=0), indices[start:end]))
                start = end
        for future, indices in sent:
            base = (await future).offset
            for n, i in enumerate(indices):
                offsets[i] = base + n
    except BaseException:
        # A batch failed (e.g. fenced): nobody awaits the others now.
        for future, _ in sent:
            future.add_done_callback(_retrieve)
        raise
    return offsets
