"""aiokafka against the real broker: what we produce comes back, in order."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import ConsumerRecord
from kafka_fixtures import create_topics

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(60, func_only=True)]


async def test_produce_consume_single_partition(kafka_bootstrap: str, kafka_topic: str) -> None:
    await create_topics(kafka_bootstrap, kafka_topic, partitions=1)
    sent = [(f"k{i}".encode(), f"event-{i}".encode()) for i in range(20)]

    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        for key, value in sent:
            await producer.send(kafka_topic, key=key, value=value)
        await producer.flush()
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        kafka_topic,
        bootstrap_servers=kafka_bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    received: list[ConsumerRecord[bytes, bytes]] = []
    try:
        while len(received) < len(sent):
            batch = await consumer.getmany(timeout_ms=1000)
            for records in batch.values():
                received.extend(records)
    finally:
        await consumer.stop()

    assert [(r.key, r.value) for r in received] == sent
    assert {r.partition for r in received} == {0}
    assert [r.offset for r in received] == list(range(len(sent)))
