"""The `quotaflow` CLI against a live agent, on the embedded log or Kafka (the `live` fixture)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from agent_harness import AgentProcess, agent_env

from streams.log import Topics, open_log

FLAVOR = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}}
CLUSTER_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "ClusterQueue",
    "metadata": {"name": "team-a-cq"},
    "spec": {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": 4}, {"name": "memory", "nominalQuota": "1Gi"}]}
                ],
            }
        ],
    },
}
LOCAL_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "LocalQueue",
    "metadata": {"name": "team-a", "namespace": "team-a"},
    "spec": {"clusterQueue": "team-a-cq"},
}


def workload(name: str, cpu: str = "1", namespace: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "queueName": "team-a",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}],
            **spec,
        },
    }


@dataclass
class Live:
    url: str
    topics: Topics
    tmp: Path
    agent: AgentProcess | None = None

    def cli(self, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "streams.cli.main", *args, "--broker", self.url],
            input=stdin.decode() if stdin is not None else None,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**agent_env(self.topics), **(env or {})},
        )

    def write(self, name: str, *objects: dict[str, Any]) -> Path:
        path = self.tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump_all(objects))
        return path

    async def values(self, topic: str) -> list[bytes]:
        """Every record's value on `topic` of this log, from its start."""
        log = open_log(self.url)
        await log.start()
        try:
            return [r.value or b"" for r in await log.read_all(topic)]
        finally:
            await log.close()

    def inputs(self) -> list[dict[str, Any]]:
        """The input log's events, decoded (for tests that run no event loop of their own)."""
        return [json.loads(v or b"null") for v in asyncio.run(self.values(self.topics.input))]

    def start_agent(self) -> None:
        self.agent = AgentProcess(self.url, self.topics, self.tmp / "agent.log")
        self.agent.start()

    def configure(self) -> None:
        """The queues every test uses, applied before the agent runs (it decides them at start)."""
        done = self.cli("apply", "-f", str(self.write("config.yaml", FLAVOR, CLUSTER_QUEUE, LOCAL_QUEUE)), "--no-wait")
        assert done.returncode == 0, done.stderr


@pytest.fixture(params=["sqlite", "kafka"])
def logs(request: pytest.FixtureRequest, tmp_path: Path) -> Live:
    """A log with the queues applied, no agent."""
    if request.param == "kafka":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        make = request.getfixturevalue("kafka_topic_factory")
        env = Live(f"kafka://{bootstrap}", Topics(make("in"), make("dec"), make("snap")), tmp_path)
    else:
        env = Live(f"sqlite:///{tmp_path / 'cli.db'}", Topics("quotaflow.events", "quotaflow.decisions", "quotaflow.snapshots"), tmp_path)
    env.configure()
    return env


@pytest.fixture
def live(logs: Live) -> Iterator[Live]:
    """`logs` with an agent following them."""
    logs.start_agent()
    assert logs.agent is not None
    logs.agent.wait_recovered_sync(120)
    try:
        yield logs
    finally:
        assert logs.agent is not None
        assert logs.agent.stop() == 0, (logs.tmp / "agent.log").read_text()[-2000:]
