"""The agent's process shell: a Faust app on Kafka, a mode worker on the embedded log.

## Who does what

The *guarantee* (streams/agent/loop.py) needs three things Faust's stream processing does not give:
progress derived from the output log (Faust keeps consumer-group offsets, committed apart from
the output; its `processing_guarantee="exactly_once"` path has open duplicate bugs --
faust-streaming issues 517, 323 and 177), a seek to that position before the first fetch, and
one Kafka transaction holding a whole batch's decisions plus a snapshot. So the loop
input -> engine -> decision log runs on aiokafka directly (streams/log/kafka.py: an assigned
read_committed consumer, a transactional producer, a standby consumer group), and Faust is the
shell around it:

- `faust.App` holds the configuration (broker, SASL/SSL credentials, web port) and is the
  process's one application object; the agent loop is registered on it as a service
  (`@app.service`), so it starts after the app and stops before it;
- `faust.Worker` runs the process: event loop, signal handling (SIGTERM/SIGINT stop the agent
  between two transactions, and its standby membership is left cleanly), logging setup (JSON,
  streams/agent/structured_logs.py) and exit codes (a crashed agent exits non-zero, for Kubernetes to restart);
- a second service on the app, `StatusServer`, serves `GET /health` (200 while the agent runs,
  as active or standby; 503 once it stopped or failed) and `GET /status` (role, offsets,
  counters, last recovery) on `QUOTAFLOW_HTTP_PORT` (6066) for probes and people. Not Faust's
  own web server: that one cannot be bounded or given a token, and the embedded runtime needs
  the same endpoints without Faust.

The embedded SQLite runtime has no Kafka, which a Faust app cannot start without, so there the
same service runs under `mode.Worker` (Faust's own service framework) next to the same
`StatusServer` when an HTTP port is given.

Both serve behind streams/http_guard.py: 127.0.0.1 unless `QUOTAFLOW_HTTP_HOST` says
otherwise, GET/HEAD only, bounded requests, and with `QUOTAFLOW_HTTP_TOKEN` a bearer token on
every path but `/health` (a liveness probe carries no credentials; it tells only the role).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import tempfile
from typing import Any

import mode
import structlog

from streams.agent.loop import Agent
from streams.agent.structured_logs import stdlib_config
from streams.http_guard import HttpGuard

HEALTHY_ROLES = ("starting", "standby", "recovering", "active", "retrying")


def status_document(agent: Agent) -> dict[str, Any]:
    s = agent.status
    return {
        "role": s.role,
        "writer": agent.config.writer_name,
        "log": agent.log.url,
        "topics": {"input": agent.topics.input, "decisions": agent.topics.decisions, "snapshots": agent.topics.snapshots},
        "position": s.position,
        "processed": s.processed,
        "events": s.events,
        "decisions": s.decisions,
        "transactions": s.transactions,
        "snapshots": s.snapshots,
        "last_snapshot_offset": s.last_snapshot_offset,
        "recoveries": s.recoveries,
        "last_recovery": s.last_recovery,
        "last_error": s.last_error,
    }


def healthy(agent: Agent) -> bool:
    return agent.status.role in HEALTHY_ROLES


class AgentService(mode.Service):
    """Runs `Agent.run()` for as long as the service runs; a fatal agent error crashes it."""

    def __init__(self, agent: Agent, **kwargs: Any) -> None:
        self.agent = agent
        self._task: asyncio.Task[None] | None = None
        super().__init__(**kwargs)

    async def on_start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="quotaflow-agent")

    async def _run(self) -> None:
        try:
            await self.agent.run()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            structlog.get_logger("quotaflow.agent").error("agent failed", error=str(exc), kind=type(exc).__name__)
            self.agent.status.role = "failed"
            self.agent.status.last_error = str(exc)
            await self.crash(exc)
            return
        if not self.should_stop:
            await self.crash(RuntimeError("agent stopped by itself"))

    async def on_stop(self) -> None:
        self.agent.stop()
        if self._task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._task, 30)


def kafka_app(
    agent: Agent,
    *,
    bootstrap: str,
    credentials: Any,
    http_port: int,
    guard: HttpGuard | None = None,
    log_level: str = "info",
) -> Any:
    """The Faust app for the Kafka runtime, with the agent registered as its service."""
    import faust

    # Faust wants a data directory (for tables, which this app has none of); removed at exit.
    datadir = tempfile.TemporaryDirectory(prefix="quotaflow-faust-")
    app = faust.App(
        f"{agent.config.writer_name}.shell",
        broker=f"kafka://{bootstrap}",
        broker_credentials=credentials,
        store="memory://",
        autodiscover=False,
        topic_disable_leader=True,  # no Faust-internal topics: the app subscribes to nothing
        datadir=datadir.name,
        web_enabled=False,  # StatusServer serves /health and /status (see the module doc)
        logging_config=stdlib_config(log_level),
    )
    # The app consumes nothing through Faust (see the module doc): no Faust consumer, consumer
    # group, conductor or tables. Faust runs its producer, its web server and our service.
    app.producer_only = True
    app.quotaflow_datadir = datadir  # type: ignore[attr-defined]  # lives as long as the app

    @app.service
    class QuotaflowAgent(AgentService):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(agent, **kwargs)

    if http_port > 0:
        status_guard = guard or HttpGuard()
        status_guard.check()  # before anything starts: an unsafe setting stops the agent here

        @app.service
        class QuotaflowStatus(StatusServer):
            def __init__(self, **kwargs: Any) -> None:
                super().__init__(agent, http_port, status_guard, **kwargs)

    return app


def run_kafka_worker(app: Any, log_level: str = "info") -> None:
    """Run the Faust worker until a signal or a crash; exits the process (non-zero on a crash)."""
    import faust

    worker = faust.Worker(
        app,
        loglevel=log_level,
        logging_config=stdlib_config(log_level),
        redirect_stdouts=False,
        quiet=True,
    )
    worker.execute_from_commandline()


class StatusServer(mode.Service):
    """`/health` and `/status` for the embedded runtime (where there is no Faust app)."""

    def __init__(self, agent: Agent, port: int, guard: HttpGuard | None = None, **kwargs: Any) -> None:
        self.agent = agent
        self.port = port
        # /health answers without the token (probes carry none); /status needs it when set
        self.guard = dataclasses.replace(guard or HttpGuard(), open_paths=("/health",))
        self.bound: int | None = None
        self._runner: Any = None
        super().__init__(**kwargs)

    async def on_start(self) -> None:
        from aiohttp import web

        async def health(_: Any) -> Any:
            return web.json_response({"role": self.agent.status.role}, status=200 if healthy(self.agent) else 503)

        async def status(_: Any) -> Any:
            return web.json_response(status_document(self.agent))

        webapp = self.guard.application()
        webapp.router.add_get("/health", health)
        webapp.router.add_get("/status", status)
        self._runner = self.guard.runner(webapp)
        self.bound = await self.guard.start(self._runner, self.port)

    async def on_stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def run_embedded_worker(agent: Agent, *, http_port: int, guard: HttpGuard | None = None, log_level: str = "info") -> None:
    """Run the agent on the embedded log under `mode.Worker`; exits the process."""
    services: list[mode.Service] = [AgentService(agent)]
    if http_port > 0:
        (guard or HttpGuard()).check()  # before anything starts
        services.append(StatusServer(agent, http_port, guard))
    worker = mode.Worker(
        *services,
        loglevel=log_level,
        logging_config=stdlib_config(log_level),
        redirect_stdouts=False,
        quiet=True,
    )
    worker.execute_from_commandline()
