"""`quotaflow estimate NS/NAME`: when a pending workload would be admitted if nothing else arrives
(streams/whatif/estimate.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from streams.cli.common import broker_option, fail

SHOWN = 10  # rows of each list in the terminal; --json has them all


def register(app: typer.Typer) -> None:
    @app.command()
    def estimate(
        workload: str = typer.Argument(..., help="NAMESPACE/NAME of a pending workload"),
        events_file: Path = typer.Argument(None, help="An events file (.jsonl/.yaml); without it, the input log of --broker"),
        now: str = typer.Option(None, "--now", help="RFC 3339 time to estimate from (default: the log's last event)"),
        json_out: bool = typer.Option(False, "--json", help="print the estimate as JSON"),
        broker: str = broker_option(),
    ) -> None:
        """Estimate when a pending workload is admitted if nothing else arrives.

        The log's state is simulated forward with no new arrivals; each workload's runtime is the
        median of similar finished runs in the log (same LocalQueue, priority and requests within
        2×; else the LocalQueue's, the ClusterQueue's, the whole log's)."""
        import asyncio

        from domain.timestamps import TimestampError, parse_time
        from streams.log.kafka_config import KafkaConfigError
        from streams.whatif.estimate import EstimateError
        from streams.whatif.estimate import estimate as run_estimate
        from streams.whatif.source import SourceError, read_file, read_log

        if "/" not in workload:
            raise fail("estimate", f"{workload!r}: give the workload as NAMESPACE/NAME", 2)
        at = None
        if now is not None:
            try:
                at = parse_time(now)
            except TimestampError as exc:
                raise fail("estimate", f"--now: {exc}", 2) from None
        try:
            records = read_file(events_file) if events_file is not None else asyncio.run(read_log(broker))
        except KafkaConfigError as exc:
            raise fail("estimate", str(exc), 2) from None
        except SourceError as exc:
            raise fail("estimate", str(exc), 1) from None
        try:
            result = run_estimate(records, workload, now=at)
        except EstimateError as exc:
            raise fail("estimate", str(exc), 1) from None
        if json_out:
            import msgspec

            sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(result), indent=2) + b"\n")
            return
        for line in describe(result):
            typer.echo(line)


def describe(r: dict[str, Any]) -> list[str]:
    from streams.cli.whatif_render import seconds

    where = f"LocalQueue {r['localQueue']}" + (f", ClusterQueue {r['clusterQueue']}" if r["clusterQueue"] else "")
    lines = [f"{r['workload']} ({where}): pending since {r['submitted']} "
             f"({seconds(r['waitedSeconds'])} by {r['now']})"]
    if r["admissible"]:
        lines.append(f"estimated admission: {r['admittedAt']}, in {seconds(r['inSeconds'])} "
                     f"(a wait of {seconds(r['waitSeconds'])} in all), if nothing else arrives")
    elif r["admissible"] is None:
        lines.append(f"no estimate: {r['reason']}")
    else:
        lines.append(f"never admitted if nothing else arrives: {r['reason']}")
    if r["first"]:
        lines.append("first:")
        for f in r["first"][:SHOWN]:
            if f["event"] != "finishes":
                lines.append(f"  {f['workload']} is {f['event']} at {f['at']}"
                             + (" (evicted: its quota is given back)" if f["event"] == "released" else ""))
                continue
            basis = ("runtime unknown" if f["runtimeSeconds"] is None else
                     f"runtime {seconds(f['runtimeSeconds'])}: median of {f['samples']} {f['runtimeBasis']} run"
                     f"{'s' if f['samples'] != 1 else ''}")
            state = "running" if f["running"] else "admitted ahead"
            lines.append(f"  {f['workload']} ({state}, {f['clusterQueue']}) finishes at {f['at']} ({basis})"
                         + (", overdue" if f["overdue"] else ""))
        if len(r["first"]) > SHOWN:
            lines.append(f"  ... and {len(r['first']) - SHOWN} more (--json lists them all)")
    elif r["admissible"]:
        lines.append("nothing has to finish first: it is admitted at the next scheduling cycle")
    ahead = [a["workload"] for a in r["admittedAhead"]]
    if ahead:
        more = f" and {len(ahead) - SHOWN} more" if len(ahead) > SHOWN else ""
        lines.append(f"admitted ahead of it ({len(ahead)}): " + ", ".join(ahead[:SHOWN]) + more)
    lines.append(f"history: {r['runs']} finished run{'s' if r['runs'] != 1 else ''} in the log")
    lines.extend(f"note: {n}" for n in r["notes"])
    return lines
