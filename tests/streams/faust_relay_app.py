"""A minimal Faust app run as a real worker by test_kafka_faust_worker.py.

Configured through env vars so every test run gets its own app id and topics.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import faust

app = faust.App(
    os.environ["QF_RELAY_APP_ID"],
    broker=f"kafka://{os.environ['QF_RELAY_BOOTSTRAP']}",
    datadir=os.environ["QF_RELAY_DATADIR"],
    store="memory://",
    web_enabled=False,
    topic_replication_factor=1,
    topic_partitions=1,
    consumer_auto_offset_reset="earliest",
)

source = app.topic(os.environ["QF_RELAY_IN"], key_serializer="raw", value_serializer="raw")
sink = app.topic(os.environ["QF_RELAY_OUT"], key_serializer="raw", value_serializer="raw")


@app.agent(source)
async def relay(stream: faust.StreamT[bytes]) -> AsyncIterator[bytes]:
    async for key, value in stream.items():
        await sink.send(key=key, value=b"relayed:" + value)
        yield value
