"""`-o table|wide|json|yaml`, the one output option of every view (as kubectl's `-o`).

- `table`: the human form (rich tables; never cut when piped, see `render.output_console`);
- `wide`: the same with more columns (kubectl's `-o wide`);
- `json` / `yaml`: the view's document, the same one in both encodings: what the HTTP API
  (`quotaflow serve`) serves for the same view, so a script can move between them. The shapes
  are listed in the README ("Output formats"); fields are only ever added to them.
"""

from __future__ import annotations

import sys
import time
from enum import Enum
from typing import Any

import typer

from domain.timestamps import TimestampError, parse_time


class Output(str, Enum):
    table = "table"
    wide = "wide"
    json = "json"
    yaml = "yaml"

    @property
    def document(self) -> bool:
        return self in (Output.json, Output.yaml)


def output_option() -> Any:
    return typer.Option(Output.table, "-o", "--output", help="table, wide, json or yaml")


def json_flag() -> Any:
    """`--json`, kept from before `-o` for the scripts that use it: `-o json`."""
    return typer.Option(False, "--json", hidden=True, help="the same as -o json")


def chosen(output: Output, json_out: bool) -> Output:
    return Output.json if json_out else output


def print_document(doc: Any, output: Output) -> None:
    """`doc` (plain data) as JSON (2-space indent) or YAML (keys in the view's order)."""
    if output == Output.yaml:
        import yaml

        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    else:
        import msgspec

        sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(doc), indent=2) + b"\n")
    sys.stdout.flush()


def print_list(items: list[Any], output: Output) -> None:
    """Several objects, as kubectl prints them: a `v1` `List`."""
    print_document({"apiVersion": "v1", "kind": "List", "items": items}, output)


def age(obj: dict[str, Any], now: float | None = None) -> str:
    """kubectl's AGE of an object from its metadata.creationTimestamp ("" without one): this
    machine's clock less that time (the views keep times from the log only)."""
    from streams.cli.render import human_duration

    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if stamp is None:
        return ""
    try:
        created_us = parse_time(stamp)
    except TimestampError:
        return ""
    return human_duration((now if now is not None else time.time()) - created_us / 1e6)
