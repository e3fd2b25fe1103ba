"""Defaults shared by the CLI, the runtimes, tests, deploy files and benchmarks.

Everything that must agree across those places (ports, topic names, env var
names) is defined once here; tests/test_compose.py checks docker-compose.yml
against it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_KAFKA_BOOTSTRAP = "localhost:9092"
DEFAULT_BROKER_URL = "sqlite:///quotaflow.db"
DEFAULT_HTTP_PORT = 6066

INPUT_TOPIC = "quotaflow.events"
DECISIONS_TOPIC = "quotaflow.decisions"
SNAPSHOTS_TOPIC = "quotaflow.snapshots"

ENV_BROKER_URL = "QUOTAFLOW_BROKER_URL"
ENV_KAFKA_BOOTSTRAP = "QUOTAFLOW_KAFKA_BOOTSTRAP"
ENV_HTTP_PORT = "QUOTAFLOW_HTTP_PORT"
# The HTTP endpoints' guard (streams/http_guard.py): bind address, bearer token, TLS.
DEFAULT_HTTP_HOST = "127.0.0.1"
ENV_HTTP_HOST = "QUOTAFLOW_HTTP_HOST"
ENV_HTTP_TOKEN = "QUOTAFLOW_HTTP_TOKEN"
ENV_HTTP_TOKEN_FILE = "QUOTAFLOW_HTTP_TOKEN_FILE"
ENV_HTTP_INSECURE = "QUOTAFLOW_HTTP_INSECURE"
ENV_HTTP_TLS_CERT = "QUOTAFLOW_HTTP_TLS_CERT"
ENV_HTTP_TLS_KEY = "QUOTAFLOW_HTTP_TLS_KEY"
ENV_HTTP_TLS_CLIENT_CA = "QUOTAFLOW_HTTP_TLS_CLIENT_CA"
ENV_INPUT_TOPIC = "QUOTAFLOW_INPUT_TOPIC"
ENV_DECISIONS_TOPIC = "QUOTAFLOW_DECISIONS_TOPIC"
ENV_SNAPSHOTS_TOPIC = "QUOTAFLOW_SNAPSHOTS_TOPIC"
# The agent (streams/agent/loop.py): snapshot cadence, log level, writer name.
DEFAULT_SNAPSHOT_EVERY = 10_000  # input events
DEFAULT_SNAPSHOT_INTERVAL_S = 60.0
DEFAULT_LOG_LEVEL = "info"
DEFAULT_MAX_BATCH = 2_000  # input events per transaction
DEFAULT_STEP_BYTES = 64 * 1024  # input bytes per engine step (streams/agent/loop.py, AgentConfig.step_bytes)
ENV_SNAPSHOT_EVERY = "QUOTAFLOW_SNAPSHOT_EVERY"
ENV_SNAPSHOT_INTERVAL = "QUOTAFLOW_SNAPSHOT_INTERVAL"
ENV_LOG_LEVEL = "QUOTAFLOW_LOG_LEVEL"
ENV_AGENT_NAME = "QUOTAFLOW_AGENT_NAME"
ENV_MAX_BATCH = "QUOTAFLOW_MAX_BATCH"
ENV_STEP_BYTES = "QUOTAFLOW_STEP_BYTES"
# Ticks (domain/clock.py): the agent appends a `Tick` to the input log when no record has moved
# the log's time for this long, so that timers (PodsReady timeouts, maximum execution times,
# requeuing backoffs) fire within about this much of their deadline on an idle log. On by
# default, as those timers are (Kueue's v1beta2 Configuration turns waitForPodsReady on); 0: off.
DEFAULT_TICK_INTERVAL_S = 10.0
ENV_TICK_INTERVAL = "QUOTAFLOW_TICK_INTERVAL"
# The engine in a child process of the agent, pipelined with the shell (streams/agent/engine_host.py).
ENV_ENGINE_PROCESS = "QUOTAFLOW_ENGINE_PROCESS"
# Test-only: turns "no Kafka broker available" from a skip into a failure.
ENV_REQUIRE_KAFKA = "QUOTAFLOW_REQUIRE_KAFKA"


def usable_cores(cpu_max: str = "/sys/fs/cgroup/cpu.max") -> int:
    """CPUs this process may run on, bounded by its cgroup's CPU quota (a container's CPU limit:
    a pod limited to 1 CPU on a 16-core node has 1, not 16)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        quota, period = open(cpu_max).read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass  # no cgroup v2 quota: the affinity mask is the bound
    return cores


def default_engine_process(environ: Mapping[str, str] | None = None) -> bool:
    """$QUOTAFLOW_ENGINE_PROCESS if set (1/0, true/false, on/off); otherwise the agent's engine
    runs in a process of its own when there is a second core for it: the engine's and the
    shell's CPU then overlap (bench/figures.md); on one core it would only add the pipe's cost."""
    raw = (os.environ if environ is None else environ).get(ENV_ENGINE_PROCESS, "").strip().lower()
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    if raw:
        raise ValueError(f"${ENV_ENGINE_PROCESS}={raw!r}: expected 1/0, true/false, yes/no or on/off")
    return usable_cores() >= 2


def split_host_port(address: str) -> tuple[str, int]:
    """"host:port" -> (host, port); also accepts a leading "kafka://"."""
    address = address.removeprefix("kafka://").split(",")[0]
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"expected host:port, got {address!r}")
    return host, int(port)


@dataclass(frozen=True)
class Settings:
    broker_url: str = DEFAULT_BROKER_URL
    kafka_bootstrap: str = DEFAULT_KAFKA_BOOTSTRAP
    http_port: int = DEFAULT_HTTP_PORT
    input_topic: str = INPUT_TOPIC
    decisions_topic: str = DECISIONS_TOPIC
    snapshots_topic: str = SNAPSHOTS_TOPIC

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        return cls(
            broker_url=env.get(ENV_BROKER_URL) or DEFAULT_BROKER_URL,
            kafka_bootstrap=env.get(ENV_KAFKA_BOOTSTRAP) or DEFAULT_KAFKA_BOOTSTRAP,
            http_port=int(env.get(ENV_HTTP_PORT) or DEFAULT_HTTP_PORT),
            input_topic=env.get(ENV_INPUT_TOPIC) or INPUT_TOPIC,
            decisions_topic=env.get(ENV_DECISIONS_TOPIC) or DECISIONS_TOPIC,
            snapshots_topic=env.get(ENV_SNAPSHOTS_TOPIC) or SNAPSHOTS_TOPIC,
        )
