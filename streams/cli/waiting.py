"""`--wait`: after a write, read the decision log until the agent has decided the written events,
print their decisions and turn them into an exit code.

When an input event is decided follows the agent's progress rule, the one projections/follower.py
applies: a decision caused by offset C means every event before C is decided; once the reader has
read everything committed, the last cause read is decided too; and so is every offset a snapshot
covers. Every event is decided by at least one decision of its own (CONTRACT.md), a valid
configuration change by `Applied`; an agent that predates `Applied` decides such a change only
when it rejects it, so with one the change is known to be decided only when something later is
decided or a snapshot covers it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import typer

# The decisions and the projection are imported where used: `--help` and a write that does not
# wait need neither.
if TYPE_CHECKING:
    from domain.decisions import AnyDecision, Rejected

# Exit codes of a write with --wait (documented in README.md).
EXIT_REJECTED = 1
EXIT_TIMEOUT = 3

DEFAULT_TIMEOUT_S = 30.0
# An agent that predates `Applied` decides a valid configuration change nothing, so once it is seen
# caught up to just before it, waiting longer only waits for a rejection that is not coming.
CONFIG_GRACE_S = 3.0


# Which of `--wait`'s defaults a command has (streams/cli/publishing.py): a workload command waits
# when stdout is a terminal; a configuration change waits only when asked.
WAIT_ON_A_TERMINAL = "wait when stdout is a terminal"
WAIT_WHEN_ASKED = "no waiting; a configuration change waits only when asked"
WAIT_BY_KIND = "for a workload, wait when stdout is a terminal; for a configuration object, only when asked"


def wait_option(default: str = WAIT_ON_A_TERMINAL) -> Any:
    return typer.Option(
        None,
        "--wait/--no-wait",
        help=f"wait for the agent's decisions and exit 1 if one is Rejected (default: {default})",
        show_default=False,
    )


def timeout_option() -> Any:
    return typer.Option(DEFAULT_TIMEOUT_S, "--timeout", min=0.0, help="with --wait: seconds to wait for the agent")


def should_wait(wait: bool | None) -> bool:
    # Scripts pass --wait explicitly; an interactive user gets the answer without asking for it.
    return sys.stdout.isatty() if wait is None else wait


@dataclass
class Outcome:
    offsets: list[int]
    decisions: dict[int, list[tuple[int, AnyDecision]]] = field(default_factory=dict)
    decided: bool = False
    # the agent had decided everything before the first written event (it is running and caught up)
    agent_caught_up: bool = False

    @property
    def rejected(self) -> list[Rejected]:
        from domain.decisions import Rejected

        return [d for o in self.offsets for _, d in self.decisions.get(o, []) if isinstance(d, Rejected)]


async def _snapshot_watermark(qf: Any) -> int:
    from projections.follower import snapshot_offset

    try:
        last = await qf.log.read_last(qf.topics.snapshots, 1)
    except Exception:  # no snapshot topic yet: it tells nothing
        return -1
    offset = snapshot_offset(last[0]) if last else None
    return -1 if offset is None else offset


async def last_decided_cause(qf: Any) -> int:
    """The cause offset of the newest decision (-1 for none): the agent has decided up to there."""
    import msgspec

    from domain.decisions import decode

    last = await qf.log.read_last(qf.topics.decisions, 1)
    if not last:
        return -1
    try:
        return decode(last[0].value or b"").cause.offset
    except msgspec.DecodeError:
        return -1


async def wait_for(
    qf: Any, offsets: list[int], decisions_start: int, timeout: float, *, before: int = -1, config: bool = False,
    poll: float = 0.2,
) -> Outcome:
    """Read decisions from `decisions_start` (the decision log's end before the write) until
    every offset in `offsets` is decided or `timeout` seconds have passed. `before` is what the
    agent had decided before the write (`last_decided_cause`); with `config`, once the agent is
    seen past the offset before the first written event, wait only CONFIG_GRACE_S more."""
    import asyncio

    import msgspec

    from domain.decisions import decode

    outcome = Outcome(offsets, {o: [] for o in offsets})
    topic = qf.topics.decisions
    target = max(offsets)
    decided = before
    last_cause = -1
    deadline = time.monotonic() + timeout
    async with await qf.log.reader(topic, decisions_start) as reader:
        while True:
            # The snapshot is looked at before the end offset: a snapshot is committed with its
            # batch's decisions, so reading up to an end taken after it reads those too.
            snapshot = await _snapshot_watermark(qf)
            end = await qf.log.end_offset(topic)
            while reader.position < end:
                for record in await reader.read(timeout=poll):
                    try:
                        decision = decode(record.value or b"")
                    except msgspec.DecodeError:
                        continue
                    cause = decision.cause.offset
                    if cause in outcome.decisions:
                        outcome.decisions[cause].append((record.offset, decision))
                    decided = max(decided, cause - 1)
                    last_cause = max(last_cause, cause)
            decided = max(decided, last_cause, snapshot)
            if decided >= target:
                outcome.decided = True
                return outcome
            if not outcome.agent_caught_up and decided >= min(offsets) - 1 >= 0:
                outcome.agent_caught_up = True
                if config:
                    deadline = min(deadline, time.monotonic() + CONFIG_GRACE_S)
            if time.monotonic() >= deadline:
                return outcome
            await asyncio.sleep(poll)


def report(command: str, outcome: Outcome, timeout: float, config: bool = False) -> int:
    """Print the decisions (one line each) and return the exit code."""
    from streams.cli.render import decision_line, output_console

    console = output_console()
    for offset in outcome.offsets:
        for record_offset, decision in outcome.decisions.get(offset, []):
            console.print(decision_line(decision, record_offset))
    for rejected in outcome.rejected:
        typer.echo(f"quotaflow {command}: rejected: {rejected.reason}: {rejected.message}", err=True)
    if outcome.rejected:
        return EXIT_REJECTED
    if not outcome.decided and config and outcome.agent_caught_up:
        console.print(
            "no rejection from the agent (this agent predates the Applied decision: it decides a "
            "configuration change only when it rejects it)",
            markup=False,
        )
        return 0
    if not outcome.decided and config:
        which = ", ".join(map(str, outcome.offsets))
        typer.echo(
            f"quotaflow {command}: not known whether the agent accepted offset {which} within {timeout:g} s: "
            "this agent predates the Applied decision and decides a configuration change only when it rejects "
            "it, so acceptance shows only once the "
            "agent decides a later event or writes a snapshot (is `quotaflow agent` running?)",
            err=True,
        )
        return EXIT_TIMEOUT
    if not outcome.decided:
        pending = [o for o in outcome.offsets if not outcome.decisions.get(o)]
        which = ", ".join(map(str, pending or outcome.offsets))
        typer.echo(
            f"quotaflow {command}: no agent decided offset {which} within {timeout:g} s; is `quotaflow agent` running?",
            err=True,
        )
        return EXIT_TIMEOUT
    if config and not any(outcome.decisions.get(o) for o in outcome.offsets):
        console.print(
            "accepted by the agent (this agent predates the Applied decision: it decides a configuration "
            "change only when it rejects it)",
            markup=False,
        )
    return 0
