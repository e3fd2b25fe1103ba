"""Who holds the input partition when two agents claim it: the newer holder.

An agent paused past the session timeout (SIGSTOP, a long GC pause) resumes still claiming the
partition its replacement now holds. The group's sticky assignment settles such a claim by the
generation each member reports; these tests drive the agents' own membership listener and
assignor with the assignments each would have seen, and check the group leader's assignment,
whichever member it lists first."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.structs import TopicPartition

from streams.log.kafka import KafkaLog, KafkaWriter, _Membership

TOPIC = "election.events"
TP = TopicPartition(TOPIC, 0)


class _Cluster:
    def topics(self) -> set[str]:
        return {TOPIC}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0}


async def _agent_that_held_it_at(generation: int) -> KafkaWriter:
    """An agent whose membership saw the partition assigned to it in `generation`."""
    writer = KafkaWriter(KafkaLog("127.0.0.1:1"), "agent", standby_topic=TOPIC)
    writer._member = SimpleNamespace(  # type: ignore[assignment]
        _coordinator=SimpleNamespace(generation=generation), pause=lambda *tps: None
    )
    writer._assignor.on_assignment(ConsumerProtocolMemberAssignment(0, [(TOPIC, [0])], b""))
    await _Membership(writer).on_partitions_assigned({TP})
    return writer


@pytest.mark.parametrize("stale_listed_first", [True, False])
async def test_the_agent_that_took_over_keeps_the_partition(stale_listed_first: bool) -> None:
    stale = await _agent_that_held_it_at(1)
    taker = await _agent_that_held_it_at(2)
    members = [("stale", stale), ("taker", taker)]
    if not stale_listed_first:
        members.reverse()
    metadata = {name: w._assignor.metadata([TOPIC]) for name, w in members}
    assignment = stale._assignor.assign(_Cluster(), metadata)  # type: ignore[arg-type]
    assert assignment["taker"].partitions() == [TP]
    assert assignment["stale"].partitions() == []
