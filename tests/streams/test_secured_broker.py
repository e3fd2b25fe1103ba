"""Who may change what, on a real Kafka broker with SASL/SCRAM-SHA-512 logins and Kafka's
StandardAuthorizer (KRaft): the broker's ACLs keep each principal to its topics, and the
sequencer (streams/sequencer/) records each event's source, which the engine holds it to.

One broker for the module (devtools/local_broker.py, secured), with the principals an
installation has: `admin` (writes the admin topic), `tenant-a` and `tenant-b` (each writes its
namespace's tenant topic), and `agent` (the sequencer and the agent); `broker` is the super
user that creates topics and ACLs.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_harness import AgentProcess, _die_with_parent
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAuthorizationFailedError
from aiokafka.structs import TopicPartition
from kafka_fixtures import kafka_required

from devtools.local_broker import (
    Acl,
    LocalBroker,
    LocalBrokerError,
    create_acls,
    start_broker,
    stop_broker,
)
from streams.log import Topics

pytestmark = pytest.mark.kafka

PASSWORDS = {"broker": "broker-secret", "admin": "admin-secret", "tenant-a": "a-secret", "tenant-b": "b-secret", "agent": "agent-secret"}
ADMIN_TOPIC = "quotaflow.admin"
TENANT_A = "quotaflow.tenant.team-a"
TENANT_B = "quotaflow.tenant.team-b"
TOPICS = Topics("quotaflow.events", "quotaflow.decisions", "quotaflow.snapshots")


def acls() -> list[Acl]:
    write = ("WRITE", "DESCRIBE")
    return [
        *(Acl("User:admin", "TOPIC", "LITERAL", ADMIN_TOPIC, op) for op in write),
        # LITERAL, not PREFIXED: "quotaflow.tenant.team-a" as a prefix also names team-ab's topic.
        *(Acl("User:tenant-a", "TOPIC", "LITERAL", TENANT_A, op) for op in write),
        *(Acl("User:tenant-b", "TOPIC", "LITERAL", TENANT_B, op) for op in write),
        # seeing that the installation's topics exist (the CLI checks before it writes)
        *(Acl(f"User:{t}", "TOPIC", "PREFIXED", "quotaflow.", "DESCRIBE") for t in ("tenant-a", "tenant-b")),
        Acl("User:agent", "TOPIC", "PREFIXED", "quotaflow.", "ALL"),
        Acl("User:agent", "GROUP", "LITERAL", "*", "ALL"),
        Acl("User:agent", "TRANSACTIONAL_ID", "LITERAL", "*", "ALL"),
    ]


def client(broker: LocalBroker, user: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": broker.bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": user,
        "sasl_plain_password": PASSWORDS[user],
    }


def env_for(user: str) -> dict[str, str]:
    return {
        "QUOTAFLOW_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "QUOTAFLOW_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "QUOTAFLOW_KAFKA_SASL_USERNAME": user,
        "QUOTAFLOW_KAFKA_SASL_PASSWORD": PASSWORDS[user],
    }


async def _create_topics(broker: LocalBroker) -> None:
    admin = AIOKafkaAdminClient(**client(broker, "broker"))
    await admin.start()
    try:
        names = [ADMIN_TOPIC, TENANT_A, TENANT_B, TOPICS.input, TOPICS.decisions]
        compacted = NewTopic(TOPICS.snapshots, 1, 1, topic_configs={"cleanup.policy": "compact"})
        await admin.create_topics([*(NewTopic(n, 1, 1) for n in names), compacted])
    finally:
        await admin.close()


@pytest.fixture(scope="module")
def secured() -> Iterator[LocalBroker]:
    try:
        broker = start_broker(owner_pid=os.getpid(), scram_users=PASSWORDS)
    except LocalBrokerError as exc:
        if kafka_required():
            raise
        pytest.skip(f"no secured local broker: {exc}")
    try:
        create_acls(broker, ("broker", PASSWORDS["broker"]), acls())
        asyncio.run(_create_topics(broker))
        yield broker
    finally:
        stop_broker(broker)


async def produce(broker: LocalBroker, user: str, topic: str, events: list[dict[str, Any]]) -> None:
    producer = AIOKafkaProducer(**client(broker, user), enable_idempotence=True)
    await producer.start()
    try:
        for event in events:
            await producer.send_and_wait(topic, json.dumps(event).encode(), partition=0)
    finally:
        await producer.stop()


async def read_all(broker: LocalBroker, topic: str, user: str = "agent") -> list[bytes]:
    consumer = AIOKafkaConsumer(**client(broker, user), isolation_level="read_committed", enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        values: list[bytes] = []
        while await consumer.position(tp) < end:
            for records in (await consumer.getmany(tp, timeout_ms=500)).values():
                values.extend(r.value for r in records)
        return values
    finally:
        await consumer.stop()


def sequencer(broker: LocalBroker, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "streams.cli.main", "sequence", "--broker", f"kafka://{broker.bootstrap}"],
            env={**os.environ, **env_for("agent"), "QUOTAFLOW_INPUT_TOPIC": TOPICS.input},
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
    proc.wait(20)


async def wait_until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "streams.cli.main", *args], env=env, capture_output=True, timeout=120, check=False)


def workload(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
    }


def cluster_queue(cpu: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}],
        },
    }


def configuration() -> list[dict[str, Any]]:
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default"}}
    queues = [
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": ns}, "spec": {"clusterQueue": "cq"}}
        for ns in ("team-a", "team-b")
    ]
    return [{"type": "ConfigApplied", "object": obj} for obj in [flavor, cluster_queue(2), *queues]]


@pytest.mark.parametrize(
    ("user", "topic"),
    [("tenant-a", ADMIN_TOPIC), ("tenant-a", TENANT_B), ("tenant-b", TENANT_A), ("tenant-a", TOPICS.input), ("admin", TENANT_A)],
)
def test_the_broker_refuses_a_write_outside_the_principals_topic(secured: LocalBroker, user: str, topic: str) -> None:
    event = {"type": "ConfigApplied", "object": cluster_queue(100_000)}
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(produce(secured, user, topic, [event]))


def test_tenant_events_are_held_to_their_source_and_the_decisions_replay(secured: LocalBroker, tmp_path: Path) -> None:
    seq = sequencer(secured, tmp_path / "sequencer.log")
    agent = AgentProcess(f"kafka://{secured.bootstrap}", TOPICS, tmp_path / "agent.log", env=env_for("agent"))
    agent.start()
    try:

        async def scenario() -> list[dict[str, Any]]:
            await produce(secured, "admin", ADMIN_TOPIC, configuration())

            async def configured() -> bool:  # so the tenants' events are a later transaction
                return len(await read_all(secured, TOPICS.input)) >= 4

            await wait_until(configured, 60, "the configuration sequenced")
            await produce(secured, "tenant-a", TENANT_A, [{"type": "ConfigApplied", "id": "raise", "object": cluster_queue(100_000)}])
            await produce(secured, "tenant-a", TENANT_A, [{"type": "WorkloadSubmitted", "id": "w1", "workload": workload("a1", "team-b")}])
            # the CLI, pointed at the tenant's topic with the tenant's credentials
            job = tmp_path / "a2.yaml"
            job.write_text(json.dumps(workload("a2", "team-a")))
            tenant_env = {**os.environ, **env_for("tenant-a"), "QUOTAFLOW_INPUT_TOPIC": TENANT_A, "QUOTAFLOW_DECISIONS_TOPIC": TOPICS.decisions, "QUOTAFLOW_SNAPSHOTS_TOPIC": TOPICS.snapshots}
            submitted = cli(["submit", "-f", str(job), "--no-wait", "--broker", f"kafka://{secured.bootstrap}"], tenant_env)
            assert submitted.returncode == 0, submitted.stderr.decode()
            # a producer's own `source` claim is overwritten by the sequencer
            await produce(secured, "tenant-b", TENANT_B, [{"type": "ConfigDeleted", "source": "admin", "kind": "ClusterQueue", "name": "cq"}])

            async def decided() -> list[dict[str, Any]] | None:
                values = [json.loads(v) for v in await read_all(secured, TOPICS.decisions)]
                return values if len(values) >= 8 else None

            return await wait_until(decided, 90, "8 decisions")

        decisions = asyncio.run(scenario())
        inputs = [json.loads(v) for v in asyncio.run(read_all(secured, TOPICS.input))]
        assert [e["source"] for e in inputs] == ["admin"] * 4 + ["tenant:team-a"] * 3 + ["tenant:team-b"]
        by_offset: dict[int, list[dict[str, Any]]] = {}
        for d in decisions:
            by_offset.setdefault(d["cause"]["offset"], []).append(d)
        outcomes = [[(d["type"], d.get("reason")) for d in by_offset[o]] for o in sorted(by_offset)]
        assert outcomes[:4] == [[("Applied", None)]] * 4
        assert outcomes[4:] == [
            [("Rejected", "Forbidden")],
            [("Rejected", "Forbidden")],
            [("Admitted", None)],
            [("Rejected", "Forbidden")],
        ], outcomes
        rejected = [d for d in decisions if d["type"] == "Rejected"]
        assert 'source "tenant:team-a" cannot apply ClusterQueue' in rejected[0]["message"]
        assert 'source "tenant:team-a" cannot create workloads in namespace "team-b"' in rejected[1]["message"]
        assert 'source "tenant:team-b" cannot delete ClusterQueue' in rejected[2]["message"]
        # the decision log is what a replay of the input log decides, byte for byte: `audit`
        # says so, and so does `replay` of an `export` (the sequencer's transaction markers
        # leave offsets without a record, which the export keeps as gaps)
        env = {**os.environ, **env_for("agent"), "QUOTAFLOW_INPUT_TOPIC": TOPICS.input, "QUOTAFLOW_DECISIONS_TOPIC": TOPICS.decisions}
        broker = ["--broker", f"kafka://{secured.bootstrap}"]
        audit = cli(["audit", *broker], env)
        assert audit.returncode == 0, audit.stdout.decode() + audit.stderr.decode()
        exported = tmp_path / "input.jsonl"
        assert cli(["export", "-o", str(exported), *broker], env).returncode == 0
        assert b'{"quotaflow.gap":' in exported.read_bytes()
        replayed = cli(["replay", str(exported)], env)
        assert replayed.returncode == 0, replayed.stderr.decode()
        assert replayed.stdout.splitlines() == asyncio.run(read_all(secured, TOPICS.decisions))
    finally:
        agent.stop()
        stop(seq)


def test_the_sequencer_survives_sigkill_with_nothing_lost_or_doubled(secured: LocalBroker, tmp_path: Path) -> None:
    before = len(asyncio.run(read_all(secured, TOPICS.input)))
    events = [{"type": "WorkloadFinished", "id": f"k{i}", "namespace": "team-b", "name": f"w{i}"} for i in range(600)]
    log = tmp_path / "sequencer.log"
    kills = 0

    async def sequenced_so_far() -> int:
        return len(await read_all(secured, TOPICS.input)) - before

    seq = sequencer(secured, log)
    try:
        for chunk in range(3):
            asyncio.run(produce(secured, "tenant-b", TENANT_B, events[chunk * 200 : (chunk + 1) * 200]))
            # kill it as soon as it has moved some of this chunk, mid-stream when it can be

            async def moved_some(done: int = chunk * 200) -> bool:
                return await sequenced_so_far() > done

            asyncio.run(wait_until(moved_some, 60, "the sequencer to move records"))
            stop(seq, signal.SIGKILL)
            kills += 1
            seq = sequencer(secured, log)

        async def all_in() -> bool:
            return await sequenced_so_far() >= len(events)

        asyncio.run(wait_until(all_in, 90, "every record sequenced"))
        time.sleep(1.0)  # anything doubled would land by now
    finally:
        stop(seq)
    got = [json.loads(v) for v in asyncio.run(read_all(secured, TOPICS.input))[before:]]
    assert kills == 3
    assert [e["id"] for e in got] == [e["id"] for e in events]
    assert {e["source"] for e in got} == {"tenant:team-b"}
