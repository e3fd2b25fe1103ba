"""No input stops the engine, and garbage in the log changes nothing for the valid events around it.

A valid stream is replayed alone and again with garbage records interleaved: mutations of its own
events (wrong types, names Kubernetes refuses, quantities out of range, pod sets changed by an
update, a Cohort its own parent, a Batch in a Batch) and raw bytes (deep nesting, oversized
records, numbers like 1e400, arbitrary text). Through the engine: no exception, every record
gets at least one decision caused by its offset, and every valid event is decided exactly as
without the garbage, once offsets are mapped back.
"""

from __future__ import annotations

import json
from typing import Any

from fuzz_inputs import mutation, raw_garbage, stream_strategy
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from domain.decisions import Cause, Decision, InternalError, Rejected, encode
from domain.engine import Engine


def run(records: list[bytes]) -> list[Decision]:
    engine = Engine()
    out: list[Decision] = []
    for offset, record in enumerate(records):
        out.extend(engine.apply(record, offset))
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), stream=stream_strategy())
def test_garbage_changes_nothing_for_the_valid_events(data: st.DataObject, stream: list[dict[str, Any]]) -> None:
    valid = [json.dumps(e).encode() for e in stream]
    garbage_at = sorted(data.draw(st.lists(st.integers(0, len(valid)), min_size=1, max_size=6)))
    records: list[bytes] = []
    original: dict[int, int] = {}  # offset in the mixed log -> offset in the valid stream
    garbage: list[int] = []
    raw: set[int] = set()  # garbage that is not even an event: always Rejected
    g = 0
    for i in range(len(valid) + 1):
        while g < len(garbage_at) and garbage_at[g] == i:
            if data.draw(st.booleans()):
                raw.add(len(records))
                records.append(data.draw(raw_garbage()))
            else:
                records.append(data.draw(mutation(stream)))
            garbage.append(len(records) - 1)
            g += 1
        if i < len(valid):
            original[len(records)] = i
            records.append(valid[i])

    mixed = run(records)
    failures = [(records[d.cause.offset][:300], d) for d in mixed if isinstance(d, InternalError)]
    assert not failures
    rejected = {d.cause.offset for d in mixed if isinstance(d, Rejected)}
    assert rejected >= raw, "a raw garbage record got no Rejected decision"
    # A mutation can still be a valid event (a huge but well-formed quantity, say), decided
    # otherwise than Rejected: then there is nothing to compare.
    garbage_decisions = [d for d in mixed if d.cause.offset in set(garbage)]
    if not rejected >= set(garbage) or not all(isinstance(d, Rejected) for d in garbage_decisions):
        event("a mutation was still a valid event: not compared")
        return
    event("compared")
    alone = [encode(d) for d in run(valid)]
    remapped = [
        encode(_with_cause(d, Cause(original[d.cause.offset], d.cause.index)))
        for d in mixed
        if d.cause.offset in original
    ]
    assert remapped == alone


def _with_cause(decision: Decision, cause: Cause) -> Decision:
    import msgspec

    return msgspec.structs.replace(decision, cause=cause)
