"""What-if against replay: `quotaflow whatif` over N recorded events, against `quotaflow replay`
of the same events, both in this process, alternated, CPU time (time.process_time).

    python -m bench.whatif_bench --workloads 25000 --rounds 3

The recorded log comes from devtools/timed_stream.py (two teams in a cohort that preempt and
reclaim, a launcher that finishes, releases and cleans up; about 3.9 events per workload),
generated beforehand and untimed. Timed:

- `replay`: `Engine.apply` over the records' bytes, as `quotaflow replay` does;
- `whatif-none`: the whole what-if run with no change (reading times, the recorded world, the
  changed world, the comparison report);
- `whatif-x1.5`: the same with team-a's nominal quota times 1.5;
- `whatif-x1.5-decided`: the same, the recorded world read from its decision log (decoding the
  decisions' bytes is timed), as `quotaflow whatif --broker URL` does when the agent has decided
  the whole input log;
- `replay-cli` and `whatif-x1.5-file`: the commands' whole work from an events file on disk:
  `quotaflow replay FILE` (reading the file, folding, encoding and writing every decision, to a
  null sink) and `quotaflow whatif FILE --set ...` (reading the file, both worlds, the report
  encoded as JSON);
- `whatif-x1.5-file-decided`: `quotaflow whatif FILE --decisions DECISIONS --set ...`, the
  recorded world read from the file's decisions (written beforehand, untimed, next to FILE as
  FILE.decisions.jsonl and kept with `--events`).

`--cases` picks cases (comma-separated); `--events FILE` keeps the generated log in FILE and
reads it back on the next run instead of generating it again (generating costs about a replay).

From an events file alone a what-if run replays the log twice (the recorded world, to learn its
runtimes and measure it, then the changed world) plus the simulation's own work, so its floor is
about 2× a replay; from a log whose decisions cover the input (or an events file with its
decisions), the recorded world is read, not replayed. The engine runs compiled when domain/ is
built (`make compile`), else from its sources; the output says which.
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from pathlib import Path

import msgspec

from devtools.timed_stream import recorded_log
from domain.decisions import decode, encode
from domain.engine import Engine
from streams.log.event_files import positioned_events, read_events
from streams.whatif.changes import At, Change, sweep
from streams.whatif.run import run
from streams.whatif.source import read_decision_file, read_file, timed


def cpu(fn) -> float:  # noqa: ANN001
    gc.collect()
    t = time.process_time()
    fn()
    return time.process_time() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", type=int, default=25_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cases", default="replay,whatif-none,whatif-x1.5,whatif-x1.5-decided",
                        help="comma-separated; also replay-cli, whatif-x1.5-file, whatif-x1.5-file-decided")
    parser.add_argument("--events", type=Path, default=None, help="keep the generated log here (.jsonl), reuse it")
    args = parser.parse_args()
    t0 = time.perf_counter()
    path = args.events
    scratch = None
    if path is not None and path.is_file():
        events = [e for e in read_events(path) if isinstance(e, bytes)]
        print(f"read {len(events)} events from {path} in {time.perf_counter() - t0:.1f} s")
    else:
        events = [msgspec.json.encode(e) for e in recorded_log(args.workloads, args.seed, mean_gap_s=30.0)]
        print(f"generated {len(events)} events ({args.workloads} workloads) in {time.perf_counter() - t0:.1f} s")
        if path is None:
            scratch = tempfile.TemporaryDirectory(prefix="whatif-bench-")
            path = Path(scratch.name) / "events.jsonl"
        path.write_bytes(b"".join(e + b"\n" for e in events))

    def replay() -> None:
        engine = Engine()
        for i, e in enumerate(events):
            engine.apply(e, i)

    changed = sweep([], ["clusterqueue/team-a.nominal=cpu:x1.5"], At())[0]
    wanted = args.cases.split(",")
    decisions_path = path.with_name(path.name + ".decisions.jsonl")
    # `quotaflow replay FILE > DECISIONS`: the first replay-cli writes the decisions the
    # file-decided case reads (the same work as writing them to /dev/null).
    keep_decisions = "whatif-x1.5-file-decided" in wanted and not decisions_path.is_file()

    def replay_cli() -> None:
        nonlocal keep_decisions
        engine = Engine()
        with open(decisions_path if keep_decisions else "/dev/null", "wb") as sink:
            write = sink.write
            for offset, e, log_time in positioned_events(path):
                for d in engine.apply(e, offset, log_time):
                    write(encode(d))
                    write(b"\n")
        keep_decisions = False

    decision_log: list[tuple[int, bytes]] = []
    if "whatif-x1.5-decided" in wanted:
        engine = Engine()
        decision_log = [(i, encode(d)) for i, e in enumerate(events) for d in engine.apply(e, i)]
    if keep_decisions and "replay-cli" not in wanted:
        replay_cli()

    def from_file_and_decisions() -> None:
        records = read_file(path)
        msgspec.json.encode(run(records, [changed], decisions=read_decision_file(decisions_path, records)))

    def from_decision_log() -> None:
        by_offset: dict[int, list] = {}
        for i, raw in decision_log:
            by_offset.setdefault(i, []).append(decode(raw))
        run(timed(events), [changed], decisions=by_offset)

    cases = {
        "replay": replay,
        "whatif-none": lambda: run(timed(events), [Change("no change")]),
        "whatif-x1.5": lambda: run(timed(events), [changed]),
        "whatif-x1.5-decided": from_decision_log,
        "replay-cli": replay_cli,
        "whatif-x1.5-file": lambda: msgspec.json.encode(run(read_file(path), [changed])),
        "whatif-x1.5-file-decided": from_file_and_decisions,
    }
    cases = {k: v for k, v in cases.items() if k in wanted}
    if "replay-cli" in cases and "whatif-x1.5-file-decided" in cases:  # the decisions first
        cases = {"replay-cli": cases.pop("replay-cli"), **cases}
    best: dict[str, float] = {}
    for r in range(args.rounds):
        for name, fn in cases.items():
            s = cpu(fn)
            best[name] = min(best.get(name, s), s)
            print(f"round {r + 1}: {name:12} {s:7.2f} s CPU")
    # Each what-if against the replay of its kind: in memory against the engine's fold, from a
    # file against `quotaflow replay FILE`.
    ratio = {k: best[k] / best[base] for k in best for base in (("replay-cli",) if "-file" in k else ("replay",))
             if k not in ("replay", "replay-cli") and base in best}
    from domain._engine_form import running_compiled

    engine_form = "compiled" if running_compiled() else "interpreted"
    result = {"events": len(events), "workloads": args.workloads, "engine": engine_form, "cpu_s": best, "ratio": ratio}
    print(f"engine: {engine_form}")
    for k, v in ratio.items():
        base = "quotaflow replay FILE" if "-file" in k else "the engine's fold"
        print(f"{k}: {v:.2f}× {base} ({len(events)} events; goal ≤ 2× at 1,000,000)")
    if args.json:
        print(json.dumps(result))
    if scratch is not None:
        scratch.cleanup()


if __name__ == "__main__":
    main()
