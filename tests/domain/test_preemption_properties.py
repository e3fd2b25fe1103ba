"""Classical preemption, checked on random configurations and random event streams.

Each example draws a cohort layout (one-level cohorts plus a standalone ClusterQueue) with
random quotas, borrowing and lending limits, preemption policies, flavor fungibility and
eviction release policies, then drives the engine event by event with submissions, finishes,
deletions, priority updates and WorkloadReleased confirmations for evicted workloads. A model
rebuilt ONLY from the decisions (never from engine state) is checked after every event:

0. The engine returns from every event (the admission cycle reaches its fixed point).
1. Every Preempted decision is allowed by the preemptor's ClusterQueue policy for its reason:
   InClusterQueue -> withinClusterQueue, InCohortReclamation -> reclaimWithinCohort,
   InCohortReclaimWhileBorrowing -> borrowWithinCohort (LowerPriority, maxPriorityThreshold).
2. No preemption when the preemptor would not fit afterwards: when a preemptor reports
   "Pending the preemption of N workload(s)", it fits in some flavor of its ClusterQueue once
   every evicted-but-not-released workload of its cohort tree is gone (a sound
   over-approximation of "its targets are gone").
3. A preemptor keeps its room (Kueue's sticky preemptor in BestEffortFIFO): while it waits for
   its victims, no other workload of its ClusterQueue is admitted.
4. Usage limits hold after every event, counting evicted-but-not-released workloads as holding
   quota: nominal + borrowingLimit per ClusterQueue, the cohort's lendable total (lending
   limits), nominal for a ClusterQueue without cohort.
5. Liveness: after draining (every eviction released, every admitted workload finished, until
   nothing holds quota), no workload still waits that an empty cluster admits when alone; with
   what Kueue needs for a drain to end (PrioritizePreemptorWorkloads, no reclaimWithinCohort
   Any: see the test).

The quota formulas in this module are written out independently of domain/quota.py, for
one-level cohorts, from Kueue's pkg/cache/scheduler/resource_node.go.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable

import msgspec
from draining import admitted_alone, drain
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from domain.decisions import encode
from domain.engine import Engine
from domain.snapshot import dump, load

V1 = "kueue.x-k8s.io/v1beta1"
PRIORITIES = (0, 1, 2, 3)
CREATED = ("2024-01-01T00:00:00Z", "2024-01-01T00:01:00Z", "2024-01-01T00:02:00Z")
PENDING_PREEMPTION = "Pending the preemption of"
WAITING_FOR_PREEMPTED = "WaitingForPreemptedWorkloads"


# -- configuration -------------------------------------------------------------------------
@dataclass
class Quota:
    nominal: int  # milli-CPU
    borrowing_limit: int | None
    lending_limit: int | None

    @property
    def guaranteed(self) -> int:
        """Kueue's localQuota: the part never lent to the cohort."""
        return 0 if self.lending_limit is None else self.nominal - self.lending_limit


@dataclass
class CQ:
    name: str
    cohort: str | None
    flavors: dict[str, Quota]  # in the ClusterQueue's order
    within: str
    reclaim: str
    bwc_policy: str
    threshold: int | None
    release: str | None  # eviction-release annotation


@dataclass
class Layout:
    cqs: dict[str, CQ]
    global_release: str

    def members(self, cohort: str) -> list[CQ]:
        return [c for c in self.cqs.values() if c.cohort == cohort]


RECLAIM_POLICIES = ("Never", "LowerPriority", "Any")
# What a drain needs for Kueue's releases to come to an end (test_a_drained_cluster_leaves_nothing_waiting).
DRAIN_GATES = ("PrioritizePreemptorWorkloads",)
DRAIN_RECLAIM_POLICIES = ("Never", "LowerPriority")


@st.composite
def layouts(draw: st.DrawFn, reclaim_policies: tuple[str, ...] = RECLAIM_POLICIES) -> Layout:
    flavors = ["default", "spot"][: draw(st.integers(1, 2))]
    cqs: dict[str, CQ] = {}
    groups = [("cohort-a", draw(st.integers(2, 3))), ("cohort-b", draw(st.integers(0, 2))), (None, 1)]
    for cohort, n in groups:
        for i in range(n):
            name = f"{cohort or 'solo'}-{i}"
            quotas = {}
            for f in flavors:
                nominal = draw(st.integers(0, 6)) * 1000
                bl = ll = None
                if cohort is not None:
                    if draw(st.booleans()):
                        bl = draw(st.integers(0, 4)) * 1000
                    if draw(st.integers(0, 3)) == 0:
                        ll = draw(st.integers(0, nominal // 1000)) * 1000
                quotas[f] = Quota(nominal, bl, ll)
            reclaim = draw(st.sampled_from(reclaim_policies))
            bwc = "Never" if reclaim == "Never" else draw(st.sampled_from(("Never", "LowerPriority")))
            threshold = draw(st.one_of(st.none(), st.sampled_from(PRIORITIES))) if bwc != "Never" else None
            cqs[name] = CQ(
                name, cohort, quotas,
                within=draw(st.sampled_from(("Never", "LowerPriority", "LowerOrNewerEqualPriority"))),
                reclaim=reclaim, bwc_policy=bwc, threshold=threshold,
                release=draw(st.sampled_from((None, None, "Immediate", "OnRelease"))),
            )
    return Layout(cqs, draw(st.sampled_from(("OnRelease", "Immediate"))))


def config_events(layout: Layout, draw: Callable[[st.SearchStrategy[str]], str],
                  gates: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    configuration: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
        "quotaflow": {"evictionRelease": layout.global_release}}
    if gates:
        configuration["featureGates"] = {gate: True for gate in gates}
    events: list[dict[str, Any]] = [{"type": "ConfigApplied", "object": configuration}]
    flavor_names = next(iter(layout.cqs.values())).flavors
    for f in flavor_names:
        events.append({"type": "ConfigApplied", "object": {"apiVersion": V1, "kind": "ResourceFlavor", "metadata": {"name": f}}})
    for cq in layout.cqs.values():
        resources = []
        for f, q in cq.flavors.items():
            r: dict[str, Any] = {"name": "cpu", "nominalQuota": f"{q.nominal}m"}
            if q.borrowing_limit is not None:
                r["borrowingLimit"] = f"{q.borrowing_limit}m"
            if q.lending_limit is not None:
                r["lendingLimit"] = f"{q.lending_limit}m"
            resources.append({"name": f, "resources": [r]})
        bwc: dict[str, Any] = {"policy": cq.bwc_policy}
        if cq.threshold is not None:
            bwc["maxPriorityThreshold"] = cq.threshold
        spec: dict[str, Any] = {
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": cq.within, "reclaimWithinCohort": cq.reclaim, "borrowWithinCohort": bwc},
            "flavorFungibility": {
                "whenCanBorrow": draw(st.sampled_from(("MayStopSearch", "TryNextFlavor"))),
                "whenCanPreempt": draw(st.sampled_from(("MayStopSearch", "TryNextFlavor"))),
            },
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": resources}],
        }
        if cq.cohort:
            spec["cohort"] = cq.cohort
        meta: dict[str, Any] = {"name": cq.name}
        if cq.release:
            meta["annotations"] = {"quotaflow.dev/eviction-release": cq.release}
        events.append({"type": "ConfigApplied", "object": {"apiVersion": V1, "kind": "ClusterQueue", "metadata": meta, "spec": spec}})
        events.append({"type": "ConfigApplied", "object": {
            "apiVersion": V1, "kind": "LocalQueue", "metadata": {"namespace": cq.name, "name": "lq"},
            "spec": {"clusterQueue": cq.name}}})
    return events


# -- the model, rebuilt from decisions -------------------------------------------------------
@dataclass
class Wl:
    cq: str
    cpu: int  # milli, whole workload
    priority: int
    created: int  # index into CREATED
    holding: dict[str, int] | None = None  # flavor -> milli, while it holds quota
    evicted: bool = False


@dataclass
class Model:
    layout: Layout
    fit: bool  # check property 2
    sticky: bool  # check property 3
    wls: dict[str, Wl] = field(default_factory=dict)
    waiting: dict[str, str] = field(default_factory=dict)  # cq -> preemptor waiting for victims

    def usage(self, cq: str, flavor: str, without_evicted_in: str | None = None) -> int:
        total = 0
        for w in self.wls.values():
            if w.cq != cq or w.holding is None:
                continue
            if without_evicted_in is not None and w.evicted:
                continue
            total += w.holding.get(flavor, 0)
        return total

    def tree(self, cq: str) -> list[CQ]:
        c = self.layout.cqs[cq]
        return [c] if c.cohort is None else self.layout.members(c.cohort)

    # Kueue's resource-node formulas for a one-level cohort (resource_node.go: available).
    def available(self, cq: str, flavor: str, drop_evicted: bool = False) -> int:
        me = self.layout.cqs[cq]
        tag = "x" if drop_evicted else None
        q = me.flavors[flavor]
        used = self.usage(cq, flavor, tag)
        if me.cohort is None:
            return q.nominal - used
        subtree = sum(m.flavors[flavor].nominal - m.flavors[flavor].guaranteed for m in self.tree(cq))
        cohort_used = sum(max(0, self.usage(m.name, flavor, tag) - m.flavors[flavor].guaranteed) for m in self.tree(cq))
        headroom = subtree - cohort_used
        if q.borrowing_limit is not None:
            lendable = q.nominal - q.guaranteed
            headroom = min(headroom, lendable - max(0, used - q.guaranteed) + q.borrowing_limit)
        return max(0, q.guaranteed - used) + headroom

    def check_limits(self, where: str) -> None:
        for cq in self.layout.cqs.values():
            for f, q in cq.flavors.items():
                used = self.usage(cq.name, f)
                if cq.cohort is None:
                    assert used <= q.nominal, f"{where}: {cq.name}/{f} uses {used} > nominal {q.nominal}"
                elif q.borrowing_limit is not None:
                    assert used <= q.nominal + q.borrowing_limit, (
                        f"{where}: {cq.name}/{f} uses {used} > nominal+borrowingLimit {q.nominal + q.borrowing_limit}")
        cohorts = {c.cohort for c in self.layout.cqs.values() if c.cohort}
        for cohort in cohorts:
            members = self.layout.members(cohort)
            for f in members[0].flavors:
                lendable = sum(m.flavors[f].nominal - m.flavors[f].guaranteed for m in members)
                borrowed = sum(max(0, self.usage(m.name, f) - m.flavors[f].guaranteed) for m in members)
                assert borrowed <= lendable, f"{where}: cohort {cohort}/{f} uses {borrowed} of its lendable {lendable}"


def milli(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(q) * 1000


def satisfies(policy: str, preemptor: Wl, victim: Wl) -> bool:
    if policy == "LowerPriority":
        return preemptor.priority > victim.priority
    if policy == "LowerOrNewerEqualPriority":
        return preemptor.priority > victim.priority or (
            preemptor.priority == victim.priority and preemptor.created < victim.created)
    return policy == "Any"


def apply_decisions(model: Model, decisions: list[dict[str, Any]], where: str) -> None:
    cqs = model.layout.cqs
    for d in decisions:
        kind: str = d["type"]
        key: str = d.get("workload") or ""
        w = model.wls.get(key) if key else None
        if kind == "Admitted":
            assert w is not None and w.holding is None, f"{where}: {key} admitted twice"
            waiting = model.waiting.get(d["clusterQueue"])
            assert not model.sticky or waiting is None or waiting == key, (
                f"{where}: {key} admitted in {d['clusterQueue']} while the preemptor {waiting} waits for its victims")
            model.waiting.pop(d["clusterQueue"], None)
            w.holding = {}
            for ps in d["podSetAssignments"]:
                f = ps["flavors"]["cpu"]
                w.holding[f] = w.holding.get(f, 0) + milli(ps["resourceUsage"]["cpu"])
        elif kind == "Preempted":
            p = model.wls[d["preemptor"]]
            assert w is not None and w.holding is not None and not w.evicted, f"{where}: {key} preempted without quota"
            assert p.holding is None, f"{where}: preemptor {d['preemptor']} already holds quota"
            policy_cq = cqs[p.cq]
            reason = d["reason"]
            if reason == "InClusterQueue":
                assert w.cq == p.cq, f"{where}: InClusterQueue across ClusterQueues"
                assert policy_cq.within != "Never" and satisfies(policy_cq.within, p, w), (
                    f"{where}: {key} (priority {w.priority}) preempted by {d['preemptor']} (priority {p.priority}) "
                    f"against withinClusterQueue {policy_cq.within}")
            else:
                assert reason in ("InCohortReclamation", "InCohortReclaimWhileBorrowing"), reason
                assert w.cq != p.cq and cqs[w.cq].cohort is not None and cqs[w.cq].cohort == policy_cq.cohort, (
                    f"{where}: {reason} outside the preemptor's cohort")
                assert policy_cq.reclaim != "Never" and satisfies(policy_cq.reclaim, p, w), (
                    f"{where}: {key} (priority {w.priority}) reclaimed by {d['preemptor']} (priority {p.priority}) "
                    f"against reclaimWithinCohort {policy_cq.reclaim}")
                if reason == "InCohortReclaimWhileBorrowing":
                    assert policy_cq.bwc_policy == "LowerPriority" and w.priority < p.priority, (
                        f"{where}: {key} preempted while borrowing against borrowWithinCohort {policy_cq.bwc_policy}")
                    assert policy_cq.threshold is None or w.priority <= policy_cq.threshold, (
                        f"{where}: {key} (priority {w.priority}) above maxPriorityThreshold {policy_cq.threshold}")
            w.evicted = True
        elif kind == "Evicted":
            assert w is not None and w.holding is not None
            w.evicted = True
        elif kind == "QuotaReleased":
            assert w is not None and w.holding is not None and w.evicted, f"{where}: {key} released without eviction"
            w.holding = None
            w.evicted = False
        elif kind in ("Finished", "Deleted"):
            model.wls.pop(key, None)
            for cq_name, waiting_key in list(model.waiting.items()):
                if waiting_key == key:
                    del model.waiting[cq_name]
        elif kind == "Pending":
            assert w is not None
            if d["reason"] != WAITING_FOR_PREEMPTED:
                if model.waiting.get(w.cq) == key:
                    del model.waiting[w.cq]
                continue
            model.waiting[w.cq] = key
            if model.fit and PENDING_PREEMPTION in d["message"]:
                fits = [f for f in cqs[w.cq].flavors if w.cpu <= model.available(w.cq, f, drop_evicted=True)]
                assert fits, (
                    f"{where}: {key} ({w.cpu}m) preempts but would not fit in {w.cq} even with every "
                    f"evicted workload of its cohort gone")
    model.check_limits(where)


# -- the stream ---------------------------------------------------------------------------
def workload(key: str, w: Wl) -> dict[str, Any]:
    ns, name = key.split("/")
    return {"metadata": {"namespace": ns, "name": name, "creationTimestamp": CREATED[w.created]},
            "spec": {"queueName": "lq", "priority": w.priority,
                     "podSets": [{"name": "main", "count": 1, "requests": {"cpu": f"{w.cpu}m"}}]}}


class EngineDidNotReturn(AssertionError):
    pass


def _time_out(signum: int, frame: Any) -> None:
    raise EngineDidNotReturn(f"the engine did not return from an event within {EVENT_TIME_LIMIT} s")


EVENT_TIME_LIMIT = 5.0


def apply_bounded(engine: Engine, event: dict[str, Any], offset: int) -> list[dict[str, Any]]:
    """Property 0: every event is applied in bounded time (the admission cycle reaches its
    fixed point)."""
    previous = signal.signal(signal.SIGALRM, _time_out)
    signal.setitimer(signal.ITIMER_REAL, EVENT_TIME_LIMIT)
    try:
        return [msgspec.to_builtins(d) for d in engine.apply(event, offset)]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run(data: st.DataObject, steps: int, fit: bool = False, sticky: bool = False, drain: bool = False,
        restore_every: int = 0) -> None:
    layout = data.draw(layouts(DRAIN_RECLAIM_POLICIES if drain else RECLAIM_POLICIES), label="layout")
    engine = Engine()
    log: list[dict[str, Any]] = []

    def apply(event: dict[str, Any]) -> list[dict[str, Any]]:
        log.append(event)
        out = apply_bounded(engine, event, len(log) - 1)
        rejected = [d for d in out if d["type"] == "Rejected"]
        assert not rejected, f"offset {len(log) - 1}: {event} -> {rejected}"
        return out

    try:
        _drive(data, layout, apply, steps, fit, sticky, DRAIN_GATES if drain else ())
        if drain:
            _drain_and_check(engine, apply, log)
        if restore_every:
            _check_restores(log, restore_every)
    except AssertionError as exc:
        # A replayable input log beats a shrunk draw list: `quotaflow replay FILE`.
        fd, path = tempfile.mkstemp(prefix="preemption-counterexample-", suffix=".jsonl")
        with os.fdopen(fd, "w") as f:
            f.writelines(json.dumps(e) + "\n" for e in log)
        raise AssertionError(f"{exc}\n(input log of {len(log)} events written to {path})") from None


def _drive(data: st.DataObject, layout: Layout, apply: Any, steps: int, fit: bool, sticky: bool,
           gates: tuple[str, ...] = ()) -> None:
    offset = 0

    for event in config_events(layout, data.draw, gates):
        apply(event)
        offset += 1
    model = Model(layout, fit, sticky)
    serial = 0
    names = sorted(layout.cqs)
    for _ in range(steps):
        live = sorted(model.wls)
        evicted = [k for k in live if model.wls[k].evicted]
        choices = ["submit"] * 4 + ["twin"] * bool(live) + ["finish", "finish"] * bool(live) + ["delete"] * bool(live)
        choices += ["priority"] * bool(live) + ["release"] * 4 * bool(evicted)
        action = data.draw(st.sampled_from(choices), label="action")
        if action in ("submit", "twin"):
            serial += 1
            if action == "twin":
                # Same ClusterQueue, size and priority as a live workload: Kueue's scheduling
                # equivalence (same hash) is where shortcuts for identical workloads show.
                like = model.wls[data.draw(st.sampled_from(live), label="like")]
                w = Wl(like.cq, like.cpu, like.priority, data.draw(st.integers(0, len(CREATED) - 1)))
            else:
                cq = data.draw(st.sampled_from(names), label="cq")
                w = Wl(cq, data.draw(st.integers(1, 5), label="cpu") * 1000, data.draw(st.sampled_from(PRIORITIES)),
                       data.draw(st.integers(0, len(CREATED) - 1)))
            key = f"{w.cq}/wl-{serial}"
            model.wls[key] = w
            event = {"type": "WorkloadSubmitted", "workload": workload(key, w)}
        elif action in ("finish", "delete"):
            key = data.draw(st.sampled_from(live), label="victim")
            ns, name = key.split("/")
            event = {"type": "WorkloadFinished" if action == "finish" else "WorkloadDeleted", "namespace": ns, "name": name}
        elif action == "priority":
            key = data.draw(st.sampled_from(live), label="updated")
            w = model.wls[key]
            w.priority = data.draw(st.sampled_from(PRIORITIES), label="priority")
            for cq, p in list(model.waiting.items()):
                if p == key:
                    del model.waiting[cq]
            event = {"type": "WorkloadUpdated", "workload": workload(key, w)}
        else:
            key = data.draw(st.sampled_from(evicted), label="released")
            ns, name = key.split("/")
            event = {"type": "WorkloadReleased", "namespace": ns, "name": name}
        apply_decisions(model, apply(event), f"event {offset} {event['type']} {key}")
        offset += 1


def _check_restores(log: list[dict[str, Any]], every: int) -> None:
    """Property 6: an engine restored from a snapshot taken after any event decides the rest of
    the log exactly as the engine it was taken from (what the agent relies on after a crash)."""
    def decide(engine: Engine, start: int, stop: int) -> list[bytes]:
        return [encode(d) for offset in range(start, stop) for d in engine.apply(log[offset], offset)]

    expected = decide(Engine(), 0, len(log))
    engine = Engine()
    head: list[bytes] = []
    for cut in range(every, len(log), every):
        head += decide(engine, cut - every, cut)
        tail = decide(load(dump(engine)), cut, len(log))
        assert head + tail == expected, f"a snapshot taken after offset {cut - 1} decides differently"


def _drain_and_check(engine: Engine, apply: Any, log: list[dict[str, Any]]) -> None:
    """Property 5 (liveness): release every evicted workload and finish every admitted one,
    again and again, until nothing holds quota; then nothing may still be pending that a fresh
    engine with the same configuration admits when given it alone."""
    config = [e for e in log if e["type"] == "ConfigApplied"]
    state = engine.state
    drain(state, apply)
    submitted = {
        f"{e['workload']['metadata']['namespace']}/{e['workload']['metadata']['name']}": e["workload"]
        for e in log if e["type"] in ("WorkloadSubmitted", "WorkloadUpdated")
    }
    for key, ws in sorted(state.workloads.items()):
        if ws.queued:
            assert not admitted_alone(config, submitted[key]), (
                f"drained cluster: {key} still waits ({ws.last_status}) but is admitted when alone"
            )


# No shrinking: a failure is reported with its whole input log (see run), and shrinking long
# engine streams takes minutes.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate)


def bounded(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, phases=PHASES, suppress_health_check=[HealthCheck.too_slow])


@bounded(100)
@given(st.data())
def test_preemptions_respect_policies_and_usage_limits(data: st.DataObject) -> None:
    """Properties 0, 1 and 4."""
    run(data, steps=45)


@bounded(20)
@given(st.data())
def test_long_streams_respect_policies_and_usage_limits(data: st.DataObject) -> None:
    """Properties 0, 1 and 4 on longer streams (more evictions in flight at once)."""
    run(data, steps=120)


@bounded(60)
@given(st.data())
def test_preemptor_fits_once_its_victims_are_gone(data: st.DataObject) -> None:
    """Property 2 (with 0, 1 and 4): a workload that reports "Pending the preemption of N
    workload(s)" fits once the evicted workloads are gone (Kueue preemption.go
    classicalPreemptions returns targets only when workloadFits)."""
    run(data, steps=45, fit=True)


@bounded(60)
@given(st.data())
def test_preemptor_keeps_its_room_until_admitted(data: st.DataObject) -> None:
    """Property 3 (with 0, 1 and 4): no other workload of the preemptor's ClusterQueue is
    admitted while it waits for its victims (Kueue: pkg/cache/queue/cluster_queue.go,
    requeueIfNotPresent marks it the sticky preemptor; baseCompareFunc keeps it at the head)."""
    run(data, steps=45, sticky=True)


@bounded(60)
@given(st.data())
def test_a_drained_cluster_leaves_nothing_waiting(data: st.DataObject) -> None:
    """Property 5 (with 0, 1 and 4): once every eviction is released and every admitted
    workload finished, no pending workload could have been admitted alone (no queue sleeps
    through the releases).

    Drained as Kueue needs for its releases to come to an end (DRAIN_GATES,
    DRAIN_RECLAIM_POLICIES); otherwise each release can start the same round of preemptions
    again, in Kueue as here, and the drain never ends:

    - PrioritizePreemptorWorkloads on, as in the hierarchy test: without it a victim can be
      admitted back into the room its preemptor waits for and be preempted again, once per
      release (kueue#13662); Kueue's makeClassicalIterator (pkg/scheduler/scheduler.go) puts
      a ClusterQueue's waiting preemptor before the cycle's other entries only under the gate.
    - No reclaimWithinCohort Any. Every other policy lets a workload preempt only one below it
      (lower priority, or equal priority and newer: SatisfiesPreemptionPolicy in
      pkg/scheduler/preemption/common/preemption_policy.go; borrowWithinCohort also needs a
      lower priority, classifyPreemptionVariant in pkg/scheduler/preemption/classical/
      hierarchical_preemption.go), so preemptions cannot go round in a circle. Any reclaims
      from a borrower whatever its priority, and three steps each right by Kueue's rules close
      a circle that the gate does not break. Cohort of a (4 CPU) and b (2 CPU, borrowingLimit
      2), both reclaimWithinCohort Any and borrowWithinCohort LowerPriority, a also
      withinClusterQueue LowerPriority; a holds two priority-0 workloads of 2 CPU, b's
      priority-3 workload of 4 CPU waits. a's priority-1 workload of 5 CPU preempts both small
      ones and borrows 1; b's priority-3 one reclaims from it while borrowing and, a preemptor,
      is admitted first; a small one is admitted again and the other reclaims a's nominal
      quota from the priority-3 one (Any); the priority-1 one preempts both small ones again;
      and so on, once per release (the conformance scenario
      reclaim_any_preemption_circle_goes_round_once_per_release). Kueue's own scheduler on
      these four workloads, evictions released at once (the differential oracle), goes round
      until its 300-cycle cap, each workload evicted 37 or 38 times. Without the gate the
      circle is shorter but there too: the priority-3 one is admitted before the waiting
      priority-1 one (both borrow, a higher priority) and the small ones reclaim from it (Any),
      each of the three evicted 50 times."""
    run(data, steps=45, drain=True)


@bounded(40)
@given(st.data())
def test_a_restored_snapshot_decides_like_the_engine_it_was_taken_from(data: st.DataObject) -> None:
    """Property 6: snapshots taken every 3 events, each restored and run to the end of the log."""
    run(data, steps=45, restore_every=3)


def test_immediate_release_preemption_cycle_terminates() -> None:
    """Property 0 on the smallest stream the random tests found where it fails.

    Release policy Immediate; cohort of a0 (3 CPU, reclaim Any) and a1 (6 CPU, within
    LowerPriority, reclaim Any, borrowWithinCohort LowerPriority up to priority 2). a0/wl-33
    (priority 3, 5 CPU) borrows; a1 holds wl-54 (3, 3 CPU); a1/wl-55 (3, 5 CPU) waits. Then
    a1/wl-59 (priority 2, 3 CPU) reclaims wl-33 (hierarchical advantage, Any) and is admitted;
    wl-55 preempts wl-59 (LowerPriority, may borrow: no other-queue candidates); wl-33 (same
    priority as wl-55, created earlier, same borrowing level) takes the room back; wl-55 can
    no longer preempt (wl-33 is ReclaimWithoutBorrowing); wl-59 reclaims wl-33 again; and so
    on. Each step is Kueue-correct; with Immediate release every step happens inside the same
    event, so the cycle must be cut somewhere for apply() to return.
    """
    def cq(name: str, nominal: str, preemption: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if annotations:
            meta["annotations"] = annotations
        return {"type": "ConfigApplied", "object": {"apiVersion": V1, "kind": "ClusterQueue", "metadata": meta, "spec": {
            "namespaceSelector": {}, "cohort": "cohort-a", "preemption": preemption,
            "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "default", "resources": [{"name": "cpu", "nominalQuota": nominal}]}]}]}}}

    def lq(ns: str) -> dict[str, Any]:
        return {"type": "ConfigApplied", "object": {"apiVersion": V1, "kind": "LocalQueue",
                                                    "metadata": {"namespace": ns, "name": "lq"}, "spec": {"clusterQueue": ns}}}

    def submit(ns: str, name: str, created: str, priority: int, cpu: str) -> dict[str, Any]:
        return {"type": "WorkloadSubmitted", "workload": {
            "metadata": {"namespace": ns, "name": name, "creationTimestamp": created},
            "spec": {"queueName": "lq", "priority": priority, "podSets": [{"name": "main", "count": 1, "requests": {"cpu": cpu}}]}}}

    events = [
        {"type": "ConfigApplied", "object": {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
                                             "quotaflow": {"evictionRelease": "Immediate"}}},
        {"type": "ConfigApplied", "object": {"apiVersion": V1, "kind": "ResourceFlavor", "metadata": {"name": "default"}}},
        cq("cohort-a-0", "3", {"withinClusterQueue": "Never", "reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "Never"}}),
        lq("cohort-a-0"),
        cq("cohort-a-1", "6", {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                               "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 2}}),
        lq("cohort-a-1"),
        submit("cohort-a-0", "wl-33", "2024-01-01T00:01:00Z", 3, "5"),
        submit("cohort-a-1", "wl-54", "2024-01-01T00:01:00Z", 3, "3"),
        submit("cohort-a-1", "wl-55", "2024-01-01T00:02:00Z", 3, "5"),
        submit("cohort-a-1", "wl-59", "2024-01-01T00:00:00Z", 2, "3"),
    ]
    engine = Engine()
    for offset, event in enumerate(events):
        apply_bounded(engine, event, offset)
