"""The classical preemption search's shortcuts change no answer.

`ClassicalPreemptor.targets` skips work: it finds the reclaimable ClusterQueues through each
cohort's over-nominal sets instead of looking at every child, reads each queue's candidates
lazily from its index, drops a queue from a search once it cannot yield a valid candidate any
more, leaves out the priority groups when borrowing is allowed but borrowWithinCohort is not,
shares the reading of a flat cohort among the heads nominated in one cycle, removes victims at
their common ancestor and gives them back in runs; and the scheduler asks each search once per
assigned workload (`Searches`) and, when only whether a workload fits matters and no search can
change that (`Scheduler._fit_decides`), only whether the ClusterQueue is deferred.

Here every search the engine makes on random streams is also made by `reference_targets`, the
search written plainly as Kueue's classical preemptor describes it (every child of every cohort
on the path, every workload of every source sorted into Kueue's candidate order, each candidate
validated, then the fewest given back, one at a time), on the same state, and the two must
agree: the same targets with the same reasons, the same deferral of the ClusterQueue, the state
left exactly as it was. Every answer a `Searches` gives is compared with a fresh search, every
assignment made without searches with one made with them, and every cohort's over-nominal sets
with a scan of its children. The streams are those of the preemption and hierarchy property
modules, plus runs of Kueue's performance suite at a small size.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from unittest.mock import patch

import pytest
import test_hierarchy_properties as hp
import test_preemption_properties as pp
from hypothesis import given
from hypothesis import strategies as st

import domain.scheduler
from devtools.kueue_perf import config, generator, virtual
from domain.entry import Entry
from domain.flavor_assigner import MODE_FIT
from domain.objects import NEVER
from domain.preemption.classical import ClassicalPreemptor
from domain.preemption.fit import fit_in_quota, fits, under_nominal, within_nominal
from domain.preemption.minimize import Runs
from domain.preemption.policy import (
    HIERARCHICAL_RECLAIM,
    RECLAIM_WHILE_BORROWING,
    RECLAIM_WITHOUT_BORROWING,
    VARIANT_REASON,
    WITHIN_CQ,
    preemptible_now,
    satisfies_policy,
    uses,
)
from domain.preemption.victims import Candidate, add_back
from domain.quota import FR, QuotaNode, recompute
from domain.scheduler import Scheduler, Searches
from domain.state import ClusterQueueState, State, WorkloadState

# Patches the scheduler's preemptor and searches, which compiled callers would not see: runs
# on the sources (tests/domain/test_compiled.py runs it so where the engine is compiled).
pytestmark = pytest.mark.pure_python

Answer = list[tuple[str, str, str]]  # (victim, reason, its ClusterQueue)


# -- the search, written plainly ---------------------------------------------------------------
def _sources(state: State, cq: ClusterQueueState, requests: dict[FR, int], frs: list[FR]
             ) -> tuple[list[tuple[ClusterQueueState, bool, QuotaNode]], list[tuple[ClusterQueueState, bool, QuotaNode]]]:
    hierarchy: list[tuple[ClusterQueueState, bool, QuotaNode]] = []
    priority: list[tuple[ClusterQueueState, bool, QuotaNode]] = []
    if cq.node.parent is None or cq.spec.preemption.reclaim_within_cohort == NEVER:
        return hierarchy, priority

    def collect(node: QuotaNode, root: QuotaNode, skip: QuotaNode | None, advantage: bool,
                out: list[tuple[ClusterQueueState, bool, QuotaNode]]) -> None:
        for name in sorted(node.children):
            child = node.children[name]
            if child is skip or child is cq.node or within_nominal(child, frs):
                continue
            if not child.is_cluster_queue:
                collect(child, root, skip, advantage, out)
            elif name in state.cluster_queues:
                out.append((state.cluster_queues[name], advantage, root))

    advantage, remaining = fit_in_quota(cq.node, requests)
    previous = None
    for subtree in cq.node.ancestors():
        collect(subtree, subtree, previous, advantage, hierarchy if advantage else priority)
        fits, remaining = fit_in_quota(subtree, remaining)
        advantage = advantage or fits
        previous = subtree
    return hierarchy, priority


def _variant(cq: ClusterQueueState, preemptor: WorkloadState, candidate: WorkloadState, own: bool,
             advantage: bool, frs: list[FR]) -> int:
    spec = cq.spec.preemption
    if not uses(candidate, frs):
        return 0
    if not satisfies_policy(preemptor, candidate, spec.within_cluster_queue if own else spec.reclaim_within_cohort):
        return 0
    if own:
        return WITHIN_CQ
    if advantage:
        return HIERARCHICAL_RECLAIM
    threshold = spec.max_priority_threshold
    if spec.borrow_within_cohort == NEVER or candidate.priority >= preemptor.priority or (
        threshold is not None and candidate.priority > threshold
    ):
        return RECLAIM_WITHOUT_BORROWING
    return RECLAIM_WHILE_BORROWING


def _group(state: State, cq: ClusterQueueState, preemptor: WorkloadState,
           sources: list[tuple[ClusterQueueState, bool, QuotaNode | None]], evicted: bool, frs: list[FR]) -> list[Candidate]:
    """Every candidate of these queues, in Kueue's order: lower priority first, then the most
    recently admitted first."""
    found: list[tuple[tuple[int, int, int], Candidate]] = []
    for member, advantage, lca in sources:
        for key in member.admitted:
            ws = state.workloads[key]
            assert ws.admission is not None
            if ws.evicted != evicted or not preemptible_now(ws, state.offset):
                continue
            variant = _variant(cq, preemptor, ws, member is cq, advantage, frs)
            if variant:
                order = (ws.priority, -ws.admission.sequence[0], -ws.admission.sequence[1])
                found.append((order, Candidate(ws, member, variant, lca)))
    found.sort(key=lambda item: item[0])
    return [c for _, c in found]


def _valid(cq: ClusterQueueState, c: Candidate, allow_borrowing: bool, frs: list[FR]) -> bool:
    """Kueue's candidate check: another queue's candidate is valid while that queue, and every
    cohort between it and the common ancestor, is above its nominal quota; one that may only be
    reclaimed without borrowing is not valid in an attempt that borrows."""
    if c.cq is cq:
        return True
    if allow_borrowing and c.variant == RECLAIM_WITHOUT_BORROWING:
        return False
    if within_nominal(c.cq.node, frs):
        return False
    for node in c.cq.node.ancestors():
        if node is c.lca:
            break
        if within_nominal(node, frs):
            return False
    return True


def _remove(c: Candidate) -> None:
    assert c.ws.admission is not None
    c.cq.node.add_usages(c.ws.admission.usage, -1)


def _restore(c: Candidate) -> None:
    assert c.ws.admission is not None
    c.cq.node.add_usages(c.ws.admission.usage)


def _fill_back(cq: ClusterQueueState, requests: dict[FR, int], allow_borrowing: bool,
               chosen: list[Candidate]) -> list[Candidate]:
    """Give back, last to first, every victim the preemptor still fits without, asking after
    each one; Kueue swaps the last element into the freed slot."""
    for i in range(len(chosen) - 2, -1, -1):
        _restore(chosen[i])
        if fits(cq, requests, allow_borrowing):
            chosen[i] = chosen[-1]
            chosen.pop()
        else:
            _remove(chosen[i])
    return chosen


def reference_targets(state: State, cq: ClusterQueueState, ws: WorkloadState, requests: dict[FR, int],
                      frs: list[FR]) -> tuple[Answer, bool]:
    """(targets, whether the search must be retried at the next event)."""
    policy = cq.spec.preemption
    if policy.within_cluster_queue == NEVER and (cq.node.parent is None or policy.reclaim_within_cohort == NEVER):
        return [], False
    own: list[tuple[ClusterQueueState, bool, QuotaNode | None]] = (
        [] if policy.within_cluster_queue == NEVER else [(cq, False, None)]
    )
    hierarchy, priority = _sources(state, cq, requests, frs)
    members = [m for m, _, _ in [*own, *hierarchy, *priority]]
    deferred = any(
        not preemptible_now(state.workloads[key], state.offset)
        for m in members for key in m.admitted
    )
    groups = [_group(state, cq, ws, list(sources), evicted, frs)
              for evicted in (True, False) for sources in (hierarchy, priority, own)]
    forbidden = policy.borrow_within_cohort == NEVER
    any_hierarchy = bool(groups[0] or groups[3])
    if (not any_hierarchy and not (groups[1] or groups[4])) or (forbidden and not under_nominal(cq, frs)):
        attempts: tuple[bool, ...] = (True,)
    elif forbidden and not any_hierarchy:
        attempts = (False, True)
    else:
        attempts = (True, False)
    for allow_borrowing in attempts:
        chosen: list[Candidate] = []
        try:
            for group in groups:
                for candidate in group:
                    if not _valid(cq, candidate, allow_borrowing, frs):
                        continue
                    _remove(candidate)
                    chosen.append(candidate)
                    if fits(cq, requests, allow_borrowing):
                        chosen = _fill_back(cq, requests, allow_borrowing, chosen)
                        return [(c.ws.key, VARIANT_REASON[c.variant], c.cq.name) for c in chosen], deferred
        finally:
            for candidate in chosen:
                _restore(candidate)
    return [], deferred


# -- the checks ------------------------------------------------------------------------------------
@dataclass
class Seen:
    searches: int = 0  # ClassicalPreemptor.targets calls
    found: int = 0  # of which found targets
    repeated: int = 0  # Searches calls (answered from memory or not)
    fit_only: int = 0  # assignments made without searches (Scheduler._fit_decides)
    shared: int = 0  # searches reading a flat cohort shared with the other heads of the cycle


def _usages(state: State) -> dict[str, dict[FR, int]]:
    nodes = {f"cq:{n}": cq.node for n, cq in state.cluster_queues.items()}
    nodes.update({f"cohort:{n}": c.node for n, c in state.cohorts.items()})
    return {name: dict(node.usage) for name, node in nodes.items()}


def _check_over_sets(state: State) -> None:
    for name, cohort in state.cohorts.items():
        node = cohort.node
        expected: dict[FR, list[str]] = {}
        for child_name in sorted(node.children):
            child = node.children[child_name]
            for fr, value in child.usage.items():
                if value > child.subtree.get(fr, 0):
                    expected.setdefault(fr, []).append(child_name)
        got = {fr: sorted(names) for fr, names in node.over.items()}
        assert got == expected, f"cohort {name}: over-nominal children {got}, by a scan {expected}"


@contextmanager
def checked_searches() -> Iterator[Seen]:
    seen = Seen()

    class Checked(ClassicalPreemptor):
        def targets(self, cq: ClusterQueueState, ws: WorkloadState, requests: dict[FR, int],
                    frs: list[FR]) -> list[Any]:
            state = self.state
            _check_over_sets(state)
            before = _usages(state)
            already = cq.name in state.deferred
            expected, deferred = reference_targets(state, cq, ws, requests, frs)
            assert _usages(state) == before
            if not already:  # only the deferral, as a search that needs no targets makes it
                self.defer(cq, requests, frs)
                by_defer = cq.name in state.deferred
                state.deferred.pop(cq.name, None)
                assert by_defer == deferred, f"offset {state.offset}: {cq.name} deferred {by_defer}, by a search {deferred}"
            shared = self._cohort(cq, frs) is not None and cq.spec.preemption.reclaim_within_cohort != NEVER
            got = super().targets(cq, ws, requests, frs)
            seen.shared += shared
            answer = [(t.ws.key, t.reason, t.cq.name) for t in got]
            where = f"offset {state.offset}: search for {ws.key} in {cq.name}, {requests}"
            assert answer == expected, f"{where}: targets {answer}, written plainly {expected}"
            assert (cq.name in state.deferred) == (already or deferred), f"{where}: deferral differs"
            assert _usages(state) == before, f"{where}: the search did not put the quota back"
            seen.searches += 1
            seen.found += bool(answer)
            return got

    remembered = Searches.__call__

    def call(self: Searches, requests: dict[FR, int], frs: list[FR]) -> list[Any]:
        answer = remembered(self, requests, frs)
        if self._defer_only:  # answers nothing by design; a fresh search would defer for it
            assert answer == []
            return answer
        fresh = self._preemptor.targets(self._cq, self._ws, requests, frs)
        assert [(t.ws.key, t.reason) for t in answer] == [(t.ws.key, t.reason) for t in fresh]
        seen.repeated += 1
        return answer

    assign = Scheduler.assign

    def checked_assign(self: Scheduler, cq: ClusterQueueState, ws: WorkloadState, fit_only: bool = False) -> Entry:
        deferred = self.state.deferred
        already = cq.name in deferred
        entry = assign(self, cq, ws, fit_only)
        if fit_only:
            # The searches it skipped would have deferred the ClusterQueue exactly when it did.
            deferred_without = cq.name in deferred
            if not already:
                deferred.pop(cq.name, None)  # the last key, if added: put back in place below
            full = assign(self, cq, ws)
            assert (cq.name in deferred) == deferred_without, f"{ws.key}: deferred without searching {deferred_without}"
            fits = entry.assignment.mode == MODE_FIT
            assert fits == (full.assignment.mode == MODE_FIT), f"{ws.key}: fits without searching {fits}, with"
            if fits:
                assert entry.assignment.usage == full.assignment.usage
                assert entry.assignment.message() == full.assignment.message()
            seen.fit_only += 1
        return entry

    with (patch.object(domain.scheduler, "ClassicalPreemptor", Checked), patch.object(Searches, "__call__", call),
          patch.object(Scheduler, "assign", checked_assign)):
        yield seen


@pp.bounded(60)
@given(st.data())
def test_searches_agree_with_the_plain_search_on_one_level_cohorts(data: st.DataObject) -> None:
    with checked_searches():
        pp.run(data, steps=60)


@hp.PROPERTY
@given(tree=hp.trees(fair=False), ops_=hp.ops(submits=8, releases=3, finishes=2, deletes=1, min_size=20, max_size=60))
def test_searches_agree_with_the_plain_search_on_cohort_trees(tree: hp.Tree, ops_: list[Any]) -> None:
    with checked_searches():
        for _ in hp.replay(tree, ops_):
            pass


SMALL_SUITE = """
cohorts:
  - className: cohort
    count: 2
    queuesSets:
    - className: cq
      count: 20
      nominalQuota: 20
      borrowingLimit: 100
      reclaimWithinCohort: Any
      withinClusterQueue: LowerPriority
      workloadsSets:
      - count: 12
        creationIntervalMs: 60
        workloads:
        - {className: small, runtimeMs: 150, priority: 50, request: 1}
      - count: 4
        creationIntervalMs: 300
        workloads:
        - {className: medium, runtimeMs: 350, priority: 100, request: 5}
      - count: 2
        creationIntervalMs: 700
        workloads:
        - {className: large, runtimeMs: 700, priority: 200, request: 20}
"""


@pytest.mark.parametrize("reclaim", ["Any", "LowerPriority"])
def test_searches_agree_with_the_plain_search_on_kueues_large_scale_shape(tmp_path: Any, reclaim: str) -> None:
    """Kueue's large-scale workload mix on 2 cohorts of 20 ClusterQueues: wide cohorts, many
    simultaneous heads of every priority (their searches share the cohort's reading, each
    classified for its priority under LowerPriority), searches that find nothing and
    preemptors whose victims overlap."""
    path = tmp_path / "generator.yaml"
    path.write_text(SMALL_SUITE.replace("reclaimWithinCohort: Any", f"reclaimWithinCohort: {reclaim}"))
    scenario = generator.generate(config.load(str(path)))
    with checked_searches() as seen:
        result = virtual.run(scenario)
    assert result.summary.complete
    # Each answer a Searches gives is checked with a fresh search: searches = its misses + calls.
    misses = seen.searches - seen.repeated
    assert seen.found > 20 and seen.searches - seen.found > 100 and misses < seen.repeated and seen.fit_only > 5
    assert seen.shared > seen.searches // 2


def _flat_cohort_events(borrow: str, b_priority: int) -> list[dict[str, Any]]:
    """A flat cohort of three ClusterQueues of 4 cpu; b holds 8 (4 borrowed) in workloads of one
    cpu; then a, holding nothing, asks for 6 cpu: more than its nominal quota, so it must borrow
    and its own queue has no candidate."""
    def cq(name: str) -> dict[str, Any]:
        return {"type": "ConfigApplied", "object": {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"namespaceSelector": {}, "cohort": "c",
                     "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                                    "borrowWithinCohort": {"policy": borrow}},
                     "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                         {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]}}}

    def lq(name: str) -> dict[str, Any]:
        return {"type": "ConfigApplied", "object": {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
            "metadata": {"namespace": "ns", "name": name}, "spec": {"clusterQueue": name}}}

    def wl(name: str, queue: str, cpu: int, priority: int) -> dict[str, Any]:
        return {"type": "WorkloadSubmitted", "workload": {
            "metadata": {"namespace": "ns", "name": name},
            "spec": {"queueName": queue, "priority": priority,
                     "podSets": [{"name": "main", "count": 1, "requests": {"cpu": str(cpu)}}]}}}

    events: list[dict[str, Any]] = [{"type": "ConfigApplied", "object": {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}}]
    for name in ("a", "b", "c"):
        events += [cq(name), lq(name)]
    events += [wl(f"b-{i}", "b", 1, b_priority) for i in range(8)]
    events.append(wl("big", "a", 6, 100))
    return events


@pytest.mark.parametrize(("borrow", "b_priority", "preempts"), [
    ("LowerPriority", 0, True),  # reclaimed while borrowing: two of b's workloads make room
    ("Never", 0, False),  # without borrowWithinCohort nothing can be reclaimed while borrowing
    ("LowerPriority", 100, False),  # b's workloads are not of lower priority
])
def test_a_borrowing_preemptor_without_own_candidates_in_a_flat_cohort(borrow: str, b_priority: int,
                                                                       preempts: bool) -> None:
    """The search's shortcut for a preemptor that must borrow and has no candidate in its own
    queue (`_own_may_yield`) answers "no target" only where the search finds none."""
    from domain.engine import Engine

    engine = Engine()
    with checked_searches() as seen:
        decisions = [d for offset, event in enumerate(_flat_cohort_events(borrow, b_priority))
                     for d in engine.apply(event, offset)]
    # Without borrowWithinCohort the flavor assigner asks no search for a request above the
    # nominal quota; the other two search (the shortcut's own condition decides).
    assert seen.searches >= (0 if borrow == "Never" else 1)
    preempted = [d for d in decisions if type(d).__name__ == "Preempted"]
    assert len(preempted) == (2 if preempts else 0)



def _victim_tree() -> list[QuotaNode]:
    """A flat cohort of three ClusterQueues and a lone one; [cohort, its three, the lone one]."""
    root = QuotaNode("cohort", is_cluster_queue=False)
    nodes = [root]
    for i in range(3):
        child = QuotaNode(f"cq-{i}", is_cluster_queue=True)
        child.nominal = {("rf", "cpu"): 4000, ("rf", "memory"): 4000}
        child.parent, root.children[child.name] = root, child
        nodes.append(child)
    recompute(root)
    lone = QuotaNode("lone", is_cluster_queue=True)
    lone.nominal = {("rf", "cpu"): 4000}
    recompute(lone)
    return [*nodes, lone]


def _state_of(nodes: list[QuotaNode]) -> list[Any]:
    return [(list(n.usage.items()), n.changes, repr(n.over)) for n in nodes]


@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3000), st.booleans()), min_size=1, max_size=40),
    st.lists(st.tuples(st.integers(0, 40), st.integers(1, 40), st.sampled_from([1, -1])), max_size=30),
)
def test_runs_give_back_as_add_back_does(victims: list[tuple[int, int, bool]],
                                         moves: list[tuple[int, int, int]]) -> None:
    """Runs (running sums by node) leaves every node's usage, its order, the change counters
    and the over-nominal sets exactly as add_back (a sum per run) does, for any runs, on
    victims at up to five nodes, with one flavor-resource or (falling back) two."""
    trees = [_victim_tree(), _victim_tree()]
    chosen: list[list[Any]] = [[], []]
    for node, cpu, with_memory in victims:
        usage = {("rf", "cpu"): cpu} if not with_memory or node == 4 else {("rf", "cpu"): cpu, ("rf", "memory"): 1}
        for tree, out in zip(trees, chosen):
            ws = type("W", (), {"admission": type("A", (), {"usage": usage})()})()
            cq = type("C", (), {"node": tree[node]})()
            out.append(Candidate(ws, cq, 1, None, tree[0] if node == 0 else None))  # type: ignore[arg-type]
    for c in chosen[0] + chosen[1]:
        (c.at or c.cq.node).add_usages(c.ws.admission.usage, -1)
    runs = Runs(chosen[0])
    n = len(victims)
    for start, length, sign in moves:
        lo = start % n
        hi = min(n, lo + length)
        runs.move(lo, hi, sign)
        add_back(chosen[1][lo:hi], sign)
        assert _state_of(trees[0]) == _state_of(trees[1])
