"""What every `quotaflow` command that opens a log shares: the `--broker` option and one way to
turn a log's failures into a message and an exit code."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import typer

from streams import settings as defaults

T = TypeVar("T")

BROKER_HELP = "kafka://host:port or sqlite:///path.db"


def broker_option() -> Any:
    return typer.Option(defaults.DEFAULT_BROKER_URL, "--broker", envvar=defaults.ENV_BROKER_URL, help=BROKER_HELP)


def fail(command: str, message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"quotaflow {command}: {message}", err=True)
    return typer.Exit(code)


def run(command: str, coro_fn: Callable[[], Awaitable[T]]) -> T:
    """Run a command's coroutine; a log that cannot be used ends the command with a message."""
    import asyncio

    from streams.log import LogError
    from streams.log.kafka_config import KafkaConfigError

    try:
        return asyncio.run(coro_fn())  # type: ignore[arg-type]
    except KafkaConfigError as exc:
        # A setting to fix, as the agent and the sequencer report it: not the log's failure.
        raise fail(command, str(exc), 2) from None
    except LogError as exc:
        raise fail(command, str(exc)) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except BrokenPipeError:
        # Standard output's reader is gone (`quotaflow watch | head`): not the log's failure. The
        # command may catch it; click ends any other quietly.
        raise
    except (OSError, ConnectionError) as exc:
        raise fail(command, f"cannot reach the log: {exc}") from None
    except Exception as exc:
        if type(exc).__module__.startswith("aiokafka"):
            raise fail(command, f"Kafka: {exc}") from None
        raise


def require_existing_log(broker: str) -> None:
    """Read-only commands must not create a log: opening a SQLite file that is not there would
    create an empty one (the default URL is relative to the working directory), and the view
    would show nothing instead of saying the log is missing. Raises LogError (see `run`)."""
    from pathlib import Path

    from streams.log import BrokerUrl, LogError

    url = BrokerUrl.parse(broker)
    if url.scheme == "sqlite" and not Path(url.location).exists():
        raise LogError(f"no log at {Path(url.location).resolve()} ({broker}); nothing was written there: check --broker")
