"""Reading input events from files: JSON Lines (one event per line) or YAML (one per document).

Each event keeps its position in the file, which is its `cause.offset` in `quotaflow replay`. A
line or document that cannot be parsed is still an event: it is handed to the engine as raw
bytes so the engine rejects it with a `Rejected` decision, like any bad input in the log.

`quotaflow export` writes the input log as JSON Lines that hold any record exactly: a record is
its own line where it can be (non-empty, not only whitespace, no line break), and otherwise a
line `{"quotaflow.record":"<base64 of its bytes>"}` (a null record: `{"quotaflow.record":null}`),
which the reader turns back into the record's bytes. Offsets that hold no record (a Kafka
transaction's commit marker, when the sequencer writes the input log) are a line
`{"quotaflow.gap":N}` for N of them, which `positioned_events` skips over. A record the engine
reads its log time for (one without a readable `time` of its own: domain/clock.py) is preceded by
a line `{"quotaflow.logTime":"<RFC 3339>"}`, which is no event: it gives the next record its time
in the log. So `quotaflow replay` of an export folds the same bytes at the same offsets and times
as the agent did, and audits of exported logs are exact.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

import yaml

from domain.timestamps import TimestampError, format_time, parse_time

if TYPE_CHECKING:
    # (imported where used: reading YAML documents, as `quotaflow apply` does, needs no engine)
    from domain.engine import Unparseable

_DOC_SEPARATOR = re.compile(r"^---(?:[ \t].*)?$")


class _Loader(yaml.SafeLoader):
    """SafeLoader that leaves timestamps as strings, as Kubernetes objects carry them."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


def load_yaml_documents(text: str) -> list[Any]:
    return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]  # noqa: S506


class EventFileError(Exception):
    pass


class Gap(NamedTuple):
    """`count` offsets of the log that hold no record."""

    count: int


Event: TypeAlias = "bytes | dict[str, Any] | Unparseable"


def read_events(path: str | Path) -> Iterator[Event]:
    """The file's events, in order (an export's gaps left out)."""
    for _, event, _ in positioned_events(path):
        yield event


def read_timed_events(path: str | Path) -> Iterator[tuple[Event, int | None]]:
    """Each event with its log time (µs) where an export recorded one, else None."""
    for _, event, log_time in positioned_events(path):
        yield event, log_time


def positioned_events(path: str | Path) -> Iterator[tuple[int, Event, int | None]]:
    """The file's events at their offsets (their position, counting an export's gaps), each with
    its log time where an export recorded one."""
    offset = 0
    for item, log_time in _items(path):
        if isinstance(item, Gap):
            offset += item.count
        else:
            yield offset, item, log_time
            offset += 1


def _items(path: str | Path) -> Iterator[tuple[Event | Gap, int | None]]:
    p = Path(path)
    try:
        text = p.read_bytes()
    except OSError as exc:
        raise EventFileError(f"cannot read {p}: {exc.strerror or exc}") from None
    if p.suffix in (".yaml", ".yml"):
        try:
            decoded = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EventFileError(f"{p} is not UTF-8: {exc}") from None
        for event in yaml_events(decoded):
            yield event, None
    else:
        yield from jsonl_timed_events(text)


_RECORD = b'{"quotaflow.record":'
_GAP = b'{"quotaflow.gap":'


def gap_line(count: int) -> bytes:
    """The line for `count` offsets that hold no record."""
    return _GAP + str(count).encode() + b"}"


_LOG_TIME = b'{"quotaflow.logTime":'


def export_line(value: bytes | None, log_time: int | None = None) -> bytes:
    """One input log record as a line of an events file (without its line break), preceded by
    its log time's line where the engine reads that time (`log_time`, µs)."""
    if value is None:
        line = _RECORD + b"null}"
    elif not value.strip() or b"\n" in value or b"\r" in value or value.startswith((_RECORD, _GAP, _LOG_TIME)):
        line = _RECORD + b'"' + base64.b64encode(value) + b'"}'
    else:
        line = value
    if log_time is None:
        return line
    from domain.clock import own_time

    if own_time(value or b"") is None:
        return _LOG_TIME + b'"' + format_time(log_time).encode() + b'"}\n' + line
    return line


def jsonl_events(data: bytes) -> Iterator[bytes | Gap]:
    for event, _ in jsonl_timed_events(data):
        yield event


def jsonl_timed_events(data: bytes) -> Iterator[tuple[bytes | Gap, int | None]]:
    log_time: int | None = None
    for line in data.splitlines():
        if line.startswith(_LOG_TIME):
            log_time = _log_time(line)
            if log_time is not None:
                continue
            # not a line export wrote: a record of its own (rejected)
        if line.startswith(_RECORD):
            yield _record_bytes(line), log_time
        elif line.startswith(_GAP):
            yield _gap(line), log_time
        elif line.strip():
            yield line, log_time
        else:
            continue
        log_time = None


def _log_time(line: bytes) -> int | None:
    body = line[len(_LOG_TIME) : -1] if line.endswith(b"}") else b""
    if len(body) >= 2 and body[:1] == body[-1:] == b'"':
        try:
            return parse_time(body[1:-1].decode())
        except (TimestampError, UnicodeDecodeError):
            pass
    return None


def _gap(line: bytes) -> bytes | Gap:
    """A `quotaflow.gap` line's count; a line that is not one export wrote is a record (rejected)."""
    body = line[len(_GAP) : -1] if line.endswith(b"}") else b""
    if body.isdigit() and int(body) > 0:
        return Gap(int(body))
    return line


def _record_bytes(line: bytes) -> bytes:
    """The record a `quotaflow.record` line holds; a null record folds as empty bytes, as the
    agent folds it. A line that is not one export wrote is a record of its own (rejected)."""
    body = line[len(_RECORD) : -1] if line.endswith(b"}") else b""
    if body == b"null":
        return b""
    if len(body) >= 2 and body[:1] == body[-1:] == b'"':
        try:
            return base64.b64decode(body[1:-1], validate=True)
        except ValueError:
            pass
    return line


def yaml_events(text: str) -> Iterator[bytes | dict[str, Any] | Unparseable]:
    from domain.engine import Unparseable

    for doc in _split_documents(text):
        try:
            value = load_yaml(doc)
            if value is None:
                continue
            event = value if isinstance(value, dict) else _as_json(value)
        except yaml.YAMLError as exc:
            # Still an event: the engine rejects it, so the offsets of later events stay right.
            yield Unparseable(f"document is not valid YAML: {exc}")
            continue
        except RecursionError:
            # PyYAML composes nested nodes recursively; the engine's own limit is far lower.
            yield Unparseable("document is not valid YAML: it nests too deep to be read")
            continue
        yield event


def _split_documents(text: str) -> Iterator[str]:
    current: list[str] = []
    for line in text.splitlines():
        if _DOC_SEPARATOR.match(line):
            yield "\n".join(current)
            # A document may start on its marker's line (`--- {type: WorkloadFinished, ...}`):
            # what follows the marker is the new document's first line, never dropped.
            current = [line[3:].lstrip(" \t")]
        else:
            current.append(line)
    yield "\n".join(current)


def _as_json(value: object) -> bytes:
    import json

    return json.dumps(value, default=str).encode()
