"""Hypothesis strategies for input that must not stop the engine or the agent: structured
mutations of valid events (wrong types, names Kubernetes refuses, quantities out of range, pod
sets changed by an update, a Cohort its own parent, a Batch in a Batch) and raw bytes (deep
nesting, oversized records, numbers like 1e400, arbitrary text). Shared by the engine's fuzz test
(tests/domain/test_fuzz_input.py) and the agent's on both logs (tests/streams/test_fuzz_agent.py).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from event_streams import batched, random_stream
from hypothesis import strategies as st

from domain import limits

INVALID_NAMES = ("Bad_Name", "UPPER", "a_b", "x\u0000y", "-lead", "../../etc/passwd", "\U0001f600", "n" * 254, "")
WRONG_TYPES: tuple[object, ...] = ([], {}, True, 1.5, [[["x"]]], {"a": {"b": []}})
BAD_QUANTITIES: tuple[object, ...] = ("99999999999999999999Ei", "-1", "1e400", "12Zi", "", "0x10", "NaN")
HUGE_NUMBER = "__HUGE_NUMBER__"  # replaced by a raw 1e400 once encoded (json.dumps cannot write it)


def stream_strategy() -> st.SearchStrategy[list[dict[str, Any]]]:
    seeds = st.integers(0, 10_000)
    plain = seeds.map(lambda s: random_stream(s, events=40, cohorts=2, queues_per_cohort=2))
    return st.one_of(plain, seeds.map(lambda s: batched(random_stream(s, events=40, cohorts=2, queues_per_cohort=2), s)))


def paths(value: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Every path to a value inside `value` (dict keys and list indexes)."""
    out: list[tuple[object, ...]] = []
    items: list[tuple[object, object]] = []
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    for key, child in items:
        out.append((*prefix, key))
        out.extend(paths(child, (*prefix, key)))
    return out


def replaced(value: Any, path: tuple[object, ...], new: object) -> Any:
    value = copy.deepcopy(value)
    target = value
    for key in path[:-1]:
        target = target[key]  # type: ignore[index]
    target[path[-1]] = new  # type: ignore[index]
    return value


@st.composite
def mutation(draw: st.DrawFn, stream: list[dict[str, Any]], max_bytes: int = limits.MAX_RECORD_BYTES + 64) -> bytes:
    """A valid event of the stream, broken so that its event must be Rejected."""
    base = draw(st.sampled_from([e for e in stream if e["type"] != "Batch"] or stream))
    kind = draw(st.sampled_from(("type", "wrong_type", "name", "quantity", "podsets", "cohort_cycle", "batch")))
    if kind == "type":
        broken: Any = {**base, "type": draw(st.sampled_from(("", "Nope", 1, None, ["WorkloadSubmitted"])))}
    elif kind == "wrong_type":
        candidates = [p for p in paths(base) if p != ("type",) and not isinstance(_at(base, p), (dict, list))]
        path = draw(st.sampled_from(candidates))
        broken = replaced(base, path, draw(st.sampled_from(WRONG_TYPES)))
    elif kind == "name":
        candidates = [p for p in paths(base) if p[-1] in ("name", "namespace", "queueName", "cohort", "clusterQueue")
                      and isinstance(_at(base, p), str) and "podSets" not in p and "resources" not in p]
        if not candidates:
            return draw(raw_garbage(max_bytes))
        broken = replaced(base, draw(st.sampled_from(candidates)), draw(st.sampled_from(INVALID_NAMES)))
    elif kind == "quantity":
        candidates = [p for p in paths(base) if (p[-1] in ("cpu", "memory", "nominalQuota") or "requests" in p)
                      and isinstance(_at(base, p), (str, int)) and not isinstance(_at(base, p), bool)]
        if not candidates:
            return draw(raw_garbage(max_bytes))
        quantity = draw(st.sampled_from((*BAD_QUANTITIES, HUGE_NUMBER)))
        broken = replaced(base, draw(st.sampled_from(candidates)), quantity)
    elif kind == "podsets":
        submits = [e for e in stream if e["type"] == "WorkloadSubmitted"]
        if not submits:
            return draw(raw_garbage(max_bytes))
        update = copy.deepcopy(draw(st.sampled_from(submits)))
        update["type"] = "WorkloadUpdated"
        update["workload"]["spec"]["podSets"][0]["count"] += draw(st.integers(1, 5))
        broken = update
    elif kind == "cohort_cycle":
        name = draw(st.sampled_from(("cohort-1", "fuzz-cohort")))
        broken = {"type": "ConfigApplied", "object": {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Cohort",
                                                      "metadata": {"name": name}, "spec": {"parentName": name}}}
    else:
        inner = {"type": "Batch", "events": [base]}
        broken = {"type": "Batch", "events": [inner, draw(st.sampled_from(({}, [], "x", None)))]}
    return json.dumps(broken).replace(f'"{HUGE_NUMBER}"', "1e400").encode()


def _at(value: Any, path: tuple[object, ...]) -> object:
    for key in path:
        value = value[key]
    return value


def raw_garbage(max_bytes: int = limits.MAX_RECORD_BYTES + 64) -> st.SearchStrategy[bytes]:
    """Records that are not events at all; `max_bytes` bounds the longest (a Kafka broker refuses
    records over its message.max.bytes, about 1 MB by default, before the engine sees them)."""
    oversized = min(limits.MAX_RECORD_BYTES, max_bytes - 64)
    depth = st.integers(limits.MAX_DEPTH + 1, 3000)
    return st.one_of(
        st.binary(max_size=64),
        st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass")),
        depth.map(lambda n: b"[" * n + b"]" * n),
        depth.map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
        depth.map(lambda n: b'{"type":"Batch","events":[' + b"[" * n + b"]" * n + b"]}"),
        depth.map(lambda n: b"[" * n),
        st.just(b'{"type":"WorkloadFinished","name":"' + b"x" * oversized + b'"}'),
        st.just(b'{"type":"Batch"}'),
        st.just(b'{"type":"Batch","events":[' + b",".join([b"1"] * (limits.MAX_BATCH_EVENTS + 1)) + b"]}"),
        st.sampled_from((b"1e400", b"-1e400", b'{"type":1e400}', b"null", b"[]", b'"Batch"', b"{}")),
    )
