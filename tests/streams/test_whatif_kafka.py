"""`quotaflow whatif` over a Kafka input log: the same worlds as from an events file."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec
import pytest

from devtools.timed_stream import recorded_log
from streams.log import Message, Topics
from streams.log.kafka import KafkaLog
from streams.settings import (
    ENV_DECISIONS_TOPIC,
    ENV_INPUT_TOPIC,
    ENV_SNAPSHOTS_TOPIC,
    Settings,
)
from streams.whatif.changes import At, sweep
from streams.whatif.run import run
from streams.whatif.source import read_log, timed

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120, func_only=True)]


def test_whatif_reads_a_kafka_log(kafka_bootstrap: str, kafka_topic_factory: Callable[[str], str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for env, suffix in ((ENV_INPUT_TOPIC, "in"), (ENV_DECISIONS_TOPIC, "dec"), (ENV_SNAPSHOTS_TOPIC, "snap")):
        monkeypatch.setenv(env, kafka_topic_factory(suffix))
    events = [msgspec.json.encode(e) for e in recorded_log(60, seed=2)]
    topics = Topics.from_settings(Settings.from_env())

    async def fill() -> None:
        log = KafkaLog(kafka_bootstrap)
        await log.start()
        try:
            await log.ensure_topics(topics.specs(), single_partition=[topics.input, topics.decisions])
            await log.append(topics.input, [Message(e) for e in events])
        finally:
            await log.close()

    asyncio.run(fill())
    records = asyncio.run(read_log(f"kafka://{kafka_bootstrap}"))
    assert [r.event for r in records] == events
    change = sweep([], ["clusterqueue/team-b.nominal=cpu:x2"], At())
    assert run(records, change) == run(timed(events), change)
