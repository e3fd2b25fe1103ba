"""Engine speed-up against another revision, interleaved finely enough for a shared machine.

    python -m bench.engine_ab --base 817b77a                       # base, cq10, backlog10, agent
    python -m bench.engine_ab --base HEAD~1 --variants base --rounds 3
    python -m bench.engine_ab --base-dir ../copy-of-main --variants base   # both compiled

`--base REV`'s `domain/` is extracted (`git archive`) into a temporary directory and imported
under other module names beside this checkout's `domain/`, so both engines live in one process.
Each variant's stream (the engine bench's streams, and the agent bench's `messages(20000)`
values as `agent`) is folded by both engines side by side, `--chunk` events at a time,
alternating which goes first, and each side's `time.process_time` is summed. Load from other
processes then falls on both sides alike within a fraction of a second, where whole-run
rounds on these machines move by ±30%. Every chunk's decisions must be byte-identical between
the two (reported, not enforced: a benchmark never fails). Two engines are alive at once, so
the absolute rates are below `bench.engine_bench`'s; the ratio is the result. `--base-dir DIR`
takes the base from a checkout's domain/ as it stands there instead (compiled if built there, so
compiled engines compare with compiled ones: `git archive REV | tar -x -C DIR` and
`python deploy/compile.py` in DIR).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from io import BytesIO
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent
Apply = Callable[[Any, int], list[Any]]


def load_engine_at(rev: str, into: Path) -> type:
    """The Engine class of `rev`'s domain/, imported from `into` under private module names."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "domain"], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return load_engine_from(into)


def load_engine_from(tree: Path) -> type:
    """The Engine class of the domain/ in `tree` as it stands there (compiled if `tree` holds a
    current mypyc build: deploy/compile.py run in a copy of another revision), imported under
    private module names."""
    ours = {k: v for k, v in sys.modules.items() if k == "domain" or k.startswith("domain.")}
    for k in ours:
        del sys.modules[k]
    # A source-only finder (QUOTAFLOW_PURE_PYTHON, or a stale build) is pinned to our domain/ and
    # would shadow the other tree's.
    pinned = [f for f in sys.meta_path if type(f).__name__ == "_SourceOnly"]
    for finder in pinned:
        sys.meta_path.remove(finder)
    sys.path.insert(0, str(tree))
    try:
        engine = importlib.import_module("domain.engine").Engine
        compiled = not (getattr(sys.modules.get("domain.scheduler"), "__file__", None) or "").endswith(".py")
        _FORMS[engine] = "compiled by mypyc" if compiled else "from its sources"
    finally:
        sys.path.remove(str(tree))
        sys.meta_path[:0] = pinned
        for k in [k for k in sys.modules if k == "domain" or k.startswith("domain.")]:
            sys.modules[f"_engine_ab_base.{k}"] = sys.modules.pop(k)
        sys.modules.update(ours)
    return engine  # type: ignore[no-any-return]


def engine_form(engine: type) -> str:
    """How an Engine class runs: "compiled by mypyc" or "from its sources"."""
    form = _FORMS.get(engine)
    if form is None:
        from domain._engine_form import running_compiled

        form = _FORMS[engine] = "compiled by mypyc" if running_compiled() else "from its sources"
    return form


_FORMS: dict[type, str] = {}


def streams(workloads: int, names: Sequence[str]) -> dict[str, tuple[list[Any], list[bytes]]]:
    """variant -> (untimed prelude, timed stream)."""
    from bench import engine_variants
    from devtools import cluster_stream

    out: dict[str, tuple[list[Any], list[bytes]]] = {}
    wanted = [n for n in names if n != "agent"]
    if wanted:
        gen = cluster_stream.generate(workloads, cluster_stream.BASE_COHORTS, 1)
        variants, _ = engine_variants.build_variants(gen, wanted)
        for n in wanted:
            out[n] = (variants[n].prelude, variants[n].stream)
    if "agent" in names:
        from bench.agent_common import messages

        out["agent"] = ([], [m.value for m in messages(20000)])
    return out


def compare(base: type, ours: type, prelude: list[Any], stream: list[bytes], chunk: int) -> tuple[float, float, bool]:
    """CPU seconds of base and ours over the stream, and whether every chunk decided alike."""
    encode = msgspec.json.Encoder().encode
    engines = {"base": base(), "ours": ours()}
    for engine in engines.values():
        for offset, event in enumerate(prelude):
            engine.apply(event, offset)
    gc.collect()
    cpu = {"base": 0.0, "ours": 0.0}
    same = True
    start = len(prelude)
    clock = time.process_time
    for i in range(0, len(stream), chunk):
        part = stream[i : i + chunk]
        order = ("base", "ours") if (i // chunk) % 2 == 0 else ("ours", "base")
        decided: dict[str, bytes] = {}
        for side in order:
            apply: Apply = engines[side].apply
            results = []
            c0 = clock()
            for offset, event in enumerate(part, start + i):
                results.append(apply(event, offset))
            cpu[side] += clock() - c0
            decided[side] = b"".join(encode(d) for out in results for d in out)
        same = same and decided["base"] == decided["ours"]
    return cpu["base"], cpu["ours"], same


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--base", help="git revision whose domain/ is the baseline (run from its sources)")
    which.add_argument("--base-dir", help="a checkout whose domain/ is the baseline as it stands there "
                                          "(compiled if built there: deploy/compile.py in a copy)")
    parser.add_argument("--workloads", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=500, help="events per side before switching")
    parser.add_argument("--variants", default="base,cq10,backlog10,agent")
    args = parser.parse_args(argv)
    names = [n for n in args.variants.split(",") if n]
    with tempfile.TemporaryDirectory(prefix="engine-ab-") as tmp:
        # A --base revision runs from its sources: against a compiled checkout (`make`), the
        # ratio includes the compilation (--base HEAD measures it alone); QUOTAFLOW_PURE_PYTHON=1
        # compares the code only. A --base-dir runs as built there.
        if args.base_dir:
            base = load_engine_from(Path(args.base_dir).resolve())
            where = f"{Path(args.base_dir).resolve()}/domain"
        else:
            base = load_engine_at(args.base, Path(tmp))
            where = f"domain/ at {args.base}"
        from domain.engine import Engine as ours

        print(f"base: {where}, {engine_form(base)}; ours: {ROOT}/domain, {engine_form(ours)}; "
              f"{args.chunk} events per side, alternating")
        for name, (prelude, stream) in streams(args.workloads, names).items():
            ratios = []
            identical = True
            for r in range(args.rounds):
                cpu_base, cpu_ours, same = compare(base, ours, prelude, stream, args.chunk)
                identical = identical and same
                ratios.append(cpu_base / cpu_ours)
                n = len(stream)
                print(
                    f"  {name:<9} round {r + 1}: base {n / cpu_base:>8,.0f} events/s CPU ({cpu_base * 1e6 / n:5.1f} µs)"
                    f"  ours {n / cpu_ours:>8,.0f} events/s CPU ({cpu_ours * 1e6 / n:5.1f} µs)  speed-up {ratios[-1]:.3f}",
                    flush=True,
                )
                gc.collect()
            print(
                f"{name}: speed-up (base CPU / ours) {' '.join(f'{x:.2f}' for x in ratios)}; "
                f"decisions identical chunk by chunk: {'yes' if identical else 'NO'}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
