"""`quotaflow estimate`: when a pending workload would be admitted if nothing else arrives.

The log is folded as it is (the recorded world of `simulation.py`), then the same discrete-event
simulation continues from its end ("now", the log's last event unless told otherwise) with no
new arrivals: the engine is fed only the finishes of the workloads that run (each at its
admission plus its estimated runtime) and the releases of evicted ones (after the log's median
release delay, counted from the eviction), until the workload is admitted or nothing is left
to happen. The workloads listed as first are those of its ClusterQueue (or its cohort) that
finish, and those preempted or released, before it is admitted.

**Runtimes** are estimated from the log's finished runs (a run: an `Admitted` decision to the
`WorkloadFinished` that ended it, as `simulation.record` reads them). For a workload, the first of
these groups of runs with at least `MIN_SAMPLES` runs gives the median; when none has that many,
the first with any run does:

1. *similar*: the same LocalQueue, the same priority (class name or value), and for every
   resource it requests (summed over its pod sets, count × request) between half and twice the
   run's, with the same resources requested;
2. *queue*: the same LocalQueue;
3. *cluster queue*: the same ClusterQueue (the one the LocalQueue points to);
4. *cluster*: every finished run of the log.

A workload running at "now" has the rest of its estimate left (its estimate minus the time it
has run); one that has already run longer is taken to finish now (marked overdue). With no
finished run in the log, runtimes are unknown: such a workload never finishes in the
simulation, and the answer (`admissible: null`) says which runtimes it lacked.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import msgspec

from domain.decisions import Decision, Pending, Preempted, Rejected
from domain.engine import Engine
from domain.quantity import QuantityError, amount
from domain.timestamps import format_time
from streams.whatif.measure import priority_label
from streams.whatif.simulation import items_of, record
from streams.whatif.source import TimedRecord

MIN_SAMPLES = 3
BASES = ("similar", "queue", "cluster queue", "cluster")
US = 1_000_000


class EstimateError(Exception):
    """The workload cannot be estimated (unknown, or not pending): one clear message."""


@dataclass(slots=True)
class Profile:
    """What a workload is compared by."""

    local_queue: str
    cluster_queue: str | None
    priority: str
    requests: dict[str, int]


@dataclass(slots=True)
class Runtime:
    seconds: float | None  # None: no finished run to estimate from
    basis: str  # one of BASES, or "unknown"
    samples: int

    def describe(self) -> str:
        if self.seconds is None:
            return "unknown (no finished run in the log)"
        return f"median of {self.samples} {self.basis} run{'s' if self.samples != 1 else ''}"


def requests_of(workload: dict[str, Any]) -> dict[str, int]:
    spec = _dict(workload.get("spec"))
    total: dict[str, int] = {}
    for ps in spec.get("podSets") or []:
        if not isinstance(ps, dict):
            continue
        count = ps.get("count", 1)
        count = count if isinstance(count, int) else 1
        reqs = ps.get("requests")
        if not isinstance(reqs, dict):
            tmpl = ps.get("template")
            reqs = {}
            containers = (((tmpl or {}).get("spec") or {}).get("containers") or []) if isinstance(tmpl, dict) else []
            for c in containers:
                r = ((c.get("resources") or {}).get("requests") or {}) if isinstance(c, dict) else {}
                for k, v in r.items():
                    try:
                        reqs[k] = reqs.get(k, 0) + amount(k, v)
                    except (QuantityError, TypeError):
                        continue
            for k, v in reqs.items():
                total[k] = total.get(k, 0) + v * count
            continue
        for k, v in reqs.items():
            try:
                total[k] = total.get(k, 0) + amount(k, v) * count
            except (QuantityError, TypeError):
                continue
    return total


def similar_requests(a: dict[str, int], b: dict[str, int]) -> bool:
    if a.keys() != b.keys():
        return False
    return all((a[k] == b[k]) or (a[k] > 0 and b[k] > 0 and a[k] <= 2 * b[k] and b[k] <= 2 * a[k]) for k in a)


@dataclass
class History:
    """The log's finished runs, each with the profile of the workload that ran."""

    runs: list[tuple[Profile, float]] = field(default_factory=list)

    def estimate(self, p: Profile) -> Runtime:
        groups: list[list[float]] = [[], [], [], []]
        for q, secs in self.runs:
            groups[3].append(secs)
            if p.cluster_queue is not None and q.cluster_queue == p.cluster_queue:
                groups[2].append(secs)
            if q.local_queue == p.local_queue:
                groups[1].append(secs)
                if q.priority == p.priority and similar_requests(q.requests, p.requests):
                    groups[0].append(secs)
        chosen = next((i for i, g in enumerate(groups) if len(g) >= MIN_SAMPLES), None)
        if chosen is None:
            chosen = next((i for i, g in enumerate(groups) if g), None)
        if chosen is None:
            return Runtime(None, "unknown", 0)
        g = sorted(groups[chosen])
        return Runtime(g[(len(g) - 1) // 2], BASES[chosen], len(g))


class _Watching(Engine):
    """The engine of the recorded world, keeping the last word on each workload's wait."""

    def __init__(self) -> None:
        super().__init__()
        self.last_word: dict[str, str] = {}

    def apply(self, event: Any, offset: int, log_time: int | None = None) -> list[Decision]:
        made = super().apply(event, offset, log_time)
        for d in made:
            if d.workload is not None and type(d) in (Pending, Rejected):
                self.last_word[d.workload] = d.message  # type: ignore[attr-defined]
        return made


def estimate(records: list[TimedRecord], target: str, *, now: int | None = None, max_events: int = 1_000_000) -> dict[str, Any]:
    """The estimate for `target` ("namespace/name"), JSON-ready."""
    if not records:
        raise EstimateError("the log holds no event")
    engines: list[_Watching] = []

    def factory() -> Engine:
        engines.append(_Watching())
        return engines[-1]

    recorded = record(records, engine_factory=factory)
    engine = engines[0]
    tracker = recorded.tracker
    assert tracker is not None
    end = records[-1].time
    now = end if now is None else max(now, end)

    submissions: dict[tuple[int, int], dict[str, Any]] = {}
    for rec in records:
        for idx, item in items_of(rec):
            if item.get("type") == "WorkloadSubmitted" and isinstance(item.get("workload"), dict):
                submissions[(rec.offset, idx)] = item["workload"]
    lq_cq = recorded.measure.lq_cq

    def profile_at(pos: tuple[int, int] | None, w: str) -> Profile:
        wl = submissions.get(pos) if pos is not None else None
        wl = wl or {}
        spec = _dict(wl.get("spec"))
        lq = f"{w.partition('/')[0]}/{spec.get('queueName', '')}"
        return Profile(lq, lq_cq.get(lq), priority_label(wl), requests_of(wl))

    history = History([(profile_at(inc, _name_at(submissions, inc)), run.delay / US)
                       for inc, run in recorded.lifecycle.runs.items()])

    state = tracker.state.get(target)
    if state is None:
        raise EstimateError(f"no workload {target} in the log")
    target_rec = recorded.measure.workloads.get(target)
    if state in ("running", "reserved"):
        t = tracker.admitted_at.get(target)
        raise EstimateError(f"{target} is not pending: it was admitted at {format_time(t) if t else '?'}"
                            if state == "running" else f"{target} is not pending: it holds a quota reservation "
                            "(waiting for its admission checks)")
    if state == "done":
        raise EstimateError(f"{target} is not pending: it finished or was deleted")

    runtimes: dict[str, Runtime] = {}
    cq_of = {w: r.cluster_queue for w, r in recorded.measure.workloads.items() if r.cluster_queue is not None}

    def runtime(w: str) -> Runtime:
        r = runtimes.get(w)
        if r is None:
            r = runtimes[w] = history.estimate(profile_at(tracker.incarnation.get(w), w))
        return r

    heap: list[tuple[int, int, str, str, int]] = []  # (when, seq, kind, workload, token)
    seq = 0
    tokens: dict[str, int] = {}
    running_since: dict[str, int] = {}
    overdue: list[str] = []
    never_finish: list[str] = []
    release_delay = recorded.lifecycle.release_delay
    # A launcher reports a run's pods ready (waitForPodsReady): after the log's median delay from
    # an admission to its report, where the log has any (else no report, as in the log).
    ready_delays = sorted(r.delay for r in recorded.lifecycle.ready.values())
    ready_delay = ready_delays[(len(ready_delays) - 1) // 2] if ready_delays else None

    def schedule_finish(w: str, admitted: int) -> None:
        nonlocal seq
        r = runtime(w)
        if r.seconds is None:
            never_finish.append(w)
            return
        when = admitted + round(r.seconds * US)
        if when < now:
            overdue.append(w)
            when = now
        heapq.heappush(heap, (when, seq, "finish", w, tokens.get(w, 0)))
        seq += 1

    def schedule_ready(w: str, admitted: int) -> None:
        nonlocal seq
        if ready_delay is not None:
            heapq.heappush(heap, (max(admitted + ready_delay, now), seq, "ready", w, tokens.get(w, 0)))
            seq += 1

    def schedule_release(w: str, evicted: int) -> None:
        nonlocal seq
        heapq.heappush(heap, (max(evicted + release_delay, now), seq, "release", w, tokens.get(w, 0)))
        seq += 1

    # The state at "now": what runs finishes, what is evicted is released (name order: determinism).
    for w in sorted(tracker.state):
        s = tracker.state[w]
        if s == "running":
            running_since[w] = tracker.admitted_at[w]
            schedule_finish(w, tracker.admitted_at[w])
            inc = tracker.incarnation.get(w)
            if inc is not None and (inc, tracker.admissions.get(w, 0)) not in recorded.lifecycle.ready:
                schedule_ready(w, tracker.admitted_at[w])  # not reported yet
        elif s == "evicted":
            schedule_release(w, tracker.evicted_at.get(w, now))

    first: list[dict[str, Any]] = []  # finishes and preemptions before the admission, in order
    admitted_ahead: list[dict[str, Any]] = []
    admitted_at: int | None = None
    admitted_cq: str | None = None
    offset = records[-1].offset + 1
    events = 0
    last_word = engine.last_word.get(target)
    enc = msgspec.json.encode
    while heap and admitted_at is None:
        when, _, kind, w, token = heapq.heappop(heap)
        if tokens.get(w, 0) != token or tracker.state.get(w) != ("evicted" if kind == "release" else "running"):
            continue
        events += 1
        if events > max_events:
            raise EstimateError(f"the simulation ran {max_events} events without settling (workloads keep "
                                "preempting each other)")
        ns, _, name = w.partition("/")
        typ = {"finish": "WorkloadFinished", "release": "WorkloadReleased", "ready": "WorkloadPodsReady"}[kind]
        raw = enc({"type": typ, "namespace": ns, "name": name, "time": format_time(when),
                   "id": f"estimate/{typ}/{w}/{seq}"})
        seq += 1
        if kind == "release":
            first.append({"workload": w, "event": "released", "at": format_time(when), "clusterQueue": cq_of.get(w)})
        elif kind == "finish":
            r = runtime(w)
            first.append({"workload": w, "event": "finishes", "at": format_time(when), "clusterQueue": cq_of.get(w),
                          "runtimeSeconds": r.seconds, "runtimeBasis": r.basis, "samples": r.samples,
                          "running": w in running_since, "overdue": w in overdue})
        for d in engine.apply(raw, offset):
            what = tracker.decided(d, when)
            dw = d.workload
            if dw is None:
                continue
            if type(d) in (Pending, Rejected) and dw == target:
                last_word = d.message  # type: ignore[attr-defined]
            if what == "admitted":
                tokens[dw] = tokens.get(dw, 0) + 1
                cq_of[dw] = d.clusterQueue  # type: ignore[attr-defined]
                if dw == target:
                    admitted_at, admitted_cq = when, d.clusterQueue  # type: ignore[attr-defined]
                else:
                    # (a workload preempted and admitted again appears once, at its first admission)
                    admitted_ahead.append({"workload": dw, "at": format_time(when), "clusterQueue": d.clusterQueue})  # type: ignore[attr-defined]
                    schedule_finish(dw, when)
                    schedule_ready(dw, when)
            elif what == "evicted":
                tokens[dw] = tokens.get(dw, 0) + 1
                if type(d) is Preempted and d.preemptor == target:
                    first.append({"workload": dw, "event": "preempted", "at": format_time(when),
                                  "clusterQueue": cq_of.get(dw)})
                if tracker.state.get(dw) == "evicted":
                    schedule_release(dw, when)
        offset += 1

    target_cq = admitted_cq or (target_rec.cluster_queue if target_rec else None) or \
        lq_cq.get(profile_at(tracker.incarnation.get(target), target).local_queue)
    cohort = recorded.measure.cq_cohort.get(target_cq or "", "(none)")

    def related(cq: str | None) -> bool:
        if cq is None:
            return False
        return cq == target_cq or (cohort != "(none)" and recorded.measure.cq_cohort.get(cq) == cohort)

    submitted = target_rec.submitted if target_rec else now
    out: dict[str, Any] = {
        "workload": target,
        "localQueue": profile_at(tracker.incarnation.get(target), target).local_queue,
        "clusterQueue": target_cq,
        "cohort": None if cohort == "(none)" else cohort,
        "submitted": format_time(submitted),
        "now": format_time(now),
        "waitedSeconds": (now - submitted) / US,
        "runs": len(history.runs),
    }
    if admitted_at is not None:
        out.update({
            "admissible": True,
            "admittedAt": format_time(admitted_at),
            "inSeconds": (admitted_at - now) / US,
            "waitSeconds": (admitted_at - submitted) / US,
            "first": [f for f in first if related(f["clusterQueue"]) or f["event"] != "finishes"],
            "admittedAhead": _once([a for a in admitted_ahead if related(a["clusterQueue"])]),
        })
    else:
        reason = last_word or "the engine gave no reason"
        if never_finish:
            # Not "never": it waits for workloads whose end cannot be estimated.
            reason = (f"the runtimes of {', '.join(sorted(never_finish))} are unknown (no finished run in the log), "
                      f"so the simulation cannot finish them; the engine's last word: {reason}")
        out.update({"admissible": None if never_finish else False, "reason": reason,
                    "first": [f for f in first if related(f["clusterQueue"])],
                    "admittedAhead": _once([a for a in admitted_ahead if related(a["clusterQueue"])])})
    notes = []
    if not history.runs:
        notes.append("no finished run in the log: runtimes are unknown")
    low = sorted({f["workload"] for f in out["first"] if f.get("samples", MIN_SAMPLES) < MIN_SAMPLES})
    if low:
        notes.append(f"runtimes estimated from fewer than {MIN_SAMPLES} runs: {', '.join(low)}")
    ov = [w for w in overdue if any(f["workload"] == w for f in out["first"])]
    if ov:
        notes.append(f"running longer than estimated, taken to finish now: {', '.join(ov)}")
    out["notes"] = notes
    return out


def _name_at(submissions: dict[tuple[int, int], dict[str, Any]], pos: tuple[int, int]) -> str:
    wl = submissions.get(pos) or {}
    meta = _dict(wl.get("metadata"))
    ns = meta.get("namespace")
    return f"{ns if isinstance(ns, str) else 'default'}/{meta.get('name', '')}"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _once(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    out = []
    for r in rows:
        if r["workload"] not in seen:
            seen.add(r["workload"])
            out.append(r)
    return out
