"""Smoke test of bench/engine_cq10_ab.py: every event of base's first window and of cq10 is
folded, in order, by its own engine."""

from __future__ import annotations

from typing import Any

from bench import engine_variants
from bench.engine_cq10_ab import fold_interleaved
from devtools import cluster_stream
from domain.engine import Engine


def test_each_side_folds_its_whole_stream_in_order() -> None:
    gen = cluster_stream.generate(300, 1, seed=3)
    variants, _ = engine_variants.build_variants(gen, ("base", "cq10"))
    base, cq10 = variants["base"], variants["cq10"]
    assert 0 < base.window < len(base.stream)
    seen: list[list[tuple[int, Any]]] = []

    class Recording(Engine):
        def __init__(self) -> None:
            super().__init__()
            self.log: list[tuple[int, Any]] = []
            seen.append(self.log)

        def apply(self, event: Any, offset: int) -> Any:
            self.log.append((offset, event))
            return super().apply(event, offset)

    cpu_base, cpu_cq10 = fold_interleaved(base, cq10, parts=3, engine_class=Recording)
    assert cpu_base > 0 and cpu_cq10 > 0
    expected_base = list(enumerate([*base.prelude, *base.stream[: base.window]]))
    expected_cq10 = list(enumerate([*cq10.prelude, *cq10.stream]))
    assert seen[0] == expected_base and seen[1] == expected_cq10
