"""A Faust agent running as a real worker process against the broker:
input produced with aiokafka comes out transformed on the output topic."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from kafka_fixtures import create_topics

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(90, func_only=True)]

PR_SET_PDEATHSIG = 1
APP_FILE = Path(__file__).with_name("faust_relay_app.py")


def _die_with_parent() -> None:
    # If pytest itself is killed (SIGKILL, os._exit on timeout) no finally
    # block runs; the kernel then still delivers SIGTERM to the worker.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop(proc: subprocess.Popen[bytes], grace_s: float = 20.0) -> int:
    """SIGTERM the worker's process group; SIGKILL if it does not exit in time."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            return proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return proc.wait(5)


async def test_faust_worker_relays_messages(
    kafka_bootstrap: str, kafka_topic_factory: Callable[[str], str], tmp_path: Path
) -> None:
    topic_in, topic_out = kafka_topic_factory("in"), kafka_topic_factory("out")
    await create_topics(kafka_bootstrap, topic_in, topic_out, partitions=1)

    env = {
        **os.environ,
        "QF_RELAY_APP_ID": f"qf-test-relay-{uuid.uuid4().hex[:8]}",
        "QF_RELAY_BOOTSTRAP": kafka_bootstrap,
        "QF_RELAY_DATADIR": str(tmp_path / "faust-data"),
        "QF_RELAY_IN": topic_in,
        "QF_RELAY_OUT": topic_out,
        "PYTHONPATH": os.pathsep.join([str(APP_FILE.parent), os.environ.get("PYTHONPATH", "")]),
    }
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "faust", "-A", "faust_relay_app", "worker", "-l", "info"],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    try:
        sent = [f"msg-{i}".encode() for i in range(5)]
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await producer.start()
        try:
            for i, value in enumerate(sent):
                await producer.send_and_wait(topic_in, key=f"k{i}".encode(), value=value)
        finally:
            await producer.stop()

        consumer = AIOKafkaConsumer(
            topic_out,
            bootstrap_servers=kafka_bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        received: list[tuple[bytes | None, bytes | None]] = []
        try:
            while len(received) < len(sent):
                assert worker.poll() is None, "faust worker died:\n" + log_path.read_text()
                for batch in (await consumer.getmany(timeout_ms=500)).values():
                    received.extend((r.key, r.value) for r in batch)
        finally:
            await consumer.stop()

        assert received == [(f"k{i}".encode(), b"relayed:" + v) for i, v in enumerate(sent)]
    finally:
        code = _stop(worker)
    log_text = log_path.read_text(errors="replace")
    # A clean shutdown: the worker honoured SIGTERM rather than being killed.
    assert code == 0, f"worker exit {code}:\n{log_text[-3000:]}"
