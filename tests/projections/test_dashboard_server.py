"""The dashboard's HTTP side on a live SQLite log: the page and its assets, bad requests refused
with a reason, time travel by `asOf`, reports confined to their directory, and the decision
stream delivering a decision folded after the page connected."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest
from projection_harness import applied, cluster_queue, flavor, local_queue, workload

from projections.server import ProjectionServer
from streams.agent.loop import Agent, AgentConfig
from streams.log import Topics
from streams.log.envelope import event_message
from streams.log.sqlite import SqliteLog

pytestmark = pytest.mark.timeout(60, func_only=True)
TOPICS = Topics("quotaflow.events", "quotaflow.decisions", "quotaflow.snapshots")


class Live:
    def __init__(self, db: Path, reports: Path) -> None:
        self.log = SqliteLog(db)
        self.agent = Agent(SqliteLog(db), AgentConfig(TOPICS, standby=False, engine_process=False))
        self.server = ProjectionServer(SqliteLog(db), TOPICS, reports=reports)
        self.base = ""

    async def publish(self, *events: dict[str, Any]) -> int:
        offsets = await self.log.append(TOPICS.input, [event_message(msgspec.json.encode(e)) for e in events])
        await self.agent.wait_processed(offsets[-1], timeout=30)
        await self.server.wait_for_offset(offsets[-1])
        return int(offsets[-1])


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "team-a-x2.html").write_text("<html><body>report</body></html>")
    (tmp_path / "secret.html").write_text("not a report")
    lv = Live(tmp_path / "log.db", reports)
    await lv.log.start()
    await lv.log.ensure_topics(TOPICS.specs(), single_partition=[TOPICS.input, TOPICS.decisions])
    task = asyncio.create_task(lv.agent.run())
    port = await lv.server.start("127.0.0.1", 0)
    lv.base = f"http://127.0.0.1:{port}"
    try:
        yield lv
    finally:
        await lv.server.stop()
        lv.agent.stop()
        await asyncio.wait_for(task, 30)
        await lv.log.close()


def submit(name: str, cpu: int) -> dict[str, Any]:
    return {"type": "WorkloadSubmitted", "workload": workload("team-a", name, "q", cpu)}


async def test_pages_requests_time_travel_and_the_stream(live: Live) -> None:
    first = await live.publish(applied(flavor("default")), applied(cluster_queue("cq-a", {"default": 4})),
                               applied(local_queue("team-a", "q", "cq-a")), submit("a1", 3))
    async with aiohttp.ClientSession() as http:

        async def get(path: str, status: int = 200) -> Any:
            async with http.get(live.base + path) as resp:
                body = await resp.read()
                assert resp.status == status, (path, resp.status, body[:300])
                return msgspec.json.decode(body) if resp.content_type == "application/json" else body.decode()

        page = await get("/")
        assert "<title>quotaflow</title>" in page and "/ui/static/dashboard.js" in page
        assert "EventSource" in await get("/ui/static/dashboard.js")
        await get("/ui/static/../server.py", 404)
        await get("/ui/static/nope.js", 404)
        assert "state must be one of pending, admitted" in (await get("/api/workloads?state=finished", 400))["message"]
        await get("/api/workloads?clusterQueue=nope", 404)
        await get("/api/overview?asOf=-1", 400)
        await get("/api/overview?asOf=x", 400)
        assert (await get("/api/reports"))["reports"] == ["team-a-x2.html"]
        assert "report" in await get("/reports/team-a-x2.html")
        await get("/reports/secret.html", 404)
        await get("/reports/..%2Fsecret.html", 404)
        await get("/api/workload/team-a/nope", 404)

        async with http.get(live.base + "/api/stream") as stream:
            assert stream.headers["Content-Type"].startswith("text/event-stream")
            second = await live.publish(submit("a2", 3))  # does not fit: Pending
            seen = b""
            while b'"workload":"team-a/a2"' not in seen:
                seen += await asyncio.wait_for(stream.content.readany(), 10)
            assert b"event: decision" in seen and b'"type":"Pending"' in seen

        now = await get("/api/workloads?state=pending")
        assert [i["name"] for i in now["items"]] == ["a2"] and now["asOf"]["inputOffset"] == second
        then = await get(f"/api/workloads?state=pending&asOf={first}")
        assert then["items"] == [] and then["asOf"]["inputOffset"] == first
        detail = await get("/api/workload/team-a/a2")
        assert detail["state"]["phase"] == "Pending" and detail["why"]["clusterQueue"] == "cq-a"
        assert detail["yaml"][0]["event"] == "WorkloadSubmitted" and "name: a2" in detail["yaml"][0]["yaml"]
        recent = await get("/api/decisions?limit=2")
        assert [i["decision"]["workload"] for i in recent["items"]] == ["team-a/a1", "team-a/a2"]
