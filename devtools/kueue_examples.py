"""Run every example manifest of Kueue's `site/static/examples/` through `quotaflow submit`'s
converter (a dry run: nothing is published) and print a Markdown table: each file, the kinds it
holds, and whether `submit -f FILE` accepts it (and the pod sets of its Workloads) or refuses it
(and why).

    git -C /work/.mirror/kubernetes-sigs+kueue/repo archive HEAD site/static/examples | tar -x -C /tmp/kx
    python -m devtools.kueue_examples --kueue-repo /tmp/kx

`--kueue-repo` is a Kueue checkout (or the extracted archive above); the examples are read from
its `site/static/examples/`. Generated names use a fixed seed and the clock is the epoch, so the
table is the same on every run.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

from streams.importers.kueue_jobs import Conversion, Naming, convert_documents
from streams.importers.kueue_jobs.registry import (
    ALIASES,
    CONFIGURATION_KINDS,
    NOT_CONVERTED,
    POD_BASED,
    job_kind,
)
from streams.importers.kueue_jobs.workload_names import random_suffix
from streams.log.event_files import load_yaml_documents

SUFFIXES = (".yaml", ".yml", ".json")
JOB_KINDS = frozenset({"Workload", *ALIASES.values(), *NOT_CONVERTED, *POD_BASED})


def documents(path: Path) -> list[Any]:
    docs: list[Any] = []
    for doc in load_yaml_documents(path.read_text()):
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            docs.extend(doc["items"])
        else:
            docs.append(doc)
    return docs


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _pod_sets(wl: dict[str, Any]) -> str:
    return ", ".join(f"{ps['name']}×{ps['count']}" + (f" (min {ps['minCount']})" if "minCount" in ps else "")
                     for ps in wl["spec"]["podSets"])


def _is_job(doc: Any) -> bool:
    """A document `submit` is meant for: a Workload, a kind Kueue integrates (converted or not),
    or a framework Kueue admits pod by pod."""
    if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
        return False
    kind, api_version = doc["kind"], str(doc.get("apiVersion", ""))
    return kind == "Workload" or job_kind(api_version, kind) is not None or kind in NOT_CONVERTED or kind in POD_BASED


def _accepted(conversion: Conversion) -> str:
    counts: dict[str, int] = {}
    for c in conversion.converted:
        if c.note:
            counts[f"{c.kind}: {c.note}"] = counts.get(f"{c.kind}: {c.note}", 0) + 1
        for wl in c.workloads:
            text = f"{c.kind} → {_pod_sets(wl)}"
            counts[text] = counts.get(text, 0) + 1
    return "; ".join(text if n == 1 else f"{n} workloads: {text}" for text, n in counts.items())


def verdict(docs: list[Any], conversion: Conversion) -> tuple[str, str]:
    if not any(_is_job(d) for d in docs):
        kinds = [d.get("kind") if isinstance(d, dict) else None for d in docs]
        if docs and all(k in CONFIGURATION_KINDS for k in kinds):
            return "no job", "configuration only: `quotaflow apply -f`"
        return "no job", "nothing here is a job or a Kueue object"
    if not conversion.refused:
        return "accepted", _accepted(conversion)
    config = [r for r in conversion.refused if r.kind in CONFIGURATION_KINDS]
    if len(config) == len(conversion.refused):
        config_kinds = ", ".join(dict.fromkeys(r.kind for r in config))
        return "refused", (f"{config_kinds}: configuration, for `quotaflow apply -f`; the rest alone is accepted: "
                           + _accepted(conversion))
    jobs = [r for r in conversion.refused if r.kind in JOB_KINDS]
    others = len(conversion.refused) - len(jobs)
    reasons = "; ".join(dict.fromkeys(r.reason for r in (jobs or conversion.refused)))
    if jobs and others:
        reasons += f" (and {others} other object{'s' if others > 1 else ''} that {'are' if others > 1 else 'is'} not a job)"
    return "refused", reasons


def table(examples: Path) -> list[str]:
    rows = ["| File | Kinds | `submit -f` | Pod sets, or why not |", "|---|---|---|---|"]
    for path in sorted(p for p in examples.rglob("*") if p.is_file() and p.suffix in SUFFIXES):
        rel = path.relative_to(examples).as_posix()
        try:
            docs = documents(path)
        except Exception as exc:  # a file that is not YAML is reported, not skipped
            rows.append(f"| {rel} | | refused | not valid YAML: {_cell(str(exc).splitlines()[0])} |")
            continue
        rng = random.Random(0)
        naming = Naming(suffix=lambda: random_suffix(rng), now=lambda: 0.0)
        conversion = convert_documents(((f"{rel}#{i + 1}", d) for i, d in enumerate(docs)), naming=naming)
        kinds = ", ".join(dict.fromkeys(str(d.get("kind")) if isinstance(d, dict) else "?" for d in docs))
        result, why = verdict(docs, conversion)
        rows.append(f"| {rel} | {_cell(kinds)} | {result} | {_cell(why)} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kueue-repo", required=True, type=Path, help="a Kueue checkout (its site/static/examples/ is read)")
    args = parser.parse_args(argv)
    examples = args.kueue_repo / "site" / "static" / "examples"
    if not examples.is_dir():
        print(f"kueue_examples: no {examples}", file=sys.stderr)
        return 2
    print("\n".join(table(examples)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
