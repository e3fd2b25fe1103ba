"""The dashboard in a real headless browser (Debian's Chromium, driven by Selenium through
Debian's chromedriver): after the demo's steps its pages show the demo's ClusterQueues and
decisions, update live when a workload is submitted, travel back in time, and log nothing to
the console."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import msgspec
import pytest

from devtools.browser import HEADLESS_FLAGS, find, find_driver
from projections.server import ProjectionServer
from streams.agent.loop import Agent, AgentConfig
from streams.cli.demo import STEPS, submitted, workload
from streams.log import Topics
from streams.log.envelope import event_message
from streams.log.sqlite import SqliteLog

BROWSER, DRIVER = find(), find_driver()
REQUIRED = os.environ.get("QUOTAFLOW_REQUIRE_BROWSER", "") == "1"
pytestmark = [
    pytest.mark.skipif((BROWSER is None or DRIVER is None) and not REQUIRED, reason="needs Debian's chromium and chromium-driver"),
    pytest.mark.timeout(240, func_only=True),
]
webdriver = pytest.importorskip("selenium.webdriver") if not REQUIRED else __import__("selenium.webdriver").webdriver
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

TOPICS = Topics("quotaflow.events", "quotaflow.decisions", "quotaflow.snapshots")


class Cluster:
    """An agent and `quotaflow serve` on one SQLite log, on an event loop of their own thread,
    so the test's synchronous browser calls never block them."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.log = SqliteLog(db)

    def call(self, coro: Any, timeout: float = 60) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)

    async def _start(self) -> int:
        await self.log.start()
        await self.log.ensure_topics(TOPICS.specs(), single_partition=[TOPICS.input, TOPICS.decisions])
        self.agent = Agent(SqliteLog(self.db), AgentConfig(TOPICS, standby=False, engine_process=False))
        self.agent_task = asyncio.create_task(self.agent.run())
        self.server = ProjectionServer(SqliteLog(self.db), TOPICS)
        return await self.server.start("127.0.0.1", 0)

    def start(self) -> int:
        return int(self.call(self._start()))

    async def _publish(self, events: list[dict[str, Any]]) -> int:
        offsets = await self.log.append(TOPICS.input, [event_message(msgspec.json.encode(e)) for e in events])
        await self.agent.wait_processed(offsets[-1], timeout=60)
        await self.server.wait_for_offset(offsets[-1])
        return int(offsets[-1])

    def publish(self, events: list[dict[str, Any]]) -> int:
        return int(self.call(self._publish(events)))

    async def _stop(self) -> None:
        await self.server.stop()
        self.agent.stop()
        await asyncio.wait_for(self.agent_task, 30)
        await self.log.close()

    def stop(self) -> None:
        try:
            self.call(self._stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "log.db")
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    assert BROWSER is not None and DRIVER is not None, (
        "QUOTAFLOW_REQUIRE_BROWSER=1 but no Chromium/chromedriver: python -m devtools.browser ensure")
    options = webdriver.ChromeOptions()
    options.binary_location = BROWSER
    for flag in HEADLESS_FLAGS:
        options.add_argument(flag)
    options.add_argument("--window-size=1400,1000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: Any, check: Any, what: str, timeout: float = 20) -> Any:
    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: check(d), message=what)


def main_text(driver: Any) -> str:
    return str(driver.find_element(By.ID, "main").text)


def test_the_dashboard_shows_the_demo_updates_live_and_travels_in_time(cluster: Cluster, browser: Any) -> None:
    port = cluster.start()
    last = 0
    for _title, _text, events in STEPS:
        last = cluster.publish(events)
    base = f"http://127.0.0.1:{port}"

    # The overview: the demo's cohorts and ClusterQueues with their usage bars.
    browser.get(base + "/")
    wait_for(browser, lambda d: "Cohort team-ab" in main_text(d), "the overview shows the cohort tree")
    text = main_text(browser)
    for name in ("team-a-cq", "team-b-cq", "team-c-cq", "team-d-cq", "research-cq"):
        assert name in text
    bars = browser.find_elements(By.CSS_SELECTOR, "#main .bar")
    assert bars, "usage bars are drawn"
    # team-a holds 21 CPUs on a nominal 9: it borrows 12, which team-b lends.
    titles = [b.get_attribute("title") for b in bars]
    assert "default-flavor/cpu: nominal 9, reserved 21, borrowed 12, lent 0" in titles, titles
    assert "default-flavor/cpu: nominal 12, reserved 0, borrowed 0, lent 12" in titles, titles

    # Pending workloads, with positions and Kueue's reasons.
    browser.get(base + "/#/pending")
    wait_for(browser, lambda d: "too-many" in main_text(d), "the pending list shows too-many")
    assert "eleventh-cpu" in main_text(browser)
    # Admitted workloads.
    browser.get(base + "/#/admitted")
    wait_for(browser, lambda d: "job-2" in main_text(d), "job-2 holds quota after job-1 finished")
    assert "big" in main_text(browser)

    # The decision stream, live: a submission appears without a reload.
    browser.get(base + "/#/decisions")
    wait_for(browser, lambda d: "research/job-3" in main_text(d), "recent decisions are listed")
    cluster.publish([submitted(workload("research", "live-one", 1, "1"))])
    wait_for(browser, lambda d: "research/live-one" in main_text(d), "the new decision arrives live")

    # A workload's page: its history and its objects as YAML.
    browser.get(base + "/#/workload/team-a/too-many")
    wait_for(browser, lambda d: "History" in main_text(d), "the workload page loads")
    assert "Pending" in main_text(browser)
    browser.find_element(By.XPATH, "//main//summary[contains(., 'View YAML')]").click()
    wait_for(browser, lambda d: "queueName: user-queue" in main_text(d), "View YAML shows the Workload")

    # Time travel: as of the offset before job-1 finished, job-2 was still pending.
    browser.get(base + "/#/admitted")
    wait_for(browser, lambda d: "job-2" in main_text(d), "live admitted list")
    box = browser.find_element(By.ID, "asof")
    box.send_keys(str(last - 1))
    box.submit()
    wait_for(browser, lambda d: d.find_element(By.ID, "main").get_attribute("data-as-of") == str(last - 1), "the view moved back")
    wait_for(browser, lambda d: "job-1" in main_text(d) and "job-2" not in main_text(d), "as of then, job-1 ran and job-2 did not")
    browser.find_element(By.ID, "live").click()
    wait_for(browser, lambda d: "job-2" in main_text(d), "back to live")

    console = [entry for entry in browser.get_log("browser") if entry.get("level") in ("SEVERE", "WARNING")]
    assert console == []
