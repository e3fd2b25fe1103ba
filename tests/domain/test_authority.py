"""Who may send what (domain/authority.py): an event's `source`, scoped ids and tenant limits."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from domain import reasons
from domain.decisions import Admitted, Applied, Decision, Pending, Rejected
from domain.engine import Engine

ADMIN = "admin"
TEAM_A = "tenant:team-a"
TEAM_B = "tenant:team-b"


def flavor() -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default"}}


def cluster_queue(cpu: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}
            ],
        },
    }


def local_queue(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": namespace},
        "spec": {"clusterQueue": "cq"},
    }


def configuration(**limits: Any) -> dict[str, Any]:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta1",
        "kind": "Configuration",
        "quotaflow": {"tenantLimits": limits},
    }


def workload(name: str, namespace: str, cpu: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]}}}]},
    }


def event(etype: str, source: str | None = None, **fields: Any) -> bytes:
    body: dict[str, Any] = {"type": etype, **fields}
    if source is not None:
        body["source"] = source
    return msgspec.json.encode(body)


class Log:
    """An engine fed records at consecutive offsets."""

    def __init__(self) -> None:
        self.engine = Engine()
        self.offset = 0

    def apply(self, record: bytes) -> list[Decision]:
        decisions = self.engine.apply(record, self.offset)
        self.offset += 1
        return decisions

    def setup(self, *namespaces: str, cpu: int = 2) -> None:
        for obj in [flavor(), cluster_queue(cpu), *(local_queue(ns) for ns in namespaces)]:
            assert all(isinstance(d, Applied) for d in self.apply(event("ConfigApplied", ADMIN, object=obj)))


def only_rejection(decisions: list[Decision]) -> Rejected:
    assert len(decisions) == 1, decisions
    d = decisions[0]
    assert isinstance(d, Rejected), d
    return d


@pytest.mark.parametrize(
    "record",
    [
        event("ConfigApplied", TEAM_A, object=cluster_queue(100_000)),
        event("ConfigDeleted", TEAM_A, kind="ClusterQueue", name="cq"),
        event("ConfigApplied", TEAM_A, object=configuration()),
        event("ConfigApplied", TEAM_A, object=local_queue("team-a")),
        event("AdmissionCheckStateChanged", TEAM_A, namespace="team-a", name="w", check="c", state="Ready"),
    ],
)
def test_a_tenant_topic_cannot_change_configuration(record: bytes) -> None:
    log = Log()
    log.setup("team-a")
    before = msgspec.json.encode(sorted(log.engine.state.objects))
    d = only_rejection(log.apply(record))
    assert d.reason == reasons.FORBIDDEN
    assert 'source "tenant:team-a" cannot' in d.message and "admin topic" in d.message
    assert msgspec.json.encode(sorted(log.engine.state.objects)) == before
    assert log.engine.state.cluster_queues["cq"].spec is not None


@pytest.mark.parametrize(
    ("record", "what"),
    [
        (event("WorkloadPodsReady", TEAM_A, namespace="team-b", name="b1"), "update pods readiness"),
        (event("WorkloadPodsReady", TEAM_A, namespace="team-b", name="b1", ready=False), "update pods readiness"),
        (event("Tick", TEAM_A, time="2030-01-01T00:00:00Z"), "append Ticks"),
    ],
)
def test_a_tenant_topic_cannot_report_pods_readiness_or_tick(record: bytes, what: str) -> None:
    log = Log()
    log.setup("team-a", "team-b")
    assert isinstance(log.apply(event("WorkloadSubmitted", "tenant:team-b", workload=workload("b1", "team-b")))[0], Admitted)
    d = only_rejection(log.apply(record))
    assert d.reason == reasons.FORBIDDEN
    assert f'source "tenant:team-a" cannot {what}' in d.message and "admin topic" in d.message


def test_a_raised_quota_from_a_tenant_admits_nothing_more() -> None:
    log = Log()
    log.setup("team-a", cpu=2)
    only_rejection(log.apply(event("ConfigApplied", TEAM_A, object=cluster_queue(100_000))))
    decisions = log.apply(event("WorkloadSubmitted", TEAM_A, workload=workload("big", "team-a", cpu=50)))
    assert [type(d) for d in decisions] == [Pending]


def test_a_tenant_cannot_touch_another_namespace() -> None:
    log = Log()
    log.setup("team-a", "team-b")
    assert isinstance(log.apply(event("WorkloadSubmitted", "tenant:team-b", workload=workload("b1", "team-b")))[0], Admitted)
    for record, verb, namespace in [
        (event("WorkloadSubmitted", TEAM_A, workload=workload("a1", "team-b")), "create", "team-b"),
        (event("WorkloadFinished", TEAM_A, namespace="team-b", name="b1"), "update", "team-b"),
        (event("WorkloadDeleted", TEAM_A, namespace="team-b", name="b1"), "delete", "team-b"),
        (event("WorkloadFinished", TEAM_A, name="b1"), "update", "default"),  # no namespace: "default"
    ]:
        d = only_rejection(log.apply(record))
        assert d.reason == reasons.FORBIDDEN
        assert f'source "tenant:team-a" cannot {verb} workloads in namespace "{namespace}"' in d.message
    assert log.engine.state.workloads["team-b/b1"].admission is not None


def test_a_tenant_runs_its_own_workloads() -> None:
    log = Log()
    log.setup("team-a")
    assert isinstance(log.apply(event("WorkloadSubmitted", TEAM_A, workload=workload("a1", "team-a")))[0], Admitted)
    assert not any(isinstance(d, Rejected) for d in log.apply(event("WorkloadFinished", TEAM_A, namespace="team-a", name="a1")))
    assert "team-a/a1" in log.engine.state.finished


def test_batch_events_are_held_to_the_batch_source_and_cannot_claim_another() -> None:
    log = Log()
    log.setup("team-a")
    inner = [
        {"type": "WorkloadSubmitted", "workload": workload("a1", "team-a")},
        {"type": "ConfigApplied", "object": cluster_queue(100)},
        {"type": "WorkloadSubmitted", "source": ADMIN, "workload": workload("a2", "team-a")},
    ]
    decisions = log.apply(event("Batch", TEAM_A, events=inner))
    rejected = {d.batchIndex: d for d in decisions if isinstance(d, Rejected)}
    assert sorted(rejected) == [1, 2]
    assert all(d.reason == reasons.FORBIDDEN for d in rejected.values())
    assert "differs from its Batch's source" in rejected[2].message
    assert "team-a/a1" in log.engine.state.workloads and "team-a/a2" not in log.engine.state.workloads


@pytest.mark.parametrize("source", [3, "tenant:", "tenant:Team_A", "root"])
def test_a_malformed_source_is_refused(source: object) -> None:
    d = only_rejection(Engine().apply(msgspec.json.encode({"type": "WorkloadFinished", "name": "w", "source": source}), 0))
    assert d.reason == reasons.MALFORMED_EVENT and d.message.startswith("WorkloadFinished: source:")


def test_ids_are_scoped_by_source() -> None:
    log = Log()
    log.setup("team-a", "team-b")
    # team-b squats the id team-a is about to use; team-a's event still applies.
    assert log.apply(event("WorkloadSubmitted", "tenant:team-b", id="next-1", workload=workload("b1", "team-b")))
    decisions = log.apply(event("WorkloadSubmitted", TEAM_A, id="next-1", workload=workload("a1", "team-a")))
    assert decisions and isinstance(decisions[0], Admitted)
    # ... while a retry from the same source is still a retry: no new outcome.
    assert log.apply(event("WorkloadSubmitted", TEAM_A, id="next-1", workload=workload("a1", "team-a"))) == []


def test_unsourced_events_keep_single_topic_behaviour() -> None:
    log = Log()
    for obj in [flavor(), cluster_queue(), local_queue("team-a")]:
        assert isinstance(log.apply(event("ConfigApplied", object=obj))[0], Applied)
    assert log.apply(event("WorkloadSubmitted", id="x", workload=workload("a1", "team-a")))
    assert log.apply(event("WorkloadSubmitted", id="x", workload=workload("a2", "team-a"))) == []


def test_pending_workloads_per_namespace_are_limited() -> None:
    log = Log()
    log.setup("team-a", "team-b", cpu=1)
    applied = log.apply(
        event("ConfigApplied", ADMIN, object=configuration(maxPendingWorkloads=5, namespaces={"team-a": {"maxPendingWorkloads": 2}}))
    )
    assert isinstance(applied[0], Applied)
    assert isinstance(log.apply(event("WorkloadSubmitted", TEAM_A, workload=workload("a0", "team-a")))[0], Admitted)
    for name in ("a1", "a2"):  # pending: the ClusterQueue is full
        assert isinstance(log.apply(event("WorkloadSubmitted", TEAM_A, workload=workload(name, "team-a")))[0], Pending)
    d = only_rejection(log.apply(event("WorkloadSubmitted", TEAM_A, workload=workload("a3", "team-a"))))
    assert d.reason == reasons.LIMIT_EXCEEDED
    assert d.message == (
        'WorkloadSubmitted: namespace "team-a" is at its tenantLimits maxPendingWorkloads of 2: 2 submitted and not admitted'
    )
    assert "team-a/a3" not in log.engine.state.workloads
    # another namespace has the default; unsourced submissions count too
    assert isinstance(log.apply(event("WorkloadSubmitted", workload=workload("b1", "team-b")))[0], Pending)
    # one admitted (a0 finishes, a1 takes its place): room for one more
    log.apply(event("WorkloadFinished", TEAM_A, namespace="team-a", name="a0"))
    assert isinstance(log.apply(event("WorkloadSubmitted", TEAM_A, workload=workload("a3", "team-a")))[0], Pending)


def test_event_size_per_tenant_is_limited() -> None:
    log = Log()
    log.setup("team-a")
    log.apply(event("ConfigApplied", ADMIN, object=configuration(maxEventBytes=600)))
    big = workload("a1", "team-a")
    big["metadata"]["labels"] = {"pad": "x" * 60}
    small = event("WorkloadSubmitted", TEAM_A, workload=workload("a0", "team-a"))
    assert len(small) <= 600 and isinstance(log.apply(small)[0], Admitted)
    record = event("WorkloadSubmitted", TEAM_A, workload={**big, "spec": {**big["spec"], "priorityClassName": "p" * 300}})
    d = only_rejection(log.apply(record))
    assert d.reason == reasons.LIMIT_EXCEEDED
    assert f"record is {len(record)} bytes, over tenantLimits maxEventBytes of 600 bytes" in d.message
    # the admin topic is not a tenant's: no limit on its size
    assert isinstance(log.apply(event("ConfigApplied", ADMIN, object={**cluster_queue(), "metadata": {"name": "cq", "labels": {"p": "y" * 60}}}))[0], Applied)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"maxPendingWorkloads": -1}, "object.quotaflow.tenantLimits.maxPendingWorkloads: must be greater than or equal to 0"),
        ({"maxEventBytes": 0}, "object.quotaflow.tenantLimits.maxEventBytes: must be greater than 0"),
        ({"namespaces": {"Bad_NS": {}}}, "not a namespace name"),
    ],
)
def test_invalid_tenant_limits_are_refused(limits: dict[str, Any], message: str) -> None:
    d = only_rejection(Engine().apply(event("ConfigApplied", object=configuration(**limits)), 0))
    assert d.reason == reasons.INVALID_OBJECT and message in d.message


def test_sourced_events_decide_as_the_replay_does() -> None:
    """The same input log, applied twice, decides byte for byte the same (the audit's check)."""
    records = [
        event("ConfigApplied", ADMIN, object=flavor()),
        event("ConfigApplied", ADMIN, object=cluster_queue()),
        event("ConfigApplied", ADMIN, object=local_queue("team-a")),
        event("ConfigApplied", TEAM_A, object=cluster_queue(9)),
        event("WorkloadSubmitted", TEAM_A, id="1", workload=workload("a1", "team-a")),
        event("WorkloadSubmitted", "tenant:team-b", id="1", workload=workload("b1", "team-a")),
    ]
    from domain.decisions import encode

    def run() -> list[bytes]:
        engine = Engine()
        return [encode(d) for i, r in enumerate(records) for d in engine.apply(r, i)]

    assert run() == run()


def test_a_tenants_own_time_is_not_the_logs() -> None:
    """A tenant asserting a time far ahead would fire every workload's timers (here: another
    team's maximum execution time) and move the clock; its event has its record's log time."""
    log = Log()
    log.setup("team-a", "team-b", cpu=4)
    t0 = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z, µs
    limited = workload("limited", "team-b")
    limited["spec"]["maximumExecutionTimeSeconds"] = 600
    admitted = log.engine.apply(event("WorkloadSubmitted", TEAM_B, workload=limited), log.offset, t0)
    log.offset += 1
    assert [type(d) for d in admitted] == [Admitted]
    far_ahead = event("WorkloadSubmitted", TEAM_A, workload=workload("early", "team-a"), time="2026-01-02T00:00:00Z")
    decided = log.engine.apply(far_ahead, log.offset, t0 + 1_000_000)
    log.offset += 1
    assert [(type(d).__name__, d.workload) for d in decided] == [("Admitted", "team-a/early")]
    assert log.engine.state.clock == t0 + 1_000_000
    # The admin's time is trusted (it may change anything anyway): the timer fires.
    fired = log.engine.apply(event("Tick", ADMIN, time="2026-01-01T00:10:00Z"), log.offset)
    assert [(type(d).__name__, d.workload) for d in fired][0] == ("Evicted", "team-b/limited")
    # A malformed time is still refused, not ignored.
    bad = only_rejection(log.engine.apply(
        event("WorkloadSubmitted", TEAM_A, workload=workload("bad-time", "team-a"), time="yesterday"), log.offset + 1, t0))
    assert "time" in bad.message
