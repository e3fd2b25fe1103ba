"""The sequencer's pure parts (streams/sequencer/): which topic is which source, and the record
it appends. Its Kafka behaviour is tested on a secured broker (test_secured_broker.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from domain import limits
from streams.sequencer import SequencerConfig, sequenced, source_of

CONFIG = SequencerConfig("127.0.0.1:9092", "quotaflow.events")


@pytest.mark.parametrize(
    ("topic", "source"),
    [
        ("quotaflow.admin", "admin"),
        ("quotaflow.tenant.team-a", "tenant:team-a"),
        ("quotaflow.tenant.Team_A", None),
        ("quotaflow.tenant.", None),
        ("quotaflow.tenant.a.b", None),
        ("quotaflow.events", None),
        ("quotaflow.adminx", None),
    ],
)
def test_topics_and_sources(topic: str, source: str | None) -> None:
    assert source_of(topic, CONFIG) == source
    # the subscription reads exactly the topics that are sources
    assert (re.match(CONFIG.pattern, topic) is not None) == (source is not None)


def test_the_source_is_set_and_a_producers_claim_overwritten() -> None:
    record = b'{"type":"WorkloadFinished","source":"admin","name":"w","namespace":"team-a"}'
    assert msgspec.json.decode(sequenced(record, "tenant:team-a")) == {
        "type": "WorkloadFinished",
        "source": "tenant:team-a",
        "name": "w",
        "namespace": "team-a",
    }
    # a duplicated key cannot smuggle a claim past it either: the last one is what decodes
    tricky = b'{"type":"WorkloadFinished","source":"tenant:team-a","source":"admin"}'
    assert msgspec.json.decode(sequenced(tricky, "tenant:team-a"))["source"] == "tenant:team-a"


@pytest.mark.parametrize("record", [b"not json", b"[1,2]", b'"text"', b"", None, b"[" * (limits.MAX_DEPTH + 2)])
def test_what_is_not_an_event_object_goes_in_unchanged_for_the_engine_to_reject(record: bytes | None) -> None:
    assert sequenced(record, "tenant:team-a") == (record or b"")


def test_the_sequencer_refuses_sqlite(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "streams.cli.main", "sequence", "--broker", f"sqlite:///{tmp_path / 'q.db'}"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "SQLite is a single-user log" in done.stderr.decode()
    assert not (tmp_path / "q.db").exists()
