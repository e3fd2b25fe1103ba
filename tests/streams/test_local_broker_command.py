"""The local broker's JVM command line (no broker is started here)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from devtools import local_broker
from devtools.local_broker import (
    BROKER_JVM_OPTS,
    JVM_OPTS_ENV,
    MAIN_CLASS,
    broker_command,
)

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="needs `java` on PATH")


def _command(tmp_path: Path) -> list[str]:
    return broker_command(tmp_path / "libs", tmp_path, "512m", tmp_path / "server.properties")


def test_the_broker_runs_with_regions_that_fit_a_batch_and_c1_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(JVM_OPTS_ENV, raising=False)
    cmd = _command(tmp_path)
    assert "-XX:G1HeapRegionSize=4m" in cmd and "-XX:TieredStopAtLevel=1" in cmd
    # JVM options must precede the class path and the main class to be options at all.
    cp = cmd.index("-cp")
    assert all(cmd.index(o) < cp for o in BROKER_JVM_OPTS)
    assert cmd[-2:] == [MAIN_CLASS, str(tmp_path / "server.properties")]


def test_user_jvm_options_come_after_ours_so_they_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JVM_OPTS_ENV, "-XX:TieredStopAtLevel=4  -Dx='a b'")
    cmd = _command(tmp_path)
    ours, theirs = cmd.index("-XX:TieredStopAtLevel=1"), cmd.index("-XX:TieredStopAtLevel=4")
    assert ours < theirs < cmd.index("-cp")
    assert "-Dx=a b" in cmd  # split as a shell would


def test_the_storage_formatter_does_not_take_the_broker_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # It runs with a 256m heap: a user's -Xms larger than that would stop it from starting.
    monkeypatch.setenv(JVM_OPTS_ENV, "-Xms1g")
    fmt = local_broker._java_cmd(tmp_path, tmp_path, "256m", ["kafka.tools.StorageTool"])
    assert "-Xms1g" not in fmt


def test_a_secured_broker_logs_in_with_scram_and_authorizes_every_request(tmp_path: Path) -> None:
    props = local_broker._server_properties(tmp_path, 9092, 9093, ("broker", "s3cret"))
    lines = dict(line.split("=", 1) for line in props.splitlines() if line)
    assert lines["listeners"] == "SASL_PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert lines["sasl.enabled.mechanisms"] == lines["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert lines["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert lines["allow.everyone.if.no.acl.found"] == "false"
    assert lines["super.users"].split(";")[0] == "User:broker"
    assert 'username="broker" password="s3cret"' in lines["listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"]
    plain = local_broker._server_properties(tmp_path, 9092, 9093)
    assert "authorizer" not in plain and "listeners=PLAINTEXT://127.0.0.1:9092," in plain


def test_scram_users_come_as_name_equals_password() -> None:
    assert local_broker._scram_users(["broker=a=b", "tenant-a=x"]) == {"broker": "a=b", "tenant-a": "x"}
    assert local_broker._scram_users(None) is None
    with pytest.raises(local_broker.LocalBrokerError, match="NAME=PASSWORD"):
        local_broker._scram_users(["nopassword"])


def test_an_acl_with_a_space_is_refused_before_java_sees_it() -> None:
    assert local_broker.Acl("User:a", "TOPIC", "LITERAL", "t", "WRITE").line() == "User:a TOPIC LITERAL t WRITE ALLOW"
    with pytest.raises(local_broker.LocalBrokerError, match="spaces"):
        local_broker.Acl("User:a b", "TOPIC", "LITERAL", "t", "WRITE").line()
