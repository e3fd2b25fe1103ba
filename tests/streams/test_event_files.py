"""Events files hold any input record exactly: `quotaflow export` then `quotaflow replay` decides
as the engine decided the log itself."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from domain.decisions import encode
from domain.engine import Engine
from streams.log import Message, Topics
from streams.log.event_files import (
    export_line,
    gap_line,
    jsonl_events,
    positioned_events,
)
from streams.log.sqlite import SqliteLog
from streams.settings import Settings

ROOT = Path(__file__).resolve().parents[2]

# Records a plain JSON Lines file could not carry, and records that look like the wrapper.
AWKWARD: list[bytes | None] = [
    b'{"type": "ConfigApplied", "object": {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}}',
    None,
    b"",
    b"   ",
    b"\t",
    b'{"type":\n"WorkloadFinished", "namespace": "a", "name": "b"}',
    b"line one\r\nline two",
    b'{"quotaflow.record":"aGVsbG8="}',
    b'{"quotaflow.record":null}',
    b'{"quotaflow.gap":3}',
    b"\xff\xfe not utf-8",
    b'{"type": "WorkloadFinished", "namespace": "a", "name": "b"}',
]


def records_of(path: Path) -> list[bytes]:
    return [e for _, e, _ in positioned_events(path)]  # type: ignore[misc]


@given(st.lists(st.one_of(st.none(), st.binary(max_size=64)), max_size=20))
def test_any_records_come_back_as_the_agent_folds_them(values: list[bytes | None]) -> None:
    data = b"".join(export_line(v) + b"\n" for v in values)
    assert list(jsonl_events(data)) == [v or b"" for v in values]


def test_awkward_records_round_trip_exactly(tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl"
    path.write_bytes(b"".join(export_line(v) + b"\n" for v in AWKWARD))
    assert records_of(path) == [v or b"" for v in AWKWARD]


def test_gaps_keep_later_records_at_their_offsets(tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl"
    finished = b'{"type":"WorkloadFinished","name":"w"}'
    path.write_bytes(b"\n".join([finished, gap_line(1), finished, gap_line(2), finished, b'{"quotaflow.gap":x}']) + b"\n")
    assert [o for o, _, _ in positioned_events(path)] == [0, 2, 5, 6]
    assert [e for _, e, _ in positioned_events(path)][-1] == b'{"quotaflow.gap":x}'  # not ours: a record


def test_export_then_replay_decides_as_the_log_was_decided(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    topics = Topics.from_settings(Settings())

    async def fill() -> None:
        log = SqliteLog(db)
        await log.start()
        await log.ensure_topics(topics.specs(), single_partition=[topics.input, topics.decisions])
        await log.append(topics.input, [Message(v) for v in AWKWARD])
        await log.close()

    asyncio.run(fill())
    out = tmp_path / "export.jsonl"
    cli = [sys.executable, "-m", "streams.cli"]
    exported = subprocess.run(
        [*cli, "export", "-o", str(out), "--broker", f"sqlite:///{db}"], cwd=ROOT, capture_output=True, timeout=60
    )
    assert exported.returncode == 0, exported.stderr.decode()
    replayed = subprocess.run([*cli, "replay", str(out)], cwd=ROOT, capture_output=True, timeout=60)
    assert replayed.returncode == 0, replayed.stderr.decode()
    engine = Engine()
    expected = b"".join(encode(d) + b"\n" for offset, v in enumerate(AWKWARD) for d in engine.apply(v or b"", offset))
    assert replayed.stdout == expected
    # Every record was decided at its own offset: the export did not shift any of them.
    assert b'"offset":10' in replayed.stdout


def test_an_export_records_the_log_time_of_records_without_a_time_of_their_own() -> None:
    from streams.log.event_files import jsonl_timed_events

    at = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
    timeless = b'{"type":"Tick"}'
    timed = b'{"type":"Tick","time":"2026-01-01T00:00:05Z"}'
    text = b"\n".join([
        export_line(timeless, at), export_line(timed, at + 1), export_line(b"not json", at + 2),
        export_line(b'{"quotaflow.logTime":"2026-01-01T00:00:00Z"}', at + 3),
        b'{"quotaflow.logTime":"yesterday"}',
    ]) + b"\n"
    # One before each record without a time of its own (the look-alike record goes in base64).
    assert sum(line.startswith(b'{"quotaflow.logTime":') for line in text.splitlines()) == 3 + 1
    events = list(jsonl_timed_events(text))
    assert events == [
        (timeless, at), (timed, None), (b"not json", at + 2),
        (b'{"quotaflow.logTime":"2026-01-01T00:00:00Z"}', at + 3),
        (b'{"quotaflow.logTime":"yesterday"}', None),  # not a line export writes: a record (rejected)
    ]
    engine = Engine()
    assert [type(d).__name__ for i, (e, t) in enumerate(events) for d in engine.apply(e, i, t)][:2] == [
        "Applied", "Applied"]


def test_a_yaml_document_that_starts_on_its_marker_line_is_an_event(tmp_path: Path) -> None:
    # `--- {...}` opens a document whose content is on the marker's line: YAML's own reading of
    # the file, as yaml.safe_load_all gives it, at the offset of its place in the file.
    import yaml

    path = tmp_path / "events.yaml"
    path.write_text(
        "type: WorkloadFinished\nnamespace: a\nname: w0\n"
        "--- {type: WorkloadFinished, namespace: a, name: w1}\n"
        "---\ntype: WorkloadFinished\nnamespace: a\nname: w2\n"
        "--- # a comment, then the document\ntype: WorkloadFinished\nnamespace: a\nname: w3\n"
    )
    expected = list(yaml.safe_load_all(path.read_text()))
    assert [(o, e) for o, e, _ in positioned_events(path)] == list(enumerate(expected))
    assert [e["name"] for _, e, _ in positioned_events(path)] == ["w0", "w1", "w2", "w3"]  # type: ignore[index]
    # a tab after the marker separates as a space does (YAML's separation whitespace)
    path.write_text(
        "---\t{type: WorkloadFinished, namespace: a, name: w4}\n"
        "---\t# a comment after a tab\ntype: WorkloadFinished\nnamespace: a\nname: w5\n"
    )
    assert [e["name"] for _, e, _ in positioned_events(path)] == ["w4", "w5"]  # type: ignore[index]
