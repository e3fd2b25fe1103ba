"""docker-compose.yml must agree with the defaults in streams/settings.py.

Nothing here needs Docker: the file is only parsed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import local_broker
from streams import settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def _service(compose: dict[str, Any], name: str) -> dict[str, Any]:
    services = compose["services"]
    assert name in services, f"service {name!r} missing; have {sorted(services)}"
    service: dict[str, Any] = services[name]
    return service


def _published(service: dict[str, Any]) -> dict[int, int]:
    """host port -> container port, from short-syntax "[IP:]HOST:CONTAINER" entries."""
    out: dict[int, int] = {}
    for entry in service.get("ports", []):
        host, _, container = str(entry).rpartition(":")
        out[int(host.rpartition(":")[2])] = int(container.split("/")[0])
    return out


def _listeners(env: dict[str, str], key: str) -> dict[str, tuple[str, int]]:
    out: dict[str, tuple[str, int]] = {}
    for item in env[key].split(","):
        name, _, address = item.partition("://")
        host, _, port = address.rpartition(":")
        out[name] = (host, int(port))
    return out


def _command(service: dict[str, Any]) -> list[str]:
    command = service["command"]
    return command.split() if isinstance(command, str) else [str(c) for c in command]


def test_services_present(compose: dict[str, Any]) -> None:
    assert {"kafka", "quotaflow-agent"} <= set(compose["services"])


def test_kafka_image_is_official_and_matches_local_broker(compose: dict[str, Any]) -> None:
    image = _service(compose, "kafka")["image"]
    repo, _, tag = image.partition(":")
    assert repo == "apache/kafka"
    assert tag == local_broker.KAFKA_VERSION


def test_host_reaches_kafka_on_default_bootstrap(compose: dict[str, Any]) -> None:
    kafka = _service(compose, "kafka")
    env = kafka["environment"]
    default_host, default_port = settings.split_host_port(settings.DEFAULT_KAFKA_BOOTSTRAP)

    published = _published(kafka)
    assert default_port in published, f"host port {default_port} not published: {published}"
    container_port = published[default_port]

    # The listener behind the published port must advertise the default
    # bootstrap, or host clients get redirected somewhere unreachable.
    bound = {port: name for name, (_, port) in _listeners(env, "KAFKA_LISTENERS").items()}
    assert container_port in bound
    advertised = _listeners(env, "KAFKA_ADVERTISED_LISTENERS")
    assert advertised[bound[container_port]] == (default_host, default_port)


def test_transactions_work_on_one_node(compose: dict[str, Any]) -> None:
    env = _service(compose, "kafka")["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    for key in (
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR",
    ):
        assert str(env[key]) == "1", key


def test_agent_uses_internal_listener(compose: dict[str, Any]) -> None:
    agent = _service(compose, "quotaflow-agent")
    command = _command(agent)
    assert command[:2] == ["quotaflow", "agent"]
    broker_url = command[command.index("--broker") + 1]
    assert broker_url.startswith("kafka://")

    kafka_env = _service(compose, "kafka")["environment"]
    advertised = set(_listeners(kafka_env, "KAFKA_ADVERTISED_LISTENERS").values())
    assert settings.split_host_port(broker_url) in advertised
    bootstrap = agent["environment"][settings.ENV_KAFKA_BOOTSTRAP]
    assert settings.split_host_port(bootstrap) == settings.split_host_port(broker_url)

    dependency = agent["depends_on"]
    assert "kafka" in dependency


def test_agent_env_and_port_match_settings(compose: dict[str, Any]) -> None:
    agent = _service(compose, "quotaflow-agent")
    env = agent["environment"]
    assert env[settings.ENV_INPUT_TOPIC] == settings.INPUT_TOPIC
    assert env[settings.ENV_DECISIONS_TOPIC] == settings.DECISIONS_TOPIC
    assert env[settings.ENV_SNAPSHOTS_TOPIC] == settings.SNAPSHOTS_TOPIC
    assert int(env[settings.ENV_HTTP_PORT]) == settings.DEFAULT_HTTP_PORT
    assert _published(agent) == {settings.DEFAULT_HTTP_PORT: settings.DEFAULT_HTTP_PORT}
    # Every variable the agent is given must be one settings.py knows about.
    known = {v for k, v in vars(settings).items() if k.startswith("ENV_")}
    assert set(env) <= known


def test_agent_build_uses_dockerfile(compose: dict[str, Any]) -> None:
    build = _service(compose, "quotaflow-agent")["build"]
    dockerfile = ROOT / build.get("dockerfile", "Dockerfile")
    text = dockerfile.read_text()
    assert text.startswith("FROM python:3.11-slim")
    assert "pip install ." in text
