"""Logs the agent has already decided, for the read-only commands: events appended, an in-process
agent run over them until it has decided the last, then the CLI run in-process (typer's
CliRunner) against them. No subprocess: the views need only the two logs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agent_harness import agent_env
from typer.testing import CliRunner, Result

from streams.agent.loop import Agent, AgentConfig
from streams.cli.main import app
from streams.log import Topics, open_log
from streams.log.envelope import event_message


@dataclass
class Decided:
    url: str
    topics: Topics
    created: str = ""  # when a fixture says its configuration was created

    def cli(self, *args: str, env: dict[str, str] | None = None) -> Result:
        settings = {k: v for k, v in agent_env(self.topics).items() if k.startswith("QUOTAFLOW_")}
        return CliRunner().invoke(app, [*args, "--broker", self.url], env={**settings, **(env or {})}, catch_exceptions=False)

    def decide(self, *events: dict[str, Any]) -> int:
        """Append `events`, and return once the agent has decided them all: the last offset."""
        return asyncio.run(_decide(self.url, self.topics, list(events)))


async def _decide(url: str, topics: Topics, events: list[dict[str, Any]]) -> int:
    log = open_log(url)
    await log.start()
    try:
        await log.ensure_topics(topics.specs(), single_partition=[topics.input, topics.decisions])
        last = (await log.append(topics.input, [event_message(e) for e in events]))[-1]
        agent = Agent(log, AgentConfig(topics, engine_process=False, standby=False, snapshot_every_seconds=3600))
        task = asyncio.create_task(agent.run())
        try:
            await agent.wait_processed(last, timeout=60)
        finally:
            agent.stop()
            await asyncio.wait_for(task, 30)
        return last
    finally:
        await log.close()


@pytest.fixture(params=["sqlite", "kafka"])
def decided(request: pytest.FixtureRequest, tmp_path: Path) -> Decided:
    """An empty pair of logs on the embedded log or Kafka."""
    if request.param == "kafka":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        make: Callable[[str], str] = request.getfixturevalue("kafka_topic_factory")
        return Decided(f"kafka://{bootstrap}", Topics(make("in"), make("dec"), make("snap")))
    return Decided(f"sqlite:///{tmp_path / 'views.db'}", Topics("quotaflow.events", "quotaflow.decisions", "quotaflow.snapshots"))
