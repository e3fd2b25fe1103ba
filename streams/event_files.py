"""Reading input events from files: JSON Lines (one event per line) or YAML (one per document).

Each event keeps its position in the file, which is its `cause.offset` in `quotaflow replay`. A
line or document that cannot be parsed is still an event: it is handed to the engine as raw
bytes so the engine rejects it with a `Rejected` decision, like any bad input in the log.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

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


def read_events(path: str | Path) -> Iterator[bytes | dict[str, Any] | Unparseable]:
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
        yield from yaml_events(decoded)
    else:
        yield from jsonl_events(text)


def jsonl_events(data: bytes) -> Iterator[bytes]:
    for line in data.splitlines():
        if line.strip():
            yield line


def yaml_events(text: str) -> Iterator[bytes | dict[str, Any] | Unparseable]:
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
            current = []
        else:
            current.append(line)
    yield "\n".join(current)


def _as_json(value: object) -> bytes:
    import json

    return json.dumps(value, default=str).encode()
