"""The admission cycle, run to a fixed point after every input event.

One cycle, as Kueue's scheduler does it: take the head of every ClusterQueue that may have one
(heads), evaluate each against the current quota (nominate: flavor assignment and, where quota is
short, preemption targets), order the entries (no borrowing first, then priority, then queue
time), and process them in that order against the same, updated quota: admit what still fits,
preempt for what needs victims, park what cannot be helped, and requeue what lost its room to an
entry processed earlier in the cycle. Cycles repeat until no ClusterQueue has a head to try.

Termination: in every cycle the first entry is processed against exactly the quota it was
nominated on, so it is admitted, parked, or issues new evictions (each workload can be evicted
only once before it is released); parked heads only come back through `wake_tree`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from domain import reasons
from domain.decisions import PodSetAssignment
from domain.emitter import Emitter
from domain.entry import Entry
from domain.fair_sharing_admission import Tournament
from domain.flavor_assigner import (
    MODE_FIT,
    MODE_NO_FIT,
    NO_CANDIDATES,
    NO_FIT,
    PREEMPT,
    RECLAIM,
    Assignment,
    FlavorAssigner,
)
from domain.lifecycle import (
    DeferredWakes,
    admit,
    drop_sticky,
    evict,
    set_pending,
    tree_members,
)
from domain.objects import ANY, FAIR_SHARING, NEVER
from domain.preemption.classical import ClassicalPreemptor
from domain.preemption.fair_sharing_strategies import FairSharingPreemptor
from domain.preemption.fit import within_quota
from domain.preemption.messages import preemption_message
from domain.preemption.policy import Target, never_preempts, own_may_yield
from domain.quantity import format_amount
from domain.queues import Status
from domain.quota import FR, QuotaNode, borrowing_level, fr_key
from domain.state import Admission, ClusterQueueState, State, WorkloadState


class Searches:
    """The preemption searches made while one workload is assigned.

    Nothing changes the quota or the candidates while one workload is assigned (the oracle and
    the preemptor put back what they simulate), so a search asked twice (the oracle's for one
    flavor, then the entry's; again in the partial-admission search) has the same answer: the
    preemptor is asked once.

    `defer_only` (classical only, see `Scheduler._fit_decides`): no answer matters, only the
    search's side effect of deferring the ClusterQueue; every search answers "no targets"."""

    __slots__ = ("_preemptor", "_cq", "_ws", "_answers", "_defer_only")

    def __init__(self, preemptor: ClassicalPreemptor | FairSharingPreemptor, cq: ClusterQueueState,
                 ws: WorkloadState, remember: bool, defer_only: bool = False) -> None:
        self._preemptor = preemptor
        self._cq = cq
        self._ws = ws
        self._answers: dict[tuple[tuple[tuple[FR, int], ...], tuple[FR, ...]], list[Target]] | None = (
            {} if remember else None
        )
        self._defer_only = defer_only

    def __call__(self, requests: dict[FR, int], frs: list[FR]) -> list[Target]:
        if self._defer_only:
            preemptor = self._preemptor
            assert isinstance(preemptor, ClassicalPreemptor)
            preemptor.defer(self._cq, requests, frs)
            return []
        answers = self._answers
        if answers is None:
            return self._preemptor.targets(self._cq, self._ws, requests, frs)
        key = (tuple(requests.items()), tuple(frs))
        found = answers.get(key)
        if found is None:
            found = answers[key] = self._preemptor.targets(self._cq, self._ws, requests, frs)
        return list(found)


def heads(state: State) -> list[tuple[ClusterQueueState, WorkloadState]]:
    out: list[tuple[ClusterQueueState, WorkloadState]] = []
    ready = state.ready
    cluster_queues = state.cluster_queues
    for name in sorted(ready):
        cq = cluster_queues.get(name)
        if cq is None or not cq.active:
            del ready[name]
            continue
        ws = _sticky_head(state, cq) if cq.sticky is not None else None
        if ws is not None and cq.queue.is_parked(ws.key):
            del ready[name]  # its preemptor waits for victims: nothing else goes first
            continue
        if ws is None and cq.preemptor is not None:
            ws = _preemptor_head(state, cq)
        if ws is None:
            key = cq.queue.head()
            if key is None:
                del ready[name]
                continue
            ws = state.workloads[cast(str, key[3])]
        out.append((cq, ws))
    if out and state.waiting_preemptors:
        _add_waiting_preemptors(state, out)
    return out


def _sticky_head(state: State, cq: ClusterQueueState) -> WorkloadState | None:
    """BestEffortFIFO keeps the workload that issued preemptions at the head until it is done."""
    if cq.sticky is None or cq.queue.strict:
        return None
    ws = state.workloads.get(cq.sticky)
    if ws is None or not ws.queued or ws.cluster_queue != cq.name:
        drop_sticky(state, cq)
        return None
    return ws


def _preemptor_head(state: State, cq: ClusterQueueState) -> WorkloadState | None:
    """Kueue's preemptor workload heads its BestEffortFIFO queue whenever it is back among
    the queue's workloads to try, also after a failure parked it and dropped `sticky`: Kueue
    clears it only when the workload leaves the queue (ClusterQueue.delete), and
    baseCompareFunc orders it before every other workload, whatever their priorities
    (pkg/cache/queue/cluster_queue.go). Parked, it leaves the head to the others, as Kueue's
    inadmissible workloads are out of the heap."""
    if cq.queue.strict:
        return None  # a StrictFIFO queue's preemptor is not sticky (isSticky only for BestEffortFIFO)
    ws = state.workloads.get(cq.preemptor) if cq.preemptor is not None else None
    if ws is None or not ws.queued or ws.cluster_queue != cq.name:
        cq.preemptor = None
        return None
    if cq.queue.is_parked(ws.key):
        return None
    return ws


def _add_waiting_preemptors(state: State, batch: list[tuple[ClusterQueueState, WorkloadState]]) -> None:
    """A preemptor waiting for its victims is, in Kueue, the head of its ClusterQueue in every
    cycle: it holds its room against entries ranked after it. Here it sleeps (so that a quiet
    cluster reaches a fixed point) and joins every cycle in which its cohort tree has work."""
    roots = {id(cq.node.root()) for cq, _ in batch}
    present = {cq.name for cq, _ in batch}
    for name in list(state.waiting_preemptors):
        cq = state.cluster_queues.get(name)
        ws = _sticky_head(state, cq) if cq is not None else None
        if cq is None or ws is None or not cq.active:
            state.waiting_preemptors.pop(name, None)
            continue
        if name not in present and id(cq.node.root()) in roots:
            batch.append((cq, ws))


class Scheduler:
    def __init__(self, state: State) -> None:
        self.state = state
        self.fair = state.configuration.preemption_policy == FAIR_SHARING
        # Feature gate PrioritizePreemptorWorkloads (kueue#13797): a ClusterQueue's preemptor,
        # waiting for its victims, is ordered before every other entry of the cycle and, when
        # it finds no candidates, still reserves its room.
        self.prioritize_preemptors = state.configuration.prioritize_preemptor_workloads
        self.preemptor: ClassicalPreemptor | FairSharingPreemptor = (
            FairSharingPreemptor(state) if self.fair else ClassicalPreemptor(state)
        )
        # The same preemptor when it is classical.
        self._classical = self.preemptor if isinstance(self.preemptor, ClassicalPreemptor) else None
        # The pass's count of each cohort tree's admissions, evictions and releases (its epoch),
        # counted here (`_tree_changed`) and read by the preemptor's kept answers and by the
        # entries kept here.
        self._epochs = self.preemptor.epochs
        # Roots (by id) of the trees `_settle_quiet_trees` found a head that may fit in, until
        # their next entry: scanning them again before that would find the same.
        # Per root: True when what refused it lasts until its next entry (a sticky head, a
        # preemptor workload, admission fair sharing), False when a head may fit.
        self._unquiet: dict[int, bool] = {}
        # Entries of this pass, kept (`_kept_assign`): per (head, its queue, fit_only, the
        # temporary usage in place), the tree's epoch they were made in and their answer.
        self._entries: dict[tuple[object, ...], tuple[int, Assignment, tuple[Target, ...]]] | None = (
            {} if KEEP_ENTRIES and (self._classical is not None or KEEP_FAIR_ENTRIES) else None
        )
        # `_room_rule` of each ClusterQueue, by name: it reads only its configuration, which a
        # pass does not change.
        self._rules: dict[str, dict[str, int] | None] = {}
        # True while a cycle's entries are made (`_nominate`): only they may leave a resumed
        # flavor scan to the next cycle (`_deferred`).
        self._nominating = False
        # The heads whose resumed scan this cycle leaves to the next (`_deferred`), by key.
        self._deferred_now: dict[str, None] = {}
        # Heads already retried in this input event after room held in every cycle kept them
        # out with flavors left to scan (`run_cycle`): once per head and event, so that the
        # event's cycles reach a fixed point.
        self._resumed_past_held: dict[str, None] = {}

    def schedule(self, out: Emitter) -> None:
        self._unquiet = {}
        while True:
            batch = heads(self.state)
            if not batch:
                return
            self.run_cycle(out, batch)

    # -- nominate ---------------------------------------------------------------------------
    def assign(self, cq: ClusterQueueState, ws: WorkloadState, fit_only: bool = False) -> Entry:
        """The entry for this head. `fit_only`: the caller only asks whether it fits as it is
        (and how), and that answer does not depend on any preemption search (`_fit_decides`):
        no search looks for targets, each only defers the ClusterQueue as it would."""
        spec = cq.spec
        preemptor = self.preemptor
        # A non-preemptive ClusterQueue: every search would find no target and change nothing
        # (never_preempts: both preemptors' targets and the classical defer start with it), so
        # none is made and the answers are "no target".
        search = (
            None if never_preempts(cq)
            else Searches(preemptor, cq, ws, remember=not self.fair or REMEMBER_FAIR, defer_only=fit_only)
        )
        across = self._kept_across(cq, ws) if search is None and KEEP_ASSIGNMENTS else None
        if across is not None:
            found = cq.assignments.get(id(ws.spec.pod_sets))
            if found is not None and found[0] is ws.spec.pod_sets and found[1] == across:
                return Entry(cq, ws, found[2])

        def oracle(fr: FR, value: int) -> tuple[int, int]:
            assert search is not None
            targets = search({fr: value}, [fr])
            if not targets:
                return NO_CANDIDATES, borrowing_level(cq.node, fr, value)[0]
            for t in targets:
                t.cq.node.add_usages(_usage(t), -1)
            borrow = borrowing_level(cq.node, fr, value)[0]
            for t in targets:
                t.cq.node.add_usages(_usage(t))
            return (PREEMPT if any(t.cq is cq for t in targets) else RECLAIM), borrow

        assigner = FlavorAssigner(
            spec,
            cq.node,
            cq.groups,
            self.state.flavors,
            # None: no preemption (the assigner answers NO_CANDIDATES at the borrowing level).
            oracle if search is not None else None,
            can_preempt_while_borrowing=spec.preemption.borrow_within_cohort != NEVER
            or (self.fair and spec.preemption.reclaim_within_cohort != NEVER),
            quotas=cq.quotas,
            plans=cq.plans,
        )
        # A head skipped in the previous cycle because another entry took its room resumes
        # that cycle's flavor scan (Kueue's markSkipped keeps LastAssignment under
        # FlavorFungibilityPreserveScanProgress, beta and on since 0.20: pkg/scheduler/
        # scheduler.go; lastAssignmentOutdated keeps an assignment of the preceding cycle).
        resume = None
        kept = ws.resume_flavors
        if kept is not None:
            ws.resume_flavors = None
            if kept[0] == self.state.offset:
                resume = kept[1]
        # A resumed scan that finds nothing is the answer, as in Kueue: the workload goes back
        # with the inadmissible ones (no flavor pending: requeueIfNotPresent in pkg/cache/queue/
        # cluster_queue.go) and waits for the next change in its cohort
        # (QueueAssociatedInadmissibleWorkloadsAfter), whose attempt scans afresh (a
        # LastTriedFlavorIdx of -1 restarts at the first flavor); it is not tried again at once,
        # even when an earlier flavor has room again.
        entry = self._cycles(cq, ws, assigner, search, resume)
        if resume is not None and ws.resume_flavors is None:
            ws.resume_flavors = (self.state.offset, None)
        if across is not None and not entry.assignment.pending_flavors():
            kept_here = cq.assignments
            if len(kept_here) >= _KEPT_ASSIGNMENTS_LIMIT:
                kept_here.clear()
            kept_here[id(ws.spec.pod_sets)] = (ws.spec.pod_sets, across, entry.assignment)
        return entry

    def _kept_across(self, cq: ClusterQueueState, ws: WorkloadState) -> tuple[int, ...] | None:
        """What `assign` reads of the usage for this head of a non-preemptive ClusterQueue, when
        its answer may be kept across events (`ClusterQueueState.assignments`); else None.

        Speed-up, exact: without a search, `assign` reads only the head's pod sets (its
        requests, selectors, tolerations: one tuple, shared by look-alikes), its kept flavor
        scan, and of its ClusterQueue the configuration (its spec, resource groups, quotas, the
        flavors they name, the engine's Configuration) and the quota tree: in a flat cohort,
        with no lending or borrowing limit of its own, only its own and the cohort's subtree
        quota (configuration) and usage of each of its flavor-resources. So a head with no scan
        to resume, no partial admission and pod sets it shares with an earlier head of the same
        queue, under the same configuration (the same objects, checked when its epoch moves:
        `_usage_read`) and the same usage, gets the same assignment, and `assign` changed
        nothing else for that one (no flavor left to scan: it kept none). The woken heads that
        hold room are evaluated in every cycle of their tree with an entry, after a pending
        workload's finish too, which moves no quota.
        """
        if ws.resume_flavors is not None:
            return None
        epoch = self.state.config_epoch
        if cq.assignments_epoch != epoch:
            cq.assignments_reads = self._usage_read(cq)
            cq.assignments_epoch = epoch
        reads = cq.assignments_reads
        if not reads:
            return None
        for ps in ws.spec.pod_sets:
            if ps.min_count is not None and ps.min_count != ps.count:
                return None
        node = cq.node
        parent = node.parent
        assert parent is not None
        own, cohort = node.usage, parent.usage
        return tuple([own.get(fr, 0) for fr in reads] + [cohort.get(fr, 0) for fr in reads])

    def _usage_read(self, cq: ClusterQueueState) -> list[FR]:
        """The flavor-resources whose usage `_kept_across` compares for cq (none: its answers
        are not kept), once per configuration epoch (`State.config_epoch`): cq's configuration
        is checked against the one its kept answers were made under, which are dropped if it
        changed. Every change of what is checked (cq's spec, groups and quotas, its place and
        limits in the tree, the subtree quotas, the flavors, the engine's Configuration) is
        made by a configuration event or `topology.set_parent`, which move the epoch first; a
        refused object's trial of the tree (`topology.yunikorn_max_violations`) rebuilds the
        subtree quotas without moving it, but puts back the same values."""
        node = cq.node
        parent = node.parent
        if parent is None or parent.parent is not None or node.lending_limit or node.borrowing_limit:
            return []
        flavors = self.state.flavors
        frs: list[FR] = []
        named: list[object] = []
        for res, group in sorted(cq.groups.items()):
            for f in group.flavors:
                frs.append(fr_key(f.name, res))
                named.append(flavors.get(f.name))
        # Compared by identity: a configuration change replaces these objects.
        under = (cq.spec, cq.groups, cq.quotas, parent, node.subtree, parent.subtree,
                 self.state.configuration, *named)
        made = cq.assignments_made_under
        if (len(made) != len(under) or any(a is not b for a, b in zip(made, under))
                or cq.assignments_height != parent.tree_height):
            cq.assignments.clear()
            cq.assignments_made_under = under
            cq.assignments_height = parent.tree_height
        return frs

    def _kept_assign(self, cq: ClusterQueueState, ws: WorkloadState, fit_only: bool,
                     moved: tuple[object, ...]) -> Entry:
        """`assign`, or the entry it gave for this head earlier in this pass.

        Speed-up, exact: `assign` reads only the head (its spec, priority and kept flavor scan),
        its ClusterQueue, the configuration, the input offset, and the usage and workloads of
        its cohort tree; within a pass only the first three can differ, and only through the
        scan kept (`resume_flavors`): an entry is kept only when the head had none before and
        after. The tree's usage and workloads are as its admissions and evictions of the pass
        left them (its epoch: `_tree_changed`) plus the usage the caller moved for the while
        (`moved`: the cycle's reserved room and its victims' usage, named by value), so equal
        epochs and equal `moved` read equal quota. The searches' one side effect, deferring
        the ClusterQueue, was made when the entry was, and lasts for the pass. A preemptor
        waiting for victims it already evicted (OnRelease) is nominated in every cycle of its
        tree, and asked again when a preemptor before it in the cycle took the same victims
        (`_overlapping`), while most cycles after a release only park woken heads."""
        kept = self._entries
        if kept is None or _scan_kept(ws):
            return self.assign(cq, ws, fit_only)
        key = (ws.key, id(cq), fit_only, moved)
        epoch = self._epochs.of(cq.node)
        found = kept.get(key)
        if found is not None and found[0] == epoch:
            return Entry(cq, ws, found[1], list(found[2]))
        entry = self.assign(cq, ws, fit_only)
        if not _scan_kept(ws):
            kept[key] = (epoch, entry.assignment, tuple(entry.targets))
        return entry

    def _cycles(self, cq: ClusterQueueState, ws: WorkloadState, assigner: FlavorAssigner,
                search: Searches | None, resume: list[dict[str, int]] | None) -> Entry:
        """The entry, as Kueue's consecutive cycles reach it.

        Each of Kueue's cycles (pkg/scheduler/scheduler.go getInitialAssignments) tries the
        full pod counts, then, when they neither fit nor find preemption targets, the
        partial-admission search; both resume the flavor scan where the previous cycle's scan of
        the full counts stopped (the workload's LastAssignment, which recordAssignment takes from
        the full assignment when the search finds nothing). When neither works while some pod
        set's scan stopped before the last flavor of its group, Kueue keeps that progress (KEP
        582: pkg/scheduler/flavorassigner/flavorassigner.go findFlavorForPodSets records
        TriedFlavorIdx) and, flavors being pending, puts the workload straight back in its queue
        (pkg/cache/queue/cluster_queue.go requeueIfNotPresent, PendingFlavors): its next cycle
        resumes each of those scans at the next flavor, so an arrangement where an earlier pod
        set takes a later flavor is found. Those cycles are made here at once, in their order:
        a reduced count found in an earlier cycle wins over a full count a later resumed scan
        would find. When none works, the attempt with the least severe reason answers (first
        among equals): the first scan's, unless a resumed one shows that the workload could fit
        in an emptier cluster."""
        full = best = first = self._try_once(cq, ws, assigner, None, search, resume)
        resumes = 0
        while True:
            if _works(full):
                return self._deferred(first, full, resumes)
            partial = self._partial(cq, ws, assigner, search, resume)
            if partial is not None:
                return self._deferred(first, partial, resumes)
            # The bound only guards against resumptions that would cycle (Kueue would keep
            # requeueing the workload); each starts past where the previous one stopped.
            if not full.assignment.pending_flavors() or resumes >= _MAX_RESUMES:
                return Entry(cq, ws, best.assignment)
            if resumes == 0:
                # Kueue's next cycle resumes from this cycle's scan: if the workload is tried
                # again within this input event, the cluster changed since (this cycle's
                # preemptions or admissions), and that cycle resumes from here.
                ws.resume_flavors = (self.state.offset, full.assignment.tried)
            resumes += 1
            resume = full.assignment.tried
            full = self._try_once(cq, ws, assigner, None, search, resume)
            if not _works(full) and _severity(full) < _severity(best):
                best = full

    def _deferred(self, first: Entry, works: Entry, resumes: int) -> Entry:
        """The entry of this cycle, once a scan of `_cycles` works. When it is a resumed scan,
        Kueue's cycle ended the head's attempt at its failed first scan: it holds room for the
        workload when that scan found no candidates (pkg/scheduler/scheduler.go,
        reserveCapacityForUnreclaimablePreempt) and requeues it at once, flavors pending
        (pkg/cache/queue/cluster_queue.go requeueIfNotPresent); its next cycle resumes the scan,
        beside the other heads of that cycle. So the failure stands for this cycle and the next
        resumes from it (`ws.resume_flavors`, set by `_cycles`). Once per head and input event:
        later resumptions in the event are made at once, as before, so that the event's cycles
        reach a fixed point (Kueue may go on resuming in every cycle)."""
        ws = first.ws
        if resumes == 0 or not self._nominating:
            return works
        if ws.key not in self._deferred_now:
            if ws.deferred_at == self.state.offset:
                return works
            ws.deferred_at = self.state.offset
            # Asked again in this cycle (a search's check, a kept entry remade), the head is
            # still deferred: the answer of a cycle does not depend on how often it is asked.
            self._deferred_now[ws.key] = None
        first.deferred = True
        return first

    @staticmethod
    def _try_once(cq: ClusterQueueState, ws: WorkloadState, assigner: FlavorAssigner,
                  counts: list[int] | None, search: Searches | None,
                  resume: list[dict[str, int]] | None) -> Entry:
        assignment = assigner.assign(ws.spec, counts, resume)
        entry = Entry(cq, ws, assignment)
        if search is not None and assignment.mode not in (MODE_FIT, MODE_NO_FIT):
            entry.targets = search(assignment.usage, assignment.preempt_frs())
        return entry

    def _partial(self, cq: ClusterQueueState, ws: WorkloadState, assigner: FlavorAssigner,
                 search: Searches | None, resume: list[dict[str, int]] | None) -> Entry | None:
        """Partial admission: the largest pod counts (down to minCount) that fit or can preempt.

        Kueue searches i in [0, Δ] (Δ = Σ count − minCount) for the smallest i whose counts
        count − ⌊δ·i/Δ⌋ work, by binary search (pkg/scheduler/flavorassigner/podset_reducer.go),
        every try resuming the flavor scan from the same place as the full counts' scan of the
        cycle."""
        pod_sets = ws.spec.pod_sets
        deltas = [ps.count - (ps.min_count if ps.min_count is not None else ps.count) for ps in pod_sets]
        total = sum(deltas)
        if total == 0:
            return None
        found: Entry | None = None
        lo, hi = 0, total + 1
        while lo < hi:
            mid = (lo + hi) // 2
            counts = [ps.count - d * mid // total for ps, d in zip(pod_sets, deltas)]
            entry = self._try_once(cq, ws, assigner, counts, search, resume)
            if _works(entry):
                found = entry
                hi = mid
            else:
                lo = mid + 1
        return found

    # -- one cycle --------------------------------------------------------------------------
    def _nominate(self, out: Emitter, batch: list[tuple[ClusterQueueState, WorkloadState]]) -> list[Entry]:
        """Kueue's nominate: the entry of every head that may be admitted, the others parked."""
        state = self.state
        entries: list[Entry] = []
        # Nominating changes no usage and no workload: searches may share their reading and keep
        # their answers. The sharing must end with the nomination, whatever happens in it.
        preemptor = self.preemptor
        preemptor.share_while_unchanged()
        hopeless: list[ClusterQueueState] = []  # queues whose head was parked still hopeless
        busy: dict[int, None] = {}  # ids of the roots of the trees whose heads were not
        # Still-hopeless heads that Kueue, evaluating them, would hold room for; and the roots of
        # the trees with an entry in this cycle, where that room matters.
        holding: list[tuple[ClusterQueueState, WorkloadState]] = []
        entered: dict[int, None] = {}
        self._nominating = True
        self._deferred_now = {}
        try:
            for cq, ws in batch:
                if not cq.spec.namespace_selector.matches(state.namespace_labels(ws.spec.namespace)):
                    status = (reasons.MISCONFIGURED, reasons.MSG_NAMESPACE_MISMATCH)
                    self._park(out, cq, ws, status, blocks=False)
                    busy[id(cq.node.root())] = None
                    continue
                invalid = ws.spec.resources_error
                if invalid is not None:
                    # Unlike a namespace mismatch, Kueue requeues it at once: a StrictFIFO head blocks.
                    self._park(out, cq, ws, (reasons.MISCONFIGURED, invalid))
                    busy[id(cq.node.root())] = None
                    continue
                needs = self._still_hopeless(cq, ws)
                if needs is not None:
                    rule = self._rule_of(cq)
                    if rule is not None and _holds_room(ws, rule, cq):
                        holding.append((cq, ws))
                        continue
                    assert ws.last_status is not None
                    cq.queue.park(ws.order_key, ws.last_status, needs=needs)
                    hopeless.append(cq)
                    continue
                entries.append(self._kept_assign(cq, ws, False, ()))
                busy[id(cq.node.root())] = None
                entered[id(cq.node.root())] = None
            if entered:
                self._hold_room(entries, batch, entered)
            for cq, ws in holding:
                root_id = id(cq.node.root())
                if root_id in entered:
                    entries.append(self.assign(cq, ws))
                    busy[root_id] = None
                    continue
                # Nothing else of its tree is tried in this cycle: the room it would hold matters
                # to no one. Filed generic, it is tried again after any release in its tree, as
                # Kueue requeues it (QueueInadmissibleWorkloads), so that it holds its room in
                # the cycles where others of its tree are tried.
                assert ws.last_status is not None
                cq.queue.park(ws.order_key, ws.last_status)
                hopeless.append(cq)
        finally:
            self._nominating = False
            preemptor.stop_sharing()
        if SETTLE_QUIET_TREES and (hopeless or busy):  # busy: its trees are scanned again once quiet
            self._settle_quiet_trees(hopeless, busy)
        return entries

    def _rule_of(self, cq: ClusterQueueState) -> dict[str, int] | None:
        rules = self._rules
        name = cq.name
        if name in rules:
            return rules[name]
        rule = rules[name] = _room_rule(cq, self.fair)
        return rule

    def _hold_room(self, entries: list[Entry], batch: list[tuple[ClusterQueueState, WorkloadState]],
                   entered: dict[int, None]) -> None:
        """The entries of blocked StrictFIFO heads that would hold room in this cycle.

        Kueue requeues a StrictFIFO head at once whatever its failure (pkg/cache/queue/
        cluster_queue.go RequeueIfNotPresent), so it is evaluated in every cycle; one that needs
        preemption and finds no candidates, in a ClusterQueue that cannot always reclaim,
        reserves room for the rest of each cycle (pkg/scheduler/scheduler.go
        reserveCapacityForUnreclaimablePreempt). Here a blocked queue sleeps; in a cycle where
        another head of its cohort tree is tried, its head is evaluated as Kueue's would be, so
        that the room it holds is held."""
        state = self.state
        present: dict[str, None] = {cq.name: None for cq, _ in batch}
        seen: dict[int, None] = {}
        for cq, _ in batch:
            root = cq.node.root()
            root_id = id(root)
            if root_id not in entered or root_id in seen or root is cq.node:
                continue
            seen[root_id] = None
            for member in tree_members(state, root):
                if member is None or member.name in present:
                    continue
                queue = member.queue
                blocker = queue.blocker
                if blocker is None or not member.active:
                    continue
                rule = self._rule_of(member)
                if rule is None:
                    continue
                ws = state.workloads[cast(str, blocker[3])]
                last = ws.last_status
                if last is None or last[0] != reasons.WAITING_FOR_QUOTA or not _holds_room(ws, rule, member):
                    continue
                entries.append(self.assign(member, ws))

    def _settle_quiet_trees(self, hopeless: list[ClusterQueueState], busy: dict[int, None]) -> None:
        """Park at once the ready heads of every cohort tree that has gone quiet (a tree all of
        whose heads in this cycle were parked still hopeless) and every other ready head of
        whose queues is still hopeless now; and, in a cycle where every tree went quiet, the
        first ready heads of every queue up to the cycle in which a head of some tree may fit.

        Such a tree changes no more until it has an entry: it has none in this cycle, and
        nothing else in a cycle moves a tree's usage, candidates or statuses but its own
        entries (victims are taken within the tree, wakes follow its releases). So each of its
        ready heads would, one cycle after another, head its queue, be found still hopeless
        against this same quota, and be parked filed as it is filed here, with nothing else
        happening in the tree: the one-per-cycle parking of a release's woken herd, done in one
        pass. When every tree is quiet and the earliest head that may fit is the k-th ready
        head of its queue, the k cycles before its turn park the first k ready heads of every
        queue and decide nothing: they are parked here, and that head is an entry in the next
        cycle, where the heads that hold room are evaluated beside it, in the same cycle as
        every other tree's next entry (a tree's entries must not move to another cycle than
        other trees': the decisions of one event are ordered by cycle). What one pass does not
        reproduce, it refuses: a sticky head (it heads its queue instead) and a waiting
        preemptor of the tree (it joins every cycle in which its tree has a head); and heads in
        part where a queue's next head is not its first ready class (a preemptor workload,
        admission fair sharing). A tree with a head that may fit, or refused, is not scanned
        again until it has an entry (`_unquiet`); one with a head that may fit is, in a cycle
        where every tree is quiet and none was refused."""
        state = self.state
        unquiet = self._unquiet
        for root_id in busy:
            unquiet.pop(root_id, None)
        waiting: dict[int, None] = {}
        for name in state.waiting_preemptors:
            preemptor = state.cluster_queues.get(name)
            if preemptor is not None:
                waiting[id(preemptor.node.root())] = None
        # Every tree with a ready head had one in this cycle, none has an entry, and none was
        # refused for what lasts until its next entry: trees with a head that may fit are
        # scanned again, for how many cycles before its turn.
        all_quiet = PARK_LEADING_HEADS and not busy
        if all_quiet:
            for cq in hopeless:
                root_id = id(cq.node.root())
                if unquiet.get(root_id) or root_id in waiting:
                    all_quiet = False
                    break
        trees: dict[int, list[ClusterQueueState]] = {}
        for cq in hopeless:
            root_id = id(cq.node.root())
            if root_id in busy or (root_id in unquiet and not all_quiet):
                continue
            trees.setdefault(root_id, []).append(cq)
        if not trees:
            return
        workloads = state.workloads
        # Trees where a ready head may fit: how many cycles before its turn, and the filings.
        leading: list[tuple[int, list[tuple[ClusterQueueState, list[tuple[int, Status, tuple[str, int] | None]]]]]] = []
        in_part = all_quiet  # every tree's next cycles can be parked in part
        for root_id, cqs in trees.items():
            if root_id in waiting:
                in_part = False
                continue
            plan: list[tuple[ClusterQueueState, list[tuple[int, Status, tuple[str, int] | None]]]] = []
            # The fewest ready heads before one that may fit, over this tree's queues where one
            # was found (None: none was); a queue is not scanned past it.
            stop: int | None = None
            in_order = True  # every queue's next head is its first ready class
            refused = False
            lasting = False  # refused for what lasts until the tree's next entry
            for cq in cqs:
                queue = cq.queue
                if queue.strict:
                    continue  # its failed head blocks it: nothing else of it heads a cycle
                if cq.sticky is not None:
                    refused = lasting = True
                    break
                if queue.fair is not None or cq.preemptor is not None:
                    in_order = False
                selector = cq.spec.namespace_selector
                selected: dict[str, bool] = {}  # namespace -> selected by cq (one read each)
                # The tree's quota does not move while it is quiet: each resource's best
                # availability over its group's flavors is read once, not once per head.
                best = _best_available(cq)
                rule = self._rule_of(cq)
                filings: list[tuple[int, Status, tuple[str, int] | None]] = []
                for key, cls in queue.ready:
                    if stop is not None and len(filings) >= stop:
                        break
                    ws = workloads[cast(str, key[3])]
                    spec = ws.spec
                    namespace = spec.namespace
                    chosen = selected.get(namespace)
                    if chosen is None:
                        chosen = selected[namespace] = selector.matches(state.namespace_labels(namespace))
                    if not chosen or spec.resources_error is not None:
                        stop = len(filings)
                        break
                    needs = self._still_hopeless(cq, ws, best)
                    if needs is None:
                        stop = len(filings)
                        break
                    assert ws.last_status is not None
                    # One that would hold room waits for any release, as in `_nominate`.
                    filings.append((cls, ws.last_status, None if rule is not None and _holds_room(ws, rule, cq, best) else needs))
                if stop is not None and (not in_order or not in_part):
                    refused = True
                    lasting = not in_order
                    break
                plan.append((cq, filings))
            if refused or stop is not None:
                unquiet[root_id] = lasting
                if refused:
                    in_part = False
                else:
                    assert stop is not None
                    leading.append((stop, plan))
                continue
            for cq, filings in plan:
                cq.queue.park_ready(filings)
        if in_part and leading:
            cycles = min(stop for stop, _ in leading)
            for _, plan in leading:
                for cq, filings in plan:
                    cq.queue.park_ready(filings[:cycles])

    def run_cycle(self, out: Emitter, batch: list[tuple[ClusterQueueState, WorkloadState]]) -> None:
        state = self.state
        entries = self._nominate(out, batch)
        # Kueue's IsPreemptor, read when the heads are taken: the entry is its ClusterQueue's
        # current preemptor workload, waiting for victims or back after a failure (Kueue keeps
        # it until it leaves the queue). Only looked up by name, never iterated.
        preemptors: frozenset[str] = frozenset()
        if self.prioritize_preemptors:
            preemptors = frozenset(e.cq.name for e in entries if e.cq.preemptor == e.ws.key)
        ordered: Iterable[Entry]
        if self.fair:
            ordered = Tournament(entries, preemptors)
        elif len(entries) > 1:
            if preemptors:
                ordered = sorted(entries, key=lambda e: (e.cq.name not in preemptors, e.order()))
            else:
                ordered = sorted(entries, key=Entry.order)
        else:
            ordered = entries

        # Quota set aside for the rest of this cycle only: for entries waiting on victims and
        # for preemptors that cannot get any, so lower-ranked entries cannot take that room.
        reserved: list[tuple[ClusterQueueState, dict[FR, int]]] = []
        held: list[tuple[ClusterQueueState, dict[FR, int]]] = []  # held in every cycle of its tree
        # Room held by entries that found no candidates, not set aside yet: only an entry that
        # reads the quota after them needs it there (`_set_aside`), and most cycles of a woken
        # herd have none (classical only: fair sharing's tournament reads the usage as it goes).
        deferred: list[tuple[ClusterQueueState, dict[FR, int]]] | None = (
            [] if DEFER_HELD_ROOM and not self.fair else None
        )
        victims: dict[str, None] = {}
        # The same victims' usage, by the id of their cohort tree's root (for _overlapping).
        gone: dict[int, list[tuple[QuotaNode, dict[FR, int]]]] = {}
        # Victims released within the cycle (evictionRelease: Immediate) woke their trees while
        # the cycle's held room still counted as used; they wake them again once it is freed.
        released = DeferredWakes()
        admitted_in: list[ClusterQueueState] = []  # a ClusterQueue of each tree that admitted
        retry_strict: list[ClusterQueueState] = []  # StrictFIFO heads to try afresh next cycle
        for entry in ordered:
            cq, ws, assignment = entry.cq, entry.ws, entry.assignment
            if entry.deferred:
                # Its resumed scan is made next cycle (`_deferred`); it keeps its place and its
                # status meanwhile, and holds its room in this one as a head without candidates.
                if assignment.mode != MODE_NO_FIT and _reserves_room(cq, preemptors):
                    reserved.append((cq, _capacity_to_reserve(cq, assignment)))
                    cq.node.add_usages(reserved[-1][1])
                continue
            if assignment.mode == MODE_NO_FIT:
                self._park(out, cq, ws, (assignment.no_fit_reason, assignment.message()))
                if self._resumed_in_vain(cq, ws):
                    retry_strict.append(cq)
                continue
            if assignment.mode != MODE_FIT and not entry.targets:
                self._park(out, cq, ws, (reasons.WAITING_FOR_QUOTA, assignment.message()))
                if self._resumed_in_vain(cq, ws):
                    retry_strict.append(cq)
                if _reserves_room(cq, preemptors):
                    # Its own node's usage, which the amount reads, moves with no other entry.
                    room = (cq, _capacity_to_reserve(cq, assignment))
                    if deferred is not None:
                        deferred.append(room)
                    else:
                        _set_aside([room], reserved, held)
                continue
            if deferred:
                _set_aside(deferred, reserved, held)
                deferred.clear()
            if any(t.ws.key in victims for t in entry.targets):
                self._overlapping(out, entry, gone.get(id(cq.node.root()), []), reserved, held)
                continue
            if not _fits(cq, assignment, entry.targets):
                status = (reasons.WAITING_FOR_QUOTA, reasons.MSG_NO_LONGER_FITS)
                held_out = self._held_by_preemptors(cq, assignment, entry.targets, held)
                resume_past_held = (held_out and cq.sticky != ws.key
                                    and assignment.pending_flavors()
                                    and ws.key not in self._resumed_past_held)
                if held_out and not resume_past_held:
                    # A preemptor waiting for its victims holds the room, in every cycle until
                    # they are gone: wait for that release rather than retry in vain. Skipped
                    # for capacity an earlier entry took, it keeps its flavor scan's progress
                    # (Kueue's markSkipped): woken by that release within this input event, it
                    # resumes the scan, as Kueue's next cycle does.
                    if assignment.pending_flavors():
                        ws.resume_flavors = (state.offset, assignment.tried)
                    if cq.sticky == ws.key:
                        # Itself a preemptor waiting for its own victims, it still heads its
                        # queue, as in Kueue (requeued after nomination, it is the head again
                        # in every cycle): nothing behind it goes first meanwhile.
                        self._wait_for_victims(out, cq, ws, status, status)
                    else:
                        self._park(out, cq, ws, status)
                else:
                    if resume_past_held:
                        # Held out by room held in every cycle, with flavors left in its scan:
                        # Kueue requeues it at once (FailedAfterNomination; requeueIfNotPresent
                        # in pkg/cache/queue/cluster_queue.go) and its next cycle resumes the
                        # scan past the flavor that no longer fitted (markSkipped keeps
                        # LastAssignment, pkg/scheduler/scheduler.go), where another flavor may
                        # have room. Once per input event, so that the event's cycles settle.
                        self._resumed_past_held[ws.key] = None
                    # Otherwise another entry of this cycle took the room. Either way, try again
                    # next cycle, from where this cycle's flavor scan stopped (see `assign`).
                    if assignment.pending_flavors():
                        ws.resume_flavors = (state.offset, assignment.tried)
                    set_pending(state, out, ws, status)
                continue
            if assignment.mode == MODE_FIT:
                if cq.sticky == ws.key:
                    drop_sticky(state, cq)
                admit(state, out, cq, ws, _admission(cq, assignment, out))
                admitted_in.append(cq)
                self._tree_changed(cq)
                continue
            reserved.append((cq, dict(assignment.usage)))
            held.append(reserved[-1])
            cq.node.add_usages(assignment.usage)
            issued = self._preempt(out, entry, victims, gone, released)
            # Kueue's markPreemptionOutcome (pkg/scheduler/scheduler.go) drops LastAssignment
            # once the preemptions are issued: the cycle after them scans every flavor afresh,
            # not from where this event's first scan stopped.
            ws.resume_flavors = None
            if issued:
                self._tree_changed(cq)
            status = (
                reasons.WAITING_FOR_PREEMPTED_WORKLOADS,
                reasons.MSG_PENDING_PREEMPTION.format(message=assignment.message(), count=len(entry.targets)),
            )
            cq.sticky = cq.preemptor = ws.key
            if issued:
                set_pending(state, out, ws, status)
            else:
                self._wait_for_victims(out, cq, ws, status,
                                       (reasons.WAITING_FOR_QUOTA, assignment.message()))
        for cq, hold in reserved:
            cq.node.add_usages(hold, -1)
        released.flush(state)
        if admitted_in:
            _retry_strict_heads(state, admitted_in)
        for cq in retry_strict:
            if cq.queue.unblock():
                state.ready[cq.name] = None

    def _resumed_in_vain(self, cq: ClusterQueueState, ws: WorkloadState) -> bool:
        """A StrictFIFO head whose failed attempt of this cycle resumed an earlier cycle's flavor
        scan (`assign` leaves its progress used up): Kueue requeues a StrictFIFO head at once
        whatever its failure (pkg/cache/queue/cluster_queue.go, RequeueIfNotPresent), and its
        next cycle scans afresh from the first flavor, where an earlier flavor may have room
        (a BestEffortFIFO head waits with the inadmissible ones for the next change instead)."""
        return cq.queue.strict and ws.resume_flavors == (self.state.offset, None)

    def _tree_changed(self, cq: ClusterQueueState) -> None:
        """A workload was admitted, evicted or released in cq's cohort tree (victims are in
        their preemptor's tree): the searches and entries kept for its heads are stale (its
        epoch)."""
        self._epochs.changed(cq.node)

    def _still_hopeless(self, cq: ClusterQueueState, ws: WorkloadState,
                        best: dict[str, int] | None = None) -> tuple[str, int] | None:
        """A woken head that was waiting for quota, which no preemption can help now, and for
        which some pod set's request of some resource exceeds what every flavor has available:
        it cannot fit, so its answer is the one it had. Skipping the full flavor assignment here
        is what keeps a finish cheap when large workloads wait.

        No preemption can help a head in a ClusterQueue that cannot preempt, or (Classical)
        one whose own queue holds no candidate under its policy and that cannot reclaim from
        its cohort because it would borrow (`_cannot_preempt`). What could change that wakes it
        again: a release in its own queue (lifecycle.wake_after_release), a candidate admitted
        there (PendingQueue.candidate_admitted), a priority or configuration change (wake_tree).

        Under fair sharing as under Classical for non-preemptive queues. Kueue would evaluate it
        in this cycle; unevaluated, it reserves no room and takes no part in the tournament
        (CONTRACT, "Waiting without re-evaluation": a departure the admission issue asks for).

        Returns the (resource, amount) it waits for, or None if it may fit and must be tried.
        `best`: `_best_available(cq)`, when the caller has it."""
        last = ws.last_status
        if last is None or last[0] != reasons.WAITING_FOR_QUOTA:
            return None
        short = self._short_of(cq, ws) if best is None else _short_of_best(ws, best)
        if short is None:
            return None
        # Its status is what workloads of its class that arrive meanwhile are told: not what
        # one cycle's competition said of it, but a flavor assignment's answer (which may name
        # another reason: a quota cut since makes it ExceedsMaxQuota).
        if last[1] in _CYCLE_MESSAGES:
            return None
        policy = cq.spec.preemption
        if policy.within_cluster_queue != NEVER or policy.reclaim_within_cohort != NEVER:
            if not self._cannot_preempt(cq, ws):
                return None
        return short

    @staticmethod
    def _short_of(cq: ClusterQueueState, ws: WorkloadState) -> tuple[str, int] | None:
        """The first (resource, amount) some pod set asks for more of than every flavor of its
        resource group has available; None if there is none (it may fit)."""
        node = cq.node
        for ps in ws.spec.pod_sets:
            count = ps.min_count if ps.min_count is not None else ps.count
            for res, per_pod in ps.per_pod:
                need = per_pod * count
                group = cq.groups.get(res)
                if need <= 0 or group is None:
                    continue
                for f in group.flavors:
                    if node.available(fr_key(f.name, res)) >= need:
                        break
                else:
                    return res, need
        return None

    def _cannot_preempt(self, cq: ClusterQueueState, ws: WorkloadState) -> bool:
        """Classical preemption, as `ClassicalPreemptor.targets` decides it, finds no target for
        this head whatever the quota available: its own queue holds no candidate under
        withinClusterQueue, borrowWithinCohort is Never, and it may not reclaim within its cohort:
        reclaimWithinCohort is Never, or there is no cohort, or (a flat cohort, one flavor per
        resource group, no partial admission: requests that do not depend on the assignment) it
        would borrow to fit (the early "no target" of `ClassicalPreemptor.targets`)."""
        if self.fair or cq.sticky == ws.key:
            return False
        policy = cq.spec.preemption
        if policy.borrow_within_cohort != NEVER or own_may_yield(cq, ws):
            return False
        parent = cq.node.parent
        if parent is None or policy.reclaim_within_cohort == NEVER:
            return True
        if parent.parent is not None:
            return False  # a hierarchy: reclaiming is decided level by level
        requests: dict[FR, int] = {}
        for ps in ws.spec.pod_sets:
            if ps.min_count is not None and ps.min_count != ps.count:
                return False
            for res, per_pod in ps.per_pod:
                group = cq.groups.get(res)
                if group is None or per_pod <= 0:
                    continue
                if len(group.flavors) != 1:
                    return False
                fr = fr_key(group.flavors[0].name, res)
                requests[fr] = requests.get(fr, 0) + per_pod * ps.count
        return not within_quota(cq.node, requests)

    def _preempt(self, out: Emitter, entry: Entry, victims: dict[str, None],
                 gone: dict[int, list[tuple[QuotaNode, dict[FR, int]]]], released: DeferredWakes) -> int:
        issued = 0
        for target in entry.targets:
            victims[target.ws.key] = None
            if not target.ws.evicted:  # else already preempted: counts, without a second eviction
                message = preemption_message(entry.ws, entry.cq, target)
                held = target.ws.admission
                evict(self.state, out, target.ws, target.reason, message, preemptor=entry.ws.key)
                issued += 1
                if held is not None and target.ws.admission is None:  # released at once
                    owner = self.state.cluster_queues.get(held.cluster_queue)
                    if owner is not None and not owner.terminating:  # a queue that may leave its tree: not again
                        released.add(owner, held.usage, own=False)
            admission = target.ws.admission  # None once released (evictionRelease: Immediate)
            if admission is not None:
                node = self.state.cluster_queues[admission.cluster_queue].node
                gone.setdefault(id(node.root()), []).append((node, admission.usage))
        return issued

    def _park(self, out: Emitter, cq: ClusterQueueState, ws: WorkloadState, status: Status,
              blocks: bool = True) -> None:
        if cq.sticky == ws.key:
            # The heads its room held out are woken before it is parked: not the preemptor
            # itself, whose answer this is. Kueue files it with the inadmissible workloads
            # (pkg/cache/queue/cluster_queue.go requeueIfNotPresent) until a change in its
            # cohort; woken by its own parking, it was tried again at once, afresh, and could
            # preempt other victims in the same event.
            drop_sticky(self.state, cq, room_freed=True)
        cq.queue.park(ws.order_key, status, blocks)
        set_pending(self.state, out, ws, status)

    def _wait_for_victims(self, out: Emitter, cq: ClusterQueueState, ws: WorkloadState,
                          status: Status, parked_as: Status) -> None:
        """Sleep until quota comes back, staying the sticky head (a waiting preemptor): its
        status is `status`; look-alikes that join its class meanwhile were not evaluated and
        read `parked_as` (that quota is short, not preemptions that are not theirs)."""
        cq.queue.park(ws.order_key, parked_as)
        self.state.waiting_preemptors[cq.name] = None
        set_pending(self.state, out, ws, status)

    @staticmethod
    def _held_by_preemptors(cq: ClusterQueueState, assignment: Assignment, targets: list[Target],
                            held: list[tuple[ClusterQueueState, dict[FR, int]]]) -> bool:
        """Would the entry fit if the preemptors of this cycle did not hold their room?"""
        if not held:
            return False
        for holder, usage in held:
            holder.node.add_usages(usage, -1)
        fits = _fits(cq, assignment, targets)
        for holder, usage in held:
            holder.node.add_usages(usage)
        return fits

    def _fit_decides(self, cq: ClusterQueueState, ws: WorkloadState) -> bool:
        """Can `assign` skip looking for preemption targets when only "does it fit, and how"
        matters?

        With one flavor per resource group, a search's answer never decides whether an
        assignment fits: the oracle is asked only for a resource that does not fit, which makes
        the assignment not fit whatever the answer (NO_CANDIDATES, PREEMPT and RECLAIM are all
        "Preempt"), and it chooses no other flavor; so the same searches are asked whatever the
        answers. Without partial admission, no search steers which pod counts are tried. A
        classical search's only other effect, deferring the ClusterQueue to the next event, is
        kept (`Searches` with `defer_only`)."""
        if self.fair:
            return False
        if any(len(group.flavors) != 1 for group in cq.groups.values()):
            return False
        return all(ps.min_count is None or ps.min_count == ps.count for ps in ws.spec.pod_sets)

    def _overlapping(self, out: Emitter, entry: Entry, gone: list[tuple[QuotaNode, dict[FR, int]]],
                     reserved: list[tuple[ClusterQueueState, dict[FR, int]]],
                     held: list[tuple[ClusterQueueState, dict[FR, int]]]) -> None:
        """Kueue's DeferredFit: this entry's victims were already chosen by an entry before it.
        If it fits once those are gone, it keeps its room and waits for them; if not, it is
        skipped this cycle."""
        cq, ws = entry.cq, entry.ws
        # assign reads only the quota tree of the entry's root and that tree's workloads: the
        # victims in other trees cannot change its answer and stay where they are (`gone`
        # holds this tree's victims of the cycle, in the order they were chosen).
        moved: tuple[object, ...] = ()
        if self._entries is not None:
            root = cq.node.root()
            moved = (
                tuple((id(holder.node), tuple(hold.items())) for holder, hold in reserved
                      if holder.node.root() is root),
                tuple((id(node), tuple(usage.items())) for node, usage in gone),
            )
        classical = self._classical
        for node, usage in gone:
            node.add_usages(usage, -1)
        try:
            if classical is not None and self._entries is not None:
                classical.reading_moved(moved)  # its searches are kept under it (and across events)
            again = self._kept_assign(cq, ws, self._fit_decides(cq, ws), moved)
        finally:
            if classical is not None:
                classical.reading_moved(None)
            for node, usage in gone:
                node.add_usages(usage)
        if again.assignment.mode != MODE_FIT:
            # Kueue retries it next cycle and meets the same victims until they are gone; here
            # it sleeps until they release their quota, so that the cycle reaches a fixed point.
            # A sticky preemptor stays sticky: it still heads its queue when it wakes.
            status = (reasons.WAITING_FOR_QUOTA, reasons.MSG_OVERLAPPING_TARGETS)
            cq.queue.park(ws.order_key, status)
            set_pending(self.state, out, ws, status)
            return
        reserved.append((cq, dict(again.assignment.usage)))
        held.append(reserved[-1])
        cq.node.add_usages(again.assignment.usage)
        cq.sticky = cq.preemptor = ws.key
        # Kueue's DeferredFit drops LastAssignment too (processEntry): the cluster changes once
        # the victims are gone, and its next attempt scans every flavor afresh.
        ws.resume_flavors = None
        self._wait_for_victims(
            out, cq, ws,
            (reasons.WAITING_FOR_PREEMPTED_WORKLOADS, reasons.MSG_DEFERRED_FIT),
            (reasons.WAITING_FOR_QUOTA, again.assignment.message()),
        )


# Keep a classical entry for the rest of its scheduling pass (Scheduler._kept_assign): the same
# decisions, checked against assigning every time by tests/domain/test_search_shortcuts.py.
KEEP_ENTRIES = True

# Keep fair sharing's entries too (with KEEP_ENTRIES), and ask its preemptor once per
# (requests, flavor-resources) while one workload is assigned (`Searches`): the same decisions,
# checked against the engine without them by tests/domain/test_fair_search_shortcuts.py.
KEEP_FAIR_ENTRIES = True
REMEMBER_FAIR = True

# Park the heads of a quiet tree in one pass (Scheduler._settle_quiet_trees): the same
# decisions, checked against parking them one cycle at a time by tests/domain/test_fast_paths.py.
SETTLE_QUIET_TREES = True

# In a quiet tree where a ready head may fit, park the heads before it in one pass too
# (Scheduler._settle_quiet_trees): the same decisions, checked against parking them one cycle at
# a time by tests/domain/test_fast_paths.py.
PARK_LEADING_HEADS = True

# Set aside the room of entries that found no candidates only when a later entry of the cycle
# reads the quota (Scheduler.run_cycle): the same decisions, checked against setting it aside at
# once by tests/domain/test_fast_paths.py.
DEFER_HELD_ROOM = True

# Keep the flavor assignments of non-preemptive heads across events, while the configuration
# and the usage they read stay (Scheduler._kept_across): the same decisions, checked against
# assigning every time by tests/domain/test_fast_paths.py. Off: in the compiled engine the
# keeping (a usage key per assignment, the read flavor-resources once per pass, now once per
# configuration) cost more than the assignments it spares, at shallow and deep backlogs alike
# (README, "Deep pending backlogs").
KEEP_ASSIGNMENTS = False
_KEPT_ASSIGNMENTS_LIMIT = 512  # per ClusterQueue; when full it starts again (costs only keeping)

# Statuses a head gets from its place in one cycle rather than from its own evaluation.
_CYCLE_MESSAGES = frozenset((reasons.MSG_NO_LONGER_FITS, reasons.MSG_OVERLAPPING_TARGETS))


_MAX_RESUMES = 64


def _works(entry: Entry) -> bool:
    """The attempt fits, or found preemption targets (Kueue takes it as the cycle's assignment)."""
    return entry.assignment.mode == MODE_FIT or bool(entry.targets)


def _scan_kept(ws: WorkloadState) -> bool:
    """Whether ws keeps a flavor scan to resume. A function, not an inline test: mypy narrows
    `ws.resume_flavors` after an inline `is None` test and keeps it narrowed across the
    `assign` call that sets it, and the compiled engine checks the narrowed type on the next
    read (a TypeError there)."""
    return ws.resume_flavors is not None


def _severity(entry: Entry) -> int:
    return reasons.NO_FIT_SEVERITY.get(entry.assignment.no_fit_reason, 0)


def _room_rule(cq: ClusterQueueState, fair: bool) -> dict[str, int] | None:
    """Which heads of cq, waiting for quota that no preemption frees, Kueue holds room for
    (`_holds_room`): None for none; an empty dict for all; else, per covered resource, the
    largest nominal quota of its group's flavors: a head asking more of a resource than that,
    and more than its flavors have available, is NoFit and holds nothing.

    Kueue's processEntry, for an entry that needs preemption and finds no candidates, calls
    reserveCapacityForUnreclaimablePreempt (pkg/scheduler/scheduler.go): unless the ClusterQueue
    can always reclaim its nominal quota (preemption.CanAlwaysReclaim: reclaimWithinCohort Any)
    it adds the entry's usage, up to its borrowing limit, to the cycle's snapshot. (The other
    case, an active preemptor under PrioritizePreemptorWorkloads, is never parked unevaluated:
    a waiting preemptor joins every cycle of its tree.) Outside a cohort that room is no one
    else's. Whether it is NoFit rather than Preempt is Kueue's fitsResourceQuota: Preempt when
    the request is within the flavor's nominal quota, or the ClusterQueue may reclaim within a
    hierarchy, or may preempt while borrowing."""
    policy = cq.spec.preemption
    if policy.reclaim_within_cohort == ANY or cq.node.parent is None:
        return None
    if policy.borrow_within_cohort != NEVER or (fair and policy.reclaim_within_cohort != NEVER):
        return {}  # may preempt while borrowing: Preempt up to the maximum capacity
    if cq.node.parent.parent is not None:
        return {}  # a hierarchy: it may reclaim within a cohort below the root
    caps: dict[str, int] = {}
    quotas = cq.quotas
    for res, group in cq.groups.items():
        cap = -1
        for f in group.flavors:
            quota = quotas.get(fr_key(f.name, res))
            nominal = quota.nominal if quota is not None else 0
            if nominal > cap:
                cap = nominal
        caps[res] = cap
    return caps


def _holds_room(ws: WorkloadState, caps: dict[str, int], cq: ClusterQueueState,
                best: dict[str, int] | None = None) -> bool:
    """Would Kueue hold room for this head of cq, which cannot fit and finds no preemption
    target (`_room_rule`'s answer for cq)? False when some pod set asks, at its smallest count,
    more of a resource than every flavor of its group can give: above the flavor's nominal quota
    (so no preemption is sought) and above what the flavor has available to cq now, borrowing
    included (so it does not fit). Kueue's fitsResourceQuota gives NoFit only then: a request
    above nominal that fits by borrowing is Fit for that resource, and the entry's other
    resources decide. Per flavor, a request is NoFit where it exceeds both amounts, so it is
    NoFit in every flavor exactly when it exceeds both the largest nominal (`caps`) and the
    largest availability (`best`, `_best_available` of cq, read only when needed). A False
    answer is a proof; a True one costs at most a flavor assignment, which decides."""
    if not caps:
        return True
    for ps in ws.spec.pod_sets:
        count = ps.min_count if ps.min_count is not None else ps.count
        for res, per_pod in ps.per_pod:
            cap = caps.get(res)
            need = per_pod * count
            if cap is None or per_pod <= 0 or need <= cap:
                continue
            if best is None:
                best = _best_available(cq)
            if need > best.get(res, -1):
                return False
    return True


def _best_available(cq: ClusterQueueState) -> dict[str, int]:
    """Per covered resource, the most any flavor of its group has available to cq (-1 for a
    group without flavors: no request fits there)."""
    node = cq.node
    best: dict[str, int] = {}
    for res, group in cq.groups.items():
        if not group.flavors:
            best[res] = -1
        for f in group.flavors:
            amount = node.available(fr_key(f.name, res))
            if res not in best or amount > best[res]:
                best[res] = amount
    return best


def _short_of_best(ws: WorkloadState, best: dict[str, int]) -> tuple[str, int] | None:
    """`Scheduler._short_of` given `_best_available` of the ClusterQueue: the same answer (a
    request is short where every flavor has less available, that is the best of them)."""
    for ps in ws.spec.pod_sets:
        count = ps.min_count if ps.min_count is not None else ps.count
        for res, per_pod in ps.per_pod:
            need = per_pod * count
            if need <= 0:
                continue
            amount = best.get(res)
            if amount is None:
                continue
            if need > amount:
                return res, need
    return None


def schedule(state: State, out: Emitter) -> None:
    Scheduler(state).schedule(out)


def _retry_strict_heads(state: State, admitted_in: list[ClusterQueueState]) -> None:
    """After a cycle that admitted workloads, the blocked StrictFIFO heads of those cohort trees
    that may reclaim within their cohort are tried again in the next cycle.

    Kueue requeues a StrictFIFO head at once whatever its failure (pkg/cache/queue/
    cluster_queue.go, RequeueIfNotPresent: immediate unless the namespace does not match), so it
    is tried in every cycle and sees every admission of the cycle before: one that takes its
    ClusterQueue over its nominal quota, or raises its share, makes its workloads candidates
    for a head that may reclaim. A blocked queue here otherwise sleeps until a release; an
    admission cannot help a head whose queue may not reclaim (only its own queue's candidates
    could, and its own queue admits nothing while it is blocked)."""
    roots: dict[int, ClusterQueueState] = {}
    for cq in admitted_in:
        root = cq.node.root()
        if root is not cq.node:  # outside a cohort nothing else shares its quota
            roots.setdefault(id(root), cq)
    for cq in roots.values():
        for member in tree_members(state, cq.node.root()):
            if (member is None or not member.queue.blocked or not member.active
                    or member.spec.preemption.reclaim_within_cohort == NEVER):
                continue
            if member.queue.unblock():
                state.ready[member.name] = None


def _usage(target: Target) -> dict[FR, int]:
    admission = target.ws.admission
    assert admission is not None
    return admission.usage


def _fits(cq: ClusterQueueState, assignment: Assignment, targets: list[Target]) -> bool:
    """Does the entry fit now, once its own victims (still holding quota) are gone?"""
    for t in targets:
        if t.ws.admission is not None:
            t.cq.node.add_usages(_usage(t), -1)
    node = cq.node
    fits = True
    for fr, value in assignment.usage.items():
        if value > 0 and value > node.available(fr):  # value <= max(0, available)
            fits = False
            break
    for t in targets:
        if t.ws.admission is not None:
            t.cq.node.add_usages(_usage(t))
    return fits


def _set_aside(holds: list[tuple[ClusterQueueState, dict[FR, int]]],
               reserved: list[tuple[ClusterQueueState, dict[FR, int]]],
               held: list[tuple[ClusterQueueState, dict[FR, int]]]) -> None:
    """Set aside for the rest of the cycle the room of entries that found no candidates, in
    their order. A blocked StrictFIFO head holds this room in every cycle of its tree
    (`_hold_room`), as Kueue's, retried in every cycle, does: what it keeps out waits for a
    release rather than retry in vain (`held`)."""
    for room in holds:
        reserved.append(room)
        cq = room[0]
        cq.node.add_usages(room[1])
        if cq.queue.strict:
            held.append(room)


def _reserves_room(cq: ClusterQueueState, preemptors: frozenset[str]) -> bool:
    """Whether an entry of cq that found no candidates holds its room for the rest of the cycle:
    Kueue's reserveCapacityForUnreclaimablePreempt does unless the ClusterQueue can always
    reclaim (reclaimWithinCohort Any), or for its active preemptor under
    PrioritizePreemptorWorkloads (`preemptors`)."""
    return cq.spec.preemption.reclaim_within_cohort != ANY or cq.name in preemptors


def _capacity_to_reserve(cq: ClusterQueueState, assignment: Assignment) -> dict[FR, int]:
    """Kueue's reserveCapacityForUnreclaimablePreempt."""
    node = cq.node
    hold: dict[FR, int] = {}
    for fr, value in assignment.usage.items():
        nominal = node.nominal.get(fr, 0)
        used = node.usage.get(fr, 0)
        if assignment.borrowing > 0:
            limit = node.borrowing_limit.get(fr)
            amount = value if limit is None else min(value, nominal + limit - used)
        else:
            amount = min(value, nominal - used)
        if amount > 0:
            hold[fr] = amount
    return hold


def _admission(cq: ClusterQueueState, assignment: Assignment, out: Emitter) -> Admission:
    pod_sets = [
        PodSetAssignment(
            name=ps.name,
            flavors={res: ps.flavors[res] for res in sorted(ps.flavors)},
            resourceUsage={res: format_amount(res, ps.requests[res]) for res in sorted(ps.flavors)},
            count=ps.count,
        )
        for ps in assignment.pod_sets
    ]
    return Admission(cq.name, pod_sets, dict(assignment.usage), (out.offset, out.next_index))


__all__ = ["NO_FIT", "Scheduler", "schedule"]
