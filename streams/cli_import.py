"""`quotaflow import ...`: convert other schedulers' configurations into contract events."""

from __future__ import annotations

import typer

import_app = typer.Typer(
    name="import",
    help="Convert another scheduler's queue configuration into quotaflow input events.",
    no_args_is_help=True,
    add_completion=False,
)


@import_app.callback()
def _import_root() -> None:
    """Convert another scheduler's queue configuration into quotaflow input events."""


@import_app.command("yunikorn")
def yunikorn(file: str = typer.Argument(..., help="YuniKorn queue configuration (queues.yaml)")) -> None:
    """Convert a YuniKorn queue configuration into quotaflow input events."""
    typer.echo("quotaflow import yunikorn: not implemented yet", err=True)
    raise typer.Exit(2)
