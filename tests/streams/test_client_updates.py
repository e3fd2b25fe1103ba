"""`Client.stop_queue` and `Client.update_workload` on a real log, SQLite and Kafka: each appends
the object as the input log last set it with only the asked change, and the engine decides it as
Kueue would (a drained ClusterQueue evicts, a resumed one admits again, a deactivated workload is
evicted, a new priority is kept)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cli_harness import CLUSTER_QUEUE, FLAVOR, LOCAL_QUEUE, workload

from domain.decisions import Decision
from domain.engine import Engine
from streams.client import Client
from streams.log import Topics
from streams.settings import Settings

pytestmark = pytest.mark.timeout(120, func_only=True)


@pytest.fixture(params=["sqlite", pytest.param("kafka", marks=pytest.mark.kafka)])
async def client(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Client]:
    if request.param == "kafka":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        make = request.getfixturevalue("kafka_topic_factory")
        topics = Topics(make("in"), make("dec"), make("snap"))
        url = f"kafka://{bootstrap}"
        settings = Settings(broker_url=url, kafka_bootstrap=bootstrap, input_topic=topics.input,
                            decisions_topic=topics.decisions, snapshots_topic=topics.snapshots)
    else:
        url = f"sqlite:///{tmp_path / 'client.db'}"
        settings = Settings(broker_url=url)
    async with Client(url, settings=settings) as qf:
        yield qf


async def inputs(qf: Client) -> list[dict[str, Any]]:
    return [json.loads(r.value or b"") for r in await qf.log.read_all(qf.topics.input)]


async def decided(qf: Client) -> list[Decision]:
    """What the engine decides for the input log as it is (what the agent would append)."""
    engine = Engine()
    return [d for r in await qf.log.read_all(qf.topics.input) for d in engine.apply(r.value or b"", r.offset)]


def of(decisions: list[Decision], offset: int) -> list[tuple[str, str | None]]:
    return [(type(d).__name__, d.workload) for d in decisions if d.cause.offset == offset]


async def test_stop_queue_reapplies_the_queue_with_only_its_stop_policy_changed(client: Client) -> None:
    qf = client
    for obj in (FLAVOR, CLUSTER_QUEUE, LOCAL_QUEUE):
        await qf.apply(obj)
    await qf.submit(workload("one"))

    drained = await qf.stop_queue("clusterqueue", "team-a-cq")  # kueuectl stop: HoldAndDrain
    held_lq = await qf.stop_queue("lq", "team-a", "team-a", policy="Hold")
    events = await inputs(qf)
    cq = events[drained]["object"]
    assert events[drained]["type"] == "ConfigApplied"
    assert cq["spec"].pop("stopPolicy") == "HoldAndDrain"
    assert cq == CLUSTER_QUEUE
    lq = events[held_lq]["object"]
    assert lq["spec"].pop("stopPolicy") == "Hold" and lq == LOCAL_QUEUE

    decisions = await decided(qf)
    assert of(decisions, 3) == [("Admitted", "team-a/one")]
    assert ("Evicted", "team-a/one") in of(decisions, drained)

    resumed = await qf.stop_queue("ClusterQueue", "team-a-cq", policy="None")
    assert (await inputs(qf))[resumed]["object"]["spec"]["stopPolicy"] == "None"
    await qf.stop_queue("LocalQueue", "team-a", "team-a", policy="None")
    await qf.release("team-a", "one")
    after = await decided(qf)
    after_resume = [(type(d).__name__, d.workload) for d in after if d.cause.offset > resumed]
    assert ("Admitted", "team-a/one") in after_resume, "the resumed queue admits the released workload again"

    with pytest.raises(LookupError, match="clusterqueue/nope is not in the input log"):
        await qf.stop_queue("ClusterQueue", "nope")
    with pytest.raises(LookupError, match="localqueue/other/team-a"):
        await qf.stop_queue("LocalQueue", "team-a", "other")


async def test_update_workload_merges_the_change_into_the_last_submitted_spec(client: Client) -> None:
    qf = client
    for obj in (FLAVOR, CLUSTER_QUEUE, LOCAL_QUEUE):
        await qf.apply(obj)
    submitted = await qf.submit(workload("two", cpu="2", priority=5))

    priority = await qf.update_workload("team-a", "two", {"priority": 10})
    deactivated = await qf.update_workload("team-a", "two", {"active": False})
    events = await inputs(qf)
    assert events[priority]["type"] == events[deactivated]["type"] == "WorkloadUpdated"
    first = events[priority]["workload"]
    assert first["spec"]["priority"] == 10 and first["spec"]["podSets"] == workload("two", cpu="2")["spec"]["podSets"]
    second = events[deactivated]["workload"]["spec"]
    assert second["active"] is False and second["priority"] == 10, "each update starts from the latest one"

    decisions = await decided(qf)
    assert of(decisions, submitted) == [("Admitted", "team-a/two")]
    assert ("Evicted", "team-a/two") in of(decisions, deactivated)

    await qf.delete("Workload", "two", "team-a")
    with pytest.raises(LookupError, match="workload/team-a/two is not in the input log"):
        await qf.update_workload("team-a", "two", {"active": True})
