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
from streams.cli.common import broker_option, fail, require_existing_log, run
from streams.cli.output import Output, chosen, json_flag, output_option
from streams.cli.publishing import publish, publish_by_name
from streams.cli.refs import NAMESPACE_HELP, WORKLOAD_REF_HELP, split_ref, workload_ref
from streams.cli.waiting import (
    WAIT_BY_KIND,
    WAIT_WHEN_ASKED,
    timeout_option,
    wait_option,
)

DOCUMENT_SUFFIXES = (".yaml", ".yml", ".json")


def _files(command: str, path: str) -> list[Path]:
    """A file, or, like kubectl's -f DIR, every *.yaml, *.yml and *.json under a directory."""
    p = Path(path)
    if p.is_dir():
        return sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in DOCUMENT_SUFFIXES)
    return [p]


def _documents(command: str, path: str) -> list[Any]:
    return [doc for _, doc in _sourced_documents(command, path)]


def _sourced_documents(command: str, path: str) -> list[tuple[str, Any]]:
    """Every object in the file(s), with where it came from: `FILE#N` (N counts the file's
    objects from 1)."""
    from streams.log.event_files import load_yaml_documents

    out: list[tuple[str, Any]] = []
    sources: list[tuple[str, str]] = []
    try:
        if path == "-":
            sources.append(("-", sys.stdin.read()))
        else:
            sources.extend((str(f), f.read_text()) for f in _files(command, path))
    except OSError as exc:
        raise fail(command, f"cannot read {path}: {exc.strerror or exc}", 2) from None
    for name, text in sources:
        try:
            docs = load_yaml_documents(text)  # JSON is YAML too
        except Exception as exc:
            raise fail(command, f"{name} is not valid YAML: {exc}", 2) from None
        found: list[Any] = []
        for doc in docs:
            if doc is None:  # an empty document between two ---
                continue
            if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
                found.extend(doc["items"])
            else:
                found.append(doc)
        for i, doc in enumerate(found):
            if not isinstance(doc, dict):
                raise fail(command, f"{name}: document {i + 1} is not an object", 2)
        out.extend((f"{name}#{i + 1}", doc) for i, doc in enumerate(found))
    if not out:
        raise fail(command, f"no objects in {'standard input' if path == '-' else path}", 2)
    return out


def _describe(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name", "?")
    ns = meta.get("namespace")
    return f"{str(obj.get('kind', '?')).lower()}/{ns + '/' if ns else ''}{name}"


def _workload_name(workload: dict[str, Any]) -> str:
    meta = workload.get("metadata") or {}
    return f"workload/{meta.get('namespace') or 'default'}/{meta.get('name', '?')}"


# Kinds whose objects live in a namespace (the rest are cluster-scoped, as in Kueue).
NAMESPACED_KINDS = frozenset({"Workload", "LocalQueue"})


def register(app: typer.Typer) -> None:
    """Add the log commands to the `quotaflow` typer app."""

    @app.command()
    def apply(
        file: str = typer.Option(..., "-f", "--filename", help="Kueue objects as YAML or JSON (multi-document; a directory: its *.yaml, *.yml, *.json; - for stdin)"),
        broker: str = broker_option(),
        wait: bool | None = wait_option(WAIT_WHEN_ASKED),
        timeout: float = timeout_option(),
    ) -> None:
        """Apply Kueue configuration objects (ResourceFlavor, ClusterQueue, LocalQueue, ...)."""
        docs = _documents("apply", file)
        for doc in docs:
            if doc.get("kind") == "Workload":
                raise fail("apply", f"{_describe(doc)}: workloads are submitted, not applied (quotaflow submit -f)", 2)
            if "kind" not in doc:
                raise fail("apply", f"{file}: a document has no kind", 2)

        events = [{"type": "ConfigApplied", "object": d} for d in docs]
        publish("apply", broker, events, lambda e: f"{_describe(e['object'])} applied", wait=wait, timeout=timeout, config=True)

    @app.command()
    def submit(
        file: str = typer.Option(..., "-f", "--filename", help="Kueue Workloads, or jobs of the kinds Kueue integrates, as YAML or JSON (multi-document; a directory: its *.yaml, *.yml, *.json; - for stdin)"),
        broker: str = broker_option(),
        wait: bool | None = wait_option(),
        timeout: float = timeout_option(),
        dry_run: bool = typer.Option(False, "--dry-run", help="print the Workloads as YAML; publish nothing"),
    ) -> None:
        """Submit workloads: Kueue Workloads, or jobs (Job, JobSet, PyTorchJob, RayJob, Pod, ...).

        Each job is turned into the Workload Kueue's integration builds for it."""
        from streams.importers.kueue_jobs import convert_documents

        result = convert_documents(_sourced_documents("submit", file))
        for refusal in result.refused:
            typer.echo(f"quotaflow submit: {refusal}", err=True)
        if result.refused:
            total = len(result.refused) + len(result.converted)
            raise fail("submit", f"nothing was submitted: {len(result.refused)} of {total} objects refused", 2)
        for converted in result.converted:
            if converted.note:
                typer.echo(f"quotaflow submit: {converted.source}: {converted.ref}: {converted.note}", err=True)
        owners = {id(w): c.ref for c in result.converted for w in c.workloads if c.ref.split("/", 1)[0] != "workload"}
        if dry_run:
            import yaml

            typer.echo(yaml.safe_dump_all(result.workloads, sort_keys=False), nl=False)
            return
        if not result.workloads:
            raise fail("submit", "no workloads to submit", 2)
        events = [{"type": "WorkloadSubmitted", "workload": w} for w in result.workloads]
        made_from = {id(e): owners.get(id(e["workload"])) for e in events}

        def describe(event: dict[str, Any]) -> str:
            owner = made_from.get(id(event))
            return f"{_workload_name(event['workload'])} submitted" + (f" ({owner})" if owner else "")

        publish("submit", broker, events, describe, wait=wait, timeout=timeout)

    @app.command()
    def finish(
        workload: str = typer.Argument(..., metavar="NS/NAME", help=WORKLOAD_REF_HELP),
        namespace: str | None = typer.Option(None, "-n", "--namespace", help=NAMESPACE_HELP),
        broker: str = broker_option(),
        wait: bool | None = wait_option(),
        timeout: float = timeout_option(),
    ) -> None:
        """Report that a workload completed (its quota is released)."""
        publish_by_name("finish", "WorkloadFinished", "finished", workload, namespace, broker, wait=wait, timeout=timeout)

    @app.command()
    def delete(
        kind: str = typer.Argument(..., help="ClusterQueue, LocalQueue, ResourceFlavor, Cohort, ..., or Workload"),
        name: str = typer.Argument(..., metavar="NAME", help="NAME, or NS/NAME for namespaced kinds"),
        namespace: str | None = typer.Option(None, "-n", "--namespace", help="for namespaced kinds"),
        broker: str = broker_option(),
        wait: bool | None = wait_option(WAIT_BY_KIND),
        timeout: float = timeout_option(),
    ) -> None:
        """Delete a configuration object or a workload."""
        from streams.client import canonical_kind

        kind = canonical_kind(kind)
        ns: str | None
        if kind == "Workload":
            ns, name = workload_ref("delete", name, namespace, broker)
        elif "/" in name or kind in NAMESPACED_KINDS:
            ns, name = split_ref("delete", name, namespace, default="default" if kind in NAMESPACED_KINDS else None)
        else:
            ns = namespace
        if kind == "Workload":
            event: dict[str, Any] = {"type": "WorkloadDeleted", "namespace": ns, "name": name}
        else:
            event = {"type": "ConfigDeleted", "kind": kind, "name": name}
            if ns is not None:
                event["namespace"] = ns
        where = f"{ns}/" if ns else ""
        publish(
            "delete", broker, [event], lambda e: f"{kind.lower()}/{where}{name} deleted",
            wait=wait, timeout=timeout, config=kind != "Workload",
        )

    @app.command()
    def watch(
        broker: str = broker_option(),
        output: Output = output_option(),
        json_lines: bool = json_flag(),
        from_end: bool = typer.Option(False, "--from-end", help="only decisions made from now on"),
        follow: bool = typer.Option(True, "--follow/--no-follow", help="keep waiting for new decisions"),
    ) -> None:
        """Tail the decision log (-o json: one decision's JSON a line; -o yaml: one document each;
        -o wide: each line with the time the decision was written)."""
        from rich.text import Text

        from domain.timestamps import format_time
        from streams.cli.render import decision_line, output_console
        from streams.client import Client
        from streams.log.envelope import CLI_SOURCE

        console = output_console()
        out = sys.stdout.buffer
        shown = chosen(output, json_lines)

        async def go() -> None:
            require_existing_log(broker)
            async with Client(broker, source=CLI_SOURCE) as qf:
                async for record, decision in qf.decision_records(start="end" if from_end else "beginning", follow=follow):
                    if shown == Output.json:
                        out.write((record.value or b"") + b"\n")
                        out.flush()
                    elif shown == Output.yaml:
                        import msgspec
                        import yaml

                        try:
                            doc = msgspec.json.decode(record.value or b"null")
                        except msgspec.DecodeError:
                            doc = {"undecodable": (record.value or b"").decode("utf-8", "replace")}
                        out.write(b"---\n" + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode())
                        out.flush()
                    elif decision is None:
                        console.print(f"{record.offset:>6} (undecodable) {record.value!r}")
                    else:
                        line = decision_line(decision, record.offset)
                        if shown == Output.wide and record.timestamp_ms:
                            line = Text(format_time(record.timestamp_ms * 1000) + " ", style="dim") + line
                        console.print(line)

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
            help=f"port for /health, /status and /metrics; 0: none (default: ${defaults.ENV_HTTP_PORT}, else "
            f"{defaults.DEFAULT_HTTP_PORT} on Kafka and none on SQLite)",
        ),
        http_host: str = typer.Option(
            defaults.DEFAULT_HTTP_HOST, "--http-host", envvar=defaults.ENV_HTTP_HOST,
            help=f"address for /health, /status and /metrics; anything but loopback needs ${defaults.ENV_HTTP_TOKEN}, "
            f"client certificates (${defaults.ENV_HTTP_TLS_CLIENT_CA}) or --insecure-bind",
        ),
        insecure_bind: bool = typer.Option(
            False, "--insecure-bind", help=f"serve /status and /metrics on a non-loopback address with no authentication (${defaults.ENV_HTTP_INSECURE}=1)"
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
        tick_interval: float = typer.Option(
            defaults.DEFAULT_TICK_INTERVAL_S, "--tick-interval", envvar=defaults.ENV_TICK_INTERVAL, min=0.0,
            help="append a Tick to the input log after this many seconds without a record, so that "
            "timers (PodsReady timeouts, maximum execution times) fire on an idle log; 0: never",
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
        from streams.agent.process import (
            kafka_app,
            run_embedded_worker,
            run_kafka_worker,
        )
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
            tick_interval=tick_interval,
            engine_process=defaults.default_engine_process() if engine_process is None else engine_process,
        )
        from streams.http_guard import GuardError, HttpGuard

        try:
            guard = HttpGuard.from_env(host=http_host, insecure=insecure_bind)
            guard.check()
        except GuardError as exc:
            raise fail("agent", str(exc), 2) from None
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
                guard=guard,
                log_level=log_level.lower(),
            )
            run_kafka_worker(app_, log_level.lower())
        else:
            port = http_port if http_port is not None else int(os.environ.get(defaults.ENV_HTTP_PORT) or 0)
            run_embedded_worker(runner, http_port=port, guard=guard, log_level=log_level.lower())

    @app.command()
    def sequence(
        broker: str = broker_option(),
        admin_topic: str = typer.Option("quotaflow.admin", envvar="QUOTAFLOW_ADMIN_TOPIC", help="the admin topic: configuration"),
        tenant_prefix: str = typer.Option(
            "quotaflow.tenant.", envvar="QUOTAFLOW_TENANT_PREFIX", help="tenant topics: this prefix and a namespace"
        ),
        group: str = typer.Option("quotaflow-sequencer", envvar="QUOTAFLOW_SEQUENCER_GROUP", help="consumer group and transactional id"),
        log_level: str = typer.Option(defaults.DEFAULT_LOG_LEVEL, envvar=defaults.ENV_LOG_LEVEL, help="debug, info, warning, error"),
    ) -> None:
        """Multi-topic mode: append the admin and tenant topics' events to the input log, each with its source."""
        import asyncio
        import signal

        from streams.agent import structured_logs as logs
        from streams.log import BrokerUrl, LogError
        from streams.log.kafka_config import KafkaConfigError, KafkaSecurity
        from streams.sequencer import SequencerConfig, run_sequencer

        logs.configure(log_level.lower())
        settings = defaults.Settings.from_env()
        try:
            url = BrokerUrl.parse(broker, settings)
            security = KafkaSecurity.from_env()
        except (LogError, KafkaConfigError) as exc:
            raise fail("sequence", str(exc), 2) from None
        if url.scheme != "kafka":
            raise fail("sequence", "the sequencer needs Kafka (kafka://...): SQLite is a single-user log", 2)
        config = SequencerConfig(
            url.location, settings.input_topic, admin_topic, tenant_prefix, group, group, security
        )

        async def go() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await run_sequencer(config, stop)

        from aiokafka.errors import KafkaError

        try:
            asyncio.run(go())
        except KafkaError as exc:
            # Fenced by another sequencer, refused by the broker, the broker gone: its open
            # transaction is aborted, and a restart goes on from the last committed positions.
            raise fail("sequence", f"stopped: {exc!r}", 1) from None

    @app.command()
    def demo(
        pause: float = typer.Option(0.0, help="seconds to pause between steps"),
        keep: bool = typer.Option(False, help="keep the temporary SQLite log and print where it is"),
    ) -> None:
        """Run a scenario from Kueue's docs on the embedded log and show what the agent decides."""
        from streams.cli.demo import run_demo

        raise typer.Exit(run_demo(pause=pause, keep=keep))
