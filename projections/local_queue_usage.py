"""Each LocalQueue's admission-fair-sharing usage, folded from the logs, for
`kueue_local_queue_admission_fair_sharing_usage`.

The same ledger as the engine's (domain/admission_fair_sharing.py), moved by what the logs say:
the Configuration and LocalQueues from the input log, admissions, evictions and releases from
the decisions, at the log's time (the latest event `time`, as the engine keeps it). A release
inside a Batch is folded at the Batch's latest time, where the engine folds it at its own inner
event's: the two can differ in the sampling that falls between them.
"""

from __future__ import annotations

from typing import Any

from domain.admission_fair_sharing import USAGE_BASED, LQKey, UsageLedger
from domain.objects import ClusterQueueSpec, Configuration
from projections.records import FR


def _by_resource(usage: dict[FR, int] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for (_, res), amount in (usage or {}).items():
        out[res] = out.get(res, 0) + amount
    return out


class LocalQueueUsage:
    __slots__ = ("ledger",)

    def __init__(self) -> None:
        self.ledger = UsageLedger()

    @property
    def enabled(self) -> bool:
        return self.ledger.config is not None

    def configuration(self, config: Configuration, lqs: list[LQKey], now: int) -> None:
        self.ledger.set_config(config.admission_fair_sharing, now)
        if self.enabled:
            for lq in lqs:
                self.ledger.entry(lq, now)

    def local_queue_applied(self, lq: LQKey, now: int) -> None:
        if self.enabled:
            self.ledger.entry(lq, now)

    def local_queue_deleted(self, lq: LQKey) -> None:
        self.ledger.forget(lq)

    def reserved(self, workload: str, lq: LQKey, cq: ClusterQueueSpec, usage: dict[FR, int] | None,
                 admitted: bool, now: int) -> None:
        if not self.enabled:
            return
        fair = cq.admission_mode == USAGE_BASED
        by_resource = _by_resource(usage)
        if fair:
            self.ledger.push_penalty(lq, workload, by_resource, now)
        if admitted:
            self.ledger.admitted(lq, workload, by_resource, now, settle=fair)

    def admitted(self, workload: str, lq: LQKey, cq: ClusterQueueSpec | None, usage: dict[FR, int] | None,
                 now: int) -> None:
        if self.enabled:
            fair = cq is not None and cq.admission_mode == USAGE_BASED
            self.ledger.admitted(lq, workload, _by_resource(usage), now, settle=fair)

    def evicted(self, workload: str, now: int) -> None:
        if self.ledger.counted:
            self.ledger.uncount(workload, now)

    def released(self, workload: str, lq: LQKey, now: int) -> None:
        if self.ledger.entries:
            self.ledger.uncount(workload, now)
            self.ledger.drop_penalty(lq, workload)

    def rank(self, lq: LQKey, weight_milli: int, now: int) -> Any:
        """As the engine's queue orders by it after an event: every sampling due made."""
        e = self.ledger.entries.get(lq)
        if e is not None:
            self.ledger.sync(lq, e, now)
        return self.ledger.rank(lq, now, weight_milli)

    def usage(self, lq: LQKey, weight_milli: int, now: int) -> float:
        return self.ledger.usage_value(lq, now, weight_milli)
