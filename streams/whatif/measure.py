"""What a world is measured by, from its input events and its decisions, on its clock.

Per ClusterQueue, LocalQueue, cohort and priority:

- **usage over time**, Kueue's definition (as its performance recorder and the projections'
  `flavorsReservation` count it): the quota a workload holds from its `Admitted` or
  `QuotaReserved` decision until its `Finished`, `Deleted` or `QuotaReleased` decision (so an
  evicted workload's quota counts until it is released), per resource, summed over flavors. Each
  holding is one interval; the mean over a window is the integral over the window divided by its
  length, and a ClusterQueue's is also given as a share of its nominal quota (as it stands at the
  end of the world);
- **time to admission**: from the workload's submission (the time of the event that submitted
  it) to its first `Admitted` decision (mean, p50, p90, p99, max; nearest rank);
- **admissions** (`Admitted` decisions, re-admissions included), **preemptions** (`Preempted`
  decisions of its workloads) and **evictions** (`Evicted` decisions).

A workload belongs to the LocalQueue it was submitted to, the priority it was submitted with
(its `priorityClassName`, else `priority N`, else `0`), the ClusterQueue that admitted it (else
the one its LocalQueue points to) and that ClusterQueue's cohort at that time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from domain.decisions import (
    Admitted,
    Decision,
    Deleted,
    Evicted,
    Finished,
    Preempted,
    QuotaReleased,
    QuotaReserved,
)
from domain.quantity import QuantityError, amount
from projections.records import FR, assignment_usage

GROUPS = ("ClusterQueue", "LocalQueue", "Cohort", "Priority")
NO_COHORT = "(none)"


@dataclass(slots=True)
class WorkloadRecord:
    local_queue: str
    priority: str
    submitted: int
    cluster_queue: str | None = None
    cohort: str | None = None
    first_admitted: int | None = None
    admissions: int = 0
    preemptions: int = 0
    evictions: int = 0
    accepted: bool = False  # a decision other than Rejected named it: the engine took it
    holding: tuple[int, dict[FR, int], str, str] | None = None  # since, usage, cq, cohort


@dataclass(slots=True)
class Interval:
    start: int
    end: int
    usage: dict[FR, int]
    cluster_queue: str
    cohort: str
    local_queue: str
    priority: str


def priority_label(workload: dict[str, Any]) -> str:
    spec = workload.get("spec") if isinstance(workload.get("spec"), dict) else {}
    name = spec.get("priorityClassName")
    ref = spec.get("priorityClassRef")
    if not isinstance(name, str) and isinstance(ref, dict):
        name = ref.get("name")
    if isinstance(spec.get("priority"), int):
        return f"priority {spec['priority']}"
    return name if isinstance(name, str) else "0"


@dataclass
class Measure:
    workloads: dict[str, WorkloadRecord] = field(default_factory=dict)
    done: list[WorkloadRecord] = field(default_factory=list)  # earlier incarnations of reused names
    intervals: list[Interval] = field(default_factory=list)
    cq_cohort: dict[str, str] = field(default_factory=dict)
    cq_nominal: dict[str, dict[str, int]] = field(default_factory=dict)
    lq_cq: dict[str, str] = field(default_factory=dict)
    start: int | None = None
    end: int = 0
    decisions: dict[str, int] = field(default_factory=dict)
    ended: set[str] = field(default_factory=set)  # finished or deleted: the name may come back

    def item(self, item: dict[str, Any], now: int, w: str | None = None) -> None:
        if self.start is None:
            self.start = now
        t = item.get("type")
        if t == "WorkloadSubmitted" and w is not None:
            wl = item.get("workload")
            if not isinstance(wl, dict):
                return
            prev = self.workloads.get(w)
            if prev is not None:
                if w not in self.ended:
                    return  # still there: a duplicate submission (the engine rejects it)
                self.done.append(prev)
            spec = wl.get("spec") if isinstance(wl.get("spec"), dict) else {}
            ns = w.partition("/")[0]
            self.workloads[w] = WorkloadRecord(f"{ns}/{spec.get('queueName', '')}", priority_label(wl), now)
            self.ended.discard(w)
        elif t == "ConfigApplied" and isinstance(item.get("object"), dict):
            self._config(item["object"])

    def _config(self, obj: dict[str, Any]) -> None:
        kind = obj.get("kind")
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        name = meta.get("name")
        if not isinstance(name, str):
            return
        if kind == "ClusterQueue":
            cohort = spec.get("cohort", spec.get("cohortName"))
            self.cq_cohort[name] = cohort if isinstance(cohort, str) and cohort else NO_COHORT
            nominal: dict[str, int] = {}
            for group in spec.get("resourceGroups") or []:
                for fl in (group.get("flavors") or []) if isinstance(group, dict) else []:
                    for r in (fl.get("resources") or []) if isinstance(fl, dict) else []:
                        try:
                            nominal[r["name"]] = nominal.get(r["name"], 0) + amount(r["name"], r.get("nominalQuota", 0))
                        except (QuantityError, KeyError, TypeError):
                            continue
            self.cq_nominal[name] = nominal
        elif kind == "LocalQueue":
            ns = meta.get("namespace", "default")
            cq = spec.get("clusterQueue")
            if isinstance(cq, str):
                self.lq_cq[f"{ns}/{name}"] = cq

    def decision(self, d: Decision, now: int) -> None:
        kind = type(d)
        name = kind.__name__
        self.decisions[name] = self.decisions.get(name, 0) + 1
        w = d.workload
        rec = self.workloads.get(w) if w is not None else None
        if rec is None:
            return
        if name != "Rejected":
            rec.accepted = True
        if kind is Admitted or kind is QuotaReserved:
            cq = d.clusterQueue  # type: ignore[attr-defined]
            rec.cluster_queue = cq
            rec.cohort = self.cq_cohort.get(cq, NO_COHORT)
            if rec.holding is None:
                rec.holding = (now, assignment_usage(d.podSetAssignments), cq, rec.cohort)  # type: ignore[attr-defined]
            if kind is Admitted:
                rec.admissions += 1
                if rec.first_admitted is None:
                    rec.first_admitted = now
        elif kind is Preempted:
            rec.preemptions += 1
        elif kind is Evicted:
            rec.evictions += 1
        elif kind is QuotaReleased or kind is Finished or kind is Deleted:
            self._release(rec, now)
            if kind is not QuotaReleased:
                self.ended.add(w)  # type: ignore[arg-type]

    def _release(self, rec: WorkloadRecord, now: int) -> None:
        if rec.holding is None:
            return
        since, usage, cq, cohort = rec.holding
        rec.holding = None
        self.intervals.append(Interval(since, now, usage, cq, cohort, rec.local_queue, rec.priority))

    def close(self, end: int) -> None:
        """The end of the world: what is still held is held until `end`."""
        self.end = max(self.end, end)
        for rec in self.workloads.values():
            if rec.holding is not None:
                since, usage, cq, cohort = rec.holding
                self.intervals.append(Interval(since, self.end, usage, cq, cohort, rec.local_queue, rec.priority))

    def all_workloads(self) -> list[tuple[str, WorkloadRecord]]:
        """(name, record) of every workload the engine took, earlier incarnations first."""
        named = [(r.local_queue.partition("/")[0] + "/?", r) for r in self.done]
        return [(n, r) for n, r in named + list(self.workloads.items()) if r.accepted]

    def groups_of(self, rec: WorkloadRecord) -> list[tuple[str, str]]:
        cq = rec.cluster_queue or self.lq_cq.get(rec.local_queue) or "(none)"
        cohort = rec.cohort or self.cq_cohort.get(cq, NO_COHORT)
        return [("ClusterQueue", cq), ("LocalQueue", rec.local_queue), ("Cohort", cohort), ("Priority", rec.priority)]
