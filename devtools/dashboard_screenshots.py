"""Screenshots of the dashboard's main pages after the demo, for the README.

    python -m devtools.dashboard_screenshots docs/screenshots

Runs the demo's steps through an in-process agent on a temporary SQLite log, serves the
dashboard, and saves one PNG per page with Debian's Chromium (see devtools/browser.py).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import msgspec

from devtools.browser import HEADLESS_FLAGS, ensure, find_driver
from projections.server import ProjectionServer
from streams.agent.loop import Agent, AgentConfig
from streams.cli.demo import STEPS
from streams.log import Topics
from streams.log.envelope import event_message
from streams.log.sqlite import SqliteLog

PAGES = {
    "overview": "/#/",
    "pending": "/#/pending",
    "workload": "/#/workload/team-a/too-many",
    "decisions": "/#/decisions",
}


async def _serve_demo(db: Path, ready: asyncio.Future[int], done: asyncio.Event) -> None:
    topics = Topics("quotaflow.events", "quotaflow.decisions", "quotaflow.snapshots")
    log = SqliteLog(db)
    await log.start()
    await log.ensure_topics(topics.specs(), single_partition=[topics.input, topics.decisions])
    agent = Agent(SqliteLog(db), AgentConfig(topics, standby=False, engine_process=False))
    task = asyncio.create_task(agent.run())
    server = ProjectionServer(SqliteLog(db), topics)
    try:
        events = [event_message(msgspec.json.encode(e)) for _, _, step in STEPS for e in step]
        offsets = await log.append(topics.input, events)
        await agent.wait_processed(offsets[-1], timeout=60)
        port = await server.start("127.0.0.1", 0)
        await server.wait_for_offset(offsets[-1])
        ready.set_result(port)
        await done.wait()
    finally:
        await server.stop()
        agent.stop()
        await task
        await log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.dashboard_screenshots")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    from selenium import webdriver

    browser = ensure()
    driver_path = find_driver()

    async def run() -> None:
        with tempfile.TemporaryDirectory(prefix="quotaflow-shots-") as tmp:
            ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            done = asyncio.Event()
            serving = asyncio.create_task(_serve_demo(Path(tmp) / "demo.db", ready, done))
            port = await ready
            options = webdriver.ChromeOptions()
            options.binary_location = browser
            for flag in HEADLESS_FLAGS:
                options.add_argument(flag)
            options.add_argument("--window-size=1280,900")
            driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver_path))
            try:
                for name, path in PAGES.items():
                    await asyncio.to_thread(driver.get, f"http://127.0.0.1:{port}{path}")
                    await asyncio.sleep(1.5)  # the page fetches its data after load
                    await asyncio.to_thread(driver.save_screenshot, str(args.out / f"dashboard-{name}.png"))
                    print(args.out / f"dashboard-{name}.png")
            finally:
                driver.quit()
                done.set()
                await serving

    began = time.monotonic()
    asyncio.run(run())
    print(f"done in {time.monotonic() - began:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
