"""A Kafka connection misconfigured in `QUOTAFLOW_KAFKA_*` ends every command that opens a log with
one line naming the setting and exit code 2: no traceback, and not "cannot reach the log". No
broker is needed: the settings are refused before any client connects."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from streams.cli.main import app
from streams.log import BrokerUrl, LogError
from streams.log.kafka_config import KafkaConfigError, KafkaSecurity

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


def _must_not_start(*args: object, **kwargs: object) -> None:
    raise AssertionError("started with settings it should have refused")


@pytest.fixture
def kafka_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("QUOTAFLOW_KAFKA_"):
            monkeypatch.delenv(name)
    # A setting let through must fail the test, not start a Faust worker or a sequencer in pytest's
    # process (the other commands fail at once on the closed port).
    monkeypatch.setattr("streams.agent.process.kafka_app", _must_not_start)
    monkeypatch.setattr("streams.sequencer.run_sequencer", _must_not_start)
    # The long-running commands point structlog at standard error, here the runner's stream,
    # closed once the command returns; loggers cached on first use would keep writing to it in
    # every later test of this worker.
    monkeypatch.setattr("streams.agent.structured_logs.configure", lambda *a, **k: None)
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


@pytest.mark.parametrize("command", NAMES)
def test_a_missing_ca_file_is_named(command: str, kafka_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = tmp_path / "kafka-ca" / "ca.crt"
    kafka_env.setenv("QUOTAFLOW_KAFKA_SECURITY_PROTOCOL", "SSL")
    kafka_env.setenv("QUOTAFLOW_KAFKA_SSL_CAFILE", str(missing))
    assert_refused(tmp_path, command, f"QUOTAFLOW_KAFKA_SSL_CAFILE={str(missing)!r}: no such file or directory")


def _certificates(tmp: Path) -> dict[str, Path]:
    """Two self-signed certificates with their keys, and the first key encrypted (password "pw")."""

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=tmp, check=True, capture_output=True)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")  # quick to make
    for name in ("a", "b"):
        run("req", "-x509", *ec, "-nodes", "-days", "1", "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.crt")
    run("pkey", "-in", "a.key", "-aes256", "-passout", "pass:pw", "-out", "a.enc.key")
    (tmp / "junk.pem").write_text("not a certificate\n")
    return {n: tmp / n for n in ("a.crt", "a.key", "a.enc.key", "b.key", "junk.pem")}


def _env(**files: Path | str) -> dict[str, str]:
    return {"QUOTAFLOW_KAFKA_SECURITY_PROTOCOL": "SSL"} | {f"QUOTAFLOW_KAFKA_{k.upper()}": str(v) for k, v in files.items()}


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make certificates")
def test_unusable_tls_files_are_named_when_the_settings_are_read(tmp_path: Path) -> None:
    c = _certificates(tmp_path)

    def refusal(**files: Path | str) -> str:
        with pytest.raises(KafkaConfigError) as info:
            KafkaSecurity.from_env(_env(**files))
        return str(info.value)

    assert refusal(ssl_cafile=tmp_path) == f"QUOTAFLOW_KAFKA_SSL_CAFILE={str(tmp_path)!r}: is a directory"
    assert refusal(ssl_cafile=c["junk.pem"]).startswith(
        f"QUOTAFLOW_KAFKA_SSL_CAFILE={str(c['junk.pem'])!r}: not a usable CA bundle (PEM): [X509"
    )
    assert refusal(ssl_certfile=c["a.crt"], ssl_keyfile=tmp_path / "gone.key") == (
        f"QUOTAFLOW_KAFKA_SSL_KEYFILE={str(tmp_path / 'gone.key')!r}: no such file or directory"
    )
    assert refusal(ssl_certfile=c["a.crt"], ssl_keyfile=c["b.key"]).startswith(
        f"QUOTAFLOW_KAFKA_SSL_CERTFILE={str(c['a.crt'])!r} with QUOTAFLOW_KAFKA_SSL_KEYFILE={str(c['b.key'])!r}: "
        "not a usable certificate and key (PEM): "
    )
    # Never a password prompt on the terminal: the setting to add is named.
    assert refusal(ssl_certfile=c["a.crt"], ssl_keyfile=c["a.enc.key"]) == (
        f"QUOTAFLOW_KAFKA_SSL_KEYFILE={str(c['a.enc.key'])!r}: the key is encrypted; set QUOTAFLOW_KAFKA_SSL_KEY_PASSWORD"
    )
    assert "QUOTAFLOW_KAFKA_SSL_KEY_PASSWORD" in refusal(
        ssl_certfile=c["a.crt"], ssl_keyfile=c["a.enc.key"], ssl_key_password="wrong"
    )

    good = KafkaSecurity.from_env(_env(ssl_cafile=c["a.crt"], ssl_certfile=c["a.crt"], ssl_keyfile=c["a.enc.key"], ssl_key_password="pw"))
    assert isinstance(good.client_kwargs()["ssl_context"], ssl.SSLContext)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("QUOTAFLOW_KAFKA_REPLICATION_FACTOR", "three", "a whole number"),
        ("QUOTAFLOW_KAFKA_APPEND_TIMEOUT_S", "2m", "a number"),
        ("QUOTAFLOW_KAFKA_SESSION_TIMEOUT_MS", "0", "a whole number above 0"),
    ],
)
# The sequencer's clients take none of these: it opens no KafkaLog.
@pytest.mark.parametrize("command", [n for n in NAMES if n != "sequence"])
def test_a_bad_number_is_named(
    command: str, name: str, value: str, expected: str, kafka_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    kafka_env.setenv(name, value)
    assert_refused(tmp_path, command, f"{name}={value!r}: expected {expected}")


@pytest.mark.parametrize(
    ("broker", "problem"),
    [
        ("kafka://127.0.0.1:abc", "the port of '127.0.0.1:abc' is not a number from 1 to 65535"),
        ("kafka://127.0.0.1:99999", "the port of '127.0.0.1:99999' is not a number from 1 to 65535"),
        ("kafka://:9092", "no host in ':9092'"),
        ("kafka://a:9092,,b:9092", "an empty host in the list"),
        ("kafka://[::1:9092", "'[::1:9092' is not [IPv6 address] or [IPv6 address]:port"),
    ],
)
@pytest.mark.parametrize("command", NAMES)
def test_a_bootstrap_list_kafka_cannot_parse_is_named(
    command: str, broker: str, problem: str, kafka_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    argv = [broker if a == BROKER else a for a in commands(tmp_path)[command]]
    result = CliRunner().invoke(app, argv)
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert (result.exit_code, result.stderr.strip()) == (2, f"quotaflow {command}: broker URL {broker!r}: {problem}")


def test_a_bad_bootstrap_setting_is_named(kafka_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    kafka_env.setenv("QUOTAFLOW_KAFKA_BOOTSTRAP", "broker-0:9O92")
    result = CliRunner().invoke(app, ["status", "--broker", "kafka://"])
    assert (result.exit_code, result.stderr.strip()) == (
        2, "quotaflow status: QUOTAFLOW_KAFKA_BOOTSTRAP='broker-0:9O92': the port of 'broker-0:9O92' is not a number from 1 to 65535"
    )


@pytest.mark.parametrize("bootstrap", ["127.0.0.1:9092", "a:1,b:2", "broker", "[::1]:9092", "[::1]", "::1"])
def test_bootstrap_lists_kafka_takes_are_taken(bootstrap: str) -> None:
    assert BrokerUrl.parse(f"kafka://{bootstrap}").location == bootstrap


@pytest.mark.parametrize("name", ["SSL_KEYFILE", "SSL_KEY_PASSWORD"])
def test_a_client_key_without_its_certificate_is_named(name: str, kafka_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    key = tmp_path / "client.key"
    key.write_text("")
    kafka_env.setenv("QUOTAFLOW_KAFKA_SECURITY_PROTOCOL", "SSL")
    kafka_env.setenv(f"QUOTAFLOW_KAFKA_{name}", str(key) if name == "SSL_KEYFILE" else "secret")
    assert_refused(tmp_path, "status", f"QUOTAFLOW_KAFKA_{name} is set but QUOTAFLOW_KAFKA_SSL_CERTFILE is not")


def test_a_check_hostname_that_is_neither_true_nor_false_is_named(kafka_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    kafka_env.setenv("QUOTAFLOW_KAFKA_SECURITY_PROTOCOL", "SSL")
    kafka_env.setenv("QUOTAFLOW_KAFKA_SSL_CHECK_HOSTNAME", "flase")
    assert_refused(tmp_path, "status", "QUOTAFLOW_KAFKA_SSL_CHECK_HOSTNAME='flase': expected true or false")


@pytest.mark.parametrize(("value", "checked"), [("", True), ("TRUE", True), ("https", True), ("False", False), ("0", False), ("none", False)])
def test_check_hostname_values(value: str, checked: bool) -> None:
    security = KafkaSecurity.from_env({"QUOTAFLOW_KAFKA_SECURITY_PROTOCOL": "SSL", "QUOTAFLOW_KAFKA_SSL_CHECK_HOSTNAME": value})
    assert security.ssl_check_hostname is checked
