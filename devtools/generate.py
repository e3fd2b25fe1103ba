"""A deterministic, generated input stream for tests and benchmarks.

`generated_events(n, seed)` yields `n` contract-v1 events as JSON bytes: a small Kueue
configuration (two flavors, three ClusterQueues sharing a cohort, one of them StrictFIFO with a
borrowingLimit, LocalQueues in a few namespaces), then a mix of workload submissions, finishes,
deletions and priority updates, with the odd invalid event (garbage bytes, invalid JSON, unknown
types) so that `Rejected` decisions are part of every run. Workloads are finished and then deleted
again, so the engine's state stays bounded however long the stream is.

The same seed always gives the same bytes; `write_jsonl` writes them one per line, which is what
`quotaflow replay` reads (no generated event contains a newline).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

_encode = msgspec.json.Encoder().encode

NAMESPACES = ("team-a", "team-b", "team-c", "research")
QUEUE = "user-queue"


def _cq(name: str, cpu: int, memory: str, *, strategy: str | None = None, borrowing: int | None = None) -> dict[str, Any]:
    cpu_res: dict[str, Any] = {"name": "cpu", "nominalQuota": cpu}
    if borrowing is not None:
        cpu_res["borrowingLimit"] = borrowing
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "cohort": "pool",
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {"name": "on-demand", "resources": [cpu_res, {"name": "memory", "nominalQuota": memory}]},
                    {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": cpu // 2}, {"name": "memory", "nominalQuota": memory}]},
                ],
            }
        ],
    }
    if strategy:
        spec["queueingStrategy"] = strategy
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def config_events() -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "on-demand"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "spot"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 1000},
        _cq("cq-a", 40, "160Gi"),
        _cq("cq-b", 60, "240Gi"),
        _cq("cq-c", 20, "80Gi", strategy="StrictFIFO", borrowing=6),
    ]
    for ns, cq in zip(NAMESPACES, ("cq-a", "cq-b", "cq-c", "cq-a"), strict=True):
        objects.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "LocalQueue",
                "metadata": {"namespace": ns, "name": QUEUE},
                "spec": {"clusterQueue": cq},
            }
        )
    return [{"type": "ConfigApplied", "object": obj} for obj in objects]


def _workload(ns: str, name: str, rng: random.Random) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "queueName": QUEUE,
        "podSets": [
            {
                "name": "main",
                "count": rng.randint(1, 4),
                "requests": {"cpu": str(rng.choice((1, 2, 3))), "memory": f"{rng.choice((1, 2, 4))}Gi"},
            }
        ],
    }
    if rng.random() < 0.2:
        spec["priorityClassName"] = "high"
    return {"metadata": {"namespace": ns, "name": name}, "spec": spec}


GARBAGE = (
    b"\x00\xff\xfe not even text \x80",
    b'{"type": "WorkloadSubmitted", "workload": ',
    b"[1, 2, 3]",
    b'{"type": "NoSuchEvent"}',
)


def generated_events(n: int, seed: int = 0, *, max_live: int = 40, garbage_rate: float = 0.01) -> Iterator[bytes]:
    """`n` events as JSON bytes (or garbage), deterministic for a seed."""
    rng = random.Random(seed)
    emitted = 0
    for event in config_events():
        if emitted == n:
            return
        yield _encode(event)
        emitted += 1
    live: list[tuple[str, str]] = []  # submitted, not yet finished
    finished: list[tuple[str, str]] = []  # finished, not yet deleted
    serial = 0
    while emitted < n:
        roll = rng.random()
        event: dict[str, Any] | bytes
        if roll < garbage_rate:
            event = rng.choice(GARBAGE)
        elif finished and (roll < 0.25 or len(finished) > max_live):
            ns, name = finished.pop(rng.randrange(len(finished)))
            event = {"type": "WorkloadDeleted", "namespace": ns, "name": name}
        elif live and (roll < 0.5 or len(live) >= max_live):
            ns, name = live.pop(rng.randrange(min(len(live), 8)))  # mostly the oldest
            finished.append((ns, name))
            event = {"type": "WorkloadFinished", "namespace": ns, "name": name}
        elif live and roll < 0.53:
            ns, name = rng.choice(live)
            wl = _workload(ns, name, rng)  # same name, a fresh shape: usually Rejected (immutable)
            wl["spec"]["priority"] = rng.randint(0, 100)
            event = {"type": "WorkloadUpdated", "workload": wl}
        else:
            ns = rng.choice(NAMESPACES)
            name = f"wl-{serial}"
            serial += 1
            live.append((ns, name))
            event = {"type": "WorkloadSubmitted", "workload": _workload(ns, name, rng)}
        yield event if isinstance(event, bytes) else _encode(event)
        emitted += 1


def write_jsonl(path: str | Path, events: Iterator[bytes] | list[bytes]) -> int:
    count = 0
    with Path(path).open("wb") as f:
        for event in events:
            if b"\n" in event or not event.strip():
                raise ValueError(f"event {count} cannot be one JSON Lines line: {event!r}")
            f.write(event)
            f.write(b"\n")
            count += 1
    return count
