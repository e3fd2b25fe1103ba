"""PendingQueue against a plain model: heads, parking, waking, removal, in both strategies
(a StrictFIFO head that failed holds the queue until a wake, its removal, or a workload that
sorts before it)."""

from __future__ import annotations

from bisect import insort

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.queues import Members, PendingQueue

ops = st.lists(
    st.one_of(
        st.tuples(st.just("push"), st.integers(0, 3), st.integers(0, 2)),  # priority, class
        st.tuples(st.just("remove"), st.integers(0, 50), st.just(0)),
        st.tuples(st.just("park"), st.just(0), st.just(0)),
        st.tuples(st.just("wake"), st.just(0), st.just(0)),
        st.tuples(st.just("park_for"), st.integers(0, 1), st.integers(0, 5)),  # resource, amount
        st.tuples(st.just("release"), st.integers(0, 1), st.integers(-1, 5)),  # resource, available
        st.tuples(st.just("candidate"), st.integers(0, 3), st.just(0)),  # priority admitted
    ),
    max_size=60,
)
RESOURCES = ("cpu", "memory")


@settings(max_examples=300, deadline=None)
@given(ops, st.booleans())
def test_queue_matches_model(operations: list[tuple[str, int, int]], strict: bool) -> None:
    q = PendingQueue(strict)
    members: dict[str, tuple[tuple[int, int, int, str], int]] = {}
    parked: set[int] = set()
    needs: dict[int, tuple[str, int]] = {}  # parked classes filed by (resource, amount)
    blocker = None  # StrictFIFO: the head that failed, holding the queue until it leaves or is outranked
    serial = 0
    for op, a, b in operations:
        if op == "push":
            serial += 1
            key = (-a, 0, serial, f"ns/w{serial}")
            status = q.push(key, b)
            members[key[3]] = (key, b)
            assert (status is not None) == (b in parked)
            if blocker is not None and key < blocker:
                blocker = None
        elif op == "remove" and members:
            name = sorted(members)[a % len(members)]
            key, cls = members.pop(name)
            q.remove(key)
            if key == blocker:
                blocker = None
            if not any(c == cls for _, c in members.values()):
                parked.discard(cls)
                needs.pop(cls, None)
        elif op == "park":
            head = q.head()
            if head is not None:
                q.park(head, ("R", "m"))
                if strict:
                    blocker = head
                else:
                    parked.add(members[head[3]][1])
        elif op == "park_for":
            head = q.head()
            if head is not None:
                q.park(head, ("R", "m"), needs=(RESOURCES[a], b))
                if strict:
                    blocker = head
                else:
                    cls = members[head[3]][1]
                    parked.add(cls)
                    needs[cls] = (RESOURCES[a], b)
        elif op == "wake":
            q.requeue_all()
            parked.clear()
            needs.clear()
            blocker = None
        elif op == "release":
            # b < 0: nothing of the resource available (the release helped nothing filed)
            available = {RESOURCES[a]: b} if b >= 0 else {}
            woke = q.wake_released(available)
            if strict:
                assert woke == ((blocker is not None or bool(parked)) and bool(members))
                blocker = None
                parked.clear()
            else:
                # generic classes wake on any release; filed ones when their amount is there
                wakes = {c for c in parked if c not in needs or needs[c][1] <= available.get(needs[c][0], -1)}
                assert woke == bool(wakes)
                parked -= wakes
                for c in wakes:
                    needs.pop(c, None)
        elif op == "candidate" and not strict:
            # filed classes whose head may preempt a workload of this priority wait for any release
            q.candidate_admitted(a)
            for c in list(needs):
                head = min(k for k, cls in members.values() if cls == c)
                if -head[0] >= a:
                    del needs[c]
        if strict:
            expected = None if blocker is not None or not members else min(k for k, _ in members.values())
        else:
            candidates = [k for k, c in members.values() if c not in parked]
            expected = min(candidates) if candidates else None
        assert q.head() == expected
        assert len(q) == len(members)
        assert list(q.keys()) == sorted(k for k, _ in members.values())


def test_positions_follow_priority_then_time() -> None:
    q = PendingQueue(strict=False)
    low = (0, 5, 1, "ns/low")
    high = (-10, 9, 2, "ns/high")
    early = (0, 1, 3, "ns/early")
    for key in (low, high, early):
        q.push(key, key[3])
    assert [q.position(k) for k in (high, early, low)] == [0, 1, 2]


member_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 400)),
        st.tuples(st.just("pop_head"), st.just(0)),
        st.tuples(st.just("remove_at"), st.integers(0, 400)),
    ),
    max_size=500,
)


@settings(max_examples=200, deadline=None)
@given(member_ops)
def test_members_stay_sorted_through_heads_leaving_and_keys_joining_anywhere(
    operations: list[tuple[str, int]],
) -> None:
    """A class's members against a sorted list: heads leaving move the front (compacted once
    it is most of the list), keys joining before the head reuse the dead front."""
    m = Members()
    model: list[tuple[int, int, int, str]] = []
    for op, n in operations:
        if op == "add":
            key = (0, n, n, f"ns/w{n}")
            if key in model:
                continue
            m.add(key)
            insort(model, key)
        elif model:
            key = model.pop(0 if op == "pop_head" else n % len(model))
            m.remove(key)
            with pytest.raises(ValueError):
                m.remove(key)
        assert list(m) == model
        assert len(m) == len(model)
        assert bool(m.items) == bool(model)
        if model:
            assert m.first() == model[0]


def test_members_drop_their_dead_front_once_it_is_most_of_the_list() -> None:
    m = Members()
    keys = [(0, n, n, f"ns/w{n}") for n in range(300)]
    for key in keys:
        m.add(key)
    for key in keys[:200]:
        m.remove(key)
        assert m.first() == keys[keys.index(key) + 1]
    assert m.start < 151 and len(m.items) - m.start == 100  # compacted on the way, not grown
    assert list(m) == keys[200:]
    m.add(keys[0])  # a requeued head, before all the others
    assert list(m) == [keys[0], *keys[200:]]
    for key in [keys[0], *keys[200:]]:
        m.remove(key)
    assert (m.items, m.start, len(m)) == ([], 0, 0)


def test_a_candidate_admitted_sends_back_to_any_release_only_the_classes_that_may_preempt_it() -> None:
    q = PendingQueue(False)
    high, low = (-5, 0, 1, "ns/high"), (-1, 0, 2, "ns/low")
    q.push(high, "high-class")
    q.push(low, "low-class")
    q.park(high, ("WaitingForQuota", "m"), needs=("cpu", 4))
    q.park(low, ("WaitingForQuota", "m"), needs=("cpu", 4))
    q.candidate_admitted(3)  # priority 3: a candidate for the priority-5 head, not the priority-1 one
    assert q.wake_released({"cpu": 1})  # short of 4: only the class sent back to generic wakes
    assert q.head() == high and q.is_parked("ns/low")
    assert q.wake_released({"cpu": 4}) and q.head() == high and not q.is_parked("ns/low")
