"""Kueue's performance metrics, with the definitions of its recorder (runner/recorder).

Per ClusterQueue, Kueue records every status change with the time it saw it and integrates the
used cpu (`FlavorsUsage`, in mCPU: quota held by admitted workloads, including evicted ones
whose reservation the runner has not cleared yet) over time, step by step: each change adds
`previous usage x time since the previous change`. A ClusterQueue class's usage is
`sum(integral) / (sum(nominal quota) x (last change - first change))` over its queues, the
window running from the first change of any of them to the last (Kueue's checker prints it as a
percentage). Per workload, time to admission is `admission time - creation time` of its latest
admission (Kueue overwrites it on every admission, so a preempted workload counts from its
creation to its final admission), evictions count the transitions to evicted, and a workload
class averages them over all its workloads. The run's wall time is the time until the
recorder's stop condition holds: every workload created and none pending or holding quota.

Here the changes are the decisions the engine wrote (and the arrivals, which change a queue's
pending count), stamped with the time at which they were seen: virtual milliseconds in the
simulation, wall-clock milliseconds since the start in real time. In real time an admission's
time is the decision record's timestamp (set by the agent when it wrote it, the counterpart of
the condition's transition time) and a creation's the moment the generator appended it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devtools.kueue_perf.generator import Arrival, Scenario
from domain.decisions import (
    Admitted,
    Applied,
    Decision,
    Deleted,
    Evicted,
    Finished,
    Preempted,
    QuotaReleased,
    Rejected,
)
from domain.quantity import amount


@dataclass(slots=True)
class CQState:
    nominal_mcpu: int
    class_name: str
    first_ms: float
    last_ms: float
    usage_mcpu: int = 0
    max_usage_mcpu: int = 0
    used_mcpu_ms: float = 0.0

    def change(self, now: float, delta_mcpu: int = 0) -> None:
        if self.usage_mcpu > 0:
            self.used_mcpu_ms += self.usage_mcpu * (now - self.last_ms)
        self.last_ms = now
        self.usage_mcpu += delta_mcpu
        self.max_usage_mcpu = max(self.max_usage_mcpu, self.usage_mcpu)


@dataclass(slots=True)
class WLState:
    class_name: str
    created_ms: float
    runtime_ms: int = 0
    request_mcpu: int = 0
    time_to_admit_ms: float = 0.0
    admissions: int = 0
    evictions: int = 0
    finished_ms: float | None = None
    admitted_ms: float | None = None  # when its latest admission was seen
    held_ms: float | None = None  # its last run: from the admission seen to the finish seen


@dataclass
class CQClassSummary:
    queues: int
    nominal_mcpu: int
    used_mcpu_ms: float
    first_ms: float
    last_ms: float

    @property
    def usage(self) -> float:
        """Kueue checker's percentage: used / (nominal x elapsed)."""
        elapsed = self.last_ms - self.first_ms
        return 100.0 * self.used_mcpu_ms / (self.nominal_mcpu * elapsed) if elapsed > 0 and self.nominal_mcpu else 0.0


@dataclass
class WLClassSummary:
    count: int
    admitted: int
    finished: int
    total_evictions: int
    avg_time_to_admission_ms: float
    avg_time_to_finish_ms: float
    max_time_to_admission_ms: float
    # Not Kueue's: how long a finished run held its quota beyond its runtime, on average. Zero in
    # virtual time without runner latency; in real time, the round trip of the finish through the
    # log (the runner's send, the agent's decision, the recorder's read) that every run pays.
    avg_held_past_runtime_ms: float = 0.0


@dataclass
class Summary:
    wall_ms: float
    complete: bool
    cluster_queue_classes: dict[str, CQClassSummary]
    workload_classes: dict[str, WLClassSummary]
    decisions: dict[str, int]
    rejected: list[str] = field(default_factory=list)
    # Quota held by the finished runs over their runtimes, weighted by their requests: 1.0 when
    # every run holds its quota exactly as long as it runs. When quota is the bottleneck, the
    # wall time stretches by about this factor (README: "Why real time is slower").
    held_per_runtime: float = 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "wallMs": round(self.wall_ms, 1),
            "complete": self.complete,
            "clusterQueueClasses": {
                k: {"queues": v.queues, "usagePercent": round(v.usage, 2), "cpuUsedMcpuMs": round(v.used_mcpu_ms),
                    "nominalQuotaMcpu": v.nominal_mcpu, "firstMs": round(v.first_ms, 1), "lastMs": round(v.last_ms, 1)}
                for k, v in self.cluster_queue_classes.items()
            },
            "workloadClasses": {
                k: {"count": v.count, "admitted": v.admitted, "finished": v.finished, "totalEvictions": v.total_evictions,
                    "averageTimeToAdmissionMs": round(v.avg_time_to_admission_ms, 1),
                    "averageTimeToFinishMs": round(v.avg_time_to_finish_ms, 1),
                    "maxTimeToAdmissionMs": round(v.max_time_to_admission_ms, 1),
                    "averageHeldPastRuntimeMs": round(v.avg_held_past_runtime_ms, 1)}
                for k, v in self.workload_classes.items()
            },
            "heldPerRuntime": round(self.held_per_runtime, 4),
            "decisions": dict(sorted(self.decisions.items())),
            "rejected": self.rejected[:10],
        }


class Recorder:
    def __init__(self, scenario: Scenario, start_ms: float = 0.0) -> None:
        self.cq = {q.name: CQState(q.nominal_mcpu, q.class_name, start_ms, start_ms) for q in scenario.queues}
        self.wl: dict[str, WLState] = {}
        self.expected = len(scenario.arrivals)
        self.finished = 0
        self.held: dict[str, tuple[str, int]] = {}  # workload -> (ClusterQueue, mCPU) while it holds quota
        self.decisions: dict[str, int] = {}
        self.rejected: list[str] = []
        self.last_finish_ms = start_ms
        self.start_ms = start_ms
        self._mcpu: dict[str, int] = {}

    def created(self, arrival: Arrival, now: float) -> None:
        self.wl[arrival.key] = WLState(arrival.class_name, now, arrival.runtime_ms, arrival.request_mcpu)
        self.cq[arrival.namespace].change(now)

    def _cpu(self, quantity: str) -> int:
        m = self._mcpu.get(quantity)
        if m is None:
            m = self._mcpu[quantity] = amount("cpu", quantity)
        return m

    def decision(self, d: Decision, now: float, decided: float | None = None) -> None:
        """`d` as seen at `now`; `decided` is when the engine decided it, if the log says so (Kueue
        takes the admission time from the Admitted condition's transition time, not from when the
        runner saw it; everything else is stamped when seen, as Kueue's recorder does)."""
        if isinstance(d, Applied):
            return  # the scenario's configuration taking effect: not a decision about its workloads
        kind = type(d).__name__
        self.decisions[kind] = self.decisions.get(kind, 0) + 1
        key = d.workload
        ws = self.wl.get(key) if key is not None else None
        if isinstance(d, Rejected):
            self.rejected.append(f"{d.workload}: {d.reason}: {d.message}")
            return
        if ws is None or key is None:
            return
        if isinstance(d, Admitted):
            mcpu = sum(self._cpu(ps.resourceUsage.get("cpu", "0")) for ps in d.podSetAssignments)
            self.held[key] = (d.clusterQueue, mcpu)
            self.cq[d.clusterQueue].change(now, mcpu)
            ws.admissions += 1
            ws.admitted_ms = now
            ws.time_to_admit_ms = (now if decided is None else min(now, max(decided, ws.created_ms))) - ws.created_ms
        elif isinstance(d, (Preempted, Evicted)):
            ws.evictions += 1
            held = self.held.get(key)
            if held is not None:
                self.cq[held[0]].change(now)
        elif isinstance(d, (QuotaReleased, Finished, Deleted)):
            held = self.held.pop(key, None)
            if held is not None:
                self.cq[held[0]].change(now, -held[1])
            if isinstance(d, (Finished, Deleted)) and ws.finished_ms is None:
                ws.finished_ms = now
                if held is not None and ws.admitted_ms is not None:
                    ws.held_ms = now - ws.admitted_ms
                self.finished += 1
                self.last_finish_ms = max(self.last_finish_ms, now)

    @property
    def done(self) -> bool:
        """Kueue's stop condition: everything created, nothing pending or holding quota."""
        return len(self.wl) == self.expected and self.finished == self.expected and not self.held

    def summary(self) -> Summary:
        classes: dict[str, CQClassSummary] = {}
        for st in self.cq.values():
            c = classes.get(st.class_name)
            if c is None:
                classes[st.class_name] = CQClassSummary(1, st.nominal_mcpu, st.used_mcpu_ms, st.first_ms, st.last_ms)
            else:
                c.queues += 1
                c.nominal_mcpu += st.nominal_mcpu
                c.used_mcpu_ms += st.used_mcpu_ms
                c.first_ms = min(c.first_ms, st.first_ms)
                c.last_ms = max(c.last_ms, st.last_ms)
        wl: dict[str, list[WLState]] = {}
        for ws in self.wl.values():
            wl.setdefault(ws.class_name, []).append(ws)
        wl_classes = {
            name: WLClassSummary(
                count=len(states),
                admitted=sum(1 for s in states if s.admissions),
                finished=sum(1 for s in states if s.finished_ms is not None),
                total_evictions=sum(s.evictions for s in states),
                avg_time_to_admission_ms=sum(s.time_to_admit_ms for s in states) / len(states),
                avg_time_to_finish_ms=sum((s.finished_ms or 0.0) - s.created_ms for s in states if s.finished_ms is not None)
                / max(1, sum(1 for s in states if s.finished_ms is not None)),
                max_time_to_admission_ms=max(s.time_to_admit_ms for s in states),
                avg_held_past_runtime_ms=_mean([s.held_ms - s.runtime_ms for s in states if s.held_ms is not None]),
            )
            for name, states in sorted(wl.items())
        }
        runs = [(s.request_mcpu, s.runtime_ms, s.held_ms) for s in self.wl.values() if s.held_ms is not None]
        runtime = sum(mcpu * ms for mcpu, ms, _ in runs)
        held = sum(mcpu * ms for mcpu, _, ms in runs)
        return Summary(self.last_finish_ms - self.start_ms, self.done, dict(sorted(classes.items())), wl_classes,
                       dict(self.decisions), self.rejected, held / runtime if runtime else 1.0)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
