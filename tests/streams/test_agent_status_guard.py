"""The agent's /health and /status behind the guard (streams/http_guard.py): loopback by default,
/status needs the bearer token when one is set, /health never does (probes carry none)."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from streams.agent.loop import Agent, AgentConfig
from streams.agent.process import StatusServer
from streams.http_guard import GuardError, HttpGuard
from streams.log import Topics
from streams.log.sqlite import SqliteLog

pytestmark = pytest.mark.timeout(60, func_only=True)

TOKEN = "agent-status-token-0123456789abcdef"


async def test_status_needs_the_token_and_health_does_not(tmp_path: Path) -> None:
    agent = Agent(SqliteLog(tmp_path / "log.db"), AgentConfig(Topics("in", "dec", "snap"), engine_process=False))
    server = StatusServer(agent, 0, HttpGuard(token=TOKEN))
    await server.start()
    try:
        assert server._runner is not None
        (address,) = {s.getsockname()[0] for site in server._runner.sites for s in site._server.sockets}
        assert address == "127.0.0.1"
        base = f"http://127.0.0.1:{server.bound}"
        async with aiohttp.ClientSession() as http:
            async with http.get(base + "/health") as response:
                assert response.status == 200 and (await response.json())["role"] == "starting"
            async with http.get(base + "/status") as response:
                assert response.status == 401
            async with http.get(base + "/status", headers={"Authorization": f"Bearer {TOKEN}"}) as response:
                assert response.status == 200 and (await response.json())["role"] == "starting"
            async with http.post(base + "/health") as response:
                assert response.status == 405
    finally:
        await server.stop()


def test_the_agent_refuses_a_wide_bind_without_a_token() -> None:
    with pytest.raises(GuardError, match="refusing to serve on 0.0.0.0"):
        HttpGuard.from_env({}, host="0.0.0.0").check()
    HttpGuard.from_env({"QUOTAFLOW_HTTP_TOKEN": TOKEN}, host="0.0.0.0").check()
    HttpGuard.from_env({"QUOTAFLOW_HTTP_INSECURE": "1"}, host="0.0.0.0").check()


def test_the_token_can_come_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n")
    assert HttpGuard.from_env({"QUOTAFLOW_HTTP_TOKEN_FILE": str(tmp_path / "token")}).token == TOKEN
    (tmp_path / "empty").write_text("")
    with pytest.raises(GuardError, match="is empty"):
        HttpGuard.from_env({"QUOTAFLOW_HTTP_TOKEN_FILE": str(tmp_path / "empty")})
    with pytest.raises(GuardError, match="nope"):
        HttpGuard.from_env({"QUOTAFLOW_HTTP_TOKEN_FILE": str(tmp_path / "nope")})
