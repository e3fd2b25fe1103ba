"""Kueue's own results on these configs: the calibrated means written in its range specs
(kubernetes-sigs/kueue test/performance/scheduler/configs/{baseline,large-scale}/rangespec.yaml,
commit ff69552e79ad21652c36caa97038382e55625cf7). The range specs set limits from these means
(+20% time, -7% usage); the means themselves are what a comparison needs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KueueMeans:
    wall_ms: float
    usage_percent: dict[str, float]  # ClusterQueue class -> mean usage
    time_to_admission_ms: dict[str, float]  # workload class -> mean of the class average


MEANS = {
    # "Average value 351116.4", "Average value 55.9 ... with SchedulingEquivalenceHashing enabled",
    # large 16501, medium 76768, small 215468.
    "baseline": KueueMeans(351_116.4, {"cq": 55.9}, {"large": 16_501, "medium": 76_768, "small": 215_468}),
    # "mean=1179411ms", "mean=38.64%", large 105604, medium 256413, small 700379.
    "large-scale": KueueMeans(1_179_411, {"cq": 38.64}, {"large": 105_604, "medium": 256_413, "small": 700_379}),
}
