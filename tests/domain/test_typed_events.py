"""The typed fast path for workload events (domain/typed_events.py, read by
domain/typed_decoding.py) decides exactly what the
general path decides: the same event as bytes (typed first) and as text (general path only)
gives the same decisions, the same state, and the same decisions for what follows."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from domain import typed_decoding, typed_events
from domain.decisions import encode
from domain.engine import Engine
from domain.snapshot import dump

SETUP: list[dict[str, Any]] = [
    {"type": "ConfigApplied", "object": {"kind": "ResourceFlavor", "metadata": {"name": "default"}}},
    {"type": "ConfigApplied", "object": {"kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 100}},
    {
        "type": "ConfigApplied",
        "object": {
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {"name": "default", "resources": [
                                {"name": "cpu", "nominalQuota": 4}, {"name": "memory", "nominalQuota": "8Gi"},
                            ]}
                        ],
                    }
                ],
            },
        },
    },
    {"type": "ConfigApplied", "object": {"kind": "LocalQueue", "metadata": {"namespace": "ns", "name": "lq"},
                                         "spec": {"clusterQueue": "cq"}}},
    {"type": "ConfigApplied", "object": {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                         "metadata": {"name": "high"}, "value": 1000}},
]


def workload(name: str = "w", cpu: str = "1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"namespace": "ns", "name": name, "labels": {"b": "2", "a": "1"}},
        "spec": {
            "queueName": "lq",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}}],
            **spec,
        },
    }


# What follows the event under test: it reads the state the event left behind.
FOLLOW_UP: list[dict[str, Any]] = [
    {"type": "WorkloadSubmitted", "workload": workload("after-1", "3")},
    {"type": "WorkloadFinished", "namespace": "ns", "name": "w"},
    {"type": "WorkloadSubmitted", "workload": workload("after-2", "2")},
    {"type": "WorkloadDeleted", "namespace": "ns", "name": "w"},
    {"type": "WorkloadFinished", "namespace": "ns", "name": "after-1"},
]


def run(events: list[bytes], as_bytes: bool) -> tuple[list[list[bytes]], bytes]:
    engine = Engine()
    out = []
    for offset, event in enumerate(events):
        value: bytes | str = event
        if not as_bytes:
            try:
                value = event.decode()  # text takes the general path only
            except UnicodeDecodeError:
                pass  # not text: both runs read the same bytes
        out.append([encode(d) for d in engine.apply(value, offset)])
    return out, dump(engine)


def assert_same(events: list[bytes]) -> None:
    typed = run(events, as_bytes=True)
    general = run(events, as_bytes=False)
    assert typed == general


def with_event(event: bytes, prefix: list[dict[str, Any]] | None = None) -> list[bytes]:
    before = [json.dumps(e).encode() for e in SETUP + (prefix or [])]
    after = [json.dumps(e).encode() for e in FOLLOW_UP]
    return before + [event] + after


def submitted(wl: object, **extra: Any) -> bytes:
    return json.dumps({"type": "WorkloadSubmitted", "workload": wl, **extra}).encode()


def test_the_fast_path_reads_the_common_events() -> None:
    """Not a test of equality alone: the common events must actually take the typed path."""
    assert isinstance(typed_decoding.decode(submitted(workload())), typed_events.Submitted)
    # A whole Workload as the API server returns it still takes the typed path.
    full = {**workload(), "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "status": {}}
    full["metadata"] = {**full["metadata"], "resourceVersion": "1", "finalizers": ["f"], "annotations": {"a": "b"}}
    decoded = typed_decoding.decode(submitted(full))
    assert isinstance(decoded, typed_events.Submitted)
    assert typed_decoding.workload_spec(decoded.workload).name == "w"
    # An unknown field does not: the general path refuses it.
    assert typed_decoding.decode(submitted({**workload(), "frobnicate": True})) is None
    finished = json.dumps({"type": "WorkloadFinished", "namespace": "ns", "name": "w"}).encode()
    assert isinstance(typed_decoding.decode(finished), typed_events.Finished)
    assert typed_decoding.decode(json.dumps(SETUP[0]).encode()) is None


EDGE_CASES: list[bytes] = [
    submitted(workload()),
    submitted(workload(), id="e-1", time="2025-01-01T00:00:00.000001Z"),
    submitted(workload(), time="2025-01-01T00:00:00+02:00"),
    submitted(workload(), time="2025-01-01T00:00:00"),
    submitted(workload(), time="not a time"),
    submitted(workload(), time=5),
    submitted(workload(), id=5),
    submitted(workload(), id="setup-dup"),
    submitted(None),
    submitted("w"),
    submitted({}),
    submitted({**workload(), "kind": "Job"}),
    submitted({**workload(), "kind": None}),
    submitted({**workload(), "metadata": None}),
    submitted({**workload(), "metadata": {"name": ""}}),
    submitted({**workload(), "metadata": {"name": "x", "namespace": ""}}),
    submitted({**workload(), "metadata": {"name": "x", "namespace": 3}}),
    submitted({**workload(), "metadata": {"name": "x", "labels": {"a": 1}}}),
    submitted({**workload(), "metadata": {"name": "x", "labels": []}}),
    submitted({**workload(), "metadata": {"name": "x", "uid": "u-1", "creationTimestamp": "2024-12-31T23:00:00Z"}}),
    submitted({**workload(), "metadata": {"name": "x", "creationTimestamp": "yesterday"}}),
    submitted({**workload(), "metadata": {"name": "x", "creationTimestamp": 17}}),
    submitted({**workload(), "spec": None}),
    submitted(workload(priority=2**31)),
    submitted(workload(priority=-(2**31))),
    submitted(workload(priority=True)),
    submitted(workload(priority=1.5)),
    submitted(workload(priorityClassName="high")),
    submitted(workload(priorityClassName="missing")),
    submitted(workload(priorityClassName="")),
    submitted(workload(priorityClassRef={"name": "high"})),
    submitted(workload(priorityClassRef={"name": 5}, priorityClassName="high")),
    submitted(workload(priorityClassRef="high")),
    submitted(workload(active=False)),
    submitted(workload(active="yes")),
    submitted(workload(queueName=None)),
    submitted(workload(queueName="other")),
    submitted(workload(podSets=None)),
    submitted(workload(podSets=[])),
    submitted(workload(podSets={})),
    submitted(workload(podSets=[{"name": "BAD", "count": 1, "requests": {"cpu": "1"}}])),
    submitted(workload(podSets=[{"name": "main", "count": 1, "requests": {"cpu": "12Zi"}}])),
    submitted(workload(podSets=[{"name": "main", "count": 2, "minCount": 1, "requests": {"cpu": "3"}}])),
    submitted(workload(podSets=[{"name": "a", "count": 1, "requests": {"cpu": "1"}},
                                {"name": "a", "count": 1, "requests": {"cpu": "1"}}])),
    submitted(workload(podSets=[{"name": "main", "template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]}}}])),
    submitted(workload("w", "100")),
    # Strict decoding: versions, unknown fields, fields of the other version, fields not supported.
    submitted({**workload(), "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload"}),
    submitted({**workload(), "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "status": {"conditions": []}}),
    submitted({**workload(), "apiVersion": "kueue.x-k8s.io/v1alpha1"}),
    submitted({**workload(), "frobnicate": True}),
    submitted({**workload(), "metadata": {"name": "x", "namespace": "ns", "lables": {}}}),
    submitted({**workload(), "metadata": {"name": "x", "namespace": "ns", "resourceVersion": "5",
                                          "ownerReferences": [{"kind": "Job", "name": "x"}], "finalizers": ["f"]}}),
    submitted(workload(frobnicate=1)),
    submitted({**workload(priorityClassName="high"), "apiVersion": "kueue.x-k8s.io/v1beta2"}),
    submitted({**workload(priorityClassRef={"name": "high"}), "apiVersion": "kueue.x-k8s.io/v1beta1"}),
    submitted(workload(priorityClassName="high", priorityClassSource="kueue.x-k8s.io/workloadpriorityclass")),
    submitted(workload(priorityClassName="high", priorityClassSource="scheduling.k8s.io/priorityclass")),
    submitted(workload(priorityClassName="system-node-critical", priorityClassSource="scheduling.k8s.io/priorityclass")),
    submitted(workload(priorityClassName="high", priorityClassSource="elsewhere")),
    submitted(workload(priorityClassRef={"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"})),
    submitted(workload(priorityClassRef={"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "high"})),
    submitted(workload(priorityClassRef={"group": "scheduling.k8s.io", "kind": "WorkloadPriorityClass", "name": "x"})),
    submitted(workload(maximumExecutionTimeSeconds=60)),
    submitted(workload(maximumExecutionTimeSeconds=None)),
    submitted(workload(preemptionGates=[{"name": "g"}])),
    submitted({**workload(), "metadata": {"name": "x", "namespace": "ns",
                                          "labels": {"kueue.x-k8s.io/max-exec-time-seconds": "60"}}}),
    submitted(workload(podSets=[{"name": "main", "count": 1, "requests": {"cpu": "1"}, "topologyRequest": {}}])),
    submitted(workload(podSets=[{"name": "main", "count": 1, "requests": {"cpu": "1"}, "cuont": 1}])),
    submitted(workload(podSets=[{"name": "main", "template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}]}}}])),
    submitted(workload(podSets=[{"name": "main", "template": {"spec": {"priorityClassName": "missing", "containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}])),
    submitted(workload(podSets=[{"name": "main", "template": {"spec": {
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["1"]}]}]}}}}}}])),
    submitted(workload(podSets=[{"name": "main", "template": {"spec": {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["one"]}]}]}}}}}}])),
    b'{"type":"WorkloadSubmitted","workload":' + json.dumps(workload()).encode() + b',"type":"WorkloadFinished"}',
    b'{"workload":' + json.dumps(workload()).encode() + b',"type":"WorkloadSubmitted"}',
    b'{"type":"WorkloadSubmitted","workload":{"metadata":{"name":"a","name":"b","namespace":"ns"},'
    b'"spec":{"queueName":"lq","podSets":[{"count":1,"requests":{"cpu":"1"}}]}}}',
    json.dumps({"type": "WorkloadFinished", "namespace": "ns", "name": "w"}).encode(),
    json.dumps({"type": "WorkloadFinished", "namespace": "ns", "name": "nobody"}).encode(),
    json.dumps({"type": "WorkloadFinished", "name": "w"}).encode(),
    json.dumps({"type": "WorkloadFinished", "namespace": "", "name": "w"}).encode(),
    json.dumps({"type": "WorkloadFinished", "namespace": "ns"}).encode(),
    json.dumps({"type": "WorkloadFinished", "namespace": "ns", "name": 5}).encode(),
    json.dumps({"type": "WorkloadFinished", "namespace": "ns", "name": "w", "id": "setup-dup"}).encode(),
    json.dumps({"type": "WorkloadFinished", "namespace": "ns", "name": "w", "time": "bad"}).encode(),
    json.dumps({"type": "WorkloadDeleted", "namespace": "ns", "name": "w"}).encode(),
    json.dumps({"type": "WorkloadDeleted", "namespace": "ns", "name": "nobody"}).encode(),
    json.dumps({"type": "WorkloadDeleted", "namespace": "ns", "name": "w", "id": "d-1"}).encode(),
    json.dumps({"type": "WorkloadReleased", "namespace": "ns", "name": "w"}).encode(),
    json.dumps({"type": "WorkloadReleased", "namespace": "ns", "name": "w", "id": "r-1", "time": "2025-01-01T00:00:01Z"}).encode(),
    json.dumps({"type": "WorkloadReleased", "namespace": "ns", "name": "nobody"}).encode(),
    json.dumps({"type": "WorkloadReleased", "name": "w"}).encode(),
    json.dumps({"type": "WorkloadReleased", "namespace": "ns"}).encode(),
    json.dumps({"type": "WorkloadReleased", "namespace": "ns", "name": ["w"]}).encode(),
    json.dumps({"type": "WorkloadReleased", "namespace": "ns", "name": "w", "id": "setup-dup"}).encode(),
    b'{"type":"WorkloadFinished","namespace":"ns","name":"w"',
    b'\xff\xfe',
    b"[]",
]

# Before the event under test: a workload w admitted (so finishing and deleting it mean
# something), one finished, and an id already seen.
PREFIX: list[dict[str, Any]] = [
    {"type": "WorkloadSubmitted", "id": "setup-dup", "workload": workload("w")},
    {"type": "WorkloadSubmitted", "workload": workload("done")},
    {"type": "WorkloadFinished", "namespace": "ns", "name": "done"},
]


# The same, with w evicted and holding its quota until released: the ClusterQueue drains.
EVICTED: list[dict[str, Any]] = [
    *PREFIX,
    {**SETUP[2], "object": {**SETUP[2]["object"], "spec": {**SETUP[2]["object"]["spec"], "stopPolicy": "HoldAndDrain"}}},
]


def test_edge_cases_decide_as_the_general_path() -> None:
    for event in EDGE_CASES:
        assert_same(with_event(event, PREFIX))
        assert_same(with_event(event, EVICTED))
        assert_same(with_event(event))


def test_a_release_of_an_evicted_workload_takes_the_typed_path_and_releases_it() -> None:
    release = json.dumps({"type": "WorkloadReleased", "namespace": "ns", "name": "w"}).encode()
    assert isinstance(typed_decoding.decode(release), typed_events.Released)
    decided, _ = run(with_event(release, EVICTED), as_bytes=True)
    outcome = decided[len(SETUP) + len(EVICTED)]
    assert any(b'"QuotaReleased"' in d and b'"ns/w"' in d for d in outcome)


def test_edge_cases_include_both_paths_outcomes() -> None:
    """The cases above cover events the typed path decides and events it hands over."""
    kinds = {typed_decoding.decode(e) is None for e in EDGE_CASES}
    assert kinds == {True, False}


_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.text(max_size=6),
    st.sampled_from(["high", "lq", "ns", "2025-01-01T00:00:00Z", "Workload", "main", "kueue.x-k8s.io/v1beta1",
                     "kueue.x-k8s.io/v1beta2", "scheduling.k8s.io/priorityclass", "kueue.x-k8s.io/workloadpriorityclass"]),
    st.lists(st.integers(0, 3), max_size=2), st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
)
_paths = st.sampled_from([
    ("kind",), ("metadata", "name"), ("metadata", "namespace"), ("metadata", "labels"), ("metadata", "uid"),
    ("metadata", "creationTimestamp"), ("spec", "queueName"), ("spec", "priority"), ("spec", "priorityClassName"),
    ("spec", "priorityClassRef"), ("spec", "active"), ("spec", "podSets"), ("metadata",), ("spec",),
    ("apiVersion",), ("status",), ("frobnicate",), ("metadata", "ownerReferences"), ("metadata", "lables"),
    ("spec", "priorityClassSource"), ("spec", "priorityClassRef", "group"), ("spec", "priorityClassRef", "kind"),
    ("spec", "maximumExecutionTimeSeconds"), ("spec", "preemptionGates"), ("spec", "frobnicate"),
])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_paths, _values), min_size=1, max_size=3))
def test_mutated_submissions_decide_as_the_general_path(mutations: list[tuple[tuple[str, ...], Any]]) -> None:
    wl: dict[str, Any] = workload("x")
    for path, value in mutations:
        target = wl
        for key in path[:-1]:
            if not isinstance(target.get(key), dict):
                target[key] = {}
            target = target[key]
        target[path[-1]] = value
    assert_same(with_event(submitted(wl), PREFIX))


# -- Batch: its envelope typed, each inner event typed where it can be -------------------------


def batch(events: list[bytes], **extra: Any) -> bytes:
    fields = b"".join(b"," + json.dumps(k).encode() + b":" + json.dumps(v).encode() for k, v in extra.items())
    return b'{"type":"Batch","events":[' + b",".join(events) + b"]" + fields + b"}"


def _is_json(event: bytes) -> bool:
    try:
        json.loads(event)
    except ValueError:
        return False
    return True


# Every edge case that can stand inside a Batch (a JSON value), in one Batch and one by one.
INNER_CASES = [e for e in EDGE_CASES if _is_json(e)]
TIME = "2025-01-01T00:00:00Z"


def test_a_batch_of_workload_events_takes_the_typed_path() -> None:
    ev = typed_decoding.decode(batch([submitted(workload()), json.dumps(FOLLOW_UP[1]).encode()], id="b-1"))
    assert isinstance(ev, typed_events.Batch) and ev.events is not None and len(ev.events) == 2
    assert isinstance(typed_decoding.decode(ev.events[0]), typed_events.Submitted)


BATCH_CASES: list[bytes] = [
    batch(INNER_CASES),
    batch(INNER_CASES, id="b-1", time=TIME),
    batch(list(reversed(INNER_CASES)), time="2025-01-01T00:00:00+02:00"),
    *(batch([e], time=TIME) for e in INNER_CASES),
    batch([]),
    batch([], id="setup-dup"),
    batch([submitted(workload())], id="setup-dup"),
    batch([submitted(workload())], id=5),
    batch([submitted(workload())], time="not a time"),
    batch([submitted(workload())], time=5),
    batch([submitted(workload())], time=None, id=None),
    b'{"type":"Batch"}',
    b'{"type":"Batch","events":null}',
    b'{"type":"Batch","events":{}}',
    b'{"type":"Batch","events":"x"}',
    b'{"events":[' + submitted(workload()) + b'],"type":"Batch"}',
    b'{"type":"Batch","events":[],"events":[' + submitted(workload()) + b"]}",
    batch([b"3", b'"x"', b"null", b"[]", b"{}", submitted(workload())]),
    batch([batch([submitted(workload())]), submitted(workload("inner"))]),
    # ids within the Batch: repeated, equal to the Batch's own, seen before it
    batch([submitted(workload("a"), id="i-1"), submitted(workload("b"), id="i-1")], id="b-2"),
    batch([submitted(workload("a"), id="b-3")], id="b-3"),
    batch([submitted(workload("a"), id="setup-dup")]),
    # inner times: own, inherited, earlier than the Batch's, malformed
    batch([submitted(workload("a"), time="2025-01-02T00:00:00Z"), submitted(workload("b"))], time=TIME),
    batch([submitted(workload("a"), time="2024-01-01T00:00:00Z"), submitted(workload("b"))], time=TIME),
    batch([submitted(workload("a"), time="bad"), submitted(workload("b"))], time=TIME),
    # the general path's events among typed ones, in order
    batch([
        json.dumps({"type": "ConfigApplied", "object": {"kind": "LocalQueue", "metadata": {"namespace": "ns2", "name": "lq"},
                                                        "spec": {"clusterQueue": "cq"}}}).encode(),
        submitted({**workload("in-ns2"), "metadata": {"namespace": "ns2", "name": "in-ns2"}}),
        json.dumps({"type": "WorkloadFinished", "namespace": "ns", "name": "w"}).encode(),
        json.dumps({"type": "WorkloadReleased", "namespace": "ns", "name": "w"}).encode(),
        json.dumps({"type": "NoSuchEvent"}).encode(),
        submitted(workload("w")),
    ], time=TIME),
]


def test_batches_decide_as_the_general_path() -> None:
    for event in BATCH_CASES:
        assert_same(with_event(event, PREFIX))
        assert_same(with_event(event, EVICTED))
        assert_same(with_event(event))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(INNER_CASES), max_size=6),
    st.sampled_from([{}, {"id": "b-x"}, {"id": "setup-dup"}, {"time": TIME}, {"time": "bad"}, {"id": 1}]),
)
def test_random_batches_decide_as_the_general_path(inner: list[bytes], extra: dict[str, Any]) -> None:
    assert_same(with_event(batch(inner, **extra), PREFIX))
