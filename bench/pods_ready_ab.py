"""waitForPodsReady against the base stream: engine events/s with it on.

    python -m bench.pods_ready_ab [--workloads N] [--rounds K]

The engine bench's base stream (devtools/cluster_stream.py `generate`: 10 cohorts x 10 ClusterQueues,
N workloads submitted and finished, every event with its `time`), two ways, measured interleaved
in one process on its CPU time (the machines are shared):

- base: the stream as it is (no Configuration: waitForPodsReady off);
- pods-ready: a v1beta2 Configuration, which turns waitForPodsReady on with Kueue's defaults
  (timeout 30m), and after every event that admitted workloads a `WorkloadPodsReady` for each,
  at that event's time, as a launcher reports them: every admission starts a timer, every report
  cancels it, every event reads its own time first to see whether a timer is due. No timeout
  falls due (runs last 10 virtual minutes on average), so the admissions are the base's.

The goal (the issue's): pods-ready within 20% of base's events/s. Its stream holds more events
(the reports); "base events/s" counts only the base stream's events over the whole run's time:
the slowdown a user of the same cluster sees.
"""

from __future__ import annotations

import argparse
from typing import Any

import msgspec

from bench.timing import cpu_rounds
from devtools.cluster_stream import generate, render, setup_events
from domain.decisions import Admitted
from domain.engine import Engine

CONFIGURATION = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}


def variants(workloads: int, seed: int) -> dict[str, list[bytes]]:
    gen = generate(workloads, seed=seed)
    setup = setup_events(gen.cohorts)
    stream = [render(rec) for rec in gen.records]
    encode = msgspec.json.encode
    base = setup + stream
    events: list[dict[str, Any]] = [{"type": "ConfigApplied", "time": setup[0]["time"], "object": CONFIGURATION}]
    engine = Engine()
    engine.apply(events[0], 0)
    for ev in base:
        events.append(ev)
        admitted = [d.workload for d in engine.apply(ev, len(events) - 1) if type(d) is Admitted]
        for key in admitted:
            assert key is not None
            namespace, _, name = key.partition("/")
            report = {"type": "WorkloadPodsReady", "namespace": namespace, "name": name, "time": ev["time"]}
            events.append(report)
            engine.apply(report, len(events) - 1)
    return {"base": [encode(e) for e in base], "pods-ready": [encode(e) for e in events]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    streams = variants(args.workloads, args.seed)
    names = list(streams)
    best, admitted = cpu_rounds(streams, args.rounds)
    base_events = len(streams["base"])
    base_rate = base_events / best["base"]
    print(f"{'variant':10} {'events':>8} {'admitted':>9} {'events/s CPU (best)':>20} {'of base':>8} "
          f"{'base events/s':>14} {'of base':>8}")
    for n in names:
        rate = len(streams[n]) / best[n]
        per_base = base_events / best[n]
        print(f"{n:10} {len(streams[n]):8} {admitted[n]:9} {rate:20,.0f} {rate / base_rate:8.3f} "
              f"{per_base:14,.0f} {per_base / base_rate:8.3f}")
    assert admitted["pods-ready"] == admitted["base"], "the reports changed the admissions"
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
