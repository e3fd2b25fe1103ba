"""The `quotaflow` command line."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from streams.cli.estimate_command import register as register_estimate_command
from streams.cli.export_command import register as register_export_command
from streams.cli.get_commands import register as register_get_commands
from streams.cli.import_commands import import_app
from streams.cli.launch_command import register as register_launch_command
from streams.cli.list_commands import register as register_list_commands
from streams.cli.log_commands import register as register_log_commands
from streams.cli.stop_commands import register as register_stop_commands
from streams.cli.view_commands import register as register_view_commands
from streams.cli.whatif_command import register as register_whatif_command
from streams.cli.workload_commands import register as register_workload_commands

app = typer.Typer(
    name="quotaflow",
    help="Kueue's quota and admission model as an event-sourced stream processor.",
    no_args_is_help=True,
)
app.add_typer(import_app, name="import")
register_log_commands(app)
register_workload_commands(app)
register_stop_commands(app)
register_list_commands(app)
register_get_commands(app)
register_view_commands(app)
register_export_command(app)
register_launch_command(app)
register_whatif_command(app)
register_estimate_command(app)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"quotaflow {version('quotaflow')}")
        except PackageNotFoundError:  # run from a source tree that was never installed
            typer.echo("quotaflow (not installed)")
        raise typer.Exit()


@app.callback()
def _root(
    _: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="print the version and exit"),
) -> None:
    """Kueue's quota and admission model as an event-sourced stream processor on Apache Kafka."""


@app.command()
def replay(
    events_file: Path = typer.Argument(..., help="Input events: .jsonl (one per line) or .yaml (one per document)"),
) -> None:
    """Fold EVENTS_FILE through the engine in-process and print the decisions as JSON Lines."""
    from domain.decisions import encode
    from domain.engine import Engine
    from streams.cli.progress import Progress, watched
    from streams.log.event_files import EventFileError, positioned_events

    engine = Engine()
    write = sys.stdout.buffer.write
    try:
        with Progress("replay", unit="events", enabled=watched(sys.stderr, output=sys.stdout)) as progress:
            for offset, event, log_time in positioned_events(events_file):
                for decision in engine.apply(event, offset, log_time):
                    write(encode(decision))
                    write(b"\n")
                progress.advance()
    except EventFileError as exc:
        typer.echo(f"quotaflow replay: {exc}", err=True)
        raise typer.Exit(2) from None
    sys.stdout.flush()


def main() -> None:
    # The name completion scripts are generated for (and the completion environment variable,
    # _QUOTAFLOW_COMPLETE, is named after), also under `python -m streams.cli`.
    app(prog_name="quotaflow")


if __name__ == "__main__":
    main()
