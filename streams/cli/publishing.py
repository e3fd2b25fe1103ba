"""Every write command's one path: append the events, print what was appended and, with `--wait`,
what the agent decided about it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import typer

from streams.cli.common import run
from streams.cli.waiting import last_decided_cause, report, should_wait, wait_for


def publish(
    command: str,
    broker: str,
    events: Sequence[dict[str, Any]],
    describe: Callable[[dict[str, Any]], str],
    *,
    wait: bool | None,
    timeout: float,
    config: bool = False,
) -> None:
    """Append `events`, print `<describe(event)> (offset N)` for each, and end the command with
    the exit code of the decisions when waiting (see streams/cli/waiting.py)."""
    from streams.client import Client
    from streams.log.envelope import CLI_SOURCE

    # A configuration change waits only when asked: an agent older than the `Applied` decision
    # decides nothing for a valid change, so waiting for one is slow to conclude.
    waiting = should_wait(wait) if not config or wait is not None else False

    async def go() -> tuple[list[int], Any]:
        async with Client(broker, source=CLI_SOURCE) as qf:
            # Read from the decision log's end as it was before the write, so a fast agent's
            # decisions cannot slip in between the write and the first read.
            start = await qf.log.end_offset(qf.topics.decisions) if waiting else 0
            before = await last_decided_cause(qf) if waiting else -1
            offsets = await qf.publish_many(events)
            if not waiting or not offsets:
                return offsets, None
            for event, offset in zip(events, offsets, strict=True):
                typer.echo(f"{describe(event)} (offset {offset})")
            return offsets, await wait_for(qf, offsets, start, timeout, before=before, config=config)

    offsets, outcome = run(command, go)
    if outcome is None:
        for event, offset in zip(events, offsets, strict=True):
            typer.echo(f"{describe(event)} (offset {offset})")
        return
    code = report(command, outcome, timeout, config=config)
    if code:
        raise typer.Exit(code)


def publish_by_name(
    command: str, event_type: str, done: str, workload: str, namespace: str | None, broker: str, *, wait: bool | None, timeout: float
) -> None:
    """Publish an event that names a workload only (`namespace`, `name`): finish, release. The
    workload may be named by its job (KIND/NAME, see streams/cli/refs.py)."""
    from streams.cli.refs import workload_ref

    ns, name = workload_ref(command, workload, namespace, broker)
    events = [{"type": event_type, "namespace": ns, "name": name}]
    publish(command, broker, events, lambda e: f"workload/{ns}/{name} {done}", wait=wait, timeout=timeout)
