"""The agent's two engine hosts: the engine process gives what the in-process engine gives."""

from __future__ import annotations

import os
import signal
import zlib

import pytest
from agent_harness import as_message, running

from devtools.generate import generated_events
from domain.engine import Engine
from domain.snapshot import dump
from streams.agent import engine_wire as wire
from streams.agent.engine_child import Child
from streams.agent.engine_host import (
    ChildEngine,
    EngineFailure,
    EngineProcessDied,
    LocalEngine,
    Shell,
)
from streams.log import Record
from streams.log.snapshots import SnapshotUnusable, Stored, snapshot_data

pytestmark = pytest.mark.timeout(60, func_only=True)


def records(n: int, seed: int) -> list[Record]:
    out = []
    for offset, event in enumerate(generated_events(n, seed=seed)):
        m = as_message(event)
        out.append(Record("in", offset, m.value, m.key, m.headers))
    return out


@pytest.mark.parametrize("keep_decided", [True, False])
async def test_the_engine_process_gives_the_same_messages_and_snapshots_as_the_engine_in_process(keep_decided: bool) -> None:
    shell = Shell("decisions", b"/quotaflow/agent/in", keep_decided=keep_decided)
    stream = records(3000, seed=8)
    local, child = LocalEngine(shell), await ChildEngine.start(shell)
    try:
        assert child.pid is not None and running(child.pid)
        for host in (local, child):
            await host.restore(None)
        # Folded without emitting (as in recovery), then applied in uneven batches, one with a snapshot.
        verify_at = 555
        folded = [await host.fold(stream[:600], verify_at) for host in (local, child)]
        assert folded[0] == folded[1] and folded[0] is not None
        cuts = [600, 601, 1500, 1501, 3000]
        for lo, hi in zip(cuts, cuts[1:], strict=False):
            snapshot = hi == 1500
            # Both handed over before either is awaited: the child's results come back in order.
            pending = [host.apply(stream[lo:hi], snapshot=snapshot, time=b"t") for host in (local, child)]
            a, b = [await p for p in pending]
            assert a.out == b.out and a.decisions == b.decisions == len(a.out)
            assert a.decided == b.decided and bool(a.decided) == (keep_decided and bool(a.out))
            if snapshot:
                assert a.snapshot is not None and b.snapshot is not None
                assert zlib.decompress(b"".join(b.snapshot)) == zlib.decompress(b"".join(a.snapshot))
            else:
                assert a.snapshot is None and b.snapshot is None
        # An empty batch with a snapshot: the state after the last event handed over.
        a, b = await local.apply([], snapshot=True, time=b"t"), await child.apply([], snapshot=True, time=b"t")
        assert a.out == b.out == [] and a.snapshot is not None and b.snapshot is not None
        assert zlib.decompress(b"".join(b.snapshot)) == dump(local.engine)
    finally:
        await child.close()
    assert not running(child.pid)


async def test_the_engine_process_restores_a_snapshot_and_refuses_an_unusable_one() -> None:
    shell = Shell("decisions", b"src", keep_decided=False)
    stream = records(800, seed=2)
    engine = Engine()
    for r in stream[:500]:
        engine.apply(r.value or b"", r.offset)
    stored = Stored(499, b"".join(snapshot_data(engine)))
    child = await ChildEngine.start(shell)
    try:
        await child.restore(stored)
        got = await child.apply(stream[500:], snapshot=False, time=b"t")
        expected = [d for r in stream[500:] for d in engine.apply(r.value or b"", r.offset)]
        assert len(got.out) == len(expected) > 0
        with pytest.raises(SnapshotUnusable, match="offset 7"):
            await child.restore(Stored(7, b"not a snapshot"))
        # ... and is then empty, as after restore(None): an empty engine rejects an unknown workload.
        fresh = await child.apply(stream[500:501], snapshot=False, time=b"t")
        assert fresh.out == (await LocalEngine(shell).apply(stream[500:501], snapshot=False, time=b"t")).out
    finally:
        await child.close()


async def test_a_dead_engine_process_fails_what_was_handed_to_it_and_everything_after() -> None:
    child = await ChildEngine.start(Shell("decisions", b"src", keep_decided=False))
    try:
        await child.restore(None)
        stream = records(4000, seed=4)
        pending = child.apply(stream, snapshot=False, time=b"t")
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        with pytest.raises(EngineProcessDied, match="died"):
            await pending
        with pytest.raises(EngineProcessDied):
            child.check()
        with pytest.raises(EngineProcessDied):
            child.apply(stream[:1], snapshot=False, time=b"t")
    finally:
        await child.close()


def test_an_engine_that_raises_is_reported_with_its_offset_and_becomes_engine_failure() -> None:
    child = Child()

    # A subclass, not a patched method: the compiled Engine's attributes are read-only.
    class Broken(Engine):
        def apply(self, event: object, offset: int, log_time: int | None = None) -> list[object]:  # type: ignore[override]
            if offset == 3:
                raise ZeroDivisionError("a bug")
            return []

    child.engine = Broken()
    reply = child.handle(wire.Apply([1, 2, 3, 4], [b"{}"] * 4, snapshot=False))
    assert isinstance(reply, wire.Failed) and reply.kind == "engine" and reply.offset == 3
    decoded = wire.reply_decoder.decode(wire.reply_encoder.encode(reply))
    error = ChildEngine._failed(decoded)  # type: ignore[arg-type]
    assert isinstance(error, EngineFailure) and "offset 3" in str(error) and "a bug" in str(error)
    folded = child.handle(wire.Fold([2, 3], [b"{}", b"{}"], verify_at=-1))
    assert isinstance(folded, wire.Failed) and folded.offset == 3


def test_engine_process_requests_and_replies_round_trip_on_the_wire() -> None:
    request = wire.Apply([5, 6], [b'{"type":"x"}', None], snapshot=True)
    assert wire.request_decoder.decode(wire.request_encoder.encode(request)) == request
    reply = wire.Applied([b"v"], ["Admitted"], [None], [1, 0], [b"chunk"], [0.5, 0.25])
    assert wire.reply_decoder.decode(wire.reply_encoder.encode(reply)) == reply
