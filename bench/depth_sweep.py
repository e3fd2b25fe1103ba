"""Engine cost against the depth of the pending backlog, two engine trees in one run.

    python -m bench.depth_sweep --quick                       # this tree alone, small streams
    python -m bench.depth_sweep --quick --base HEAD~3         # against another revision's domain/
    python -m bench.depth_sweep --base main --depths 8,80 --cqs 100
    python -m bench.depth_sweep --base-dir ../copy-of-main --strategies "" --preemption-events 0
        # the submit-all row only, against another checkout's domain/ as built there (compiled)

Three kinds of stream, all generated here, deterministic for a seed:

- the sweep: `--cohorts` cohorts of ClusterQueues (two flavors, on-demand 16 cpu / 64Gi and spot
  8 cpu / 32Gi each), every ClusterQueue keeping `depth` workloads outstanding: the oldest
  finishes (WorkloadFinished, pending or admitted) when the next one arrives. Workloads have many
  distinct shapes (pod count × cpu × memory: 6 × 6 × 6) and three priorities (0, 100, 1000).
  One row per depth × queueing strategy (BestEffortFIFO, StrictFIFO) × preemption policy (none:
  Never/Never; classical: withinClusterQueue LowerPriority, reclaimWithinCohort Any; fair:
  the classical policy with Configuration fairSharing.enable). The first depth × ClusterQueues
  × 1.5 arrivals fill the queues, untimed; the next `--events` are timed.
- `submit-all`: `--submit-all` workloads submitted round-robin over the ClusterQueues before
  any finishes, then finished in the order they came (the whole stream is timed).
- `preemption-deep`: a two-level cohort tree (Cohort `org` > `left`, `right` > two ClusterQueues
  each) with withinClusterQueue LowerPriority, reclaimWithinCohort Any, borrowWithinCohort
  LowerPriority (threshold 100), two ClusterQueues with evictionRelease Immediate and two with
  OnRelease (a WorkloadReleased follows each eviction), quota changes, priority updates and
  deletes, each ClusterQueue keeping a deep backlog. It is written by folding it through this
  tree's engine (to know what was admitted and evicted); the whole stream is timed.

Each stream is folded by both engines side by side, `--chunk` events at a time, alternating,
as `bench.engine_ab` does (CPU time of each side summed; decisions compared chunk by chunk).
Columns: events/s CPU of each tree, each row's rate relative to its strategy and policy's
shallowest depth (the issue's goal: ≥ 0.8 at 10× the depth), the speed-up (base CPU / ours),
and memory: peak RSS over an empty engine's (after the stream's bytes are built), divided by
the workloads pending at the end of the untimed fill, measured in a child process per tree.
`searches/event`: preemption searches made per timed event (`_targets()` runs where the engine
keeps answers apart, else `targets()` calls; less those that the shortfall bound answers before
reading a candidate: domain/preemption/shortfall.py), counted in
an extra, untimed pass (interpreted engines only; "-" where the engine is compiled);
`assignments/event`: flavor assignments made per timed event in the same pass (`Scheduler.assign`
calls; entries kept and given again are not counted).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from bench.engine_ab import ROOT, engine_form, load_engine_at, load_engine_from
from domain.timestamps import format_time, parse_time

FLAVORS = ("on-demand", "spot")
NOMINAL = {"on-demand": {"cpu": "16", "memory": "64Gi"}, "spot": {"cpu": "8", "memory": "32Gi"}}
PODS = (1, 2, 3, 4, 6, 8)
CPUS = ("250m", "500m", "1", "1500m", "2", "3")
MEMS = ("512Mi", "1Gi", "2Gi", "3Gi", "4Gi", "6Gi")
PRIORITIES = (0, 100, 1000)
STRATEGIES = ("BestEffortFIFO", "StrictFIFO")
POLICIES = ("none", "classical", "fair")
START_US = 1_735_689_600_000_000  # 2025-01-01T00:00:00Z
STEP_US = 250_000
QUEUE = "jobs"

encode = msgspec.json.Encoder().encode


def _time(t_us: int) -> str:
    return format_time(t_us)


def _cq(name: str, cohort: str | None, strategy: str, policy: dict[str, Any], quota: dict[str, dict[str, str]],
        release: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "queueingStrategy": strategy,
        "preemption": policy,
        "resourceGroups": [{
            "coveredResources": ["cpu", "memory"],
            "flavors": [{"name": f, "resources": [{"name": r, "nominalQuota": quota[f][r]} for r in ("cpu", "memory")]}
                        for f in FLAVORS],
        }],
    }
    if cohort is not None:
        spec["cohort"] = cohort
    meta: dict[str, Any] = {"name": name}
    if release is not None:  # quotaflow's per-ClusterQueue release mode (domain/objects.py)
        meta["annotations"] = {"quotaflow.dev/eviction-release": release}
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": meta, "spec": spec}


def _applied(obj: dict[str, Any], t_us: int = START_US) -> dict[str, Any]:
    name = obj["metadata"]["name"]
    ns = obj["metadata"].get("namespace", "")
    return {"type": "ConfigApplied", "id": f"cfg/{obj['kind']}/{ns}/{name}/{t_us}", "time": _time(t_us), "object": obj}


def _flavors() -> list[dict[str, Any]]:
    return [_applied({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": f}})
            for f in FLAVORS]


def _lq(ns: str, cq: str) -> dict[str, Any]:
    return _applied({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                     "metadata": {"namespace": ns, "name": QUEUE}, "spec": {"clusterQueue": cq}})


def _submit(t_us: int, ns: str, name: str, shape: tuple[int, str, str], priority: int) -> dict[str, Any]:
    pods, cpu, mem = shape
    return {
        "type": "WorkloadSubmitted", "id": f"submit/{ns}/{name}", "time": _time(t_us),
        "workload": {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"namespace": ns, "name": name, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
            "spec": {
                "queueName": QUEUE, "priority": priority,
                "podSets": [{"name": "main", "count": pods, "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "main", "image": "registry.example.com/batch/job:1.0",
                     "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}}}],
            },
        },
    }


def _by_name(kind: str, t_us: int, ns: str, name: str) -> dict[str, Any]:
    return {"type": kind, "id": f"{kind}/{ns}/{name}/{t_us}", "time": _time(t_us), "namespace": ns, "name": name}


def _policy(policy: str) -> dict[str, Any]:
    if policy == "none":
        return {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}
    return {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}


def _fair_sharing() -> dict[str, Any]:
    return {"type": "ConfigApplied", "id": "configuration", "time": _time(START_US),
            "object": {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
                       "fairSharing": {"enable": True}}}


class Stream:
    def __init__(self, name: str, prelude: list[bytes], timed: list[bytes], backlog: int | None = None) -> None:
        self.name = name
        self.prelude = prelude
        self.timed = timed
        # The memory measurement folds the setup, then this many events after it (default: the
        # rest of the prelude), and counts the workloads pending then.
        self.backlog = backlog


def sweep_stream(strategy: str, policy: str, depth: int, cohorts: int, per_cohort: int, events: int,
                 seed: int = 1) -> Stream:
    rng = random.Random(seed)
    setup: list[dict[str, Any]] = [_fair_sharing()] if policy == "fair" else []
    setup += _flavors()
    names = [(f"cq-{c:03d}-{q}", f"team-{c:03d}-{q}", f"cohort-{c:03d}") for c in range(cohorts) for q in range(per_cohort)]
    for cq, ns, cohort in names:
        setup.append(_applied(_cq(cq, cohort, strategy, _policy(policy), NOMINAL)))
        setup.append(_lq(ns, cq))
    outstanding: list[deque[str]] = [deque() for _ in names]
    fill = int(depth * len(names) * 1.5)
    out: list[bytes] = [encode(e) for e in setup]
    t = START_US
    n = 0
    while len(out) < len(setup) + fill + events:
        i = rng.randrange(len(names))
        _, ns, _ = names[i]
        t += STEP_US
        if len(outstanding[i]) >= depth:
            out.append(encode(_by_name("WorkloadFinished", t, ns, outstanding[i].popleft())))
        shape = (rng.choice(PODS), rng.choice(CPUS), rng.choice(MEMS))
        name = f"job-{n:07d}"
        n += 1
        out.append(encode(_submit(t, ns, name, shape, rng.choice(PRIORITIES))))
        outstanding[i].append(name)
    cut = len(out) - events
    return Stream(f"{strategy}/{policy}/{depth}", out[:cut], out[cut:])


def submit_all_stream(total: int, cohorts: int, per_cohort: int, seed: int = 1) -> Stream:
    rng = random.Random(seed)
    setup = _flavors()
    names = [(f"cq-{c:03d}-{q}", f"team-{c:03d}-{q}", f"cohort-{c:03d}") for c in range(cohorts) for q in range(per_cohort)]
    for cq, ns, cohort in names:
        setup.append(_applied(_cq(cq, cohort, "BestEffortFIFO", _policy("none"), NOMINAL)))
        setup.append(_lq(ns, cq))
    timed: list[bytes] = []
    t = START_US
    order = []
    for n in range(total):
        _, ns, _ = names[n % len(names)]
        t += STEP_US // 10
        name = f"job-{n:07d}"
        shape = (rng.choice(PODS), rng.choice(CPUS), rng.choice(MEMS))
        timed.append(encode(_submit(t, ns, name, shape, rng.choice(PRIORITIES))))
        order.append((ns, name))
    for ns, name in order:
        t += STEP_US // 10
        timed.append(encode(_by_name("WorkloadFinished", t, ns, name)))
    return Stream(f"submit-all/{total}", [encode(e) for e in setup], timed, backlog=total)


def preemption_deep_stream(events: int, depth: int = 200, seed: int = 1) -> Stream:
    """The preemption-heavy deep-backlog stream (module docstring), folded through this tree's
    engine as it is written."""
    from domain.decisions import Admitted, Evicted, Finished, Preempted, QuotaReleased
    from domain.engine import Engine

    rng = random.Random(seed)
    quota = {"on-demand": {"cpu": "8", "memory": "32Gi"}, "spot": {"cpu": "4", "memory": "16Gi"}}
    policy = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
              "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}}
    cqs = [("cq-l0", "left", "Immediate"), ("cq-l1", "left", "OnRelease"),
           ("cq-r0", "right", "OnRelease"), ("cq-r1", "right", "Immediate")]
    setup = _flavors()
    for name, parent in (("org", None), ("left", "org"), ("right", "org")):
        spec = {} if parent is None else {"parentName": parent}
        setup.append(_applied({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name},
                               "spec": spec}))
    for name, cohort, release in cqs:
        setup.append(_applied(_cq(name, cohort, "BestEffortFIFO", policy, quota, release)))
        setup.append(_lq(f"ns-{name}", name))
    engine = Engine()
    written: list[bytes] = []
    admitted: dict[str, None] = {}  # ns/name
    evicted: dict[str, int] = {}  # ns/name of OnRelease evictions awaiting their release -> due time
    live: list[deque[str]] = [deque() for _ in cqs]
    shapes: dict[str, tuple[int, str, str]] = {}
    t = START_US
    n = 0

    def put(event: dict[str, Any]) -> None:
        data = encode(event)
        for d in engine.apply(data, len(written)):
            key = d.workload
            if key is None:
                continue
            if isinstance(d, Admitted):
                admitted[key] = None
            elif isinstance(d, (Preempted, Evicted)):
                admitted.pop(key, None)
                evicted[key] = t + rng.randrange(1, 8) * STEP_US
            elif isinstance(d, (QuotaReleased, Finished)):
                evicted.pop(key, None)
                admitted.pop(key, None)
        written.append(data)

    for e in setup:
        put(e)
    fill = depth * len(cqs)
    while len(written) < len(setup) + fill + events:
        t += STEP_US
        for key, due in list(evicted.items()):
            if due <= t and key in evicted:
                ns, name = key.split("/")
                put(_by_name("WorkloadReleased", t, ns, name))
                evicted.pop(key, None)
        i = rng.randrange(len(cqs))
        cq, cohort, release = cqs[i]
        ns = f"ns-{cq}"
        r = rng.random()
        if r < 0.01:  # a quota change
            cpu = rng.choice(("4", "8", "12"))
            put(_applied(_cq(cq, cohort, "BestEffortFIFO", policy,
                             {"on-demand": {"cpu": cpu, "memory": "32Gi"}, "spot": quota["spot"]}, release), t))
            continue
        if r < 0.06 and live[i]:  # a priority update of a live workload
            name = rng.choice(live[i])
            ev = _submit(t, ns, name, shapes[name], rng.choice(PRIORITIES))
            ev["type"] = "WorkloadUpdated"
            ev["id"] = f"update/{ns}/{name}/{t}"
            put(ev)
            continue
        if r < 0.10 and live[i]:  # a delete of a live workload
            name = live[i][rng.randrange(len(live[i]))]
            live[i].remove(name)
            evicted.pop(f"{ns}/{name}", None)
            put(_by_name("WorkloadDeleted", t, ns, name))
            continue
        if len(live[i]) >= depth:  # the oldest admitted finishes, or the oldest leaves
            key_name = next((w for w in live[i] if f"{ns}/{w}" in admitted), live[i][0])
            live[i].remove(key_name)
            put(_by_name("WorkloadFinished", t, ns, key_name))
            continue
        name = f"job-{n:07d}"
        n += 1
        shape = (rng.choice(PODS[:4]), rng.choice(CPUS), rng.choice(MEMS))
        shapes[name] = shape
        put(_submit(t, ns, name, shape, rng.choice(PRIORITIES)))
        live[i].append(name)
        # finish some admitted workloads too, so the cluster turns over
        if rng.random() < 0.3:
            for w in list(live[i]):
                if f"{ns}/{w}" in admitted:
                    live[i].remove(w)
                    t += 1
                    put(_by_name("WorkloadFinished", t, ns, w))
                    break
    cut = len(written) - events
    return Stream(f"preemption-deep/{depth}", written[:cut], written[cut:])


# -- measuring ----------------------------------------------------------------------------------


def compare(engines: dict[str, type], stream: Stream, chunk: int,
            counts: dict[str, int] | None = None) -> tuple[dict[str, float], bool]:
    """CPU seconds of each engine over the timed stream, and whether their decisions were the
    same. `counts` (if given) gets the decisions made over the timed stream, all and Pending."""
    live = {side: cls() for side, cls in engines.items()}
    for engine in live.values():
        for offset, event in enumerate(stream.prelude):
            engine.apply(event, offset)
    gc.collect()
    cpu = dict.fromkeys(live, 0.0)
    same = True
    start = len(stream.prelude)
    clock = time.process_time
    sides = list(live)
    for j, i in enumerate(range(0, len(stream.timed), chunk)):
        part = stream.timed[i: i + chunk]
        order = sides if j % 2 == 0 else sides[::-1]
        decided: dict[str, bytes] = {}
        for side in order:
            apply = live[side].apply
            results = []
            c0 = clock()
            for offset, event in enumerate(part, start + i):
                results.append(apply(event, offset))
            cpu[side] += clock() - c0
            decided[side] = b"".join(encode(d) for out in results for d in out)
        same = same and len(set(decided.values())) == 1
        if counts is not None:
            made = decided[sides[0]]
            # Each decision is encoded on its own, its tag first.
            counts["decisions"] = counts.get("decisions", 0) + made.count(b'{"type":"')
            counts["pending"] = counts.get("pending", 0) + made.count(b'{"type":"Pending"')
    return cpu, same


def searches(engine_cls: type, stream: Stream, assigned: list[int] | None = None,
             retries: list[tuple[int, int]] | None = None) -> int | None:
    """Preemption searches made over the timed stream (searches run, not answers kept and given
    again, less those the shortfall bound answers, where the tree has it), or None if not
    countable. `assigned`: the flavor assignments made in the same pass (`Scheduler.assign`
    calls, not entries kept and given again) are appended to it. `retries`: the cohort-tree
    retries of the same pass (`tree_retries`) are appended to it."""
    # The engine's own modules: a base tree's are kept under a prefix (engine_ab.load_engine_at)
    # while their __name__ still reads "domain.engine".
    name = next(k for k, m in list(sys.modules.items())
                if k.endswith("domain.engine") and getattr(m, "Engine", None) is engine_cls)
    prefix = name.rsplit("domain.engine", 1)[0]
    counted = [0]
    patched: list[tuple[Any, str, Any]] = []
    try:
        classical = sys.modules.get(prefix + "domain.preemption.classical")
        bound = getattr(classical, "cannot_fit", None) if classical is not None else None
        if bound is not None:
            if not hasattr(bound, "__code__"):
                return None  # compiled

            def bounded(*a: Any, _b: Any = bound) -> Any:
                answer = _b(*a)
                if answer:
                    counted[0] -= 1  # answered without a search
                return answer

            classical.cannot_fit = bounded  # type: ignore[union-attr]
            patched.append((classical, "cannot_fit", bound))
        for modname, clsname in (("domain.preemption.classical", "ClassicalPreemptor"),
                                 ("domain.preemption.fair_sharing_strategies", "FairSharingPreemptor")):
            mod = sys.modules.get(prefix + modname)
            cls = getattr(mod, clsname, None) if mod is not None else None
            if cls is None or not hasattr(cls, "__dict__") or "targets" not in cls.__dict__:
                return None
            # The search itself where the tree has one apart from the answers it keeps
            # (`_targets`): an answer given again is no search.
            method = "_targets" if "_targets" in cls.__dict__ else "targets"
            original = cls.__dict__[method]
            if not hasattr(original, "__code__"):
                return None  # compiled
            try:
                patched.append(_count_calls(cls, method, counted))
            except TypeError:
                return None
        made = [0]
        sched = getattr(sys.modules.get(prefix + "domain.scheduler"), "Scheduler", None)
        assign = sched.__dict__.get("assign") if sched is not None else None
        if assigned is not None and assign is not None and hasattr(assign, "__code__"):
            patched.append(_count_calls(sched, "assign", made))
        woken: dict[str, None] = {}
        if retries is not None:
            patched += _hook_wakes(prefix, woken)
        engine = engine_cls()
        for offset, event in enumerate(stream.prelude):
            engine.apply(event, offset)
        counted[0] = made[0] = 0
        retried: list[tuple[int, str]] = []
        for offset, event in enumerate(stream.timed, len(stream.prelude)):
            woken.clear()
            engine.apply(event, offset)
            retried += ((offset, root) for root in woken)
        if assigned is not None:
            assigned.append(made[0])
        if retries is not None:
            retries.append(tree_retries(stream, retried))
        return counted[0]
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)


def _count_calls(owner: Any, attr: str, counter: list[int]) -> tuple[Any, str, Any]:
    """Make each call of `owner.attr` add one to `counter[0]`; (owner, attr, the original), to
    put it back."""
    original = owner.__dict__[attr]

    def counting(*a: Any, **k: Any) -> Any:
        counter[0] += 1
        return original(*a, **k)

    setattr(owner, attr, counting)
    return owner, attr, original


# Kueue main does not retry a cohort tree's inadmissible workloads when quota comes back: it asks
# its requeuer to, which waits a second and folds every other request for the same tree in that
# second into one (pkg/cache/queue/inadmissible_workloads.go, requeueBatchPeriod).
KUEUE_REQUEUE_BATCH_US = 1_000_000


def _hook_wakes(prefix: str, woken: dict[str, None]) -> list[tuple[Any, str, Any]]:
    """Record in `woken` the root of every cohort tree whose parked heads an event retries."""
    lifecycle = sys.modules[prefix + "domain.lifecycle"]
    patched: list[tuple[Any, str, Any]] = []
    whole, released = lifecycle.wake_tree, lifecycle._wake_tree_after_release
    if not hasattr(whole, "__code__") or not hasattr(released, "__code__"):
        return patched  # compiled

    def wake_tree(state: Any, cq: Any, _o: Any = whole) -> Any:
        woken[cq.node.root().name] = None
        return _o(state, cq)

    def after_release(state: Any, cq: Any, *a: Any, _o: Any = released) -> Any:
        woken[cq.node.root().name] = None
        return _o(state, cq, *a)

    patched.append((lifecycle, "_wake_tree_after_release", released))
    lifecycle._wake_tree_after_release = after_release
    for name, module in list(sys.modules.items()):
        if name.startswith(prefix + "domain.") and getattr(module, "wake_tree", None) is whole:
            patched.append((module, "wake_tree", whole))
            module.wake_tree = wake_tree
    return patched


def tree_retries(stream: Stream, retried: list[tuple[int, str]]) -> tuple[int, int]:
    """(retries quotaflow made, retries Kueue main's requeuer would make) over the timed stream:
    quotaflow retries a tree at each event that asks for it; Kueue's requeuer serves a request
    a second after it, with every later request for the same tree in that second."""
    first = len(stream.prelude)
    due: dict[str, int] = {}
    batches = 0
    for offset, root in retried:
        t = _event_time_us(stream.timed[offset - first])
        if root not in due or t > due[root]:
            due[root] = t + KUEUE_REQUEUE_BATCH_US
            batches += 1
    return len(retried), batches


def _event_time_us(event: bytes) -> int:
    return parse_time(msgspec.json.decode(event)["time"])


_MEMORY_CHILD = r"""
import gc, json, os, sys
sys.path[:0] = {paths!r}
{loader}
import msgspec
data = msgspec.msgpack.decode(open({path!r}, "rb").read())
page = os.sysconf("SC_PAGE_SIZE")
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page
engine = Engine()
setup, rest = data[:{setup}], data[{setup}:]
for offset, event in enumerate(setup):
    engine.apply(event, offset)
gc.collect()
before = rss()
peak = before
for offset, event in enumerate(rest, len(setup)):
    engine.apply(event, offset)
    if offset % 256 == 0:
        peak = max(peak, rss())
peak = max(peak, rss())
pending = sum(1 for ws in engine.state.workloads.values() if ws.admission is None)
print(json.dumps({{"bytes": peak - before, "pending": pending}}))
"""


def memory(tree: str | None, setup: list[bytes], backlog: list[bytes], workdir: Path) -> tuple[float, int] | None:
    """Bytes of peak RSS over an empty (configured) engine's, per pending workload, and the
    pending count, measured in a child process folding `setup` then `backlog` with `tree`'s
    engine (None: this checkout)."""
    path = workdir / "memory-stream.msgpack"
    path.write_bytes(msgspec.msgpack.encode(setup + backlog))
    if tree is None:
        loader = "from domain.engine import Engine"
        paths = [str(ROOT)]
    else:
        loader = "from domain.engine import Engine"
        paths = [tree]
    code = _MEMORY_CHILD.format(paths=paths, loader=loader, path=str(path), setup=len(setup))
    env_cmd = [sys.executable, "-c", code]
    done = subprocess.run(env_cmd, capture_output=True, text=True, cwd=str(workdir))
    if done.returncode != 0:
        print(f"  (memory child failed: {done.stderr.strip().splitlines()[-1:]})", flush=True)
        return None
    got = json.loads(done.stdout.strip().splitlines()[-1])
    pending = got["pending"]
    return (got["bytes"] / pending if pending else 0.0), pending


def _setup_len(stream: Stream) -> int:
    for i, data in enumerate(stream.prelude):
        if b'"WorkloadSubmitted"' in data:
            return i
    return len(stream.prelude)


def _depths(text: str) -> list[int]:
    try:
        depths = [int(d) for d in text.split(",") if d.strip()]
    except ValueError:
        depths = []
    if not depths or min(depths) < 1:
        raise argparse.ArgumentTypeError("whole numbers of at least 1, comma-separated (8,80)")
    return depths


def _names(choices: Sequence[str]) -> Any:
    def parse(text: str) -> list[str]:
        names = [x.strip() for x in text.split(",") if x.strip()]
        if any(x not in choices for x in names):
            raise argparse.ArgumentTypeError(f"choose from {', '.join(choices)}")
        return names

    return parse


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--base", help="git revision whose domain/ is compared with this checkout's (from its sources)")
    which.add_argument("--base-dir", help="a checkout whose domain/ is compared as it stands there "
                                          "(compiled if built there: deploy/compile.py in a copy)")
    parser.add_argument("--quick", action="store_true", help="small streams: a smoke run in a few minutes")
    parser.add_argument("--depths", type=_depths, default=[8, 80],
                        help="outstanding workloads per ClusterQueue, comma-separated (default 8,80)")
    parser.add_argument("--cohorts", type=int)
    parser.add_argument("--per-cohort", type=int, default=10)
    parser.add_argument("--events", type=int, help="timed events per sweep row")
    parser.add_argument("--submit-all", type=int, help="workloads of the submit-all stream (0: skip)")
    parser.add_argument("--preemption-events", type=int, help="timed events of the preemption stream (0: skip)")
    parser.add_argument("--strategies", type=_names(STRATEGIES), default=list(STRATEGIES),
                        help=f"any of {','.join(STRATEGIES)} (empty: no sweep rows)")
    parser.add_argument("--policies", type=_names(POLICIES), default=list(POLICIES),
                        help=f"any of {','.join(POLICIES)}")
    parser.add_argument("--chunk", type=int, default=250)
    parser.add_argument("--no-memory", action="store_true")
    args = parser.parse_args(argv)
    quick = args.quick
    depths = args.depths
    cohorts = args.cohorts or (2 if quick else 10)
    events = args.events or (1500 if quick else 20000)
    submit_all = args.submit_all if args.submit_all is not None else (10000 if quick else 200000)
    pre_events = args.preemption_events if args.preemption_events is not None else (2000 if quick else 25000)
    strategies, policies = args.strategies, args.policies

    with tempfile.TemporaryDirectory(prefix="depth-sweep-") as tmp:
        workdir = Path(tmp)
        engines: dict[str, type] = {}
        trees: dict[str, str | None] = {}
        where = ""
        if args.base_dir:
            base_dir = Path(args.base_dir).resolve()
            engines["base"] = load_engine_from(base_dir)
            trees["base"] = str(base_dir)
            where = f"{base_dir}/domain"
        elif args.base:
            base_dir = workdir / "base"
            engines["base"] = load_engine_at(args.base, base_dir)
            trees["base"] = str(base_dir)
            where = f"domain/ at {args.base}"
        from domain.engine import Engine

        engines["ours"] = Engine
        trees["ours"] = None
        print(f"ours: {ROOT}/domain, {engine_form(Engine)}"
              + (f"; base: {where}, {engine_form(engines['base'])}" if where else "")
              + f"; {cohorts} cohorts x {args.per_cohort} CQs; {args.chunk} events per side, alternating", flush=True)
        rows: list[dict[str, Any]] = []

        def run(stream: Stream, group: str, depth: int | None, count_searches: bool = False) -> None:
            counts: dict[str, int] = {}
            cpu, same = compare(engines, stream, args.chunk, counts)
            n = len(stream.timed)
            row: dict[str, Any] = {"name": stream.name, "group": group, "depth": depth, "events": n, "same": same,
                                   "decisions": counts.get("decisions", 0) / n, "pending": counts.get("pending", 0) / n}
            for side in engines:
                row[f"rate_{side}"] = n / cpu[side] if cpu[side] else float("inf")
            if not args.no_memory:
                split = _setup_len(stream)
                if stream.backlog is None:
                    setup, backlog = stream.prelude[:split], stream.prelude[split:]
                else:
                    setup, backlog = stream.prelude, stream.timed[: stream.backlog]
                for side in engines:
                    got = memory(trees[side], setup, backlog, workdir)
                    row[f"mem_{side}"] = got
            if count_searches:
                for side, cls in engines.items():
                    assigned: list[int] = []
                    retries: list[tuple[int, int]] = []
                    found = searches(cls, stream, assigned, retries if side == "ours" else None)
                    row[f"searches_{side}"] = None if found is None else found / n
                    row[f"assigned_{side}"] = assigned[0] / n if found is not None and assigned else None
                    if found is not None and retries and retries[0][0]:
                        row["retries"] = (retries[0][0] / n, retries[0][1] / n)
            rows.append(row)
            rates = "  ".join(f"{side} {row[f'rate_{side}']:>8,.0f} ev/s" for side in engines)
            mem = "  ".join(
                f"{side} {row[f'mem_{side}'][0]:,.0f} B/pending ({row[f'mem_{side}'][1]:,} pending)"
                for side in engines if row.get(f"mem_{side}"))
            srch = "  ".join(f"{side} {row[f'searches_{side}']:.2f} searches/event"
                             for side in engines if row.get(f"searches_{side}") is not None)
            srch += "".join(f"  {side} {row[f'assigned_{side}']:.1f} assignments/event"
                            for side in engines if row.get(f"assigned_{side}") is not None)
            out = f"  {row['decisions']:.1f} decisions/event ({row['pending']:.1f} Pending)"
            if "retries" in row:
                out += (f"  {row['retries'][0]:.2f} tree retries/event"
                        f" ({row['retries'][1]:.2f} under Kueue's 1 s requeue batch)")
            print(f"  {stream.name:<34} {n:>7,} events  {rates}  identical: {'yes' if same else 'NO'}  {mem}  {srch}{out}",
                  flush=True)

        for strategy in strategies:
            for policy in policies:
                for depth in depths:
                    run(sweep_stream(strategy, policy, depth, cohorts, args.per_cohort, events),
                        f"{strategy}/{policy}", depth, count_searches=True)
        if submit_all:
            run(submit_all_stream(submit_all, cohorts, args.per_cohort), "submit-all", None)
        if pre_events:
            run(preemption_deep_stream(pre_events, depth=20 if quick else 200), "preemption-deep", None,
                count_searches=True)
        print()
        print(table(rows, list(engines)))
    return 0


def table(rows: list[dict[str, Any]], sides: list[str]) -> str:
    """The markdown table of a run: rates, each relative to its group's shallowest depth."""
    shallow: dict[tuple[str, str], float] = {}
    for row in rows:
        if row["depth"] is not None:
            for side in sides:
                key = (row["group"], side)
                shallow.setdefault(key, row[f"rate_{side}"])
    base_rate = {side: next((r[f"rate_{side}"] for r in rows if r["depth"] is not None), None) for side in sides}
    head = ["stream", "events"]
    for side in sides:
        head += [f"{side} ev/s", f"{side} rel."]
    if "base" in sides:
        head.append("speed-up")
    head += [f"{side} B/pending" for side in sides] + [f"{side} searches/ev" for side in sides]
    head += [f"{side} assignments/ev" for side in sides]
    head += ["decisions/ev (Pending)", "tree retries/ev (Kueue 1 s batch)", "identical"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["name"], f"{row['events']:,}"]
        for side in sides:
            rate = row[f"rate_{side}"]
            ref = shallow.get((row["group"], side)) if row["depth"] is not None else base_rate[side]
            cells += [f"{rate:,.0f}", f"{rate / ref:.2f}" if ref else "-"]
        if "base" in sides:
            cells.append(f"{row['rate_ours'] / row['rate_base']:.2f}")
        for side in sides:
            mem = row.get(f"mem_{side}")
            cells.append(f"{mem[0]:,.0f} ({mem[1]:,})" if mem else "-")
        for side in sides:
            s = row.get(f"searches_{side}")
            cells.append("-" if s is None else f"{s:.2f}")
        for side in sides:
            s = row.get(f"assigned_{side}")
            cells.append("-" if s is None else f"{s:.1f}")
        cells.append(f"{row['decisions']:.1f} ({row['pending']:.1f})")
        retries = row.get("retries")
        cells.append("-" if retries is None else f"{retries[0]:.2f} ({retries[1]:.2f})")
        cells.append("yes" if row["same"] else "NO")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("rel.: events/s relative to the same strategy and policy's shallowest depth (submit-all and "
                 "preemption-deep: relative to the first sweep row)")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
