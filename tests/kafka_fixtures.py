"""How the test session gets its one Kafka broker.

Order of preference:
1. QUOTAFLOW_KAFKA_BOOTSTRAP, when set (e.g. `make test` started a broker);
2. a local JVM broker (devtools.local_broker) when `java` and `mvn` exist;
3. testcontainers' Kafka when a Docker engine answers;
4. otherwise Kafka tests are skipped -- or fail when QUOTAFLOW_REQUIRE_KAFKA=1.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator

import pytest

from devtools import local_broker
from streams.settings import ENV_KAFKA_BOOTSTRAP, ENV_REQUIRE_KAFKA, split_host_port

# cp-kafka 7.9 is Apache Kafka 3.9; testcontainers' KafkaContainer only knows
# how to drive Confluent's images.
TESTCONTAINERS_IMAGE = "confluentinc/cp-kafka:7.9.0"


def kafka_required() -> bool:
    return os.environ.get(ENV_REQUIRE_KAFKA, "").strip().lower() in ("1", "true", "yes")


def _announce(config: pytest.Config, line: str) -> None:
    # Session-fixture output is normally captured; this line is worth seeing.
    capman = config.pluginmanager.getplugin("capturemanager")
    reporter = config.pluginmanager.getplugin("terminalreporter")
    if capman is None or reporter is None:
        return
    with capman.global_and_fixture_disabled():
        reporter.write_line(f"kafka: {line}")


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        probe = subprocess.run(
            ["docker", "info"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _reachable(bootstrap: str) -> bool:
    try:
        host, port = split_host_port(bootstrap)
        with socket.create_connection((host, port), timeout=3):
            return True
    except (OSError, ValueError):
        return False


def _unavailable(reason: str) -> None:
    if kafka_required():
        pytest.fail(f"{ENV_REQUIRE_KAFKA}=1 but no Kafka broker: {reason}", pytrace=False)
    pytest.skip(f"no Kafka broker: {reason}")


def provide_bootstrap(config: pytest.Config) -> Iterator[str]:
    explicit = os.environ.get(ENV_KAFKA_BOOTSTRAP, "").strip()
    if explicit:
        if not _reachable(explicit):
            pytest.fail(f"{ENV_KAFKA_BOOTSTRAP}={explicit} is not reachable", pytrace=False)
        _announce(config, f"using {explicit} from {ENV_KAFKA_BOOTSTRAP}")
        yield explicit
        return

    reasons: list[str] = []
    if shutil.which("java") and shutil.which("mvn"):
        try:
            broker = local_broker.start_broker(owner_pid=os.getpid())
        except local_broker.LocalBrokerError as exc:
            reasons.append(f"local JVM broker failed: {str(exc).splitlines()[0]}")
        else:
            _announce(
                config,
                f"local JVM broker {broker.bootstrap} (Kafka {broker.version}) "
                f"started in {broker.started_in_s:.1f} s; log {broker.log_file}",
            )
            try:
                yield broker.bootstrap
            finally:
                local_broker.stop_broker(broker)
            return
    else:
        reasons.append("java/mvn not on PATH")

    if _docker_answers():
        from testcontainers.community.kafka import KafkaContainer

        container = (
            KafkaContainer(TESTCONTAINERS_IMAGE)
            .with_kraft()
            .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
            .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
        )
        with container:
            bootstrap = container.get_bootstrap_server()
            _announce(config, f"testcontainers {TESTCONTAINERS_IMAGE} at {bootstrap}")
            yield bootstrap
        return
    reasons.append("no Docker engine answers")

    _unavailable("; ".join(reasons))


@pytest.fixture(scope="session")
def kafka_bootstrap(pytestconfig: pytest.Config) -> Iterator[str]:
    """"host:port" of the session's single Kafka broker (see module doc)."""
    yield from provide_bootstrap(pytestconfig)


def _slug(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9._-]+", "-", text).strip("-")[:80]


@pytest.fixture
def kafka_topic_factory(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Returns `make(suffix)`: a topic name unique to this test and call."""
    base = _slug(request.node.name)

    def make(suffix: str = "") -> str:
        parts = ["qf-test", base, _slug(suffix), uuid.uuid4().hex[:8]]
        return ".".join(p for p in parts if p)

    return make


@pytest.fixture
def kafka_topic(kafka_topic_factory: Callable[[str], str]) -> str:
    """One topic name unique to this test."""
    return kafka_topic_factory("")


async def create_topics(bootstrap: str, *names: str, partitions: int = 1) -> None:
    """Create topics explicitly so partition counts are what the test expects."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names]
        )
    finally:
        await admin.close()
