"""Helpers for the projection tests: a randomized Kueue-like input stream, the decision log the
agent would write for it, and a check of a projection against the engine's own state."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import msgspec

from domain.decisions import encode
from domain.engine import Engine
from projections.fold import DecisionRecord, Projection
from projections.follower import decode_decision

_encode = msgspec.json.Encoder().encode
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z

GARBAGE = (
    b"\x00\xff not json",
    b'{"type": "WorkloadSubmitted", "workload": ',
    b"[1, 2]",
    b'{"type": "NoSuchEvent"}',
    b'{"type": "WorkloadFinished", "namespace": "team-a", "name": "never-there"}',
    b'{"type": "ConfigApplied", "object": {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", '
    b'"metadata": {"name": "bad"}, "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": '
    b'[{"name": "default", "resources": [{"name": "cpu", "nominalQuota": -1}]}]}]}}}',
)


def iso(seconds: float) -> str:
    whole = int(seconds)
    from datetime import UTC, datetime

    return datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def flavor(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cluster_queue(
    name: str,
    cpu: dict[str, Any],
    *,
    cohort: str | None = None,
    strategy: str | None = None,
    preemption: dict[str, Any] | None = None,
    checks: list[str] | None = None,
    stop: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """cpu: flavor -> nominal or (nominal, borrowingLimit, lendingLimit); memory is ample."""
    flavors = []
    for fname, q in cpu.items():
        nominal, borrowing, lending = q if isinstance(q, tuple) else (q, None, None)
        res: dict[str, Any] = {"name": "cpu", "nominalQuota": nominal}
        if borrowing is not None:
            res["borrowingLimit"] = borrowing
        if lending is not None:
            res["lendingLimit"] = lending
        flavors.append({"name": fname, "resources": [res, {"name": "memory", "nominalQuota": "1Ti"}]})
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": flavors}],
    }
    if cohort:
        spec["cohort"] = cohort
    if strategy:
        spec["queueingStrategy"] = strategy
    if preemption:
        spec["preemption"] = preemption
    if checks:
        spec["admissionChecks"] = checks
    if stop:
        spec["stopPolicy"] = stop
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": meta, "spec": spec}


def local_queue(ns: str, name: str, cq: str, stop: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"clusterQueue": cq}
    if stop:
        spec["stopPolicy"] = stop
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"namespace": ns, "name": name}, "spec": spec}


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}


def workload(
    ns: str,
    name: str,
    queue: str,
    cpu: int | str,
    count: int = 1,
    *,
    priority: int | None = None,
    priority_class: str | None = None,
    created: str | None = None,
    active: bool | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": ns, "name": name}
    if created:
        meta["creationTimestamp"] = created
    spec: dict[str, Any] = {"queueName": queue, "podSets": [{"name": "main", "count": count, "requests": {"cpu": str(cpu), "memory": "1Gi"}}]}
    if priority is not None:
        spec["priority"] = priority
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    if active is not None:
        spec["active"] = active
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": meta, "spec": spec}


def applied(obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": "ConfigApplied", "object": obj}


PREEMPT = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
QUEUES = {  # (namespace, LocalQueue) -> ClusterQueue
    ("team-a", "q"): "cq-a",
    ("team-a", "q2"): "cq-b",
    ("team-b", "q"): "cq-b",
    ("team-c", "q"): "cq-c",
    ("team-d", "q"): "cq-d",
}


def cq_objects(variant: int = 0) -> list[dict[str, Any]]:
    bump = 2 * variant
    return [
        cluster_queue("cq-a", {"default": 10 + bump, "spot": 4}, cohort="pool", preemption=PREEMPT),
        cluster_queue("cq-b", {"default": (6, 4, 3), "spot": 4}, cohort="pool", strategy="StrictFIFO"),
        cluster_queue("cq-c", {"default": 6}, cohort="pool", checks=["check-1"], preemption={"withinClusterQueue": "LowerPriority"}),
        cluster_queue("cq-d", {"default": 4}, preemption={"withinClusterQueue": "LowerOrNewerEqualPriority"},
                      annotations={"quotaflow.dev/eviction-release": "Immediate"} if variant % 2 else None),
    ]


def base_config() -> list[dict[str, Any]]:
    objs = [
        flavor("default"),
        flavor("spot"),
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "AdmissionCheck", "metadata": {"name": "check-1"}, "spec": {"controllerName": "x"}},
        priority_class("low", 10),
        priority_class("high", 1000),
        *cq_objects(),
    ]
    objs += [local_queue(ns, q, cq) for (ns, q), cq in QUEUES.items()]
    return [applied(o) for o in objs]


class Generator:
    """A seeded random stream that exercises everything the projection folds. It runs its own
    engine to pick sensible targets (evicted workloads to release, reserved ones to check)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.engine = Engine()
        self.offset = 0
        self.now = float(T0)
        self.serial = 0
        self.ids: list[str] = []
        self.pc_values = {"low": 10, "high": 1000}

    def _emit(self, event: dict[str, Any] | bytes) -> bytes:
        raw = event if isinstance(event, bytes) else _encode(event)
        self.engine.apply(raw, self.offset)
        self.offset += 1
        return raw

    def _stamp(self, event: dict[str, Any]) -> dict[str, Any]:
        rng = self.rng
        self.now += rng.choice((0.5, 1, 2, 5))
        if rng.random() < 0.8:
            event["time"] = iso(self.now)
        if rng.random() < 0.1:
            event["id"] = f"id-{self.serial}-{rng.randrange(1000)}"
            self.ids.append(event["id"])
        return event

    def _workloads(self, pred: Any) -> list[str]:
        return [k for k, ws in self.engine.state.workloads.items() if pred(ws)]

    def _submit(self) -> dict[str, Any]:
        rng = self.rng
        (ns, q) = rng.choice(list(QUEUES))
        if rng.random() < 0.04:
            q = "missing-q"
        name = f"wl-{self.serial}"
        self.serial += 1
        kind = rng.random()
        prio = None
        pc = None
        if kind < 0.3:
            prio = rng.randint(0, 100)
        elif kind < 0.55:
            pc = rng.choice(("low", "high", "low"))
        created = iso(self.now - rng.randint(0, 60)) if rng.random() < 0.3 else None
        active = False if rng.random() < 0.03 else None
        wl = workload(ns, name, q, rng.choice((1, 1, 2, 3)), rng.choice((1, 1, 2)),
                      priority=prio, priority_class=pc, created=created, active=active)
        return {"type": "WorkloadSubmitted", "workload": wl}

    def _update(self, key: str) -> dict[str, Any] | None:
        ws = self.engine.state.workloads[key]
        spec = ws.spec
        ps = spec.pod_sets[0]
        cpu = dict(ps.per_pod).get("cpu", 1000)
        wl = workload(spec.namespace, spec.name, spec.queue_name, f"{cpu}m", ps.count,
                      priority=spec.priority, priority_class=spec.priority_class, active=spec.active)
        wl["spec"]["podSets"][0]["requests"]["memory"] = "1Gi"
        roll = self.rng.random()
        if roll < 0.4:
            wl["spec"]["priority"] = self.rng.randint(0, 2000)
        elif roll < 0.7:
            wl["spec"]["active"] = not spec.active
        elif roll < 0.85 and ws.admission is None:
            others = [q for (ns, q) in QUEUES if ns == spec.namespace and q != spec.queue_name]
            if others:
                wl["spec"]["queueName"] = others[0]
        else:
            wl["spec"]["podSets"][0]["count"] = ps.count + 1  # immutable: Rejected
        return {"type": "WorkloadUpdated", "workload": wl}

    def _config_change(self) -> dict[str, Any]:
        rng = self.rng
        roll = rng.random()
        if roll < 0.2:
            pc = rng.choice(("low", "high"))
            self.pc_values[pc] = rng.choice((5, 10, 50, 500, 1000, 2000))
            return applied(priority_class(pc, self.pc_values[pc]))
        if roll < 0.4:
            (ns, q), cq = rng.choice(list(QUEUES.items()))
            return applied(local_queue(ns, q, cq, rng.choice((None, None, None, None, "Hold", "HoldAndDrain"))))
        if roll < 0.45:
            (ns, q) = rng.choice(list(QUEUES))
            return {"type": "ConfigDeleted", "kind": "LocalQueue", "namespace": ns, "name": q}
        if roll < 0.52:
            (ns, q) = rng.choice(list(QUEUES))
            return applied(local_queue(ns, q, "cq-x"))  # immutable clusterQueue: Rejected if it exists
        if roll < 0.57:
            return {"type": "ConfigDeleted", "kind": "ClusterQueue", "name": rng.choice(("cq-a", "cq-b", "cq-c", "cq-d"))}
        if roll < 0.8:
            obj = rng.choice(cq_objects(rng.randint(0, 3)))
            if rng.random() < 0.2:
                obj["spec"]["stopPolicy"] = rng.choice(("Hold", "HoldAndDrain"))
            return applied(obj)
        if roll < 0.88:
            cohort = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Cohort", "metadata": {"name": "pool"},
                      "spec": {"parentName": "org"}}
            if rng.random() < 0.5:
                cohort["spec"]["resourceGroups"] = [{"coveredResources": ["cpu"], "flavors": [
                    {"name": "default", "resources": [{"name": "cpu", "nominalQuota": rng.randint(0, 6)}]}]}]
            return applied(cohort)
        if roll < 0.92:
            # a cycle: org's parent is pool, whose parent may be org -> Rejected
            return applied({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Cohort", "metadata": {"name": "org"},
                            "spec": {"parentName": "pool"}})
        if roll < 0.96:
            return {"type": "ConfigDeleted", "kind": "Cohort", "name": rng.choice(("pool", "org"))}
        return applied(flavor("spot")) if rng.random() < 0.5 else {"type": "ConfigDeleted", "kind": "ResourceFlavor", "name": "spot"}

    def _one(self) -> dict[str, Any] | bytes | None:
        rng = self.rng
        st = self.engine.state
        roll = rng.random()
        if roll < 0.3:
            return self._submit()
        if roll < 0.5:
            admitted = self._workloads(lambda ws: ws.admission is not None and not ws.evicted)
            if admitted:
                ns, name = rng.choice(admitted).split("/")
                return {"type": "WorkloadFinished", "namespace": ns, "name": name}
        if roll < 0.58:
            pool = list(st.finished) + self._workloads(lambda ws: ws.admission is None)
            if pool:
                ns, name = rng.choice(pool).split("/")
                return {"type": "WorkloadDeleted", "namespace": ns, "name": name}
        if roll < 0.7:
            evicted = self._workloads(lambda ws: ws.evicted)
            if evicted:
                ns, name = rng.choice(evicted).split("/")
                return {"type": "WorkloadReleased", "namespace": ns, "name": name}
        if roll < 0.77:
            reserved = self._workloads(lambda ws: ws.admission is not None and not ws.evicted and not ws.admission.admitted)
            if reserved:
                ns, name = rng.choice(reserved).split("/")
                state = rng.choices(("Ready", "Retry", "Rejected", "Pending"), (70, 15, 5, 10))[0]
                return {"type": "AdmissionCheckStateChanged", "namespace": ns, "name": name, "check": "check-1", "state": state}
        if roll < 0.83:
            keys = list(st.workloads)
            if keys:
                return self._update(rng.choice(keys))
        if roll < 0.9:
            return self._config_change()
        if roll < 0.93 and self.ids:
            return {"type": "WorkloadFinished", "namespace": "team-a", "name": "x", "id": rng.choice(self.ids)}
        if roll < 0.96:
            return rng.choice(GARBAGE)
        return None

    def events(self, n: int) -> Iterator[bytes]:
        for event in base_config():
            yield self._emit(self._stamp(event))
        while self.offset < n:
            rng = self.rng
            if rng.random() < 0.06:
                inner: list[Any] = []
                for _ in range(rng.randint(2, 5)):
                    e = self._one()
                    if isinstance(e, dict):
                        inner.append(e)
                if rng.random() < 0.3 and inner:
                    inner.append(dict(inner[0]))  # the same event twice: often Rejected the second time
                event: dict[str, Any] | bytes = self._stamp({"type": "Batch", "events": inner})
            else:
                one = self._one()
                if one is None:
                    continue
                event = one if isinstance(one, bytes) else self._stamp(one)
            yield self._emit(event)


def decide(events: list[bytes]) -> list[list[bytes]]:
    """The decisions of each input event, encoded as the agent records them."""
    engine = Engine()
    return [[encode(d) for d in engine.apply(e, i)] for i, e in enumerate(events)]


def fold_lockstep(events: list[bytes], check_every: int = 1) -> tuple[Projection, Engine]:
    """Fold events through an engine and a projection side by side, checking after each event."""
    engine = Engine()
    proj = Projection()
    doff = 0
    for i, raw in enumerate(events):
        recs = []
        # Both read the record's time in the log, as the agent's engine and a follower do.
        for d in engine.apply(raw, i, (T0 + i) * 1_000_000):
            value = encode(d)
            recs.append(decode_decision(doff, value))
            doff += 1
        proj.apply(i, raw, recs, timestamp_ms=(T0 + i) * 1000)
        if i % check_every == 0:
            check_against_engine(proj, engine, i)
    check_against_engine(proj, engine, len(events) - 1)
    return proj, engine


def check_against_engine(proj: Projection, engine: Engine, at: int) -> None:
    st = engine.state
    where = f"after input offset {at}"
    assert not proj.anomalies, f"{where}: {proj.anomalies}"
    assert proj.clock == st.clock, where
    assert proj.seen_ids == st.seen_ids, where
    assert list(proj.finished) == list(st.finished), where
    assert set(proj.workloads) == set(st.workloads), f"{where}: {set(proj.workloads) ^ set(st.workloads)}"
    assert set(proj.cluster_queues) == set(st.cluster_queues), where
    assert dict(proj.priority_classes) == dict(st.priority_classes), where
    assert set(proj.local_queues) == set(st.local_queues), where
    assert {k: v.parent for k, v in proj.cohorts.items()} == {
        k: c.spec.parent for k, c in st.cohorts.items() if c.spec is not None
    }, where
    for name, cq in st.cluster_queues.items():
        view = proj.cluster_queues[name]
        assert view.terminating == cq.terminating, f"{where}: {name}"
        assert list(view.pending) == list(cq.queue.keys()), f"{where}: pending order of {name}"
        assert view.reservation == {fr: v for fr, v in cq.node.usage.items() if v}, f"{where}: reservation of {name}"
        assert list(view.holders) == list(cq.admitted) or set(view.holders) == set(cq.admitted), where
        admitted = [k for k in cq.admitted if st.workloads[k].admission.admitted and not st.workloads[k].evicted]  # type: ignore[union-attr]
        assert view.admitted == len(admitted), f"{where}: admitted count of {name}"
        in_use: dict[tuple[str, str], int] = {}
        for k in admitted:
            for fr, v in st.workloads[k].admission.usage.items():  # type: ignore[union-attr]
                in_use[fr] = in_use.get(fr, 0) + v
        assert view.usage == {fr: v for fr, v in in_use.items() if v}, f"{where}: usage of {name}"
    for key, ws in st.workloads.items():
        wv = proj.workloads[key]
        assert wv.priority == ws.priority, f"{where}: priority of {key}"
        assert wv.spec == ws.spec, f"{where}: spec of {key}"
        assert wv.queue_time == ws.queue_time, f"{where}: queue time of {key}"
        assert wv.seq == ws.seq, where
        assert wv.active == ws.spec.active, f"{where}: active of {key}"
        assert wv.evicted == ws.evicted, f"{where}: evicted of {key}"
        holding = ws.admission.cluster_queue if ws.admission is not None else None
        assert wv.cluster_queue == holding, f"{where}: holding of {key}"
        if ws.admission is not None:
            assert wv.usage == ws.admission.usage, where
            assert wv.admitted == (ws.admission.admitted and not ws.evicted), f"{where}: admitted of {key}"
        assert wv.queued_in == (ws.cluster_queue if ws.queued else None), f"{where}: queued_in of {key}"
        if ws.admission is None and ws.last_status is not None:
            assert wv.reason == ws.last_status[0], f"{where}: reason of {key}: {wv.reason} vs {ws.last_status}"
    check_local_queue_counts(proj, engine, where)


def check_local_queue_counts(proj: Projection, engine: Engine, where: str) -> None:
    """The counts the fold keeps per LocalQueue equal those of the engine's workloads."""
    expected: dict[tuple[str, str], list[Any]] = {}
    for ws in engine.state.workloads.values():
        adm = ws.admission
        if adm is None and not ws.spec.active:
            continue
        row = expected.setdefault((ws.spec.namespace, ws.spec.queue_name), [0, 0, 0, {}, {}])
        if adm is None:
            row[0] += 1
            continue
        row[1] += 1
        admitted = adm.admitted and not ws.evicted
        row[2] += admitted
        for fr, v in adm.usage.items():
            row[3][fr] = row[3].get(fr, 0) + v
            if admitted:
                row[4][fr] = row[4].get(fr, 0) + v
    actual = {k: [c.pending, c.reserving, c.admitted, c.reservation, c.usage] for k, c in proj.lq_counts.items()}
    assert actual == expected, f"{where}: LocalQueue counts {actual} != {expected}"


def decision_records(values: list[bytes], first_offset: int = 0) -> list[DecisionRecord]:
    return [decode_decision(first_offset + i, v) for i, v in enumerate(values)]
