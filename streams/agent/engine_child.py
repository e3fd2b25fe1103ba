"""The agent's engine process: `python -m streams.agent.engine_child PARENT_PID`.

Started by `streams.agent.engine_host.ChildEngine`, it holds the engine and answers the requests of
`streams.agent.engine_wire` on stdin/stdout, one at a time, in order. It keeps nothing durable, so it
only has to die with its parent, never outlive it:

- PR_SET_PDEATHSIG: the kernel SIGKILLs it when its parent dies, however (SIGKILL included);
- stdin EOF: the parent closed its end or is gone (also where PR_SET_PDEATHSIG does not exist);
- SIGTERM and SIGINT are ignored: a signal to the agent's process group stops the agent
  gracefully, and the engine must still answer until the agent closes it.
"""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import sys
import time
from typing import BinaryIO

from domain.decisions import encode
from domain.engine import Engine
from streams.agent.engine_wire import (
    LENGTH_BYTES,
    Applied,
    Apply,
    Failed,
    Fold,
    Folded,
    Reply,
    Restore,
    Restored,
    reply_encoder,
    request_decoder,
)
from streams.log.snapshots import SnapshotUnusable, restore, snapshot_data

PR_SET_PDEATHSIG = 1

# The collector's thresholds in this process (gen0 allocations, gen1 and gen2 collections). The
# engine's state grows by a few tracked objects per workload and its per-event garbage is freed
# by reference counting, so the default (700, 10, 10) mostly rescans the live state over and
# over, more so the larger it is. Measured with both settings folding the same streams side by
# side (500 events at a time, bench.engine_bench streams and the agent bench's): 1.18x on the
# cq10 stream (1,000 ClusterQueues), 1.02-1.04x on the agent bench's small state. Memory grows
# by at most the young objects between collections (a few MB). Same values as the projections'
# bulk fold (projections.follower.bulk_gc).
ENGINE_GC_THRESHOLD = (50_000, 50, 100)


def _die_with(parent: int) -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # The parent may have died before prctl: then this process was already reparented.
    if os.getppid() != parent:
        os._exit(1)


class Child:
    def __init__(self) -> None:
        self.engine = Engine()

    def handle(self, request: Restore | Fold | Apply) -> Reply:
        if isinstance(request, Apply):
            return self.apply(request)
        if isinstance(request, Fold):
            return self.fold(request)
        try:
            self.engine = Engine() if request.data is None else restore(request.data, request.offset)
        except SnapshotUnusable as exc:
            self.engine = Engine()
            return Failed("snapshot", request.offset, str(exc))
        return Restored()

    def fold(self, request: Fold) -> Reply:
        apply = self.engine.apply
        verify = None
        offset = -1
        times = request.times or [None] * len(request.offsets)
        try:
            for offset, value, time in zip(request.offsets, request.values, times, strict=True):
                decisions = apply(value or b"", offset, time)
                if offset == request.verify_at:
                    verify = [encode(d) for d in decisions]
        except Exception as exc:
            return Failed("engine", offset, repr(exc))
        return Folded(verify)

    def apply(self, request: Apply) -> Reply:
        apply = self.engine.apply
        values: list[bytes] = []
        types: list[str] = []
        workloads: list[str | None] = []
        counts: list[int] = []
        seconds: list[float] = []
        clock = time.perf_counter
        offset = -1
        times = request.times or [None] * len(request.offsets)
        try:
            for offset, value, log_time in zip(request.offsets, request.values, times, strict=True):
                began = clock()
                decisions = apply(value or b"", offset, log_time)
                seconds.append(clock() - began)
                counts.append(len(decisions))
                for decision in decisions:
                    values.append(encode(decision))
                    types.append(type(decision).__name__)
                    workloads.append(decision.workload)
        except Exception as exc:
            return Failed("engine", offset, repr(exc))
        return Applied(values, types, workloads, counts, snapshot_data(self.engine) if request.snapshot else None, seconds)


def _read_exactly(stream: BinaryIO, n: int) -> bytes | None:
    data = stream.read(n)
    return data if data is not None and len(data) == n else None


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """Answer requests until EOF."""
    child = Child()
    decode = request_decoder.decode
    encode_reply = reply_encoder.encode
    while True:
        head = _read_exactly(requests, LENGTH_BYTES)
        if head is None:
            return
        body = _read_exactly(requests, int.from_bytes(head, "big"))
        if body is None:
            return
        out = encode_reply(child.handle(decode(body)))
        replies.write(len(out).to_bytes(LENGTH_BYTES, "big"))
        replies.write(out)
        replies.flush()


def main() -> None:
    _die_with(int(sys.argv[1]))
    gc.set_threshold(*ENGINE_GC_THRESHOLD)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Replies get stdout's pipe to themselves; anything printed goes to stderr, not into a frame.
    replies = os.fdopen(os.dup(1), "wb", buffering=1 << 20)
    os.dup2(2, 1)
    requests = os.fdopen(0, "rb", buffering=1 << 20, closefd=False)
    try:
        serve(requests, replies)
    except BrokenPipeError:
        pass  # the agent is gone


if __name__ == "__main__":
    main()
