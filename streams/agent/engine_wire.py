"""What the agent and its engine process (`streams.agent.engine_child`) say to each other.

One request and one reply per batch, each a msgpack message behind a 4-byte big-endian length,
on the child's stdin and stdout. Batches carry raw input values (the engine parses them) and
come back as already-encoded decision payloads plus the few fields the shell needs for headers
and keys, in columns: msgpack moves lists of bytes and strings at memcpy-like cost, where a
list of per-decision objects would cost a Python object each on both sides.

Requests are answered strictly in order; the child keeps no state but its engine, so any
failure on either side is answered by killing the child and recovering from the logs.
"""

from __future__ import annotations

import msgspec

LENGTH_BYTES = 4


class Restore(msgspec.Struct, tag="restore", array_like=True, gc=False):
    """Replace the engine: a stored snapshot's bytes (`streams.log.snapshots.Stored`), or empty."""

    data: bytes | None
    offset: int  # the snapshot's offset, for error messages (-1: none)


class Fold(msgspec.Struct, tag="fold", array_like=True, gc=False):
    """Apply events already decided (recovery): nothing comes back but the decisions of
    `verify_at`, if it is in this batch, for the agent to compare with the decision log."""

    offsets: list[int]
    values: list[bytes | None]
    verify_at: int
    times: list[int | None] = []  # each record's log time (Record.log_time)


class Apply(msgspec.Struct, tag="apply", array_like=True, gc=False):
    """Apply live events; with `snapshot`, also return the state right after the last one."""

    offsets: list[int]
    values: list[bytes | None]
    snapshot: bool
    times: list[int | None] = []  # each record's log time (Record.log_time)


Request = Restore | Fold | Apply


class Restored(msgspec.Struct, tag="restored", array_like=True, gc=False):
    pass


class Folded(msgspec.Struct, tag="folded", array_like=True, gc=False):
    verify: list[bytes] | None  # the encoded decisions of `verify_at`; None: not in this batch


class Applied(msgspec.Struct, tag="applied", array_like=True, gc=False):
    """The decisions of an `Apply`, in order: `counts[i]` of them for the i-th input event."""

    values: list[bytes]  # domain.decisions.encode(decision)
    types: list[str]  # the decision's type name (ce_type)
    workloads: list[str | None]  # the record key and ce_subject
    counts: list[int]
    snapshot: list[bytes] | None  # streams.log.snapshots.snapshot_data chunks
    seconds: list[float]  # per input event, the time Engine.apply took (admission attempt metrics)


class Failed(msgspec.Struct, tag="failed", array_like=True, gc=False):
    kind: str  # "engine": the engine raised (a bug); "snapshot": the snapshot cannot be loaded
    offset: int
    message: str


Reply = Restored | Folded | Applied | Failed

request_encoder = msgspec.msgpack.Encoder()
request_decoder = msgspec.msgpack.Decoder(Request)
reply_encoder = msgspec.msgpack.Encoder()
reply_decoder = msgspec.msgpack.Decoder(Reply)
