"""`quotaflow launch`: run admitted workloads as local processes (streams/launcher)."""

from __future__ import annotations

from pathlib import Path

import typer

from streams import settings as defaults
from streams.cli.common import broker_option, fail, run

ENV_STATE_DIR = "QUOTAFLOW_LAUNCH_STATE_DIR"
ENV_GRACE_PERIOD = "QUOTAFLOW_LAUNCH_GRACE_PERIOD"


def register(app: typer.Typer) -> None:
    @app.command()
    def launch(
        broker: str = broker_option(),
        state_dir: Path = typer.Option(
            Path(".quotaflow-launch"), "--state-dir", envvar=ENV_STATE_DIR,
            help="where the launcher keeps its position, its runs and its pods' pids (keep it across restarts)",
        ),
        log_dir: Path | None = typer.Option(None, "--log-dir", help="pods' stdout and stderr (default: STATE_DIR/logs)"),
        grace_period: float = typer.Option(
            30.0, "--grace-period", envvar=ENV_GRACE_PERIOD, min=0,
            help="seconds between SIGTERM and SIGKILL when a pod is stopped, unless its template sets "
            "terminationGracePeriodSeconds",
        ),
        poll: float = typer.Option(0.2, "--poll", min=0.01, help="seconds between looks at the pods"),
        log_level: str = typer.Option(defaults.DEFAULT_LOG_LEVEL, envvar=defaults.ENV_LOG_LEVEL, help="debug, info, warning, error"),
    ) -> None:
        """Run admitted workloads as local processes; stop and release preempted ones.

        Reports finished workloads. Crash-safe: restart it with the same --state-dir."""
        import asyncio
        import signal

        from streams.agent import structured_logs as logs
        from streams.launcher.loop import LaunchConfig, Launcher
        from streams.launcher.state import StateError
        from streams.log import LogError, Topics, open_log

        if not Path("/proc/self/stat").exists():
            raise fail("launch", "it tells its pods apart by pid and start time in /proc: it runs on Linux only")
        if log_level.lower() not in logs.LEVELS:
            raise fail("launch", f"--log-level must be one of {', '.join(logs.LEVELS)}", 2)
        logs.configure(log_level.lower())
        settings = defaults.Settings.from_env()
        try:
            log = open_log(broker, settings)
        except LogError as exc:
            raise fail("launch", str(exc), 2) from None
        config = LaunchConfig(state_dir=state_dir, grace_period=grace_period, poll=poll, log_dir=log_dir)

        async def go() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            try:
                launcher = Launcher(log, Topics.from_settings(settings), config)
            except StateError as exc:
                raise LogError(f"--state-dir {state_dir}: {exc}") from None
            try:
                await launcher.run(stop)
            except StateError as exc:
                raise LogError(f"--state-dir {state_dir}: {exc}") from None
            finally:
                await launcher.close()

        run("launch", go)
