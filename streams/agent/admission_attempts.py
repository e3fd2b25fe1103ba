"""Kueue's `kueue_admission_attempts_total{result}` and
`kueue_admission_attempt_duration_seconds{result}`, measured by the agent.

Kueue counts one attempt per scheduling cycle that found heads to try (pkg/scheduler/scheduler.go
`schedule`, metrics.AdmissionAttempt): `success` when it admitted (or reserved quota for) at least
one workload, else `inadmissible`, with the cycle's duration. quotaflow's engine runs its
admission cycle after each input event, so an attempt is an input event whose decisions show a
cycle at work: an `Admitted` or `QuotaReserved` (success), else a `Pending` or a `Preempted`
(inadmissible). An event that changed no workload's admission (a configuration applied, a
duplicate, a head tried again with the same outcome, which the engine does not repeat) is no
attempt. The duration is the time the engine took to decide the event, measured around
`Engine.apply` by the agent (in the engine process when it runs in one): the engine has no clock.

These are the agent's, not the logs': the decision log stays the same whatever the machine's
speed, so the projection cannot know them. The agent serves them on its HTTP port (`/metrics`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

# Kueue's histogram sets no buckets: the Prometheus client's defaults.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SUCCESS = "success"
INADMISSIBLE = "inadmissible"
_ADMITTING = frozenset(("Admitted", "QuotaReserved"))
_TRYING = frozenset(("Pending", "Preempted"))


def attempt_of(types: Sequence[str]) -> bool | None:
    """True: a successful attempt; False: an inadmissible one; None: no attempt."""
    tried = False
    for kind in types:
        if kind in _ADMITTING:
            return True
        if kind in _TRYING:
            tried = True
    return False if tried else None


class Attempts:
    """Counts and durations by result; `record` costs a bisect per attempt."""

    __slots__ = ("count", "sum", "buckets")

    def __init__(self) -> None:
        self.count = {SUCCESS: 0, INADMISSIBLE: 0}
        self.sum = {SUCCESS: 0.0, INADMISSIBLE: 0.0}
        self.buckets = {SUCCESS: [0] * len(BUCKETS), INADMISSIBLE: [0] * len(BUCKETS)}

    def record(self, success: bool, seconds: float) -> None:
        result = SUCCESS if success else INADMISSIBLE
        self.count[result] += 1
        self.sum[result] += seconds
        i = bisect.bisect_left(BUCKETS, seconds)
        if i < len(BUCKETS):
            self.buckets[result][i] += 1

    def families(self, role: str = "standalone") -> Iterator[Metric]:
        help_text = ("The total number of attempts to admit workloads.\nEach admission attempt might try to admit "
                     "more than one workload.\nThe label 'result' can have the following values:\n- 'success' means "
                     "that at least one workload was admitted.,\n- 'inadmissible' means that no workload was admitted.")
        total = CounterMetricFamily("kueue_admission_attempts", help_text, labels=["result", "replica_role"])
        duration = HistogramMetricFamily(
            "kueue_admission_attempt_duration_seconds",
            "The latency of an admission attempt.\nThe label 'result' can have the following values:\n- 'success' "
            "means that at least one workload was admitted.,\n- 'inadmissible' means that no workload was admitted.",
            labels=["result", "replica_role"])
        for result in (INADMISSIBLE, SUCCESS):
            total.add_metric([result, role], self.count[result])
            cumulative = 0
            buckets = []
            for bound, n in zip(BUCKETS, self.buckets[result], strict=True):
                cumulative += n
                buckets.append((repr(bound), cumulative))
            buckets.append(("+Inf", self.count[result]))
            duration.add_metric([result, role], buckets, self.sum[result])
        yield total
        yield duration
