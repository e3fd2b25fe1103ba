"""The dashboard `quotaflow serve` shows at `/`: the cluster as the logs have it, live.

One page (static/index.html, static/dashboard.js, static/dashboard.css: shipped in the package,
no build step, no third-party script) reads the JSON endpoints below and the decision stream.

| path | what |
| --- | --- |
| `GET /` | the page |
| `GET /ui/static/{file}` | its script and style |
| `GET /api/overview` | cohorts, ClusterQueues (usage per flavor and resource: nominal, reservation, borrowed, lent), LocalQueues, flavors and who uses them (`projections/dashboard/data.py`) |
| `GET /api/workloads?state=pending\\|admitted&clusterQueue=&offset=&limit=` | a page of pending workloads in queue order (with positions and reasons) or of workloads holding quota |
| `GET /api/workload/{ns}/{name}` | a workload's state, its history, why it waits (`explain`) and its objects as YAML |
| `GET /api/decisions?limit=` | the latest decisions |
| `GET /api/stream` | server-sent events: each decision as it is folded (`decision`), the position (`position`), `resync` |
| `GET /api/reports`, `/reports/{file}` | the what-if reports in `serve --reports DIR` |

Every `/api` view but the stream takes `asOf=OFFSET`: the view as of that input offset (time
travel, as the CLI's `--as-of`), built by a rebuild of the logs up to it; the last few are kept,
so moving a slider back and forth does not rebuild each time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import msgspec
import yaml
from aiohttp import web

from projections import views
from projections.dashboard import data
from projections.dashboard.live import HEARTBEAT_SECONDS, Hub
from projections.fold import Projection
from projections.follower import Follower, rebuild
from streams.log import EventLog, Topics

STATIC_FILES = {
    "dashboard.js": "application/javascript",
    "dashboard.css": "text/css",
}
AS_OF_CACHE = 4
OVERVIEW_EVERY_SECONDS = 1.0
RECENT_DECISIONS = 200

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder()


class Source(Protocol):
    """What the dashboard reads: the server's live projection and its logs."""

    log: EventLog
    topics: Topics
    projection: Projection
    follower: Follower


def _static(name: str) -> bytes:
    return resources.files("projections.dashboard").joinpath("static", name).read_bytes()


class Dashboard:
    def __init__(self, source: Source, reports: Path | None = None) -> None:
        self.source = source
        self.reports = reports
        self.hub = Hub(source.follower.recent_decisions)
        self._as_of: OrderedDict[int, Projection] = OrderedDict()
        self._as_of_lock = asyncio.Lock()
        self._overview: tuple[tuple[int, int], float, bytes] | None = None
        source.follower.on_progress(lambda: self.hub.notify(source.projection.position))

    # -- helpers ---------------------------------------------------------------------------------
    def _json(self, body: dict[str, Any], proj: Projection, status: int = 200) -> web.Response:
        undecided = self.source.follower.undecided if proj is self.source.projection else 0
        body = {**body, "asOf": views.as_of(proj, undecided)}
        return web.Response(body=_encode(body), status=status, content_type="application/json")

    @staticmethod
    def _error(status: int, reason: str, message: str) -> web.Response:
        body = {"kind": "Status", "status": "Failure", "reason": reason, "message": message, "code": status}
        return web.Response(body=_encode(body), status=status, content_type="application/json")

    @staticmethod
    def _int(request: web.Request, name: str, default: int | None) -> int | None:
        raw = request.query.get(name)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw)
        except ValueError:
            raise web.HTTPBadRequest(text=f"{name} must be an integer, not {raw!r}") from None
        if value < 0:
            raise web.HTTPBadRequest(text=f"{name} must not be negative")
        return value

    async def _projection(self, request: web.Request) -> Projection:
        """The live projection, or the one as of `asOf` (rebuilt, then kept a while)."""
        as_of = self._int(request, "asOf", None)
        live = self.source.projection
        if as_of is None or as_of >= live.position:
            return live
        async with self._as_of_lock:
            proj = self._as_of.get(as_of)
            if proj is None:
                proj, _ = await rebuild(self.source.log, self.source.topics, as_of=as_of, history=False)
                self._as_of[as_of] = proj
                while len(self._as_of) > AS_OF_CACHE:
                    self._as_of.popitem(last=False)
            else:
                self._as_of.move_to_end(as_of)
            return proj

    # -- handlers --------------------------------------------------------------------------------
    async def page(self, request: web.Request) -> web.Response:
        return web.Response(body=_static("index.html"), content_type="text/html", charset="utf-8")

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["file"]
        kind = STATIC_FILES.get(name)
        if kind is None:
            return self._error(404, "NotFound", f"no file {name}")
        return web.Response(body=_static(name), content_type=kind, charset="utf-8")

    async def overview(self, request: web.Request) -> web.Response:
        proj = await self._projection(request)
        if proj is not self.source.projection:
            return self._json(data.overview(proj), proj)
        # Every open page asks for the overview after each change it hears of; on a busy big
        # cluster one computation a second serves them all (the body says as of when).
        key = (proj.position, proj.next_decision_offset)
        now = time.monotonic()
        cached = self._overview
        if cached is None or (cached[0] != key and now - cached[1] >= OVERVIEW_EVERY_SECONDS):
            body = self._json(data.overview(proj), proj).body
            assert isinstance(body, bytes)
            cached = self._overview = (key, now, body)
        return web.Response(body=cached[2], content_type="application/json")

    async def workloads(self, request: web.Request) -> web.Response:
        proj = await self._projection(request)
        state = request.query.get("state", "pending")
        if state not in data.WORKLOAD_STATES:
            return self._error(400, "BadRequest", f"state must be one of {', '.join(data.WORKLOAD_STATES)}")
        cq = request.query.get("clusterQueue") or None
        page = data.workloads(
            proj, state, cluster_queue=cq,
            offset=self._int(request, "offset", 0) or 0, limit=self._int(request, "limit", 100) or 0,
        )
        if page is None:
            return self._error(404, "NotFound", f"ClusterQueue {cq} not found")
        return self._json(page, proj)

    async def workload(self, request: web.Request) -> web.Response:
        from projections.explain import explain

        key = f"{request.match_info['ns']}/{request.match_info['name']}"
        as_of = self._int(request, "asOf", None)
        result = await explain(self.source.log, self.source.topics, key, as_of=as_of)
        if result["state"] is None and not result["history"]:
            return self._error(404, "NotFound", f"workload {key} not found")
        result["yaml"] = _objects_yaml(result["history"])
        return web.Response(body=_encode(result), content_type="application/json")

    async def decisions(self, request: web.Request) -> web.Response:
        limit = min(self._int(request, "limit", 50) or 0, RECENT_DECISIONS)
        window = self.source.follower.recent_decisions.values
        items: list[dict[str, Any]] = []
        for offset in reversed(window):
            if len(items) >= limit:
                break
            value = window[offset][0]
            items.append({"offset": offset, "decision": _decode.decode(value) if value else None})
        items.reverse()
        return self._json({"items": items}, self.source.projection)

    async def stream(self, request: web.Request) -> web.StreamResponse:
        queue = self.hub.open()
        if queue is None:
            return self._error(503, "TooManyRequests", "too many live pages; try again later")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        try:
            await response.prepare(request)
            await response.write(b"retry: 2000\n\n")
            while True:
                try:
                    message = await asyncio.wait_for(queue.get(), HEARTBEAT_SECONDS)
                except TimeoutError:
                    message = b": heartbeat\n\n"
                if message is None:
                    break
                await response.write(message)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.hub.close(queue)
        return response

    async def report_list(self, request: web.Request) -> web.Response:
        names = sorted(p.name for p in self.reports.glob("*.html")) if self.reports is not None else []
        return self._json({"reports": names}, self.source.projection)

    async def report(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["file"]
        if self.reports is None or name not in {p.name for p in self.reports.glob("*.html")}:
            return self._error(404, "NotFound", f"no report {name}")
        return web.FileResponse(self.reports / name)

    def shutdown(self) -> None:
        self.hub.shutdown()


def _objects_yaml(history: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The workload's objects as submitted and updated, each as YAML, in log order."""
    out: list[dict[str, Any]] = []
    for entry in history:
        event = entry.get("event")
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind in ("WorkloadSubmitted", "WorkloadUpdated") and isinstance(event.get("workload"), dict):
            offset = (entry.get("cause") or {}).get("offset")
            if out and out[-1]["offset"] == offset:
                continue
            out.append({"event": kind, "offset": offset,
                        "yaml": yaml.safe_dump(event["workload"], sort_keys=False, allow_unicode=True)})
    return out


def register(app: web.Application, source: Source, reports: Path | None = None) -> Dashboard:
    """Add the dashboard's routes to `app`; the server calls `shutdown` when it stops."""
    board = Dashboard(source, reports)
    add = app.router.add_get
    add("/", board.page)
    add("/ui/static/{file}", board.static)
    add("/api/overview", board.overview)
    add("/api/workloads", board.workloads)
    add("/api/workload/{ns}/{name}", board.workload)
    add("/api/decisions", board.decisions)
    add("/api/stream", board.stream)
    add("/api/reports", board.report_list)
    add("/reports/{file}", board.report)
    app.on_shutdown.append(lambda _app: _shutdown(board))
    return board


async def _shutdown(board: Dashboard) -> None:
    with contextlib.suppress(Exception):
        board.shutdown()
