"""Rewrite conformance scenarios' `.expected.yaml` from `quotaflow replay`, keeping their text.

    python -m devtools.conformance_expect [RULE/NAME ...]   # every scenario when none is named
    python -m devtools.conformance_expect --check           # exit 1 where a file would change

A decision the expected file already holds keeps its text as written (its flow style, its
`messageMatches` pattern in place of a message); only its `cause.index` is renumbered and the
fields the replay adds to it are appended. A decision it does not hold is written in the house
style (block mapping, `cause` and pod-set assignments in flow style). So after a change of the
contract the diff shows exactly the added decisions and fields, to review line by line.

Old and new decisions are paired in order by what does not depend on the added ones: type,
workload, cause offset and reason. Every decision dropped, and every one added other than an
`Applied`, is printed: a change of behaviour to look at, not a contract addition.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "tests" / "conformance" / "scenarios"
ADDED_TYPES = ("Applied",)
ADDED_FIELDS = ("kind", "name", "namespace", "batchIndex")  # on Rejected
_CAUSE = re.compile(r"cause: \{offset: (\d+), index: (\d+)\}")


def replay(events: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "streams.cli.main", "replay", str(events)],
        capture_output=True, check=True, cwd=ROOT, timeout=300,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def split(text: str) -> tuple[list[str], list[list[str]]]:
    """The file's header (comments) and one block of lines per decision."""
    header: list[str] = []
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("- "):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
        else:
            header.append(line)
    return header, blocks


def _key(d: dict[str, Any]) -> tuple[Any, ...]:
    return (d.get("type"), d.get("workload"), (d.get("cause") or {}).get("offset"), d.get("reason"))


def _same(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """`new` is `old` with the added fields (and any cause index)."""
    new = {k: v for k, v in new.items() if not (new.get("type") == "Rejected" and k in ADDED_FIELDS)}
    old = {k: v for k, v in old.items() if not (old.get("type") == "Rejected" and k in ADDED_FIELDS)}
    pattern = old.pop("messageMatches", None)
    if pattern is not None:
        if not re.fullmatch(pattern, new.get("message", ""), re.DOTALL):
            return False
        new = {k: v for k, v in new.items() if k != "message"}
    strip = lambda d: {k: v for k, v in d.items() if k != "cause"}  # noqa: E731
    return strip(old) == strip(new) and old["cause"]["offset"] == new["cause"]["offset"]


def scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 30, allow_unicode=True, sort_keys=False)
    return text.removesuffix("\n...\n").rstrip("\n")


def render(d: dict[str, Any]) -> list[str]:
    """A decision in the house style."""
    lines: list[str] = []
    for i, (key, value) in enumerate(d.items()):
        prefix = "- " if i == 0 else "  "
        if key == "podSetAssignments":
            lines.append(f"{prefix}{key}:")
            lines.extend(f"  - {scalar(ps)}" for ps in value)
        else:
            lines.append(f"{prefix}{key}: {scalar(value)}")
    return lines


def reuse(block: list[str], new: dict[str, Any]) -> list[str]:
    """An old decision's text, with the new cause index and the added fields."""
    out = [_CAUSE.sub(f"cause: {{offset: {new['cause']['offset']}, index: {new['cause']['index']}}}", line)
           for line in block]
    if new.get("type") == "Rejected":
        out = [line for line in out if not any(line.startswith(f"  {k}: ") for k in ADDED_FIELDS)]
        end = len(out)
        while end and not out[end - 1].strip():
            end -= 1
        added = [f"  {k}: {scalar(new[k])}" for k in ADDED_FIELDS if k in new]
        out[end:end] = added
    return out


def rewrite(name: str) -> tuple[str, str, list[str]]:
    """(old text, new text, the changes that are not contract additions) of one scenario."""
    expected = SCENARIOS / f"{name}.expected.yaml"
    text = expected.read_text()
    header, blocks = split(text)
    old = yaml.safe_load(text) or []
    assert len(old) == len(blocks), f"{name}: could not split the file by decision"
    events = [p for p in (SCENARIOS / f"{name}.yaml", SCENARIOS / f"{name}.jsonl") if p.exists()]
    new = replay(events[0])
    notes: list[str] = []
    body: list[str] = []
    matcher = difflib.SequenceMatcher(None, [_key(d) for d in old], [_key(d) for d in new], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            for o, n in zip(range(i1, i2), range(j1, j2), strict=True):
                if _same(old[o], new[n]):
                    body.extend(reuse(blocks[o], new[n]))
                else:
                    notes.append(f"changed: {json.dumps(old[o])} -> {json.dumps(new[n])}")
                    body.extend(render(new[n]))
            continue
        for o in range(i1, i2):
            notes.append(f"dropped: {json.dumps(old[o])}")
        for n in range(j1, j2):
            if new[n].get("type") not in ADDED_TYPES:
                notes.append(f"added: {json.dumps(new[n])}")
            body.extend(render(new[n]))
    lines = header + body
    return text, "\n".join(lines) + "\n" if lines else "", notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", help="RULE/NAME (default: all)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 where a file would change")
    args = parser.parse_args(argv)
    names = args.scenarios or sorted(
        str(p.relative_to(SCENARIOS))[: -len(".expected.yaml")] for p in SCENARIOS.glob("*/*.expected.yaml")
    )
    stale = 0
    for name in names:
        before, after, notes = rewrite(name)
        for note in notes:
            print(f"{name}: {note}")
        if after != before:
            stale += 1
            if not args.check:
                (SCENARIOS / f"{name}.expected.yaml").write_text(after)
    print(f"{stale} of {len(names)} expected files {'would change' if args.check else 'rewritten'}", file=sys.stderr)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
