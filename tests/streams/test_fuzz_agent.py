"""No input stops the agent, on either log, and garbage changes nothing for the valid events.

The engine's fuzz test (tests/domain/test_fuzz_input.py) with the real agent around the engine:
hypothesis-generated garbage (tests/fuzz_inputs.py: structured mutations of valid events and raw
bytes) interleaved with a valid stream is appended to a fresh input log, SQLite or Kafka, and
`streams.agent.loop.Agent` (its engine in a child process, as `quotaflow agent` runs it) folds it
into the decision log. Then:

- no crash: the agent decides up to the last record and stops cleanly; no hang: within a bound;
- every input record has an outcome: a decision whose cause offset is the record's (configuration
  events too: `Applied`);
- no `InternalError` decision;
- the decision log is byte for byte the in-process engine's on the same records (what
  `quotaflow replay` prints), and the decisions of the valid events, their causes mapped back to
  the valid stream's offsets, are exactly those of the valid events replayed alone.

A mutation that is still a valid event (a huge but well-formed quantity, say) would change what
the valid events decide; such records are left out of the log before it is written, so every
garbage record in it is one the engine rejects.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
from agent_harness import as_message
from event_streams import random_stream
from fuzz_inputs import mutation, raw_garbage, stream_strategy
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from domain.decisions import Cause, Decision, InternalError, Rejected, decode, encode
from domain.engine import Engine
from streams.agent.loop import Agent, AgentConfig
from streams.log import EventLog, Message, Topics

pytestmark = pytest.mark.timeout(300, func_only=True)

# A Kafka broker refuses records over its message.max.bytes (about 1 MB by default) before the
# engine could see them: the garbage stays under it on both logs, so both get the same records.
MAX_GARBAGE_BYTES = 900_000
# Each example starts an agent and its engine process: a handful per log in CI (profile `ci`,
# derandomized), more where someone runs it on purpose.
EXAMPLES = 8
def engine_decisions(records: list[bytes]) -> list[Decision]:
    engine = Engine()
    return [d for offset, record in enumerate(records) for d in engine.apply(record, offset)]


def only_rejected_garbage(records: list[bytes], garbage: set[int]) -> tuple[list[bytes], set[int]]:
    """The records without the garbage the engine does not reject outright (a mutation that is
    still a valid event), re-checked until every garbage record left is Rejected and nothing else."""
    while True:
        by_offset: dict[int, list[Decision]] = {}
        for d in engine_decisions(records):
            by_offset.setdefault(d.cause.offset, []).append(d)
        accepted = {g for g in garbage if not by_offset.get(g) or not all(isinstance(d, Rejected) for d in by_offset[g])}
        if not accepted:
            return records, garbage
        kept = [i for i in range(len(records)) if i not in accepted]
        records = [records[i] for i in kept]
        garbage = {kept.index(g) for g in garbage - accepted}


@st.composite
def mixed_logs(draw: st.DrawFn) -> tuple[list[bytes], list[bytes], set[int]]:
    """(records of the input log, the valid events alone, offsets of the garbage records)."""
    stream = draw(stream_strategy())
    valid = [json.dumps(e).encode() for e in stream]
    at = sorted(draw(st.lists(st.integers(0, len(valid)), min_size=1, max_size=8)))
    records: list[bytes] = []
    garbage: set[int] = set()
    place = iter(at)
    nxt = next(place, None)
    for i in range(len(valid) + 1):
        while nxt == i:
            garbage.add(len(records))
            records.append(draw(st.one_of(raw_garbage(MAX_GARBAGE_BYTES), mutation(stream, MAX_GARBAGE_BYTES))))
            nxt = next(place, None)
        if i < len(valid):
            records.append(valid[i])
    records, garbage = only_rejected_garbage(records, garbage)
    return records, valid, garbage


async def run_agent(log: EventLog, topics: Topics, records: list[bytes], garbage: set[int]) -> list[bytes]:
    """Append the records, let an agent decide them all, stop it; the decision log's values."""
    messages = [Message(r) if i in garbage else as_message(r) for i, r in enumerate(records)]
    offsets = await log.append(topics.input, messages)
    assert offsets == list(range(len(records)))
    agent = Agent(log, AgentConfig(topics, standby=False, engine_process=True, snapshot_every_events=16))
    task = asyncio.create_task(agent.run())
    progress = asyncio.ensure_future(agent.wait_processed(len(records) - 1, timeout=90))
    await asyncio.wait({task, progress}, return_when=asyncio.FIRST_COMPLETED)
    agent.stop()
    await asyncio.wait_for(task, 60)  # an agent that crashed raises here
    progress.result()  # one that hung: "not processed in 90 s"
    return [r.value or b"" for r in await log.read_all(topics.decisions)]


def check(records: list[bytes], valid: list[bytes], garbage: set[int], logged: list[bytes]) -> None:
    decisions = [decode(v) for v in logged]
    internal = [(records[d.cause.offset][:200], d) for d in decisions if isinstance(d, InternalError)]
    assert not internal, internal
    decided = {d.cause.offset for d in decisions}
    missing = [(i, records[i][:200]) for i in range(len(records)) if i not in decided]
    assert not missing, f"input records without an outcome: {missing}"
    assert logged == [encode(d) for d in engine_decisions(records)], "the agent decided otherwise than replay"
    original = {}  # offset in the mixed log -> offset in the valid stream
    for offset, n in zip((i for i in range(len(records)) if i not in garbage), itertools.count(), strict=False):
        original[offset] = n
    assert len(original) == len(valid)
    remapped = [encode(msgspec.structs.replace(d, cause=Cause(original[d.cause.offset], d.cause.index)))
                for d in decisions if d.cause.offset in original]
    assert remapped == [encode(d) for d in engine_decisions(valid)]
    assert all(isinstance(d, Rejected) for d in decisions if d.cause.offset in garbage)


LogFactory = Callable[[], tuple[EventLog, Topics]]


@pytest.fixture(params=["sqlite", pytest.param("kafka", marks=pytest.mark.kafka)])
def new_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LogFactory]:
    """`new_log()`: a started-later log and fresh topics for one example, on this log kind."""
    if request.param == "kafka":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        make = request.getfixturevalue("kafka_topic_factory")
        from streams.log.kafka import KafkaLog

        def kafka() -> tuple[EventLog, Topics]:
            return KafkaLog(bootstrap), Topics(make("in"), make("dec"), make("snap"))

        yield kafka
    else:
        from streams.log.sqlite import SqliteLog

        count = itertools.count()

        def sqlite() -> tuple[EventLog, Topics]:
            n = next(count)
            return SqliteLog(tmp_path / f"fuzz-{n}.db"), Topics("quotaflow.events", "quotaflow.decisions", "quotaflow.snapshots")

        yield sqlite


async def one_example(new_log: LogFactory, records: list[bytes], valid: list[bytes], garbage: set[int]) -> None:
    log, topics = new_log()
    await log.start()
    try:
        await log.ensure_topics(topics.specs(), single_partition=[topics.input, topics.decisions])
        logged = await run_agent(log, topics, records, garbage)
    finally:
        await log.close()
    check(records, valid, garbage, logged)


def handpicked() -> tuple[list[bytes], list[bytes], set[int]]:
    """Every case the fuzzing must show, in one log, whatever hypothesis draws: deep nesting (also
    inside a Batch), a Batch in a Batch, a Batch without events, 1e400, a quantity of
    99999999999999999999Ei, a Cohort its own parent, a pod-set change in WorkloadUpdated, an
    emoji and an upper-case name, a 300,000-character name, raw bytes that are not UTF-8."""
    stream = random_stream(3, events=40, cohorts=2, queues_per_cohort=2)
    valid = [json.dumps(e).encode() for e in stream]
    submit = next(e for e in stream if e["type"] == "WorkloadSubmitted")
    huge = copy.deepcopy(submit)
    huge["workload"]["spec"]["podSets"][0]["requests"]["cpu"] = "99999999999999999999Ei"
    resized = copy.deepcopy(submit)
    resized["type"] = "WorkloadUpdated"
    resized["workload"]["spec"]["podSets"][0]["count"] += 2
    renamed = copy.deepcopy(submit)
    renamed["workload"]["metadata"]["name"] = "\U0001f600-UPPER"
    cyclic = {"type": "ConfigApplied", "object": {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Cohort",
                                                  "metadata": {"name": "loop"}, "spec": {"parentName": "loop"}}}
    garbage = [
        b"[" * 1000 + b"]" * 1000,
        b'{"a":' * 1000 + b"1" + b"}" * 1000,
        b'{"type":"Batch","events":[' + b"[" * 1000 + b"]" * 1000 + b"]}",
        json.dumps({"type": "Batch", "events": [{"type": "Batch", "events": [submit]}]}).encode(),
        b'{"type":"Batch"}',
        b'{"type":1e400}',
        json.dumps(huge).encode(),
        json.dumps(cyclic).encode(),
        json.dumps(resized).encode(),
        json.dumps(renamed).encode(),
        b'{"type":"WorkloadFinished","namespace":"ns","name":"' + b"x" * 300_000 + b'"}',
        b"\x00\xff\xfe not UTF-8 \xc3\x28",
    ]
    records: list[bytes] = []
    at: set[int] = set()
    step = len(valid) // len(garbage)
    for i, record in enumerate(valid):
        if i % step == step - 1 and i // step < len(garbage):
            at.add(len(records))
            records.append(garbage[i // step])
        records.append(record)
    records, at = only_rejected_garbage(records, at)
    return records, valid, at


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(example=mixed_logs())
@example(example=handpicked())
def test_garbage_through_the_agent_changes_nothing_for_the_valid_events(
        new_log: LogFactory, example: tuple[list[bytes], list[bytes], set[int]]) -> None:
    records, valid, garbage = example
    event(f"garbage records in the log: {min(len(garbage), 3)}{'+' if len(garbage) >= 3 else ''}")
    asyncio.run(one_example(new_log, records, valid, garbage))
