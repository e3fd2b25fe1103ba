"""The quota tree formulas, on the seeds' worked examples and on random trees."""

from __future__ import annotations

import pytest
from event_streams import random_stream
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.engine import Engine
from domain.quota import QuotaNode, borrowing_level, fr_key, recompute
from domain.snapshot import dump, load

FR = ("default-flavor", "cpu")


def cohort_of(*members: tuple[str, int, int | None, int | None]) -> tuple[QuotaNode, dict[str, QuotaNode]]:
    root = QuotaNode("team-ab", is_cluster_queue=False)
    nodes = {}
    for name, nominal, borrowing, lending in members:
        node = QuotaNode(name, is_cluster_queue=True)
        node.set_quotas(
            {FR: nominal},
            {FR: borrowing} if borrowing is not None else {},
            {FR: lending} if lending is not None else {},
        )
        node.parent = root
        root.children[name] = node
        nodes[name] = node
    recompute(root)
    return root, nodes


def test_idle_cohort_lends_everything_9_plus_12_is_21() -> None:
    root, cq = cohort_of(("team-a-cq", 9, None, None), ("team-b-cq", 12, None, None))
    assert root.subtree[FR] == 21
    assert cq["team-a-cq"].available(FR) == 21
    assert cq["team-b-cq"].available(FR) == 21
    assert cq["team-a-cq"].potential_available(FR) == 21


def test_borrowing_limit_caps_at_nominal_plus_limit_9_plus_1_is_10() -> None:
    _, cq = cohort_of(("team-a-cq", 9, 1, None), ("team-b-cq", 12, None, None))
    assert cq["team-a-cq"].available(FR) == 10
    assert cq["team-a-cq"].potential_available(FR) == 10
    # team-b-cq has no borrowing limit: it can use the whole cohort, 12+9.
    assert cq["team-b-cq"].available(FR) == 21


def test_lending_limit_keeps_12_minus_1_is_11_guaranteed() -> None:
    root, cq = cohort_of(("team-a-cq", 9, None, None), ("team-b-cq", 12, None, 1))
    assert root.subtree[FR] == 10  # 9 + the 1 team-b-cq lends
    assert cq["team-a-cq"].available(FR) == 10
    # team-a-cq takes all it can; team-b-cq still has its 11 guaranteed.
    cq["team-a-cq"].add_usage(FR, 10)
    assert cq["team-b-cq"].available(FR) == 11
    assert root.usage[FR] == 10


def test_usage_inside_guaranteed_part_is_invisible_to_the_cohort() -> None:
    root, cq = cohort_of(("a", 9, None, None), ("b", 12, None, 1))
    cq["b"].add_usage(FR, 11)
    assert root.usage.get(FR, 0) == 0
    cq["b"].add_usage(FR, 1)
    assert root.usage[FR] == 1
    cq["b"].add_usage(FR, -12)
    assert root.usage.get(FR, 0) == 0


def test_borrowing_level_is_zero_within_nominal_and_one_in_a_flat_cohort() -> None:
    _, cq = cohort_of(("a", 9, None, None), ("b", 12, None, None))
    assert borrowing_level(cq["a"], FR, 9) == (0, True)
    assert borrowing_level(cq["a"], FR, 10)[0] == 1


def test_clusterqueue_without_cohort_has_its_nominal_only() -> None:
    node = QuotaNode("solo", is_cluster_queue=True)
    node.set_quotas({FR: 5}, {}, {})
    recompute(node)
    assert node.available(FR) == 5
    node.add_usage(FR, 3)
    assert node.available(FR) == 2
    assert node.potential_available(FR) == 5
    assert borrowing_level(node, FR, 100) == (0, False)


members = st.lists(
    st.tuples(
        st.integers(0, 50),
        st.one_of(st.none(), st.integers(0, 50)),
        st.one_of(st.none(), st.integers(0, 50)),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=200, deadline=None)
@given(members, st.lists(st.tuples(st.integers(0, 4), st.integers(-30, 30)), max_size=30))
def test_incremental_usage_matches_a_full_recompute(spec: list[tuple[int, int | None, int | None]], moves: list[tuple[int, int]]) -> None:
    cfg = [(f"cq{i}", n, b, min(l, n) if l is not None else None) for i, (n, b, l) in enumerate(spec)]
    root, cqs = cohort_of(*cfg)
    names = sorted(cqs)
    for index, delta in moves:
        node = cqs[names[index % len(names)]]
        delta = max(delta, -node.usage.get(FR, 0))
        node.add_usage(FR, delta)
        incremental = dict(root.usage)
        recompute(root)
        assert root.usage == incremental
    for node in cqs.values():
        # A ClusterQueue never gets more than nominal + borrowingLimit.
        limit = node.borrowing_limit.get(FR)
        if limit is not None:
            assert node.usage.get(FR, 0) + node.available(FR) <= node.nominal[FR] + limit


@settings(max_examples=200, deadline=None)
@given(members, st.lists(st.tuples(st.integers(0, 4), st.integers(-30, 30)), max_size=30))
def test_incremental_usage_matches_a_full_recompute_even_below_zero(
    spec: list[tuple[int, int | None, int | None]], moves: list[tuple[int, int]]
) -> None:
    """add_usage's shortcut for nodes without a lending limit (the parent sees the whole
    change) holds only while usage stays non-negative; below zero the formula clamps, as the
    recompute does. The engine never takes usage below zero; the formulas still agree."""
    cfg = [(f"cq{i}", n, b, min(l, n) if l is not None else None) for i, (n, b, l) in enumerate(spec)]
    root, cqs = cohort_of(*cfg)
    names = sorted(cqs)
    for index, delta in moves:
        cqs[names[index % len(names)]].add_usage(FR, delta)
        incremental = dict(root.usage)
        recompute(root)
        assert root.usage == incremental


def _flavor_resource_keys(engine: Engine) -> list[tuple[str, ...]]:
    state = engine.state
    nodes = [cq.node for cq in state.cluster_queues.values()] + [c.node for c in state.cohorts.values()]
    keys: list[tuple[str, str]] = []
    for node in nodes:
        for table in (node.nominal, node.borrowing_limit, node.lending_limit, node.subtree, node.usage, node.over):
            keys.extend(table)
    for ws in state.workloads.values():
        if ws.admission is not None:
            keys.extend(ws.admission.usage)
    return keys


@pytest.mark.parametrize("seed", [3, 11])
def test_every_flavor_resource_key_is_the_one_fr_key_tuple(seed: int) -> None:
    # The quota dicts find a key they hold by identity before comparing; an equal tuple built
    # elsewhere would be compared element by element on every lookup of the hot paths.
    engine = Engine()
    for offset, event in enumerate(random_stream(seed, events=300)):
        engine.apply(event, offset)
    for restored in (engine, load(dump(engine))):
        keys = _flavor_resource_keys(restored)
        assert len(keys) > 50
        for key in keys:
            assert key is fr_key(*key), key
