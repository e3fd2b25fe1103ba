"""The engine benchmark's variants of the cluster stream (devtools/cluster_stream.py): the same
stream among 10x the ClusterQueues, 10x the cluster at work, behind 10x the pending backlog.
What each variant measures is in bench/engine_bench.py's docstring.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from devtools.cluster_stream import (
    CQS_PER_COHORT,
    GPU_SHAPES,
    START_US,
    Generated,
    Record,
    preload_events,
    render,
    setup_events,
)

CQ_SCALE = 10  # cq10: this many times the base cohorts
BACKLOG_SCALE = 10  # backlog10: this many times the base mean pending backlog
COPY_SHIFT_US = 7_919_000  # cq10: copy k of a cohort runs k × this later

VARIANTS = ("base", "cq10-same", "cq10", "backlog10", "backlog1")
# (variant, compared with, over the compared variant's window only)
COMPARISONS = (("cq10-same", "base", False), ("cq10", "base", True), ("backlog10", "base", False),
               ("backlog1", "base", False), ("backlog10", "backlog1", False))
# The comparisons with a goal (>= 0.8 of base); the others are diagnostics (see the module docstring).
GOAL_COMPARISONS = {("cq10-same", "base"), ("backlog10", "base")}


@dataclass
class Variant:
    name: str
    description: str
    cohorts: int
    preload_per_cq: int
    prelude: list[Any]  # setup + pre-loaded state (event dicts or JSON bytes), applied untimed
    stream: list[bytes]  # the measured input events, JSON-encoded
    copies: int = 1  # how many copies of (a prefix of) the base stream `stream` holds
    window: int = 0  # base: its first `window` events are also timed on their own (cq10's baseline)
    complete: bool = True  # every workload of the stream is submitted and finished within it

    @property
    def cqs(self) -> int:
        return self.cohorts * CQS_PER_COHORT


def build_variants(
    gen: Generated, names: Sequence[str] = VARIANTS, cq10_window: float = 1 / CQ_SCALE
) -> tuple[dict[str, Variant], dict[str, Any]]:
    encode = msgspec.json.Encoder().encode
    records = gen.records
    base_stream = [encode(render(rec)) for rec in records]
    nat_per_cq = gen.natural_pending_mean / gen.cqs
    # ≥ 9N: mean pending ≥ 10× base's; ≥ 10 of each GPU shape so that backlog1 has one of each
    p = max(math.ceil((BACKLOG_SCALE - 1) * nat_per_cq), BACKLOG_SCALE * len(GPU_SHAPES))
    p1 = p // BACKLOG_SCALE
    # cq10 replays the records before t_cut (the first `cq10_window` of the virtual time)
    window = _prefix_length(records, cq10_window)
    info = {
        "natural_pending_per_cq": nat_per_cq,
        "preload_backlog10_per_cq": p,
        "preload_backlog1_per_cq": p1,
        "cq10_window": min(1.0, cq10_window),
        "cq10_window_base_events": window,
    }
    setup = setup_events(gen.cohorts)
    cqs = gen.cohorts * CQS_PER_COHORT
    out: dict[str, Variant] = {}
    out["base"] = Variant("base", f"{cqs} CQs, the stream alone", gen.cohorts, 0, setup, base_stream, window=window)
    if "cq10-same" in names:
        # The base stream itself, unchanged, among 10× the ClusterQueues: CQ_SCALE - 1 more copies
        # of every base cohort hold what a running cluster holds - admitted, pending and finished
        # workloads, from replaying the stream's first tenth in each (untimed, stamped before the
        # stream starts) - and the measured stream never touches them.
        head = records[: _prefix_length(records, 1 / CQ_SCALE)]
        shift = (START_US - 60_000_000) - (head[-1][0] if head else START_US)
        others = heapq.merge(*(_shifted(head, k) for k in range(1, CQ_SCALE)))
        state = [encode(render(head[i], k * gen.cohorts, shift)) for _, k, i in others]
        out["cq10-same"] = Variant(
            "cq10-same",
            f"{cqs * CQ_SCALE} CQs: the base stream unchanged, {cqs * (CQ_SCALE - 1)} more CQs in "
            f"{gen.cohorts * (CQ_SCALE - 1)} more cohorts holding a running cluster's state "
            f"({len(state):,} untimed events) that the stream never touches",
            gen.cohorts * CQ_SCALE, 0, setup_events(gen.cohorts * CQ_SCALE) + state, base_stream,
        )
    if "cq10" in names:
        cohorts = gen.cohorts * CQ_SCALE
        head = records[:window]
        merged = heapq.merge(*(_shifted(head, k) for k in range(CQ_SCALE)))
        stream = [encode(render(head[i], k * gen.cohorts, k * COPY_SHIFT_US)) for _, k, i in merged]
        share = "the whole stream" if window == len(records) else f"the first {cq10_window:.0%} of its virtual time"
        out["cq10"] = Variant(
            "cq10",
            f"{cohorts * CQS_PER_COHORT} CQs, same per-CQ load, {CQ_SCALE} copies of {share}",
            cohorts, 0, setup_events(cohorts), stream, copies=CQ_SCALE, complete=window == len(records),
        )
    for name, per_cq in (("backlog10", p), ("backlog1", p1)):
        if name in names:
            out[name] = Variant(
                name,
                f"{cqs} CQs, the same stream after {per_cq} pre-loaded pending GPU jobs per CQ",
                gen.cohorts, per_cq, setup + preload_events(gen.cohorts, per_cq), base_stream,
            )
    return out, info


def _prefix_length(records: list[Record], share: float) -> int:
    """How many records fall in the first `share` of the stream's virtual time."""
    if share >= 1 or not records:
        return len(records)
    t_cut = records[0][0] + share * (records[-1][0] - records[0][0])
    return bisect.bisect_left(records, (int(t_cut),))


def _shifted(records: list[Record], k: int) -> Iterator[tuple[int, int, int]]:
    shift = k * COPY_SHIFT_US
    for i, rec in enumerate(records):
        yield rec[0] + shift, k, i
