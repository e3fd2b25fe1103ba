"""`quotaflow whatif`: the recorded input log replayed under a changed configuration, in
simulated time, compared with what was recorded (streams/whatif)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from streams.cli.common import broker_option, fail


def register(app: typer.Typer) -> None:
    @app.command()
    def whatif(
        events_file: Path = typer.Argument(None, help="An events file (.jsonl/.yaml); without it, the input log of --broker"),
        change: list[Path] = typer.Option(None, "--change", "-f", help="Kueue YAML: objects to apply, or ConfigDeleted events; "
                                          "each file is one change of the sweep"),
        set_: list[str] = typer.Option(None, "--set", help="KIND/NAME.FIELD=V1[,V2...], e.g. clusterqueue/team-a.nominal=cpu:x1.5,x2 "
                                       "or configuration.fairSharing=on; each value is one change of the sweep"),
        at: str = typer.Option(None, "--at", help="where the change starts: an input offset or an RFC 3339 time (default: the start)"),
        json_out: bool = typer.Option(False, "--json", help="print the report as JSON"),
        top: int = typer.Option(10, "--top", help="workloads listed per moved-admission table"),
        bins: int = typer.Option(60, "--bins", help="points of each usage-over-time series"),
        write_events: Path = typer.Option(None, "--write-events", help="write the changed world's input log here "
                                          "(.jsonl; one file per change, numbered, in a sweep)"),
        html_out: Path = typer.Option(None, "--html", help="also write a self-contained HTML report with plots here"),
        decisions_file: Path = typer.Option(None, "--decisions", help="the events file's decisions (JSON Lines, as "
                                            "`quotaflow replay EVENTS_FILE` prints them): the recorded world is read "
                                            "from them instead of replayed"),
        replay_recorded: bool = typer.Option(False, "--replay-recorded", help="replay the recorded world even when the "
                                             "decision log covers the input log (a log decided by another engine version)"),
        broker: str = broker_option(),
    ) -> None:
        """Replay the recorded log under another configuration and compare the two worlds.

        Each workload keeps its recorded runtime; the comparison is per ClusterQueue, LocalQueue,
        cohort and priority."""
        import asyncio

        from streams.log.kafka_config import KafkaConfigError
        from streams.whatif.changes import ChangeError, parse_at, sweep
        from streams.whatif.run import run
        from streams.whatif.simulation import Stalled
        from streams.whatif.source import (
            SourceError,
            read_decision_file,
            read_decisions,
            read_file,
            read_log,
        )

        try:
            changes = sweep([str(p) for p in change or []], list(set_ or []), parse_at(at))
        except ChangeError as exc:
            raise fail("whatif", str(exc), 2) from None
        decisions = None
        try:
            if decisions_file is not None and events_file is None:
                raise fail("whatif", "--decisions goes with an events file (from --broker the decision log is read)", 2)
            if events_file is not None:
                records = read_file(events_file)
                if decisions_file is not None and not replay_recorded:
                    decisions = read_decision_file(decisions_file, records)
            else:
                records = asyncio.run(read_log(broker))
                if not replay_recorded:
                    decisions = asyncio.run(read_decisions(broker, len(records)))
        except KafkaConfigError as exc:
            raise fail("whatif", str(exc), 2) from None
        except SourceError as exc:
            raise fail("whatif", str(exc), 1) from None
        verbose = not json_out and sys.stderr.isatty()
        try:
            report = run(records, changes, bins=max(1, bins), top=max(0, top),
                         write_events=str(write_events) if write_events else None, decisions=decisions,
                         progress=(lambda m: typer.echo(m, err=True)) if verbose else None)
        except ChangeError as exc:
            raise fail("whatif", str(exc), 2) from None
        except Stalled as exc:
            raise fail("whatif", f"the simulation stopped: {exc}", 1) from None
        if html_out is not None:
            from streams.whatif.html_report import render

            html_out.write_text(render(report), encoding="utf-8")
            if not json_out:
                typer.echo(f"wrote {html_out}", err=True)
        if json_out:
            import msgspec

            sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(report), indent=2) + b"\n")
            return
        from streams.cli.render import output_console
        from streams.cli.whatif_render import renderables

        console = output_console()
        for r in renderables(report):
            console.print(r)
