"""The progress line of `replay`, `export` and `audit`: on stderr when it is a terminal (and the
command's output is not), never when piped."""

from __future__ import annotations

import asyncio
import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from agent_harness import write_jsonl

from devtools.generate import generated_events
from streams.agent.loop import Agent, AgentConfig
from streams.cli import progress
from streams.client import Client
from streams.log import Topics
from streams.log.sqlite import SqliteLog
from streams.settings import Settings

pytestmark = pytest.mark.timeout(120, func_only=True)

# The CLI with the progress line's start-up delay at 0, so that a small log shows it too.
EAGER = "import sys; import streams.cli.progress as p; p.DELAY_S = 0; from streams.cli.main import main; main()"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_drawn_in_place_after_a_delay_then_finished_with_a_line_break() -> None:
    out, clock = Terminal(), Clock()
    with progress.Progress("export", 1000, stream=out, clock=clock) as p:
        p.advance(10)
        assert out.getvalue() == "", "quiet for the first half second"
        clock.now += progress.DELAY_S
        p.advance(490)
        assert out.getvalue().startswith("\rexport: 500/1,000 records (50%)")
        drawn = out.getvalue()
        clock.now += progress.INTERVAL_S / 2
        p.advance(100)
        assert out.getvalue() == drawn, "redrawn at most every INTERVAL_S"
        clock.now += progress.INTERVAL_S
        p.advance(400)
    lines = out.getvalue().split("\r")
    assert lines[-1].startswith("export: 1,000/1,000 records (100%)") and lines[-1].endswith("\x1b[K\n")


def test_nothing_for_a_quick_operation_a_pipe_or_output_on_the_same_terminal() -> None:
    out, clock = Terminal(), Clock()
    with progress.Progress("replay", stream=out, clock=clock) as p:
        p.advance(5)
    assert out.getvalue() == ""
    piped = io.StringIO()
    with progress.Progress("replay", stream=piped, clock=clock) as p:
        clock.now += 10
        p.advance(5)
    assert piped.getvalue() == ""
    assert progress.watched(Terminal()) and not progress.watched(io.StringIO())
    assert not progress.watched(Terminal(), output=Terminal()) and progress.watched(Terminal(), output=io.StringIO())


def cli_with_stderr_on_a_terminal(*args: str, cwd: Path) -> tuple[bytes, str]:
    """(stdout, what the terminal on stderr showed) of the CLI with `args`."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", EAGER, *args], stdout=subprocess.PIPE, stderr=slave,
                            stdin=subprocess.DEVNULL, cwd=cwd)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        shown += chunk
    stdout = proc.stdout.read() if proc.stdout else b""
    assert proc.wait(60) == 0, shown.decode(errors="replace")
    os.close(master)
    return stdout, shown.decode(errors="replace")


def test_replay_shows_progress_on_a_terminal_and_nothing_when_piped(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    write_jsonl(events, generated_events(300, seed=4))
    decisions, shown = cli_with_stderr_on_a_terminal("replay", str(events), cwd=Path.cwd())
    assert decisions.count(b"\n") > 0
    assert "replay: 300 events" in shown and shown.endswith("\n")
    piped = subprocess.run([sys.executable, "-c", EAGER, "replay", str(events)], capture_output=True, check=True, timeout=60)
    assert piped.stderr == b"" and piped.stdout == decisions


def test_export_and_audit_show_how_far_they_are(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    url = f"sqlite:///{db}"
    topics = Topics("quotaflow.events", "quotaflow.decisions", "quotaflow.snapshots")

    async def fill() -> None:
        async with Client(url, settings=Settings(broker_url=url)) as qf:
            last = (await qf.publish_many(generated_events(200, seed=5)))[-1]
        log = SqliteLog(db)
        await log.start()
        try:
            agent = Agent(log, AgentConfig(topics, standby=False, engine_process=False))
            task = asyncio.create_task(agent.run())
            await agent.wait_processed(last, timeout=30)
            agent.stop()
            await task
        finally:
            await log.close()

    asyncio.run(fill())
    exported, shown = cli_with_stderr_on_a_terminal("export", "--broker", url, cwd=Path.cwd())
    # one line per record, each after the line giving it its log time (it has no `time` of its own)
    assert sum(not line.startswith(b'{"quotaflow.logTime"') for line in exported.splitlines()) == 200
    assert "export: 200/200 records (100%)" in shown
    report, shown = cli_with_stderr_on_a_terminal("audit", "--broker", url, cwd=Path.cwd())
    assert b"200" in report
    assert "audit: 200/200 events (100%)" in shown
