"""SASL/SSL client settings come from the environment (streams/log/kafka_config.py)."""

from __future__ import annotations

import ssl

import pytest

from streams.log.kafka_config import KafkaConfigError, KafkaSecurity


def test_plaintext_by_default() -> None:
    security = KafkaSecurity.from_env({})
    assert security.client_kwargs() == {"security_protocol": "PLAINTEXT"}
    assert security.faust_credentials() is None


def test_sasl_ssl_from_the_environment() -> None:
    security = KafkaSecurity.from_env(
        {
            "QUOTAFLOW_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
            "QUOTAFLOW_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "QUOTAFLOW_KAFKA_SASL_USERNAME": "agent",
            "QUOTAFLOW_KAFKA_SASL_PASSWORD": "secret",
            "QUOTAFLOW_KAFKA_SSL_CHECK_HOSTNAME": "false",
        }
    )
    kwargs = security.client_kwargs()
    assert kwargs["security_protocol"] == "SASL_SSL"
    assert (kwargs["sasl_mechanism"], kwargs["sasl_plain_username"], kwargs["sasl_plain_password"]) == (
        "SCRAM-SHA-512",
        "agent",
        "secret",
    )
    assert isinstance(kwargs["ssl_context"], ssl.SSLContext)
    assert kwargs["ssl_context"].check_hostname is False
    creds = security.faust_credentials()
    assert creds.username == "agent" and creds.mechanism.value == "SCRAM-SHA-512"


@pytest.mark.parametrize(
    "env",
    [
        {"QUOTAFLOW_KAFKA_SECURITY_PROTOCOL": "TLS"},
        {"QUOTAFLOW_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"},  # no credentials
        {"QUOTAFLOW_KAFKA_SASL_MECHANISM": "MD5"},
    ],
)
def test_bad_settings_are_refused(env: dict[str, str]) -> None:
    with pytest.raises(KafkaConfigError):
        KafkaSecurity.from_env(env)


def test_a_password_in_clear_warns_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    import structlog.testing

    from streams.log import kafka_config

    monkeypatch.setattr(kafka_config, "_warned_plain", False)
    env = {
        "QUOTAFLOW_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "QUOTAFLOW_KAFKA_SASL_USERNAME": "agent",
        "QUOTAFLOW_KAFKA_SASL_PASSWORD": "secret",
    }
    with structlog.testing.capture_logs() as logs:
        KafkaSecurity.from_env({**env, "QUOTAFLOW_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512"})
        assert logs == []
        KafkaSecurity.from_env(env)  # PLAIN is SASL_PLAINTEXT's default mechanism
        KafkaSecurity.from_env(env)
    assert [(e["log_level"], e["event"]) for e in logs] == [("warning", "kafka_password_in_clear")]
    assert "in clear" in logs[0]["message"]
