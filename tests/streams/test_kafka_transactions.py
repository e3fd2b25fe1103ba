"""Kafka transactions on the single-node broker: aborted writes stay invisible
to read_committed consumers, committed ones show up."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import ConsumerRecord, TopicPartition
from kafka_fixtures import create_topics

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(60, func_only=True)]


async def _drain(bootstrap: str, topic: str, isolation_level: str) -> list[bytes]:
    """Everything readable under `isolation_level`, up to the current end."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level=isolation_level,
    )
    await consumer.start()
    tp = TopicPartition(topic, 0)
    records: list[ConsumerRecord[bytes, bytes]] = []
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        # For read_committed this is the last stable offset, so reaching it
        # proves we have seen every record that will ever be visible.
        end = (await consumer.end_offsets([tp]))[tp]
        while await consumer.position(tp) < end:
            for batch in (await consumer.getmany(tp, timeout_ms=500)).values():
                records.extend(batch)
    finally:
        await consumer.stop()
    return [r.value for r in records if r.value is not None]


async def test_aborted_invisible_committed_visible(
    kafka_bootstrap: str, kafka_topic: str
) -> None:
    await create_topics(kafka_bootstrap, kafka_topic, partitions=1)
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap,
        transactional_id=f"qf-test-{uuid.uuid4().hex}",
        enable_idempotence=True,
    )
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send_and_wait(kafka_topic, b"aborted-1")
        await producer.send_and_wait(kafka_topic, b"aborted-2")
        await producer.abort_transaction()

        async with producer.transaction():
            await producer.send_and_wait(kafka_topic, b"committed-1")
            await producer.send_and_wait(kafka_topic, b"committed-2")
    finally:
        await producer.stop()

    assert await _drain(kafka_bootstrap, kafka_topic, "read_committed") == [
        b"committed-1",
        b"committed-2",
    ]
    # The aborted records did reach the log; only isolation hides them.
    assert await _drain(kafka_bootstrap, kafka_topic, "read_uncommitted") == [
        b"aborted-1",
        b"aborted-2",
        b"committed-1",
        b"committed-2",
    ]
