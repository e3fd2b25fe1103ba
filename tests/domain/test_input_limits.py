"""Records over the size, depth or Batch-count limits are Rejected whole, never a traceback."""

from __future__ import annotations

import pytest

from domain import limits, reasons
from domain.decisions import Rejected
from domain.engine import Engine

DEEP = [
    b"[" * 1000 + b"]" * 1000,
    b'{"a":' * 1000 + b"1" + b"}" * 1000,
    b'{"type":"Batch","events":[' + b"[" * 1000 + b"]" * 1000 + b"]}",
    b'{"type":"Batch","events":[{"type":"WorkloadFinished","name":' + b"[" * 70 + b"]" * 70 + b"}]}",
]


@pytest.mark.parametrize("record", DEEP)
def test_deep_records_are_rejected_before_decoding(record: bytes) -> None:
    decisions = Engine().apply(record, 7)
    assert len(decisions) == 1
    d = decisions[0]
    assert isinstance(d, Rejected)
    assert d.reason == reasons.LIMIT_EXCEEDED
    assert d.cause.offset == 7 and "offset 7" in d.message and f"{limits.MAX_DEPTH} deep" in d.message


def test_deep_record_as_text_and_as_decoded_value() -> None:
    assert isinstance(Engine().apply("[" * 1000 + "]" * 1000, 0)[0], Rejected)
    value: object = 1
    for _ in range(200):
        value = {"a": value}
    d = Engine().apply({"type": "Batch", "events": [value]}, 0)[0]
    assert isinstance(d, Rejected) and d.reason == reasons.LIMIT_EXCEEDED


def test_a_self_referencing_value_is_rejected() -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    d = Engine().apply({"type": "Batch", "events": cyclic}, 0)[0]
    assert isinstance(d, Rejected) and d.reason == reasons.LIMIT_EXCEEDED


def test_depth_at_the_limit_is_read_and_brackets_in_strings_do_not_count() -> None:
    at_limit = b"[" * limits.MAX_DEPTH + b"]" * limits.MAX_DEPTH
    assert limits.record_error(at_limit) is None
    assert limits.record_error(b"[" + at_limit + b"]") is not None
    assert limits.record_error(b'{"s":"' + b"[" * 500 + b'\\"{{{"}') is None
    assert limits.record_error(b"[" * 60 + b"}") is None  # unbalanced: the decoder says why
    # ... unless what it leaves open would still make the decoder recurse too deep
    assert limits.record_error(b"[" * 2000) is not None
    assert limits.record_error(b"[" * 1000 + at_limit) is not None


def test_oversized_record_is_rejected() -> None:
    record = b'{"type":"WorkloadFinished","name":"' + b"x" * limits.MAX_RECORD_BYTES + b'"}'
    d = Engine().apply(record, 3)[0]
    assert isinstance(d, Rejected) and d.reason == reasons.LIMIT_EXCEEDED
    assert str(limits.MAX_RECORD_BYTES) in d.message and d.workload is None


def test_batch_over_the_event_limit_is_rejected() -> None:
    record = b'{"type":"Batch","events":[' + b",".join([b"{}"] * (limits.MAX_BATCH_EVENTS + 1)) + b"]}"
    decisions = Engine().apply(record, 0)
    assert len(decisions) == 1 and isinstance(decisions[0], Rejected)
    assert decisions[0].reason == reasons.LIMIT_EXCEEDED


@pytest.mark.parametrize("record", [b'{"type":"Batch"}', b'{"type":"Batch","events":null}', b'{"type":"Batch","events":3}'])
def test_batch_without_events_is_rejected(record: bytes) -> None:
    decisions = Engine().apply(record, 0)
    assert len(decisions) == 1 and isinstance(decisions[0], Rejected)
    assert decisions[0].reason == reasons.MALFORMED_EVENT


def test_a_number_out_of_range_in_pod_sets_is_rejected() -> None:
    record = (
        b'{"type":"WorkloadSubmitted","workload":{"metadata":{"name":"w"},"spec":{"queueName":"lq",'
        b'"podSets":[{"name":"main","count":1,"requests":{"cpu":1e400}}]}}}'
    )
    decisions = Engine().apply(record, 0)
    assert len(decisions) == 1 and isinstance(decisions[0], Rejected)
    assert decisions[0].reason == reasons.MALFORMED_EVENT
