"""`quotaflow export`: the input log as an events file that `quotaflow replay` folds exactly."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from streams.cli.common import broker_option, require_existing_log, run


def register(app: typer.Typer) -> None:
    @app.command()
    def export(
        output: Path = typer.Option(None, "--output", "-o", help="Write here instead of standard output"),
        broker: str = broker_option(),
    ) -> None:
        """Write the input log as JSON Lines, every record exactly.

        One line per record (CONTRACT.md, "`quotaflow export` and exact events files"): `quotaflow
        replay FILE` decides it as the agent did."""
        from streams.cli.progress import Progress, watched
        from streams.log import Topics, open_log
        from streams.log.event_files import export_line, gap_line
        from streams.settings import Settings

        settings = Settings.from_env()
        topics = Topics.from_settings(settings)

        async def go() -> int:
            require_existing_log(broker)
            log = open_log(broker, settings)
            await log.start()
            out = open(output, "wb") if output else sys.stdout.buffer  # noqa: SIM115 - closed below
            written = 0
            position = 0
            try:
                end = await log.end_offset(topics.input)
                shown = watched(sys.stderr, output=None if output else sys.stdout)
                with Progress("export", end, enabled=shown) as progress:
                    async with await log.reader(topics.input, 0) as reader:
                        while reader.position < end:
                            records = await reader.read(limit=5000, timeout=1.0)
                            for r in records:
                                if r.offset > position:
                                    # offsets with no record: a transaction's commit marker (the sequencer's)
                                    out.write(gap_line(r.offset - position) + b"\n")
                                out.write(export_line(r.value, r.log_time) + b"\n")
                                position = r.offset + 1
                                written += 1
                            progress.advance(len(records))
            finally:
                if output:
                    out.close()
                else:
                    out.flush()
                await log.close()
            return written

        n = run("export", go)
        if output:
            typer.echo(f"exported {n} input event(s) to {output}", err=True)
