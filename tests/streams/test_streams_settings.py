from __future__ import annotations

import pytest

from streams import settings
from streams.settings import Settings, split_host_port


def test_defaults_without_env() -> None:
    s = Settings.from_env({})
    assert s == Settings()
    assert s.kafka_bootstrap == "localhost:9092"
    assert s.broker_url == "sqlite:///quotaflow.db"
    assert s.http_port == 6066
    assert (s.input_topic, s.decisions_topic, s.snapshots_topic) == (
        "quotaflow.events",
        "quotaflow.decisions",
        "quotaflow.snapshots",
    )


def test_env_overrides() -> None:
    s = Settings.from_env(
        {
            settings.ENV_KAFKA_BOOTSTRAP: "127.0.0.1:39092",
            settings.ENV_BROKER_URL: "kafka://127.0.0.1:39092",
            settings.ENV_HTTP_PORT: "7000",
            settings.ENV_INPUT_TOPIC: "bench.events",
        }
    )
    assert s.kafka_bootstrap == "127.0.0.1:39092"
    assert s.broker_url == "kafka://127.0.0.1:39092"
    assert s.http_port == 7000
    assert s.input_topic == "bench.events"
    assert s.decisions_topic == settings.DECISIONS_TOPIC


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("localhost:9092", ("localhost", 9092)),
        ("kafka://kafka:9092", ("kafka", 9092)),
        ("a:1,b:2", ("a", 1)),
    ],
)
def test_split_host_port(text: str, expected: tuple[str, int]) -> None:
    assert split_host_port(text) == expected


@pytest.mark.parametrize("text", ["localhost", ":9092", "host:port"])
def test_split_host_port_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        split_host_port(text)


def test_engine_process_default_follows_the_env_then_the_usable_cores(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    env = settings.ENV_ENGINE_PROCESS
    assert settings.default_engine_process({env: "1"}) is True
    assert settings.default_engine_process({env: "off"}) is False
    with pytest.raises(ValueError, match=env):
        settings.default_engine_process({env: "maybe"})
    monkeypatch.setattr(settings, "usable_cores", lambda: 1)
    assert settings.default_engine_process({}) is False
    monkeypatch.setattr(settings, "usable_cores", lambda: 2)
    assert settings.default_engine_process({}) is True


@pytest.mark.parametrize(("cpu_max", "bound"), [("max 100000", None), ("100000 100000", 1), ("150000 100000", 2), ("20000 100000", 1)])
def test_usable_cores_are_bounded_by_the_cgroup_cpu_quota(tmp_path, cpu_max: str, bound: int | None) -> None:  # type: ignore[no-untyped-def]
    import os

    path = tmp_path / "cpu.max"
    path.write_text(cpu_max + "\n")
    affinity = len(os.sched_getaffinity(0))
    assert settings.usable_cores(str(path)) == (affinity if bound is None else min(affinity, bound))
    assert settings.usable_cores(str(tmp_path / "missing")) == affinity
