"""A Kafka connection misconfigured in `QUOTAFLOW_KAFKA_*` ends every command that opens a log with
one line naming the setting and exit code 2: no traceback, and not "cannot reach the log". No
broker is needed: the settings are refused before any client connects."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from streams.cli.main import app
from streams.log import LogError
from streams.log.kafka_config import KafkaConfigError

BROKER = "kafka://127.0.0.1:1"  # nothing listens there; nothing may try to


def commands(tmp: Path) -> dict[str, list[str]]:
    flavor = tmp / "flavor.yaml"
    flavor.write_text("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata:\n  name: default\n")
    job = tmp / "job.yaml"
    job.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  namespace: ns\n"
        "  labels: {kueue.x-k8s.io/queue-name: lq}\nspec:\n  template:\n    spec:\n"
        '      containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]\n'
    )
    b = ["--broker", BROKER]
    return {
        "agent": ["agent", *b],
        "sequence": ["sequence", *b],
        "launch": ["launch", *b, "--state-dir", str(tmp / "launch")],
        "serve": ["serve", *b],
        "status": ["status", *b],
        "pending": ["pending", *b, "cq"],
        "watch": ["watch", *b],
        "history": ["history", *b, "ns/wl"],
        "audit": ["audit", *b],
        "export": ["export", *b],
        "apply": ["apply", *b, "-f", str(flavor)],
        "submit": ["submit", *b, "-f", str(job)],
        "finish": ["finish", *b, "ns/wl"],
        "list": ["list", "clusterqueues", *b],
        "get": ["get", "clusterqueue", "cq", *b],
        "stop": ["stop", "clusterqueue", "cq", *b],
        "whatif": ["whatif", *b],
        "estimate": ["estimate", *b, "ns/wl"],
    }


NAMES = [
    "agent", "sequence", "launch", "serve", "status", "pending", "watch", "history", "audit", "export",
    "apply", "submit", "finish", "list", "get", "stop", "whatif", "estimate",
]


@pytest.fixture
def kafka_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("QUOTAFLOW_KAFKA_"):
            monkeypatch.delenv(name)
    return monkeypatch


def assert_refused(tmp_path: Path, command: str, message: str) -> None:
    argv = commands(tmp_path)
    assert sorted(argv) == sorted(NAMES)
    result = CliRunner().invoke(app, argv[command])
    assert "Traceback" not in result.output
    assert "cannot reach the log" not in result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert (result.exit_code, result.stderr.strip()) == (2, f"quotaflow {command}: {message}")


@pytest.mark.parametrize("command", NAMES)
def test_a_bad_security_protocol_is_named(command: str, kafka_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    kafka_env.setenv("QUOTAFLOW_KAFKA_SECURITY_PROTOCOL", "TLS")
    assert_refused(
        tmp_path, command,
        "QUOTAFLOW_KAFKA_SECURITY_PROTOCOL='TLS': expected one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL",
    )


@pytest.mark.parametrize("command", NAMES)
def test_missing_sasl_credentials_are_named(command: str, kafka_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    kafka_env.setenv("QUOTAFLOW_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    assert_refused(
        tmp_path, command, "SASL_SSL needs QUOTAFLOW_KAFKA_SASL_USERNAME and QUOTAFLOW_KAFKA_SASL_PASSWORD"
    )


def test_a_kafka_config_error_is_a_log_error() -> None:
    assert issubclass(KafkaConfigError, LogError)
