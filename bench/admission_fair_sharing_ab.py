"""Admission fair sharing against the base stream: engine events/s with it on.

    python -m bench.admission_fair_sharing_ab [--workloads N] [--rounds K]

The engine bench's base stream (devtools/cluster_stream.py `generate`: 10 cohorts x 10 ClusterQueues,
N workloads submitted and finished, every event with its `time`), three ways, measured
interleaved in one process on its CPU time (the machines are shared):

- base: the stream as it is;
- base-2lq: two LocalQueues per ClusterQueue, every other workload in the second one, and a
  Configuration without admission fair sharing (what the afs variant has, less the feature);
- afs-1lq: the base stream with `admissionFairSharing` (Kueue's documented example: half-life
  168h, sampling 5m, cpu weighing 2) and every ClusterQueue `admissionScope:
  UsageBasedAdmissionFairSharing`: every admission pushes and settles a penalty, every release
  moves a LocalQueue's admitted usage, samplings fall due as the log's time passes (one
  LocalQueue per ClusterQueue: the order is the base order);
- afs: the same on base-2lq, where the order by usage decides between the two LocalQueues, and
  each LocalQueue's workloads wait in classes of their own.

The goal (the issue's): the base stream with admission fair sharing on (afs-1lq) within 20% of
base's events/s; afs against base-2lq is what ordering by usage costs on top. The decisions of afs
differ (that is the feature); the admission counts are printed so that a run that stalls shows.
"""

from __future__ import annotations

import argparse
import copy
from typing import Any

import msgspec

from bench.timing import cpu_rounds
from devtools.cluster_stream import generate, render, setup_events

AFS = {"usageHalfLifeTime": "168h", "usageSamplingInterval": "5m", "resourceWeights": {"cpu": 2.0, "memory": 1.0}}


def variants(workloads: int, seed: int) -> dict[str, list[bytes]]:
    gen = generate(workloads, seed=seed)
    setup = setup_events(gen.cohorts)
    stream = [render(rec) for rec in gen.records]
    encode = msgspec.json.encode
    out = {"base": [encode(e) for e in setup + stream]}
    one: list[dict[str, Any]] = [{"type": "ConfigApplied", "time": setup[0]["time"], "object": {
        "apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration", "admissionFairSharing": AFS}}]
    for ev in setup:
        ev = copy.deepcopy(ev)
        if ev["object"]["kind"] == "ClusterQueue":
            ev["object"]["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
        one.append(ev)
    out["afs-1lq"] = [encode(e) for e in one + stream]
    for name, afs in (("base-2lq", False), ("afs", True)):
        config: dict[str, Any] = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration"}
        if afs:
            config["admissionFairSharing"] = AFS
        events: list[dict[str, Any]] = [{"type": "ConfigApplied", "time": setup[0]["time"], "object": config}]
        for ev in setup:
            ev = copy.deepcopy(ev)
            obj = ev["object"]
            if obj["kind"] == "ClusterQueue" and afs:
                obj["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
            events.append(ev)
            if obj["kind"] == "LocalQueue":
                second = copy.deepcopy(ev)
                second["id"] += "-b"
                second["object"]["metadata"]["name"] += "-b"
                events.append(second)
        for ev, rec in zip(stream, gen.records):
            if ev["type"] == "WorkloadSubmitted" and rec[4] % 2:
                ev = copy.deepcopy(ev)
                ev["workload"]["spec"]["queueName"] += "-b"
            events.append(ev)
        out[name] = [encode(e) for e in events]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    streams = variants(args.workloads, args.seed)
    names = list(streams)
    best, admitted = cpu_rounds(streams, args.rounds)
    print(f"{'variant':10} {'events':>8} {'admitted':>9} {'events/s CPU (best)':>20} {'of base':>8}")
    for n in names:
        rate = len(streams[n]) / best[n]
        base_rate = len(streams["base"]) / best["base"]
        print(f"{n:10} {len(streams[n]):8} {admitted[n]:9} {rate:20,.0f} {rate / base_rate:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
