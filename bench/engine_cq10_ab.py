"""cq10 against base's first window, both folded in one process, interleaved.

    python -m bench.engine_cq10_ab                                  # 20,000 workloads, 3 rounds, 2 parts
    python -m bench.engine_cq10_ab --gc-threshold engine-process --parts 2 --rounds 3

`bench.engine_bench` compares cq10 (1,000 ClusterQueues, 10 copies of the first tenth of the
stream's virtual time) with base's first window (the same tenth, 100 ClusterQueues) timed in
separate runs. That window is only ~4,000 events (~0.15 s), and on a shared 2-core machine its
rate flips between two levels from round to round (18,000 and 27,000 events/s CPU at the same
code in one session), so that ratio moves by ±0.2 between runs. Here one engine of each folds
its stream `--parts` pieces at a time, alternating which goes first, CPU time summed per side, so
load from other processes falls on both alike. Both engines are alive at once, and each part of
one evicts the other's state from the CPU caches: the more parts, the more base pays for cq10's
heap (back to back, 10 parts read 0.80-0.84 where 2 parts read 0.75-0.79), so keep --parts small,
and read the result as an upper bound of what cq10 would show alone. Decisions
are not compared (engine_bench checks that cq10 decides 10 × what base's window decides).
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench import engine_variants, timing
from devtools import cluster_stream
from domain.engine import Engine


def fold_interleaved(
    base: engine_variants.Variant, cq10: engine_variants.Variant, parts: int, engine_class: Callable[[], Any] = Engine
) -> tuple[float, float]:
    """CPU seconds of base's first window and of cq10, folded part by part."""
    window = base.stream[: base.window]
    engines: dict[str, Any] = {}
    for side, variant in (("base", base), ("cq10", cq10)):
        engine = engines[side] = engine_class()
        for offset, event in enumerate(variant.prelude):
            engine.apply(event, offset)
    gc.collect()
    streams = {"base": (window, len(base.prelude)), "cq10": (cq10.stream, len(cq10.prelude))}
    cpu = {"base": 0.0, "cq10": 0.0}
    clock = time.process_time
    for k in range(parts):
        for side in ("base", "cq10") if k % 2 == 0 else ("cq10", "base"):
            stream, start = streams[side]
            lo, hi = k * len(stream) // parts, (k + 1) * len(stream) // parts
            apply = engines[side].apply
            c0 = clock()
            for i in range(lo, hi):
                apply(stream[i], start + i)
            cpu[side] += clock() - c0
    return cpu["base"], cpu["cq10"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parts", type=int, default=2, help="pieces of each stream, alternated (default 2)")
    parser.add_argument("--gc-threshold", default="default", help="as in bench.engine_bench")
    args = parser.parse_args(argv)
    gen = cluster_stream.generate(args.workloads, cluster_stream.BASE_COHORTS, 1)
    variants, _ = engine_variants.build_variants(gen, ["base", "cq10"])
    base, cq10 = variants["base"], variants["cq10"]
    threshold = timing.gc_threshold(args.gc_threshold)
    print(
        f"base's first {base.window:,} events against cq10's {len(cq10.stream):,}, {args.parts} parts each, "
        f"gc thresholds {threshold or gc.get_threshold()}"
    )
    ratios = []
    for r in range(args.rounds):
        with timing.gc_thresholds(threshold):
            cpu_base, cpu_cq10 = fold_interleaved(base, cq10, args.parts)
        rate_base, rate_cq10 = base.window / cpu_base, len(cq10.stream) / cpu_cq10
        ratios.append(rate_cq10 / rate_base)
        print(
            f"  round {r + 1}: base window {rate_base:>8,.0f} events/s CPU  cq10 {rate_cq10:>8,.0f} events/s CPU"
            f"  ratio {ratios[-1]:.3f}",
            flush=True,
        )
        gc.collect()
    print(f"cq10 / base window (CPU): {' '.join(f'{x:.2f}' for x in ratios)}; goal >= 0.8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
