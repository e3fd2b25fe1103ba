"""Kafka client security settings, passed through from the environment.

Every Kafka client quotaflow opens (the agent's consumers and transactional producer, the
client/CLI producer, the admin client, and the Faust app shell) gets the same settings. They are
the standard Kafka client settings, spelled as environment variables:

| variable | Kafka setting | values |
| --- | --- | --- |
| `QUOTAFLOW_KAFKA_SECURITY_PROTOCOL` | `security.protocol` | `PLAINTEXT` (default), `SSL`, `SASL_PLAINTEXT`, `SASL_SSL` |
| `QUOTAFLOW_KAFKA_SASL_MECHANISM` | `sasl.mechanism` | `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512` |
| `QUOTAFLOW_KAFKA_SASL_USERNAME` | `sasl.username` (JAAS user) | |
| `QUOTAFLOW_KAFKA_SASL_PASSWORD` | `sasl.password` (JAAS password) | |
| `QUOTAFLOW_KAFKA_SSL_CAFILE` | `ssl.truststore` / CA bundle (PEM) | path |
| `QUOTAFLOW_KAFKA_SSL_CERTFILE` | client certificate (PEM), for mutual TLS | path |
| `QUOTAFLOW_KAFKA_SSL_KEYFILE` | client key (PEM) | path |
| `QUOTAFLOW_KAFKA_SSL_KEY_PASSWORD` | password of the client key | |
| `QUOTAFLOW_KAFKA_SSL_CHECK_HOSTNAME` | `ssl.endpoint.identification.algorithm` | `true` (default) / `false` |
| `QUOTAFLOW_KAFKA_CLIENT_ID` | `client.id` prefix | default `quotaflow` |

`SASL_PLAINTEXT` with `PLAIN` sends the password in clear over the network: every process that
starts with it logs a warning (`kafka_password_in_clear`). Use `SCRAM-SHA-512`, or `SASL_SSL`.

With `SSL` or `SASL_SSL` and no CA file, the system's default trust store is used. The files
are loaded when the settings are read (`from_env`): a missing or unusable one stops a command at
start with a `KafkaConfigError` naming its variable. In Kubernetes, put the non-secret ones in
the ConfigMap and the password in a Secret (`deploy/agent.yaml` shows both).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from streams.log.interface import LogError

ENV_PREFIX = "QUOTAFLOW_KAFKA_"
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
CHECK_HOSTNAME_ON = ("1", "true", "yes", "https")
CHECK_HOSTNAME_OFF = ("0", "false", "no", "none")

N = TypeVar("N", int, float)


_warned_plain = False


class KafkaConfigError(LogError, ValueError):
    """A `QUOTAFLOW_KAFKA_*` setting no Kafka client can be built with. A LogError, so every
    command that opens a log reports it in one line, naming the setting: it is not a broker
    that cannot be reached, and no retry mends it."""


def _why(exc: BaseException, what: str = "file") -> str:
    if isinstance(exc, ssl.SSLError):
        # "[X509: NO_CERTIFICATE_OR_CRL_FOUND] no certificate or crl found (_ssl.c:4149)"
        return f"not a usable {what}: {str(exc).split(' (_ssl.c:')[0]}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    return str(exc)


def _check_readable(name: str, path: str | None) -> None:
    """ssl's own errors for a file it cannot open name no file (`[Errno 2] No such file or
    directory`), and load_cert_chain does not say which of its two files it was."""
    if path is None:
        return
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise KafkaConfigError(f"{ENV_PREFIX}{name}={path!r}: {_why(exc)}") from None


def number_from_env(name: str, default: N, *, positive: bool = False, environ: Mapping[str, str] | None = None) -> N:
    """A number setting of the Kafka log (`QUOTAFLOW_KAFKA_REPLICATION_FACTOR`, ...), of the type of
    its default; unset or empty: the default."""
    env = os.environ if environ is None else environ
    raw = env.get(name, "").strip()
    if not raw:
        return default
    kind = "a whole number" if isinstance(default, int) else "a number"
    try:
        value = type(default)(raw)
    except ValueError:
        raise KafkaConfigError(f"{name}={raw!r}: expected {kind}") from None
    if value != value or (positive and value <= 0):  # NaN, or 0 where only more makes sense
        raise KafkaConfigError(f"{name}={raw!r}: expected {kind} above 0")
    return value


def _warn_password_in_clear() -> None:
    global _warned_plain
    if not _warned_plain:
        _warned_plain = True
        structlog.get_logger("quotaflow.kafka").warning(
            "kafka_password_in_clear",
            message="SASL_PLAINTEXT with PLAIN sends the Kafka password in clear over the network: "
            "anyone on the path can read it and act as this principal. Use SCRAM-SHA-512 or SASL_SSL.",
        )


@dataclass(frozen=True)
class KafkaSecurity:
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = None
    ssl_check_hostname: bool = True
    client_id: str = "quotaflow"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> KafkaSecurity:
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            value = env.get(ENV_PREFIX + name, "").strip()
            return value or None

        protocol = (get("SECURITY_PROTOCOL") or "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise KafkaConfigError(f"{ENV_PREFIX}SECURITY_PROTOCOL={protocol!r}: expected one of {', '.join(PROTOCOLS)}")
        mechanism = get("SASL_MECHANISM")
        if mechanism is not None:
            mechanism = mechanism.upper()
            if mechanism not in MECHANISMS:
                raise KafkaConfigError(f"{ENV_PREFIX}SASL_MECHANISM={mechanism!r}: expected one of {', '.join(MECHANISMS)}")
        if protocol.startswith("SASL_"):
            mechanism = mechanism or "PLAIN"
            if get("SASL_USERNAME") is None or get("SASL_PASSWORD") is None:
                raise KafkaConfigError(f"{protocol} needs {ENV_PREFIX}SASL_USERNAME and {ENV_PREFIX}SASL_PASSWORD")
        if protocol == "SASL_PLAINTEXT" and mechanism == "PLAIN":
            _warn_password_in_clear()
        if get("SSL_CERTFILE") is None:
            for name in ("SSL_KEYFILE", "SSL_KEY_PASSWORD"):
                if get(name) is not None:
                    # aiokafka would ignore it and send no client certificate; a broker that
                    # asks for one closes the connection, which reads as an unreachable broker.
                    raise KafkaConfigError(f"{ENV_PREFIX}{name} is set but {ENV_PREFIX}SSL_CERTFILE is not")
        check = (get("SSL_CHECK_HOSTNAME") or "true").lower()
        # "https" and "none" as Kafka's ssl.endpoint.identification.algorithm spells them. Anything
        # else (a typo of "false") must not silently mean true.
        if check not in CHECK_HOSTNAME_ON + CHECK_HOSTNAME_OFF:
            raise KafkaConfigError(f"{ENV_PREFIX}SSL_CHECK_HOSTNAME={get('SSL_CHECK_HOSTNAME')!r}: expected true or false")
        security = cls(
            security_protocol=protocol,
            sasl_mechanism=mechanism,
            sasl_username=get("SASL_USERNAME"),
            sasl_password=get("SASL_PASSWORD"),
            ssl_cafile=get("SSL_CAFILE"),
            ssl_certfile=get("SSL_CERTFILE"),
            ssl_keyfile=get("SSL_KEYFILE"),
            ssl_key_password=get("SSL_KEY_PASSWORD"),
            ssl_check_hostname=check in CHECK_HOSTNAME_ON,
            client_id=get("CLIENT_ID") or "quotaflow",
        )
        # Now rather than when the first client starts: there the failure would surface as the
        # log being unreachable, or escape the command.
        security.ssl_context()
        return security

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext | None:
        """What aiokafka's `create_ssl_context` builds, with each failure naming its setting."""
        if not self.uses_ssl:
            return None
        _check_readable("SSL_CAFILE", self.ssl_cafile)
        _check_readable("SSL_CERTFILE", self.ssl_certfile)
        _check_readable("SSL_KEYFILE", self.ssl_keyfile)
        try:
            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.ssl_cafile)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise KafkaConfigError(f"{ENV_PREFIX}SSL_CAFILE={self.ssl_cafile!r}: {_why(exc, 'CA bundle (PEM)')}") from None
        if self.ssl_certfile is not None:
            asked: list[bool] = []

            def no_password() -> bytes:
                # Without a password, OpenSSL would prompt for one on the terminal.
                asked.append(True)
                return b""

            try:
                context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile, self.ssl_key_password or no_password)
            except (OSError, ValueError) as exc:
                if asked:
                    key = ("SSL_KEYFILE", self.ssl_keyfile) if self.ssl_keyfile else ("SSL_CERTFILE", self.ssl_certfile)
                    raise KafkaConfigError(
                        f"{ENV_PREFIX}{key[0]}={key[1]!r}: the key is encrypted; set {ENV_PREFIX}SSL_KEY_PASSWORD"
                    ) from None
                names = f"{ENV_PREFIX}SSL_CERTFILE={self.ssl_certfile!r}"
                if self.ssl_keyfile is not None:
                    names += f" with {ENV_PREFIX}SSL_KEYFILE={self.ssl_keyfile!r}"
                if self.ssl_key_password is not None:
                    names += f" and {ENV_PREFIX}SSL_KEY_PASSWORD"
                raise KafkaConfigError(f"{names}: {_why(exc, 'certificate and key (PEM)')}") from None
        context.check_hostname = self.ssl_check_hostname
        return context

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for aiokafka's producer, consumer and admin client."""
        kwargs: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.uses_ssl:
            kwargs["ssl_context"] = self.ssl_context()
        if self.security_protocol.startswith("SASL_"):
            kwargs["sasl_mechanism"] = self.sasl_mechanism
            kwargs["sasl_plain_username"] = self.sasl_username
            kwargs["sasl_plain_password"] = self.sasl_password
        return kwargs

    def faust_credentials(self) -> Any:
        """The same settings as Faust's `broker_credentials` (None for PLAINTEXT)."""
        import faust
        from faust.types.auth import SASLMechanism

        if self.security_protocol.startswith("SASL_"):
            return faust.SASLCredentials(
                username=self.sasl_username,
                password=self.sasl_password,
                mechanism=SASLMechanism(self.sasl_mechanism),
                ssl_context=self.ssl_context(),
            )
        if self.uses_ssl:
            return faust.SSLCredentials(self.ssl_context())
        return None
