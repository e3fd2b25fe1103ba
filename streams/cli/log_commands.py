"""`quotaflow` commands that talk to a log: apply, submit, finish, delete, watch, agent, demo.

Every one takes `--broker URL` (env `QUOTAFLOW_BROKER_URL`): `kafka://host:port` or
`sqlite:///path.db` (the default, `quotaflow.db` in the working directory). Topic names come from
`QUOTAFLOW_INPUT_TOPIC`, `QUOTAFLOW_DECISIONS_TOPIC` and `QUOTAFLOW_SNAPSHOTS_TOPIC`; Kafka
security settings from `QUOTAFLOW_KAFKA_*` (streams/log/kafka_config.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from streams import settings as defaults
from streams.cli.common import broker_option, fail, run
from streams.log.envelope import CLI_SOURCE


def _documents(command: str, path: str) -> list[Any]:
    from streams.log.event_files import load_yaml_documents

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise fail(command, f"cannot read {path}: {exc.strerror or exc}", 2) from None
    try:
        docs = load_yaml_documents(text)  # JSON is YAML too
    except Exception as exc:
        raise fail(command, f"{path} is not valid YAML: {exc}", 2) from None
    out: list[Any] = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            out.extend(doc["items"])
        else:
            out.append(doc)
    for i, doc in enumerate(out):
        if not isinstance(doc, dict):
            raise fail(command, f"{path}: document {i + 1} is not an object", 2)
    return out


def _describe(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name", "?")
    ns = meta.get("namespace")
    return f"{str(obj.get('kind', '?')).lower()}/{ns + '/' if ns else ''}{name}"


def register(app: typer.Typer) -> None:
    """Add the log commands to the `quotaflow` typer app."""

    @app.command()
    def apply(
        file: str = typer.Option(..., "-f", "--filename", help="Kueue objects as YAML or JSON (multi-document; - for stdin)"),
        broker: str = broker_option(),
    ) -> None:
        """Apply Kueue configuration objects (ResourceFlavor, ClusterQueue, LocalQueue, ...)."""
        from streams.client import Client

        docs = _documents("apply", file)
        for doc in docs:
            if doc.get("kind") == "Workload":
                raise fail("apply", f"{_describe(doc)}: workloads are submitted, not applied (quotaflow submit -f)", 2)
            if "kind" not in doc:
                raise fail("apply", f"{file}: a document has no kind", 2)

        async def go() -> list[int]:
            async with Client(broker, source=CLI_SOURCE) as qf:
                return await qf.publish_many({"type": "ConfigApplied", "object": d} for d in docs)

        for doc, offset in zip(docs, run("apply", go), strict=True):
            typer.echo(f"{_describe(doc)} applied (offset {offset})")

    @app.command()
    def submit(
        file: str = typer.Option(..., "-f", "--filename", help="Kueue Workload objects as YAML or JSON (- for stdin)"),
        broker: str = broker_option(),
    ) -> None:
        """Submit workloads for admission."""
        from streams.client import Client

        docs = _documents("submit", file)
        for doc in docs:
            if doc.get("kind", "Workload") != "Workload":
                raise fail("submit", f"{_describe(doc)} is not a Workload (quotaflow apply -f for configuration)", 2)

        async def go() -> list[int]:
            async with Client(broker, source=CLI_SOURCE) as qf:
                return await qf.publish_many({"type": "WorkloadSubmitted", "workload": d} for d in docs)

        for doc, offset in zip(docs, run("submit", go), strict=True):
            meta = doc.get("metadata") or {}
            typer.echo(f"workload/{meta.get('namespace') or 'default'}/{meta.get('name', '?')} submitted (offset {offset})")

    @app.command()
    def finish(
        workload: str = typer.Argument(..., metavar="NS/NAME", help="the workload, as namespace/name"),
        broker: str = broker_option(),
    ) -> None:
        """Report that a workload completed (its quota is released)."""
        from streams.client import Client

        ns, sep, name = workload.partition("/")
        if not sep or not ns or not name:
            raise fail("finish", f"expected NAMESPACE/NAME, got {workload!r}", 2)

        async def go() -> int:
            async with Client(broker, source=CLI_SOURCE) as qf:
                return await qf.finish(ns, name)

        typer.echo(f"workload/{ns}/{name} finished (offset {run('finish', go)})")

    @app.command()
    def delete(
        kind: str = typer.Argument(..., help="ClusterQueue, LocalQueue, ResourceFlavor, Cohort, ..., or Workload"),
        name: str = typer.Argument(...),
        namespace: str | None = typer.Option(None, "-n", "--namespace", help="for namespaced kinds"),
        broker: str = broker_option(),
    ) -> None:
        """Delete a configuration object or a workload."""
        from streams.client import Client, canonical_kind

        async def go() -> int:
            async with Client(broker, source=CLI_SOURCE) as qf:
                return await qf.delete(kind, name, namespace)

        offset = run("delete", go)
        where = f"{namespace}/" if namespace else ""
        typer.echo(f"{canonical_kind(kind).lower()}/{where}{name} deleted (offset {offset})")

    @app.command()
    def watch(
        broker: str = broker_option(),
        json_lines: bool = typer.Option(False, "--json", help="print each decision's JSON, one per line"),
        from_end: bool = typer.Option(False, "--from-end", help="only decisions made from now on"),
        follow: bool = typer.Option(True, "--follow/--no-follow", help="keep waiting for new decisions"),
    ) -> None:
        """Tail the decision log."""
        from rich.console import Console

        from streams.client import Client
        from streams.cli.render import decision_line

        console = Console(highlight=False)
        out = sys.stdout.buffer

        async def go() -> None:
            async with Client(broker, source=CLI_SOURCE) as qf:
                async for record, decision in qf.decision_records(start="end" if from_end else "beginning", follow=follow):
                    if json_lines:
                        out.write((record.value or b"") + b"\n")
                        out.flush()
                    elif decision is None:
                        console.print(f"{record.offset:>6} (undecodable) {record.value!r}")
                    else:
                        console.print(decision_line(decision, record.offset))

        try:
            run("watch", go)
        except BrokenPipeError:
            pass

    @app.command()
    def agent(
        broker: str = broker_option(),
        http_port: int | None = typer.Option(
            None,
            "--http-port",
            help=f"port for /health and /status; 0: none (default: ${defaults.ENV_HTTP_PORT} or "
            f"{defaults.DEFAULT_HTTP_PORT} on Kafka, none on SQLite)",
        ),
        snapshot_every: int = typer.Option(
            defaults.DEFAULT_SNAPSHOT_EVERY, envvar=defaults.ENV_SNAPSHOT_EVERY, help="snapshot after this many input events"
        ),
        snapshot_interval: float = typer.Option(
            defaults.DEFAULT_SNAPSHOT_INTERVAL_S,
            envvar=defaults.ENV_SNAPSHOT_INTERVAL,
            help="... or after this many seconds with new events",
        ),
        log_level: str = typer.Option(defaults.DEFAULT_LOG_LEVEL, envvar=defaults.ENV_LOG_LEVEL, help="debug, info, warning, error"),
        name: str | None = typer.Option(
            None,
            envvar=defaults.ENV_AGENT_NAME,
            help="writer name (Kafka transactional.id and standby group); default quotaflow-agent.<input topic>",
        ),
        standby: bool = typer.Option(True, "--standby/--no-standby", help="Kafka: wait as a standby while another agent is active"),
        max_batch: int = typer.Option(
            defaults.DEFAULT_MAX_BATCH, envvar=defaults.ENV_MAX_BATCH, help="at most this many input events per transaction"
        ),
        step_bytes: int = typer.Option(
            defaults.DEFAULT_STEP_BYTES, envvar=defaults.ENV_STEP_BYTES, min=1,
            help="hand the engine a read's input in steps of about this many bytes: a large record's "
            "decisions are committed while the engine folds the next",
        ),
        engine_process: bool | None = typer.Option(
            None,
            "--engine-process/--no-engine-process",
            envvar=defaults.ENV_ENGINE_PROCESS,
            help="run the engine in a child process, pipelined with reading and committing "
            "(default: on with 2 or more cores)",
            show_default=False,
        ),
    ) -> None:
        """Run the agent: input log -> engine -> decision log, exactly once, until stopped."""
        import os

        from streams.agent import structured_logs as logs
        from streams.agent.loop import Agent, AgentConfig
        from streams.agent.process import kafka_app, run_embedded_worker, run_kafka_worker
        from streams.log import BrokerUrl, LogError, Topics, open_log

        if log_level.lower() not in logs.LEVELS:
            raise fail("agent", f"--log-level must be one of {', '.join(logs.LEVELS)}", 2)
        logs.configure(log_level.lower())
        settings = defaults.Settings.from_env()
        try:
            url = BrokerUrl.parse(broker, settings)
            log = open_log(broker, settings)
        except LogError as exc:
            raise fail("agent", str(exc), 2) from None
        config = AgentConfig(
            Topics.from_settings(settings),
            name=name,
            snapshot_every_events=snapshot_every,
            snapshot_every_seconds=snapshot_interval,
            standby=standby,
            max_batch=max_batch,
            step_bytes=step_bytes,
            engine_process=defaults.default_engine_process() if engine_process is None else engine_process,
        )
        runner = Agent(log, config)
        if url.scheme == "kafka":
            from streams.log.kafka_config import KafkaConfigError, KafkaSecurity

            try:
                security = KafkaSecurity.from_env()
            except KafkaConfigError as exc:
                raise fail("agent", str(exc), 2) from None
            port = http_port if http_port is not None else settings.http_port
            app_ = kafka_app(
                runner,
                bootstrap=url.location,
                credentials=security.faust_credentials(),
                http_port=port,
                log_level=log_level.lower(),
            )
            run_kafka_worker(app_, log_level.lower())
        else:
            port = http_port if http_port is not None else int(os.environ.get(defaults.ENV_HTTP_PORT) or 0)
            run_embedded_worker(runner, http_port=port, log_level=log_level.lower())

    @app.command()
    def demo(
        pause: float = typer.Option(0.0, help="seconds to pause between steps"),
        keep: bool = typer.Option(False, help="keep the temporary SQLite log and print where it is"),
    ) -> None:
        """Run a scenario from Kueue's docs on the embedded log and show what the agent decides."""
        from streams.cli.demo import run_demo

        raise typer.Exit(run_demo(pause=pause, keep=keep))
