"""`quotaflow` commands over the projections: status, pending, history, explain, audit, serve.

All read the logs (`--broker URL`, env `QUOTAFLOW_BROKER_URL`; topics from `QUOTAFLOW_*_TOPIC`)
and never write to them. `status`, `pending`, `history` and `explain` fold the logs from offset 0
up to what the agent has decided (or `--as-of OFFSET`: time travel to that input offset) and
print; `serve` keeps folding as the logs grow and serves the views over HTTP; `audit` replays
the input log through a fresh engine and compares every recorded decision byte for byte.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import typer

from streams import settings as defaults
from streams.cli.common import broker_option, fail, require_existing_log, run
from streams.cli.output import Output, chosen, json_flag, output_option, print_document


def _as_of() -> Any:
    return typer.Option(None, "--as-of", min=0, help="time travel: the views as of this input log offset")


def _json_flag() -> Any:
    return json_flag()


async def _open(broker: str) -> tuple[Any, Any]:
    from streams.log import Topics, open_log

    require_existing_log(broker)
    settings = defaults.Settings.from_env()
    log = open_log(broker, settings)
    await log.start()
    topics = Topics.from_settings(settings)
    await log.ensure_topics(topics.specs(), single_partition=[topics.input, topics.decisions])
    return log, topics


def _workload_key(command: str, workload: str, broker: str) -> str:
    from streams.cli.refs import kind_ref, workload_ref

    if kind_ref(workload) is not None:  # a job as KIND/NAME, or workload/NS/NAME
        ns, name = workload_ref(command, workload, None, broker)
        return f"{ns}/{name}"
    ns, sep, name = workload.partition("/")
    if not sep or not ns or not name:
        raise fail(command, f"expected NAMESPACE/NAME, got {workload!r}", 2)
    return workload


def _print_json(obj: Any, output: Output = Output.json) -> None:
    print_document(obj, output)


def register(app: typer.Typer) -> None:
    """Add the projection commands to the `quotaflow` typer app."""

    @app.command()
    def status(
        broker: str = broker_option(),
        as_of: int | None = _as_of(),
        output: Output = output_option(),
        json_out: bool = _json_flag(),
        usage: bool = typer.Option(True, "--usage/--no-usage", help="usage bars per flavor and resource"),
    ) -> None:
        """ClusterQueues like `kubectl get clusterqueues -o wide`, with usage bars (-o wide: also
        reserving workloads, Active, stop policy and age)."""

        from projections import views
        from projections.follower import rebuild
        from streams.cli.render import output_console, status_table, usage_table

        async def go() -> tuple[Any, int]:
            log, topics = await _open(broker)
            try:
                proj, follower = await rebuild(log, topics, as_of=as_of, history=False)
                return proj, follower.undecided
            finally:
                await log.close()

        proj, undecided = run("status", go)
        output = chosen(output, json_out)
        if output.document:
            _print_json({"items": views.cluster_queues(proj), "asOf": views.as_of(proj, undecided)}, output)
            return
        console = output_console()
        console.print(status_table(proj, more=output == Output.wide))
        if usage and proj.cluster_queues:
            console.print()
            console.print(usage_table(proj, bar_width=20 if console.width >= 110 else 10))
        note = f"as of input offset {proj.position}"
        if as_of is not None:
            note += " (--as-of)"
        elif undecided:
            note += f"; {undecided} newer input event(s) not decided yet"
        console.print(note, style="dim")

    @app.command()
    def pending(
        queue: str = typer.Argument(..., metavar="CLUSTERQUEUE | NS/LOCALQUEUE", help="a ClusterQueue, or a LocalQueue as namespace/name"),
        broker: str = broker_option(),
        as_of: int | None = _as_of(),
        offset: int = typer.Option(0, min=0, help="first position to show"),
        limit: int = typer.Option(1000, min=1, help="how many to show (at most 4000 a page; Kueue's visibility API allows 100,000)"),
        show_all: bool = typer.Option(False, "--all", help="every pending workload, however many"),
        output: Output = output_option(),
        json_out: bool = _json_flag(),
    ) -> None:
        """Pending workloads with their positions, as Kueue's visibility API gives them (-o wide:
        also each one's ClusterQueue and age)."""

        from projections import views
        from projections.follower import rebuild
        from streams.cli.render import output_console, pending_table

        async def go() -> Any:
            log, topics = await _open(broker)
            try:
                return (await rebuild(log, topics, as_of=as_of, history=False))[0]
            finally:
                await log.close()

        proj = run("pending", go)
        ns, sep, name = queue.partition("/")

        def page(first: int, count: int) -> dict[str, Any] | None:
            if sep:
                return views.pending_in_local_queue(proj, ns, name, first, count)
            return views.pending_in_cluster_queue(proj, queue, first, count)

        summary = page(offset, views.MAX_PENDING_LIMIT if show_all else limit)
        if summary is None:
            raise fail("pending", f"{'LocalQueue' if sep else 'ClusterQueue'} {queue} not found")
        # The API caps a page; --all keeps asking for the next one until a page comes back short.
        while show_all and summary["items"] and len(summary["items"]) % views.MAX_PENDING_LIMIT == 0:
            more = page(offset + len(summary["items"]), views.MAX_PENDING_LIMIT) or {"items": []}
            if not more["items"]:
                break
            summary["items"].extend(more["items"])
        total = len(proj.lq_pending.get((ns, name)) or ()) if sep else len(proj.cluster_queues[queue].pending)
        page_end = offset + min(limit, views.MAX_PENDING_LIMIT)
        if not show_all and page_end < total:
            typer.echo(
                f"quotaflow pending: showing positions {offset}..{page_end - 1} of {total} pending workloads; "
                f"--offset {page_end} or --all for the rest",
                err=True,
            )
        output = chosen(output, json_out)
        if output.document:
            _print_json(summary, output)
        else:
            cq_name = (proj.local_queues[(ns, name)].cluster_queue if sep else queue)
            output_console().print(pending_table(summary, cluster_queue=cq_name if output == Output.wide else None))

    @app.command()
    def history(
        workload: str = typer.Argument(..., metavar="NS/NAME", help="the workload as NS/NAME, or its job as KIND/NAME or KIND/NS/NAME (job/sample-job)"),
        broker: str = broker_option(),
        as_of: int | None = _as_of(),
        output: Output = output_option(),
        json_out: bool = _json_flag(),
    ) -> None:
        """Every decision about a workload, with the input event that caused each (-o wide: also
        each decision's offset and when its event was written)."""

        from projections import views
        from projections.explain import focus_history
        from projections.follower import rebuild
        from streams.cli.render import history_table, output_console

        key = _workload_key("history", workload, broker)

        async def go() -> Any:
            log, topics = await _open(broker)
            try:
                return (await rebuild(log, topics, as_of=as_of, focus=key, history=False))[0]
            finally:
                await log.close()

        proj = run("history", go)
        entries = focus_history(proj)
        state = views.workload_state(proj, key)
        if not entries and state is None:
            raise fail("history", f"workload {key} not found")
        output = chosen(output, json_out)
        if output.document:
            _print_json({"workload": key, "state": state, "history": entries, "asOf": views.as_of(proj)}, output)
        else:
            console = output_console()
            console.print(history_table(entries, wide=output == Output.wide))
            if state is not None:
                console.print(f"now: {state['phase']}", style="bold")

    @app.command()
    def explain(
        workload: str = typer.Argument(..., metavar="NS/NAME", help="the workload as NS/NAME, or its job as KIND/NAME or KIND/NS/NAME (job/sample-job)"),
        broker: str = broker_option(),
        as_of: int | None = _as_of(),
        output: Output = output_option(),
        json_out: bool = _json_flag(),
    ) -> None:
        """A workload's history and, if it is pending, why: flavors tried, what is short, who holds
        it (-o wide: the history with decision offsets and event times)."""

        from projections.explain import explain as run_explain
        from streams.cli.render import explain_renderables, output_console

        key = _workload_key("explain", workload, broker)

        async def go() -> Any:
            log, topics = await _open(broker)
            try:
                return await run_explain(log, topics, key, as_of=as_of)
            finally:
                await log.close()

        result = run("explain", go)
        if result["state"] is None and not result["history"]:
            raise fail("explain", f"workload {key} not found")
        output = chosen(output, json_out)
        if output.document:
            _print_json(result, output)
        else:
            console = output_console()
            for renderable in explain_renderables(result, wide=output == Output.wide):
                console.print(renderable)

    @app.command()
    def audit(broker: str = broker_option(), output: Output = output_option()) -> None:
        """Replay the input log through a fresh engine; compare every recorded decision byte for byte
        (-o json|yaml: {ok, verified, events, auditedUpTo, inputEnd, seconds, divergence})."""
        from projections.audit import audit as run_audit
        from streams.cli.progress import Progress

        async def go() -> Any:
            log, topics = await _open(broker)
            try:
                with Progress("audit", unit="events") as progress:

                    def heard(events: int, of: int) -> None:
                        progress.total = of
                        progress.advance()

                    return await run_audit(log, topics, progress=heard)
            finally:
                await log.close()

        result = run("audit", go)
        if output.document:
            d = result.divergence

            def text(value: bytes | None) -> str | None:
                return value.decode(errors="replace") if value is not None else None

            print_document({
                "ok": result.ok, "verified": result.verified, "events": result.events, "auditedUpTo": result.audited_upto,
                "inputEnd": result.input_end, "seconds": round(result.seconds, 3),
                "divergence": None if d is None else {
                    "inputOffset": d.input_offset, "index": d.index, "decisionOffset": d.decision_offset,
                    "recorded": text(d.recorded), "replayed": text(d.replayed),
                },
            }, output)
        else:
            typer.echo(result.describe())
        if not result.ok:
            raise typer.Exit(1)

    @app.command()
    def serve(
        broker: str = broker_option(),
        port: int = typer.Option(8080, "--port", envvar="QUOTAFLOW_VIEWS_PORT", help="HTTP port (0: any free port)"),
        host: str = typer.Option(
            "127.0.0.1", "--host", envvar="QUOTAFLOW_VIEWS_HOST",
            help="address to bind; anything but loopback needs a token ($QUOTAFLOW_HTTP_TOKEN), --tls-client-ca or --insecure-bind",
        ),
        insecure_bind: bool = typer.Option(
            False, "--insecure-bind", help="serve on a non-loopback address with no authentication at all ($QUOTAFLOW_HTTP_INSECURE=1)"
        ),
        tls_cert: Path | None = typer.Option(None, "--tls-cert", help="serve HTTPS with this certificate (PEM) ($QUOTAFLOW_HTTP_TLS_CERT)"),
        tls_key: Path | None = typer.Option(None, "--tls-key", help="... and this key ($QUOTAFLOW_HTTP_TLS_KEY)"),
        tls_client_ca: Path | None = typer.Option(
            None, "--tls-client-ca", help="require client certificates signed by this CA: mTLS ($QUOTAFLOW_HTTP_TLS_CLIENT_CA)"
        ),
        max_in_flight: int = typer.Option(64, "--max-in-flight", min=1, help="requests handled at once (more wait, up to a bound)"),
        reports: Path | None = typer.Option(
            None, "--reports", exists=True, file_okay=False, dir_okay=True,
            help="a directory of what-if HTML reports (quotaflow whatif --html) the dashboard lists",
        ),
    ) -> None:
        """Serve the dashboard at /, the views (JSON) and Prometheus /metrics over HTTP, following the logs.

        Read-only; 127.0.0.1 unless --host says otherwise. With $QUOTAFLOW_HTTP_TOKEN (or
        $QUOTAFLOW_HTTP_TOKEN_FILE) set, every request needs `Authorization: Bearer TOKEN`, or the
        cookie a browser gets by opening /?token=TOKEN once."""
        import asyncio

        from projections.server import ProjectionServer
        from streams.http_guard import GuardError, HttpGuard

        try:
            guard = HttpGuard.from_env(
                host=host, insecure=insecure_bind, tls_cert=tls_cert, tls_key=tls_key, tls_client_ca=tls_client_ca,
                max_in_flight=max_in_flight,
            )
            guard.check()
        except GuardError as exc:
            raise fail("serve", str(exc), 2) from None

        async def go() -> None:
            log, topics = await _open(broker)
            server = ProjectionServer(log, topics, reports=reports, guard=guard)
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            try:
                bound = await server.start(port=port)
                shown = f"[{host}]" if ":" in host else host
                auth = "bearer token" if guard.token else ("client certificates" if guard.tls_client_ca else "no authentication")
                typer.echo(f"quotaflow dashboard and views on {guard.scheme}://{shown}:{bound}/ ({auth}; log {log.url})", err=True)
                await stop.wait()
            finally:
                await server.stop()
                await log.close()

        run("serve", go)
