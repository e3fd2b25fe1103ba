"""The sequencer's loop (see streams/sequencer/__init__.py): consume, append, commit, as one."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import OffsetAndMetadata, TopicPartition

from domain.authority import ADMIN, tenant_source
from domain.limits import record_error
from domain.names import label_problem
from streams.log.kafka_config import KafkaSecurity

ADMIN_TOPIC = "quotaflow.admin"
TENANT_PREFIX = "quotaflow.tenant."
DEFAULT_GROUP = "quotaflow-sequencer"
MAX_RECORDS = 500  # per transaction

log = structlog.get_logger("quotaflow.sequencer")

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


@dataclass(frozen=True)
class SequencerConfig:
    bootstrap: str
    input_topic: str
    admin_topic: str = ADMIN_TOPIC
    tenant_prefix: str = TENANT_PREFIX
    group_id: str = DEFAULT_GROUP
    transactional_id: str = DEFAULT_GROUP
    security: KafkaSecurity = field(default_factory=KafkaSecurity)
    # How soon a newly created tenant topic is subscribed (Kafka's metadata.max.age.ms).
    metadata_max_age_ms: int = 30_000

    @property
    def pattern(self) -> str:
        """The admin topic and every tenant topic whose suffix is a namespace name (a DNS label);
        a topic with another suffix is not subscribed, so no record of it is read and dropped."""
        namespace = "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
        return f"^({re.escape(self.admin_topic)}|{re.escape(self.tenant_prefix)}{namespace})$"


def source_of(topic: str, config: SequencerConfig) -> str | None:
    """The source a topic stands for: `admin`, `tenant:<namespace>`, or None (not one of ours:
    the subscription's pattern leaves such topics out)."""
    if topic == config.admin_topic:
        return ADMIN
    if topic.startswith(config.tenant_prefix):
        namespace = topic[len(config.tenant_prefix) :]
        if label_problem(namespace) is None:
            return tenant_source(namespace)
    return None


def sequenced(value: bytes | None, source: str) -> bytes:
    """The record as the input log gets it: a JSON object with `source` set (a producer's own
    `source` overwritten). Anything else goes in unchanged, for the engine to reject as it is
    (a non-object cannot be applied, whoever sent it); so does a record over the input limits,
    which is not decoded here at all."""
    raw = value or b""
    if record_error(raw) is not None:
        return raw
    try:
        event = _decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return raw
    if not isinstance(event, dict):
        return raw
    event["source"] = source
    return _encode(event)


def _client_kwargs(config: SequencerConfig, role: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": config.bootstrap,
        "client_id": f"{config.security.client_id}-sequencer-{role}",
        **config.security.client_kwargs(),
    }


async def _step(
    config: SequencerConfig,
    producer: AIOKafkaProducer,
    batches: dict[TopicPartition, Sequence[Any]],
) -> int:
    """One transaction: every record read, appended in order, and the positions after them."""
    positions: dict[TopicPartition, OffsetAndMetadata] = {}
    sent = 0
    async with producer.transaction():
        for tp in sorted(batches, key=lambda t: (t.topic, t.partition)):
            records = batches[tp]
            source = source_of(tp.topic, config)
            if source is None:  # cannot happen with the pattern: say so rather than drop quietly
                log.error("not a source topic: records left out", topic=tp.topic, records=len(records))
                continue
            for r in records:
                await producer.send(
                    config.input_topic,
                    value=sequenced(r.value, source),
                    key=r.key,
                    headers=list(r.headers or ()),
                    partition=0,
                )
                sent += 1
            if records:
                positions[tp] = OffsetAndMetadata(records[-1].offset + 1, "")
        await producer.send_offsets_to_transaction(positions, config.group_id)
    return sent


async def run_sequencer(config: SequencerConfig, stop: asyncio.Event) -> None:
    """Sequence until `stop` is set."""
    consumer = AIOKafkaConsumer(
        **_client_kwargs(config, "consumer"),
        group_id=config.group_id,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        metadata_max_age_ms=config.metadata_max_age_ms,
    )
    producer = AIOKafkaProducer(
        **_client_kwargs(config, "producer"),
        transactional_id=config.transactional_id,
        enable_idempotence=True,
        acks="all",
    )
    consumer.subscribe(pattern=config.pattern)
    await producer.start()
    try:
        await consumer.start()
        try:
            log.info("sequencer started", input=config.input_topic, pattern=config.pattern)
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=200, max_records=MAX_RECORDS)
                if any(batches.values()):
                    sent = await _step(config, producer, batches)
                    log.debug("sequenced", records=sent)
        finally:
            await consumer.stop()
    finally:
        await producer.stop()
