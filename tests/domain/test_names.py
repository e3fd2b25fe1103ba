"""Kubernetes' name and label rules, and that no refused name makes a large decision."""

from __future__ import annotations

import json

import pytest

from domain import decisions, names, reasons
from domain.decisions import Rejected
from domain.engine import Engine


def submit(name: str, namespace: str = "default", labels: dict[str, str] | None = None) -> bytes:
    meta: dict[str, object] = {"name": name, "namespace": namespace}
    if labels is not None:
        meta["labels"] = labels
    spec = {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "1"}}]}
    return json.dumps({"type": "WorkloadSubmitted", "workload": {"metadata": meta, "spec": spec}}).encode()


@pytest.mark.parametrize("name", ["UPPER", "a_b", "x\u0000y", "-lead", "lead-", "../../etc/passwd", "\U0001f600", "a" * 254, "a\n", ""])
def test_invalid_subdomains(name: str) -> None:
    assert names.subdomain_problem(name) is not None


@pytest.mark.parametrize("name", ["a", "a-b", "a.b-c", "0", "a" * 253, "my.team-1.example.com"])
def test_valid_subdomains(name: str) -> None:
    assert names.subdomain_problem(name) is None


def test_labels() -> None:
    assert names.label_problem("a.b") is not None and names.label_problem("a" * 64) is not None
    assert names.label_key_problem("example.com/Team_1.x") is None
    assert names.label_key_problem("Example.com/x") is not None
    assert names.label_key_problem("/x") is not None and names.label_key_problem("x/") is not None
    assert names.label_value_problem("") is None and names.label_value_problem("A-b_c.9") is None
    assert names.label_value_problem("v" * 64) is not None and names.label_value_problem("-x") is not None


def test_the_api_servers_message() -> None:
    d = Engine().apply(submit("Bad_Name"), 0)[0]
    assert isinstance(d, Rejected) and d.reason == reasons.INVALID_WORKLOAD and d.workload is None
    assert d.message.startswith(
        'WorkloadSubmitted: workload.metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain '
        "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
        "alphanumeric character"
    )


@pytest.mark.parametrize(
    "event",
    [
        submit("w" * 350_000),
        submit("w", labels={"team": "v" * 1_000_000}),
        submit("w", namespace="n" * 350_000),
        json.dumps({"type": "WorkloadFinished", "name": "w" * 350_000}).encode(),
        json.dumps({"type": "WorkloadDeleted", "namespace": "N" * 350_000, "name": "w"}).encode(),
        json.dumps({"type": "ConfigDeleted", "kind": "ClusterQueue", "name": "c" * 350_000}).encode(),
        json.dumps({"type": "ConfigDeleted", "kind": "K" * 350_000, "name": "c"}).encode(),
        json.dumps({"type": "T" * 350_000}).encode(),
    ],
)
def test_huge_names_make_small_rejections(event: bytes) -> None:
    out = Engine().apply(event, 0)
    assert len(out) == 1 and isinstance(out[0], Rejected)
    assert len(decisions.encode(out[0])) < 2000


def test_a_huge_annotation_is_rejected_on_both_paths() -> None:
    event = json.loads(submit("w"))
    event["workload"]["metadata"]["annotations"] = {"a": "x" * (names.ANNOTATIONS_MAX + 1)}
    for raw in (json.dumps(event).encode(), event):
        d = Engine().apply(raw, 0)[0]
        assert isinstance(d, Rejected) and "metadata.annotations: Too long" in d.message


def test_a_local_queue_deletion_names_a_valid_namespace() -> None:
    event = {"type": "ConfigDeleted", "kind": "LocalQueue", "namespace": "Bad_NS", "name": "lq"}
    d = Engine().apply(json.dumps(event).encode(), 0)[0]
    assert isinstance(d, Rejected) and d.reason == reasons.MALFORMED_EVENT
    assert d.message.startswith('ConfigDeleted: namespace: Invalid value: "Bad_NS": a lowercase RFC 1123 label')
    assert d.namespace is None
