"""The log contract on Kafka (the session's real broker), plus Kafka-only topic rules."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from kafka_fixtures import create_topics
from log_contract import LogContract, log_opener

from streams.log import EventLog, LogError, Topics, TopicSpec, TransactionalWriter
from streams.log.kafka import KafkaLog
from streams.settings import ENV_KAFKA_BOOTSTRAP

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(90, func_only=True)]


class TestKafkaLog(LogContract):
    @pytest.fixture
    def log_url(self, kafka_bootstrap: str) -> str:
        return f"kafka://{kafka_bootstrap}"

    @pytest.fixture
    def child_env(self, kafka_bootstrap: str) -> dict[str, str]:
        return {**os.environ, ENV_KAFKA_BOOTSTRAP: kafka_bootstrap}

    @pytest.fixture
    async def make_log(self, kafka_bootstrap: str) -> AsyncIterator[Callable[[], Awaitable[EventLog]]]:
        async with log_opener(lambda: KafkaLog(kafka_bootstrap)) as make:
            yield make

    @pytest.fixture
    async def topics(self, kafka_bootstrap: str, kafka_topic_factory: Callable[[str], str]) -> list[str]:
        names = [kafka_topic_factory(s) for s in ("one", "two", "three")]
        log = KafkaLog(kafka_bootstrap)
        await log.ensure_topics([TopicSpec(n) for n in names])
        await log.close()
        return names

    @pytest.fixture
    def takeover(self) -> Callable[[EventLog, str], Awaitable[TransactionalWriter]]:
        async def take(log: EventLog, name: str) -> TransactionalWriter:
            # A writer outside the standby group: its InitProducerId alone fences the holder.
            writer = log.writer(name)
            await writer.acquire()
            return writer

        return take


async def test_topics_created_with_retention_and_compaction(
    kafka_bootstrap: str, kafka_topic_factory: Callable[[str], str]
) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    topics = Topics(kafka_topic_factory("in"), kafka_topic_factory("out"), kafka_topic_factory("snap"))
    log = KafkaLog(kafka_bootstrap)
    await log.ensure_topics(topics.specs(), single_partition=[topics.input, topics.decisions])
    await log.ensure_topics(topics.specs(), single_partition=[topics.input, topics.decisions])  # idempotent
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        described = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t) for t in (topics.input, topics.decisions, topics.snapshots)]
        )
        configs: dict[str, dict[str, str]] = {}
        for response in described:
            for resource in response.resources:
                _code, _msg, _type, name, entries = resource[:5]
                configs[name] = {e[0]: e[1] for e in entries}
        for name in (topics.input, topics.decisions):
            assert configs[name]["cleanup.policy"] == "delete"
            assert configs[name]["retention.ms"] == "-1"
            assert configs[name]["retention.bytes"] == "-1"
        assert configs[topics.snapshots]["cleanup.policy"] == "compact"
        # The input log's time is the broker's (domain/clock.py): no producer can set it.
        assert configs[topics.input]["message.timestamp.type"] == "LogAppendTime"
        assert configs[topics.decisions]["message.timestamp.type"] == "CreateTime"
        desc = await admin.describe_topics([topics.input, topics.decisions, topics.snapshots])
        assert all(len(d["partitions"]) == 1 for d in desc)
    finally:
        await admin.close()
        await log.close()


async def test_multi_partition_input_topic_is_refused(
    kafka_bootstrap: str, kafka_topic_factory: Callable[[str], str]
) -> None:
    topics = Topics(kafka_topic_factory("in"), kafka_topic_factory("out"), kafka_topic_factory("snap"))
    await create_topics(kafka_bootstrap, topics.input, partitions=3)
    log = KafkaLog(kafka_bootstrap)
    with pytest.raises(LogError, match=r"has 3 partitions; quotaflow needs exactly 1"):
        await log.ensure_topics(topics.specs(), single_partition=[topics.input])
    await log.close()
