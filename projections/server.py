"""The HTTP API: every view as JSON, and Prometheus metrics, while tailing the logs.

aiohttp (which Faust itself runs on) rather than Faust web views: the projection is a reader of
both logs on Kafka *or* SQLite, and a Faust app cannot start without Kafka. The agent's own
`/health` and `/status` stay on the agent (streams/agent/process.py).

| path | view |
| --- | --- |
| `GET /clusterqueues`, `/clusterqueues/{name}` | ClusterQueues with Kueue's status |
| `GET /clusterqueues/{name}/pendingworkloads` | Kueue's visibility API (`?offset=&limit=`) |
| `GET /localqueues`, `/localqueues/{ns}`, `/localqueues/{ns}/{name}` | LocalQueues |
| `GET /localqueues/{ns}/{name}/pendingworkloads` | visibility API for a LocalQueue |
| `GET /cohorts`, `/cohorts/{name}` | cohorts: totals, who lends to whom |
| `GET /pending`, `/pending/clusterqueues/{name}`, `/pending/localqueues/{ns}/{name}`, `/pending/workloads/{ns}/{name}` | positions |
| `GET /workloads/{ns}/{name}` | a workload's state and history (decisions with their input events) |
| `GET /apis/visibility.kueue.x-k8s.io/v1beta1/...` | Kueue's visibility paths (clusterqueues/{name}/pendingworkloads, namespaces/{ns}/localqueues/{name}/pendingworkloads) |
| `GET /metrics` | Prometheus, Kueue's metric names |
| `GET /status`, `/health` | where the projection stands |
| `GET /`, `/api/...` | the dashboard and its data (projections/dashboard) |

Every JSON view carries `asOf` (input offset, decision offset, undecided events).

In front of every path: streams/http_guard.py (127.0.0.1 unless told otherwise, GET/HEAD only,
an optional bearer token, TLS/mTLS, bounds on request size and on requests at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from projections import dashboard, views
from projections.fold import Projection
from projections.follower import Follower
from projections.metrics import exposition, registry_for
from streams.http_guard import HttpGuard
from streams.log import EventLog, Topics

_encode = msgspec.json.Encoder().encode


class ProjectionServer:
    def __init__(
        self, log: EventLog, topics: Topics, *, recent: int = 20_000, reports: Path | None = None, guard: HttpGuard | None = None
    ) -> None:
        self.log = log
        # the dashboard's live stream holds its request open: not counted among requests at once
        self.guard = dataclasses.replace(guard or HttpGuard(), streaming_paths=("/api/stream",))
        self.reports = reports  # what-if HTML reports the dashboard lists
        self.topics = topics
        self.projection = Projection()
        self.follower = Follower(log, topics, self.projection, recent=recent)
        self.registry = registry_for(lambda: self.projection, lambda: self.follower.undecided)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self.failed: str | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self, host: str | None = None, port: int = 0) -> int:
        """Follow the logs and serve; `host` overrides the guard's. Raises GuardError (before
        anything starts) when the guard's settings would serve unsafely."""
        if host is not None:
            self.guard = dataclasses.replace(self.guard, host=host)
        self.guard.check()
        await self.log.start()
        await self.follower.open()
        self._task = asyncio.create_task(self._follow(), name="quotaflow-projection")
        self._runner = self.guard.runner(self.app())
        self.port = await self.guard.start(self._runner, port)
        return self.port

    async def _follow(self) -> None:
        try:
            await self.follower.catch_up()  # the bulk of the logs, then follow them
            await self.follower.run(self._stop)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.failed = f"{type(exc).__name__}: {exc}"
            raise

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._task, 10)
        if self._runner is not None:
            await self._runner.cleanup()
        await self.follower.close()

    async def wait_for_offset(self, offset: int, timeout: float = 30.0) -> None:
        """Wait until input `offset` is folded (tests, scripts)."""

        async def wait() -> None:
            while self.projection.position < offset:
                self.follower.progress.clear()
                if self.projection.position >= offset:
                    return
                if self.failed:
                    raise RuntimeError(self.failed)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.follower.progress.wait(), 0.5)

        await asyncio.wait_for(wait(), timeout)

    # -- HTTP ------------------------------------------------------------------------------------
    def _json(self, body: Any, status: int = 200) -> web.Response:
        if isinstance(body, dict):
            body = {**body, "asOf": views.as_of(self.projection, self.follower.undecided)}
        return web.Response(body=_encode(body), status=status, content_type="application/json")

    def _not_found(self, what: str) -> web.Response:
        return self._json({"kind": "Status", "status": "Failure", "reason": "NotFound", "message": f"{what} not found", "code": 404}, 404)

    @staticmethod
    def _page(request: web.Request) -> tuple[int, int]:
        try:
            offset = int(request.query.get("offset", 0))
            limit = int(request.query.get("limit", views.DEFAULT_PENDING_LIMIT))
        except ValueError:
            raise web.HTTPBadRequest(text="offset and limit must be integers") from None
        return offset, limit

    def app(self) -> web.Application:
        def p() -> Projection:
            return self.projection

        Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
        routes: list[tuple[str, Handler]] = []

        def get(path: str) -> Callable[[Handler], Handler]:
            def register(handler: Handler) -> Handler:
                routes.append((path, handler))
                return handler

            return register

        @get("/health")
        async def health(request: web.Request) -> web.Response:
            ok = self.failed is None
            return web.json_response({"ok": ok, "error": self.failed}, status=200 if ok else 503)

        @get("/status")
        async def status(request: web.Request) -> web.Response:
            s = self.follower.status
            return self._json({
                "log": self.log.url,
                "topics": {"input": self.topics.input, "decisions": self.topics.decisions, "snapshots": self.topics.snapshots},
                "inputOffset": p().position,
                "inputEndSeen": s.input_end_seen,
                "decisionsRead": s.decisions_read,
                "snapshotOffset": s.snapshot_offset,
                "caughtUp": s.caught_up,
                "anomalies": p().anomalies,
                "error": self.failed,
            })

        @get("/metrics")
        async def metrics(request: web.Request) -> web.Response:
            return web.Response(body=exposition(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

        @get("/clusterqueues")
        async def cqs(request: web.Request) -> web.Response:
            return self._json({"apiVersion": views.KUEUE_API, "kind": "ClusterQueueList", "items": views.cluster_queues(p())})

        @get("/clusterqueues/{name}")
        async def cq(request: web.Request) -> web.Response:
            name = request.match_info["name"]
            view = views.cluster_queue(p(), name)
            return self._json(view) if view is not None else self._not_found(f"ClusterQueue {name}")

        async def cq_pending(request: web.Request) -> web.Response:
            name = request.match_info["name"]
            view = views.pending_in_cluster_queue(p(), name, *self._page(request))
            return self._json(view) if view is not None else self._not_found(f"ClusterQueue {name}")

        async def lq_pending(request: web.Request) -> web.Response:
            ns, name = request.match_info["ns"], request.match_info["name"]
            view = views.pending_in_local_queue(p(), ns, name, *self._page(request))
            return self._json(view) if view is not None else self._not_found(f"LocalQueue {ns}/{name}")

        get("/clusterqueues/{name}/pendingworkloads")(cq_pending)
        get("/pending/clusterqueues/{name}")(cq_pending)
        get(f"/apis/{views.VISIBILITY_API}/clusterqueues/{{name}}/pendingworkloads")(cq_pending)
        get("/localqueues/{ns}/{name}/pendingworkloads")(lq_pending)
        get("/pending/localqueues/{ns}/{name}")(lq_pending)
        get(f"/apis/{views.VISIBILITY_API}/namespaces/{{ns}}/localqueues/{{name}}/pendingworkloads")(lq_pending)

        @get("/localqueues")
        async def lqs(request: web.Request) -> web.Response:
            return self._json({"apiVersion": views.KUEUE_API, "kind": "LocalQueueList", "items": views.local_queues(p())})

        @get("/localqueues/{ns}")
        async def lqs_ns(request: web.Request) -> web.Response:
            ns = request.match_info["ns"]
            return self._json({"apiVersion": views.KUEUE_API, "kind": "LocalQueueList", "items": views.local_queues(p(), ns)})

        @get("/localqueues/{ns}/{name}")
        async def lq(request: web.Request) -> web.Response:
            ns, name = request.match_info["ns"], request.match_info["name"]
            view = views.local_queue(p(), ns, name)
            return self._json(view) if view is not None else self._not_found(f"LocalQueue {ns}/{name}")

        @get("/cohorts")
        async def cohorts(request: web.Request) -> web.Response:
            return self._json({"apiVersion": views.KUEUE_API, "kind": "CohortList", "items": views.cohorts(p())})

        @get("/cohorts/{name}")
        async def cohort(request: web.Request) -> web.Response:
            name = request.match_info["name"]
            view = views.cohort(p(), name)
            return self._json(view) if view is not None else self._not_found(f"Cohort {name}")

        @get("/pending")
        async def pending(request: web.Request) -> web.Response:
            return self._json({"clusterQueues": views.pending(p())})

        @get("/pending/workloads/{ns}/{name}")
        async def pending_workload(request: web.Request) -> web.Response:
            key = f"{request.match_info['ns']}/{request.match_info['name']}"
            state = views.workload_state(p(), key)
            if state is None:
                return self._not_found(f"workload {key}")
            return self._json(state)

        @get("/workloads/{ns}/{name}")
        async def workload(request: web.Request) -> web.Response:
            key = f"{request.match_info['ns']}/{request.match_info['name']}"
            proj = p()
            pairs = views.history_pairs(proj, key)
            state = views.workload_state(proj, key)
            if state is None and not pairs:
                return self._not_found(f"workload {key}")
            decisions = await self.follower.fetch(self.topics.decisions, [d for d, _ in pairs])
            inputs = await self.follower.fetch(self.topics.input, [c for _, c in pairs])
            return self._json({
                "workload": key,
                "state": state or {"workload": key, "phase": "Deleted"},
                "history": views.history_entries(pairs, decisions, inputs),
            })

        app = self.guard.application()
        for path, handler in routes:
            app.router.add_get(path, handler)
        dashboard.register(app, self, self.reports)
        return app
