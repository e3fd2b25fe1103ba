"""`quotaflow import ...`: convert other schedulers' queue configurations into contract events.

    quotaflow import yunikorn queues.yaml [--capacity cpu=64,memory=256Gi] [-o events.yaml]

prints the events (one YAML document each, or JSON Lines with `--format jsonl` or an `-o` file
ending in `.jsonl`/`.json`), ready for `quotaflow replay` or for the input topic. The mapping is
described in streams/importers/yunikorn.py. Configuration errors (YuniKorn's own checks, such as a
child queue's max above its parent's) are printed on standard error and exit with status 1 and
no events, unless `--allow-errors` asks for the events anyway (the engine then rejects what it
must).
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Any, NoReturn

import typer

from streams.importers.yunikorn import DEFAULT_FLAVOR

import_app = typer.Typer(
    name="import",
    help="Convert another scheduler's queue configuration into quotaflow input events.",
    no_args_is_help=True,
    add_completion=False,
)


class OutputFormat(str, Enum):
    yaml = "yaml"
    jsonl = "jsonl"


@import_app.callback()
def _import_root() -> None:
    """Convert another scheduler's queue configuration into quotaflow input events."""


@import_app.command("yunikorn")
def yunikorn(
    file: Path = typer.Argument(..., help="YuniKorn queue configuration (the queues.yaml of yunikorn-configs)"),
    capacity: str = typer.Option(
        "", "--capacity", help="Cluster size per resource, e.g. cpu=64,memory=256Gi (default: sum of top-level max)"
    ),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write the events to this file instead of stdout"),
    fmt: OutputFormat | None = typer.Option(
        None, "--format", help="yaml (one document per event) or jsonl; default from -o's suffix, else yaml"
    ),
    flavor: str = typer.Option(DEFAULT_FLAVOR, "--flavor", help="Name of the ResourceFlavor every queue uses"),
    allow_errors: bool = typer.Option(
        False, "--allow-errors", help="Print the events even when YuniKorn would refuse the configuration"
    ),
) -> None:
    """Convert a YuniKorn queue configuration into quotaflow input events."""
    from streams.importers.yunikorn import (
        YuniKornConfigError,
        convert_with_problems,
        parse_capacity,
    )

    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        _fail(f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}", 2)
    try:
        cap = parse_capacity(capacity)
    except YuniKornConfigError as exc:
        _fail(str(exc), 2)
    events, problems = convert_with_problems(text, cap, flavor)
    for problem in problems:
        typer.echo(f"quotaflow import yunikorn: {file}: {problem}", err=True)
    if events is None or (problems and not allow_errors):
        raise typer.Exit(1)
    chosen = fmt or (OutputFormat.jsonl if output is not None and output.suffix in (".jsonl", ".json") else OutputFormat.yaml)
    rendered = render(events, chosen)
    if output is None:
        sys.stdout.write(rendered)
        sys.stdout.flush()
    else:
        try:
            output.write_text(rendered, encoding="utf-8")
        except OSError as exc:
            _fail(f"cannot write {output}: {exc.strerror or exc}", 2)


def render(events: list[dict[str, Any]], fmt: OutputFormat) -> str:
    if fmt is OutputFormat.jsonl:
        return "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events)
    import yaml

    return "".join("---\n" + yaml.safe_dump(e, sort_keys=False, default_flow_style=False) for e in events)


def _fail(message: str, code: int, command: str = "yunikorn") -> NoReturn:
    typer.echo(f"quotaflow import {command}: {message}", err=True)
    raise typer.Exit(code)


@import_app.command("kueue-cluster")
def kueue_cluster(
    file: Path = typer.Argument(..., help="kubectl get clusterqueues,localqueues,resourceflavors,cohorts,"
                                "workloadpriorityclasses,workloads -A -o yaml"),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write the events to this file instead of stdout"),
    fmt: OutputFormat | None = typer.Option(
        None, "--format", help="yaml (one document per event) or jsonl; default from -o's suffix, else yaml"
    ),
) -> None:
    """A Kueue cluster's objects as an input log: configuration first, each Workload submitted at
    its creationTimestamp and finished one Kueue runtime after quotaflow admits it (see
    streams/importers/kueue_cluster.py for what a dump cannot give back)."""
    import yaml

    from streams.importers.kueue_cluster import KueueDumpError, convert
    from streams.log.event_files import load_yaml_documents

    try:
        docs = load_yaml_documents(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        _fail(f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}", 2, "kueue-cluster")
    except yaml.YAMLError as exc:
        _fail(f"{file} is not valid YAML: {exc}", 2, "kueue-cluster")
    try:
        events, notes = convert(docs)
    except KueueDumpError as exc:
        _fail(f"{file}: {exc}", 2, "kueue-cluster")
    for note in notes:
        typer.echo(f"quotaflow import kueue-cluster: {note}", err=True)
    chosen = fmt or (OutputFormat.jsonl if output is not None and output.suffix in (".jsonl", ".json") else OutputFormat.yaml)
    rendered = render(events, chosen)
    if output is None:
        sys.stdout.write(rendered)
    else:
        output.write_text(rendered, encoding="utf-8")
