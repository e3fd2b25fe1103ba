"""Properties of fair sharing over random cohort trees (see test_hierarchy_properties for the trees
and streams), with shares computed here independently from the configuration and the usage.

Dominant resource share (Kueue pkg/cache/scheduler/fair_sharing.go; kueue-semantics.md §7.1): for a
node n with parent p, per resource, what n uses above its subtree quota (summed over the flavors it
borrows in) per 1000 of what p could lend (Σ over flavors of potentialAvailable(p)); the largest
ratio, divided by n's fairSharing.weight; 0 when not borrowing; +infinity for weight 0 while
borrowing. Compared as Kueue's CompareDRS.

* No fair-sharing preemption lets the preemptor's share end above the victim side's beyond what the
  configured strategy allows. For every InCohortFairSharing victim, at the moment the engine took
  it (the ClusterQueues' usage then: the preemptor's workload added, earlier victims of the same
  preemption removed), between the almost-lowest-common-ancestors of preemptor and victim:
  LessThanOrEqualToFinalShare: preemptor's share <= victim side's share after removing the victim;
  LessThanInitialShare: preemptor's share < victim side's share before; with both strategies
  configured (Kueue's default) one of the two holds. The usage is read from the engine's
  ClusterQueues when it takes the victim (quotaflow has no other view of a decision in progress);
  everything else — cohort usage, subtree quotas, lendable capacity, shares — is computed here.
* The engine's dominant resource share of every ClusterQueue and Cohort equals Kueue's formula
  after every event.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from copy import deepcopy
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Iterator
from unittest.mock import patch

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from test_hierarchy_properties import (
    CPU,
    FR,
    PROPERTY,
    Node,
    Quota,
    Quotas,
    Submit,
    Tree,
    ops,
    replay,
    setup_events,
    trees,
)

from domain.engine import Engine
from domain.fair_sharing import dominant_resource_share
from domain.preemption.fair_sharing_strategies import FairSharingPreemptor
from domain.scheduler import Scheduler
from domain.state import ClusterQueueState, State, WorkloadState

S2A = "LessThanOrEqualToFinalShare"
S2B = "LessThanInitialShare"


# ---------------------------------------------------------------------------------------------
# Kueue's dominant resource share, independently


@dataclass(frozen=True)
class Share:
    ratio: Fraction  # 1000 × borrowed / lendable, of the dominant resource (unweighted)
    weight: Fraction
    borrowing: bool

    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and self.ratio != 0

    def value(self) -> Fraction:
        return Fraction(0) if self.ratio == 0 else self.ratio / self.weight


def compare(a: Share, b: Share) -> int:
    """Kueue's CompareDRS."""
    if a.zero_weight_borrows() and b.zero_weight_borrows():
        return (a.ratio > b.ratio) - (a.ratio < b.ratio)
    if a.zero_weight_borrows():
        return 1
    if b.zero_weight_borrows():
        return -1
    va, vb = a.value(), b.value()
    return (va > vb) - (va < vb)


def share(tree: Tree, quotas: Quotas, usage: dict[str, dict[FR, int]], name: str) -> Share:
    node = tree.by_name[name]
    weight = Fraction(node.weight)
    if node.parent is None:
        return Share(Fraction(0), weight, False)
    borrowed: dict[str, int] = {}
    for fr in tree.frs():  # every node's subtree quota holds every flavor-resource of the tree
        over = usage[name][fr] - quotas.subtree[name][fr]
        if over > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
    if not borrowed:
        return Share(Fraction(0), weight, False)
    ratio = Fraction(0)
    for resource, amount in borrowed.items():
        lendable = sum(quotas.potential(node.parent, fr) for fr in tree.frs() if fr[1] == resource)
        if lendable > 0:
            ratio = max(ratio, Fraction(1000 * amount, lendable))
    return Share(ratio, weight, True)


def almost_lcas(tree: Tree, preemptor_cq: str, target_cq: str) -> tuple[str, str]:
    p_path = tree.path(preemptor_cq)
    t_path = tree.path(target_cq)
    lca = next(n for n in t_path[1:] if n in p_path[1:])
    return p_path[p_path.index(lca) - 1], t_path[t_path.index(lca) - 1]


# ---------------------------------------------------------------------------------------------
# Watching the engine take victims


@dataclass
class Take:
    preemptor_cq: str
    target_cq: str
    victim: str
    victim_usage: dict[FR, int]
    reason: str
    raw: dict[str, dict[FR, int]]  # every ClusterQueue's usage when the victim was taken


@dataclass
class Call:
    preemptor: str
    victims: list[str]
    takes: list[Take]


@dataclass
class Watch:
    calls: list[Call] = field(default_factory=list)
    stack: list[list[Take]] = field(default_factory=list)


@contextmanager
def watching(state_of: Callable[[], State]) -> Iterator[Watch]:
    watch = Watch()
    original_take = FairSharingPreemptor._take
    original_targets = FairSharingPreemptor.targets

    def take(cq: ClusterQueueState, requests: dict[FR, int], victim: WorkloadState, target: ClusterQueueState,
             reason: str, taken: list[Any]) -> bool:
        assert victim.admission is not None
        raw = {name: dict(c.node.usage) for name, c in state_of().cluster_queues.items()}
        if watch.stack:
            watch.stack[-1].append(Take(cq.name, target.name, victim.key, dict(victim.admission.usage), reason, raw))
        return original_take(cq, requests, victim, target, reason, taken)

    def targets(self: FairSharingPreemptor, cq: ClusterQueueState, ws: WorkloadState, requests: dict[FR, int],
                frs: list[FR]) -> Any:
        watch.stack.append([])
        try:
            result = original_targets(self, cq, ws, requests, frs)
        finally:
            takes = watch.stack.pop()
        watch.calls.append(Call(ws.key, [t.ws.key for t in result], takes))
        return result

    with patch.object(FairSharingPreemptor, "_take", staticmethod(take)), patch.object(FairSharingPreemptor, "targets", targets):
        yield watch


def check_strategy(tree: Tree, quotas: Quotas, take: Take, where: str) -> None:
    before = quotas.usage(take.raw)
    after_raw = {name: dict(u) for name, u in take.raw.items()}
    for fr, v in take.victim_usage.items():
        after_raw[take.target_cq][fr] = after_raw[take.target_cq].get(fr, 0) - v
    after = quotas.usage(after_raw)
    p_side, t_side = almost_lcas(tree, take.preemptor_cq, take.target_cq)
    preemptor = share(tree, quotas, before, p_side)
    target_old = share(tree, quotas, before, t_side)
    target_new = share(tree, quotas, after, t_side)
    s2a = compare(preemptor, target_new) <= 0
    s2b = compare(preemptor, target_old) < 0
    allowed = {(S2A,): s2a, (S2B,): s2b, (S2A, S2B): s2a or s2b}[tree.strategies]
    assert allowed, (
        f"{where}: {take.victim} preempted for {take.preemptor_cq} under {tree.strategies}: preemptor side "
        f"{p_side} share {float(preemptor.value()):.3f} (weight {preemptor.weight}), victim side {t_side} "
        f"{float(target_old.value()):.3f} before, {float(target_new.value()):.3f} after (weight {target_new.weight})"
    )


FAIR_WEIGHTS = ("1", "1", "2", "3", "0.5", "0")
# Mostly submissions, so that queues borrow and others reclaim; releases let preemptions complete.
CONTENDED = ops(submits=8, releases=3, finishes=1, deletes=0, min_size=40, max_size=80)


@pytest.mark.pure_python  # watching() patches the preemptor: see tests/domain/test_compiled.py
@PROPERTY
@given(tree=trees(fair=True, min_quota=1, weights=FAIR_WEIGHTS, release="OnRelease"), ops_=CONTENDED)
def test_fair_sharing_preemption_respects_the_strategy_at_every_victim(tree: Tree, ops_: list[Any]) -> None:
    """Trees whose ClusterQueues all have quota (min_quota=1), so that the cohort shares here and
    in the engine agree (see test_engine_dominant_resource_share_matches_kueue_formula)."""
    quotas = Quotas.of(tree)
    engine = Engine()
    with watching(lambda: engine.state) as watch:
        for _engine, _ledger, _event, decisions, where in replay(tree, ops_, engine):
            for d in decisions:
                if d["type"] != "Preempted" or d["reason"] != "InCohortFairSharing":
                    continue
                calls = [c for c in watch.calls if c.preemptor == d["preemptor"] and d["workload"] in c.victims]
                assert calls, f"{where}: no preemption search chose {d['workload']} for {d['preemptor']}"
                # A search answered again within the pass (the tree unchanged since) takes nothing
                # itself: the take is the one its first asking made.
                takes = [t for c in calls for t in c.takes if t.victim == d["workload"]]
                assert takes, f"{where}: {d['workload']} preempted without being taken by the search"
                check_strategy(tree, quotas, takes[-1], where)
            watch.calls.clear()


# Cohort dept has no resourceGroups and its ClusterQueue no quota: dept's subtree quota is 0 and
# it borrows all it uses (conformance: fair_sharing_cohort_share_counts_borrowing_when_children_have_zero_quota).
ZERO_QUOTA_DEPT = Tree(("f1",), (
    Node("org", False, None, (("f1", Quota(4)),)),
    Node("dept", False, "org", ()),
    Node("x", True, "dept", (("f1", Quota(0)),)),
    Node("other", True, "org", (("f1", Quota(1)),)),
), "FairSharing", "OnRelease", ("LessThanOrEqualToFinalShare", "LessThanInitialShare"))


@PROPERTY
@example(tree=ZERO_QUOTA_DEPT, ops_=[Submit(0, 2, 1, 0)])
@given(tree=trees(fair=True, weights=FAIR_WEIGHTS, release="OnRelease"), ops_=ops())
def test_engine_dominant_resource_share_matches_kueue_formula(tree: Tree, ops_: list[Any]) -> None:
    quotas = Quotas.of(tree)
    for engine, ledger, _event, _decisions, where in replay(tree, ops_):
        usage = quotas.usage(ledger.raw())
        state = engine.state
        for node in tree.nodes:
            qn = state.cluster_queues[node.name].node if node.is_cq else state.cohorts[node.name].node
            mine = share(tree, quotas, usage, node.name)
            theirs = dominant_resource_share(qn)
            assert (theirs.ratio, theirs.borrowing) == (mine.ratio, mine.borrowing), (
                f"{where}: {node.name}: engine DRS {theirs.ratio} (borrowing {theirs.borrowing}), Kueue's formula "
                f"{mine.ratio} (borrowing {mine.borrowing}); subtree {quotas.subtree[node.name]}, usage {usage[node.name]}"
            )


def test_share_examples_from_kueue_tests() -> None:
    """preemption_fair_test.go "CQ with higher weight can preempt more": three ClusterQueues of 3
    CPUs in one cohort; a (weight 2) uses 5, b uses 6 -> a borrows 2 of 9 (111.1), b 3 of 9 (333.3)."""
    tree = Tree(("f1",), (
        Node("all", False, None, (("f1", Quota(0)),)),
        Node("a", True, "all", (("f1", Quota(3)),), "2"),
        Node("b", True, "all", (("f1", Quota(3)),)),
        Node("c", True, "all", (("f1", Quota(3)),)),
    ))
    quotas = Quotas.of(tree)
    fr = ("f1", CPU)
    usage = quotas.usage({"a": {fr: 5000}, "b": {fr: 6000}})
    a, b, c = (share(tree, quotas, usage, n) for n in "abc")
    assert (a.value(), b.value(), c.value()) == (Fraction(1000, 9), Fraction(1000, 3), 0)
    assert compare(a, b) < 0 and not c.borrowing
    assert almost_lcas(tree, "a", "b") == ("a", "b")
    zero = Share(Fraction(5), Fraction(0), True)
    assert compare(zero, b) > 0 and compare(b, zero) < 0


def test_immediate_release_preemption_settles_in_a_cohort_tree() -> None:
    """A preemptor within its nominal quota reclaims from another department (FairSharing-
    PreemptWithinNominal); with Immediate release the victim is requeued at once and, its department
    having the lower weighted share, wins the next tournament; the preemptor no longer fits and
    reclaims again. Kueue would flap like this once per eviction; the engine's per-event fixed
    point must still end (scheduler.py promises it does).

      Cohort root (1 CPU) > Cohort c1 > a (2 CPUs, reclaimWithinCohort LowerPriority), a2 (0)
                          > Cohort c2 (weight 2) > b (1 CPU)

    a2 borrows a's 2 CPUs (priority 5), b uses 2 (priority -1): all 4 are in use. p (a, 2 CPUs,
    priority 0) reclaims b's workload."""
    tree = Tree(("f1",), (
        Node("root", False, None, (("f1", Quota(1)),)),
        Node("c1", False, "root", (("f1", Quota(0)),)),
        Node("a", True, "c1", (("f1", Quota(2)),), preemption=("Never", "LowerPriority", "Never")),
        Node("a2", True, "c1", (("f1", Quota(0)),)),
        Node("c2", False, "root", (("f1", Quota(0)),), "2"),
        Node("b", True, "c2", (("f1", Quota(1)),)),
    ), "FairSharing", "Immediate", ("LessThanOrEqualToFinalShare", "LessThanInitialShare"))
    stream = [Submit(1, 2, 1, 5), Submit(2, 2, 1, -1), Submit(0, 2, 1, 0)]
    decisions = [d for _e, _l, _ev, ds, _w in replay(tree, stream) for d in ds]
    preempted = [d["workload"] for d in decisions if d["type"] == "Preempted"]
    assert len(preempted) == len(set(preempted)), f"preempted more than once for one event: {preempted}"


# ---------------------------------------------------------------------------------------------
# Kueue's guarantee that fair-sharing preemption does not ping-pong (site/content/en/docs/concepts/
# fair_sharing.md, "Proof that two workloads won't preempt each other", kueue#6888)

FLAT_STRATEGIES = ((S2A,), (S2B,), (S2A, S2B))


@st.composite
def flat_cohorts(draw: st.DrawFn) -> Tree:
    """One Cohort (the proof covers flat cohorts only), 2-3 ClusterQueues that may always reclaim
    (reclaimWithinCohort Any, so priorities never stop a fair-sharing preemption), one flavor of
    one resource (so admitting a borrowing workload always raises its queue's share: the proof's
    assumption), Immediate release (a preemption and its preemptor's admission in one event)."""
    cqs = tuple(
        Node(f"q{i}", True, "all", (("f1", Quota(draw(st.integers(0, 4)))),), draw(st.sampled_from(FAIR_WEIGHTS)),
             preemption=("Never", "Any", "Never"))
        for i in range(draw(st.integers(2, 3)))
    )
    root = Node("all", False, None, (("f1", Quota(draw(st.integers(0, 2)))),))
    return Tree(("f1",), (root, *cqs), "FairSharing", "Immediate", draw(st.sampled_from(FLAT_STRATEGIES)))


@pytest.mark.pure_python  # watching() patches the preemptor: see tests/domain/test_compiled.py
@PROPERTY
@given(tree=flat_cohorts(), ops_=ops(submits=8, releases=0, finishes=2, deletes=0, min_size=10, max_size=40))
def test_a_fair_sharing_victim_cannot_preempt_its_preemptor_back(tree: Tree, ops_: list[Any]) -> None:
    """Right after A is admitted by preempting B for fair sharing, B (requeued) must find no right
    to preempt A: Kueue proves DRS(A's queue with A) < DRS(B's queue with B) for any preemption
    either strategy allows, so the strategy fails in the other direction. Checked by running B's
    own nomination (flavor assignment and preemption search) on a copy of the engine as of the
    next event. The proof compares the two queues as they were when A took B; it applies while
    A's queue holds no more than then and B's queue, B back in, no less."""
    engine = Engine()
    offset = len(setup_events(tree))
    with watching(lambda: engine.state) as watch:
        for _engine, ledger, _event, decisions, where in replay(tree, ops_, engine):
            admitted = {d["workload"] for d in decisions if d["type"] == "Admitted"}
            pairs = [(d["preemptor"], d["workload"]) for d in decisions
                     if d["type"] == "Preempted" and d["reason"] == "InCohortFairSharing" and d["preemptor"] in admitted]
            takes = {(c.preemptor, t.victim): t for c in watch.calls for t in c.takes}
            watch.calls.clear()
            for a_key, b_key in pairs:
                state = engine.state
                a, b = state.workloads.get(a_key), state.workloads.get(b_key)
                if a is None or b is None or a.admission is None or b.admission is not None or not b.queued:
                    continue  # A finished or B readmitted within the event: nothing to check
                take = takes[(a_key, b_key)]
                now = ledger.raw()
                a_cq, b_cq = take.preemptor_cq, take.target_cq
                if any(now[a_cq].get(fr, 0) > v for fr, v in take.raw[a_cq].items()):
                    continue  # A's queue admitted more after A: its share grew, B may be right
                if any(now[b_cq].get(fr, 0) + take.victim_usage.get(fr, 0) < v for fr, v in take.raw[b_cq].items()):
                    continue  # B's queue lost more than B: its share fell, B may be right
                copy_ = deepcopy(engine)
                copy_.state.offset = offset + 1  # A was admitted by an earlier event
                cq = copy_.state.cluster_queues[b_cq]
                entry = Scheduler(copy_.state).assign(cq, copy_.state.workloads[b_key])
                back = [t.ws.key for t in entry.targets]
                assert a_key not in back, (
                    f"{where}: {b_key} was preempted for {a_key} (fair sharing, {tree.strategies}) and may now "
                    f"preempt it back: targets {back}; usage {dict(now)}, at the take {take.raw}"
                )
            offset += 1
