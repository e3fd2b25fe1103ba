"""Classical preemption: which admitted workloads a pending one may evict, and the fewest of them.

Follows Kueue's classical preemptor (pkg/scheduler/preemption): candidates come from the
preemptor's own ClusterQueue (per `withinClusterQueue`) and from ClusterQueues of its cohort tree
that use more than their nominal quota (per `reclaimWithinCohort`, with `borrowWithinCohort` and
`maxPriorityThreshold` deciding whether the preemptor may borrow while reclaiming). Candidates are
taken in Kueue's order (already evicted first; other ClusterQueues before its own; lower priority
first; most recently admitted first) until the preemptor fits, then every victim that turns out
not to be needed is given back, last to first.

Cost: each ClusterQueue keeps its workloads in candidate order (`candidates.py`); an attempt
chooses the queues to take from (one look at each queue of the cohort tree), then merges their
candidates lazily, reading only as many as the search examines: k·log q for k candidates from q
queues, whatever the number of workloads the cohort holds.

While a cycle nominates its heads nothing changes, and the heads of one flat cohort would each
collect the same reclaimable queues and read and merge the same candidates (less their own
queue's): those searches share that work (`shared_cohort.py`, a speed-up, switched on by the
scheduler around nomination). Victims are removed where it is cheapest with the same effect on
what the search reads (`victims.removal_node`), and given back in runs (`minimize.fill_back`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from domain.local_queue_usage import by_usage, wants_fair
from domain.objects import LOWER_OR_NEWER_EQUAL, NEVER
from domain.preemption.fit import (
    borrows,
    fit_in_quota,
    fits,
    under_nominal,
    within_quota,
)
from domain.preemption.minimize import fill_back
from domain.preemption.policy import (
    VARIANT_REASON,
    Target,
    classify,
    max_candidate_priority,
    never_preempts,
    own_may_yield,
    preemptible_now,
    preemptor_reads,
)
from domain.preemption.reading import (
    Key,
    Source,
    Stream,
    any_candidate,
    path_valid,
    read_group,
)
from domain.preemption.shared_cohort import SharedCohort, SharedGroups
from domain.preemption.shortfall import cannot_fit
from domain.preemption.tree_epochs import Kept, TreeEpochs
from domain.preemption.victims import (
    Candidate,
    Pending,
    add_back,
    apply_pending,
    note,
    removal_node,
)
from domain.quota import FR, QuotaNode, over_nominal
from domain.state import ClusterQueueState, State, WorkloadState

# Where a candidate group's workloads come from, as Kueue's classical candidate iterator splits
# them: queues of the cohort the preemptor has a hierarchical advantage over (it fits in the
# quota of a cohort they sit outside of), the other reclaimable queues of the cohort (taken by
# priority), and the preemptor's own queue.
HIERARCHY = 0
PRIORITY = 1
SAME_QUEUE = 2
KINDS = (HIERARCHY, PRIORITY, SAME_QUEUE)
# The candidate groups in the order a search reads them: every already evicted candidate before
# any still holding, each by kind in the order above.
GROUPS: tuple[tuple[bool, int], ...] = tuple((evicted, kind) for evicted in (True, False) for kind in KINDS)
NO_SHARED_KIND = -1  # the search does not read a shared cohort


# Switch of the answers kept across one scheduling pass's nominations (`ClassicalPreemptor.targets`).
KEEP_ANSWERS = True

# Switch of the answers kept across events (`ClassicalPreemptor.targets`, `_across`).
KEEP_ACROSS_EVENTS = True
# Answers kept per ClusterQueue; when full, the oldest quarter is dropped (costs only keeping).
_KEPT_ACROSS_LIMIT = 128

# Switch of the bound's answers given again, within a pass's nominations, to asks they dominate
# (`ClassicalPreemptor.targets`, `_dominated`; with KEEP_ANSWERS).
KEEP_BOUNDS = True
_KEPT_BOUNDS_LIMIT = 8  # per (ClusterQueue, flavor-resources asked and searched) and tree epoch


def _asked(reads: tuple[int, int | None], requests: dict[FR, int], frs: list[FR]) -> tuple[object, ...]:
    """What a search is asked, as one flat tuple (it is kept, per answer, across events): what
    it reads of the preemptor (`preemptor_reads`), the requests' flavor-resources and amounts
    alternating, then the flavor-resources searched in (an amount is an int, a flavor-resource
    a tuple of strings: read back one way only)."""
    flat: list[object] = list(reads)
    for fr, value in requests.items():
        flat.append(fr)
        flat.append(value)
    flat.extend(frs)
    return tuple(flat)


def _named(answer: list[Target]) -> tuple[object, ...]:
    """An answer as it is kept across events: its victims by name (so that a kept answer does
    not keep a finished workload's state alive), their reasons and queues' names."""
    return tuple([(t.ws.key, t.reason, t.cq.name) for t in answer])


def _keep(searches: dict[tuple[object, ...], tuple[int, int, tuple[object, ...]]], asked: tuple[object, ...],
          answer: tuple[int, int, tuple[object, ...]]) -> None:
    """Keep an answer across events, in the order made (a dict keeps it: no hash order)."""
    searches.pop(asked, None)
    if len(searches) >= _KEPT_ACROSS_LIMIT:
        for old in list(searches)[: _KEPT_ACROSS_LIMIT // 4]:
            del searches[old]
    searches[asked] = answer


def _dominated(said: list[tuple[int, tuple[int, ...]]], priority: int, requests: dict[FR, int]) -> bool:
    """Did the shortfall bound say "cannot fit", on the same tree, to a preemptor of at least
    this priority asking at most these amounts (`said`, per answer: the priority and the amounts
    in the order of `requests`)? Then it says so to this ask too.

    Speed-up, exact: with the flavor-resources requested and searched, the ClusterQueue and the
    tree the same (`shortfall.cannot_fit` reads nothing else of the preemptor than its priority
    where no policy is LowerOrNewerEqual), the bound's answer can only go from "might fit" to
    "cannot fit" as the priority falls (every candidate's bound falls with it: fewer workloads
    counted) and as an amount grows (more is borrowed and missing, the same quota and workloads
    to cover it; it fits in no cohort below the root where it did not before)."""
    for high, amounts in said:
        if priority > high:
            continue
        for value, least in zip(requests.values(), amounts):
            if value < least:
                break
        else:
            return True
    return False


class ClassicalPreemptor:
    """One scheduling pass's classical searches (the scheduler makes one per pass)."""

    def __init__(self, state: State) -> None:
        self.state = state
        # Flat cohorts' shared reading, by (root, flavor-resources), while the caller
        # guarantees that no usage and no workload changes (`share_while_unchanged`).
        self._cohorts: dict[tuple[int, tuple[FR, ...]], SharedCohort | None] | None = None
        # Answers of searches made while nominating, by (what the search reads of the
        # preemptor, its queue, requests, flavor-resources), each under its cohort tree's epoch:
        # the scheduler counts the pass's changes of each tree in `epochs` (read here through
        # its dict, `_epochs`).
        self._kept: dict[tuple[int, tuple[object, ...]], Kept] | None = {} if KEEP_ANSWERS else None
        self.epochs = TreeEpochs()
        self._epochs = self.epochs.by_root
        self._moved: tuple[object, ...] | None = None  # `reading_moved`
        # `_across` of this pass, by (the id of the tree's root, its epoch, the flavor-resources read).
        self._tokens: dict[tuple[int, int, tuple[FR, ...]], tuple[int, int] | None] = {}
        # Per cohort tree (by the id of its root): whether some queue of it holds a workload
        # shielded at this offset (`defer`), and the tree's epoch when that was seen.
        self._shielding: dict[int, tuple[int, bool]] = {}
        # The shortfall bound's "cannot fit" answers of this pass's nominations, by (the
        # ClusterQueue's id, the flavor-resources requested, those searched): the tree's epoch and
        # what each was asked (the preemptor's priority, the requested amounts in that order).
        self._bounds: dict[tuple[int, tuple[FR, ...], tuple[FR, ...]],
                           tuple[int, list[tuple[int, tuple[int, ...]]]]] = {}
        self._bound_said = False  # the last `_targets` was answered by the bound

    def share_while_unchanged(self) -> None:
        """From now until `stop_sharing`, nothing but these searches touches the quota or the
        workloads (a nomination phase): searches of heads of one flat cohort share their
        reading of it (`SharedCohort`)."""
        self._cohorts = {}

    def stop_sharing(self) -> None:
        self._cohorts = None

    def reading_moved(self, moved: tuple[object, ...] | None) -> None:
        """From now until called with None, the only usage moved for the while in a search's
        tree is `moved` (the scheduler's reserved room and victims' usage in that tree, named
        by value): answers are kept across events under it too (`targets`)."""
        self._moved = moved

    def _cohort(self, cq: ClusterQueueState, frs: list[FR]) -> SharedCohort | None:
        cohorts = self._cohorts
        root = cq.node.parent
        if cohorts is None or root is None or root.parent is not None:
            return None
        key = (id(root), tuple(frs))
        if key in cohorts:
            return cohorts[key]
        members: list[ClusterQueueState] = []
        cohort: SharedCohort | None = None
        for name in over_nominal(root, frs):  # as _collect finds them, the head's own included
            child = root.children[name]
            if not child.is_cluster_queue or child.lending_limit:
                break
            member = self.state.cluster_queues.get(name)
            if member is not None and member.active:  # an inactive queue: as in _collect
                members.append(member)
        else:
            cohort = SharedCohort(root, members, self.state.offset)
        cohorts[key] = cohort
        return cohort

    def _groups(self, cohort: SharedCohort, cq: ClusterQueueState, ws: WorkloadState, frs: list[FR],
                advantage: bool) -> SharedGroups:
        """The cohort's candidates classified for this preemptor: `classify` of another
        queue's candidate reads only these (and `max_candidate_priority` the first two)."""
        spec = cq.spec.preemption
        policy = spec.reclaim_within_cohort
        key = (advantage, policy, ws.priority, ws.queue_time if policy == LOWER_OR_NEWER_EQUAL else None,
               spec.borrow_within_cohort == NEVER, spec.max_priority_threshold)
        groups = cohort.groups.get(key)
        if groups is None:
            made: list[list[Stream]] = [[], []]
            for evicted in (True, False):
                for member in cohort.members:
                    stream = self._stream(cq, ws, (member, advantage, cohort.root), evicted, frs, False)
                    if stream is not None:
                        made[0 if evicted else 1].append(stream)
            groups = cohort.groups[key] = SharedGroups(made[0], made[1], frs)
        return groups

    def targets(
        self,
        cq: ClusterQueueState,
        ws: WorkloadState,
        requests: dict[FR, int],
        frs: list[FR],
    ) -> list[Target]:
        """The victims that make room for these requests (none if nothing can).

        Speed-up, exact: while nominating, an answer found in an earlier nomination of the same
        scheduling pass is given again when nothing has been admitted, evicted or released in
        the preemptor's cohort tree since. A search reads only that tree's usage and workloads
        (and the preemptor, the configuration and the input offset, which do not change within
        a pass), and at every nomination each of them is as the admissions, evictions and
        releases of the pass left it: what a cycle holds for its preemptors is given back before
        the next one nominates. The search's one side effect, deferring the ClusterQueue, was
        made the first time and lasts for the whole pass. A waiting preemptor is nominated in
        every cycle of its tree (Kueue's head of its queue), and most cycles after a release
        only park woken heads: its searches are asked again on the same tree.

        Of the preemptor a search reads only its priority, and its queue time where a policy is
        LowerOrNewerEqual (`satisfies_policy`, `max_candidate_priority`, `classify`, the
        shortfall bound; no search singles the preemptor out among the candidates): an answer
        is kept under those, so the heads of one queue that a release woke, one per cycle,
        share the searches they ask alike.

        Speed-up, exact: an answer is also kept across events, in the ClusterQueue
        (`ClusterQueueState.searches`), and given again while nothing it read has changed
        (`_across`).

        Speed-up, exact: the shortfall bound's "cannot fit" is given again, while nominating on
        the same tree epoch, to an ask of the same queue and flavor-resources that it dominates
        (`_dominated`): the woken heads of one queue, one per cycle, ask with other amounts and
        priorities."""
        kept = self._kept
        if kept is None or self._cohorts is None:
            if kept is None or self._moved is None:
                return self._targets(cq, ws, requests, frs)
            return self._moved_targets(cq, ws, requests, frs, self._moved)
        reads = preemptor_reads(cq, ws)
        root = cq.node.root()
        epoch = self._epochs.get(id(root), 0)
        keep_bounds = KEEP_BOUNDS and reads[1] is None
        if keep_bounds and self._bounds:
            said = self._bounds.get((id(cq), tuple(requests), tuple(frs)))
            if said is not None and said[0] == epoch and _dominated(said[1], ws.priority, requests):
                self.defer(cq, requests, frs)  # the search's one side effect, as the bound's
                return []
        asked = _asked(reads, requests, frs)
        key = (id(cq), asked)
        found = kept.get(key)
        if found is not None and found[0] == epoch:
            return list(found[1])
        across = self._across(cq, root, requests, frs) if KEEP_ACROSS_EVENTS else None
        if across is not None:
            held = cq.searches.get(asked)
            if held is not None and held[0] == across[0] and held[1] == across[1]:
                given = self._given(held[2])
                kept[key] = (epoch, given)
                return list(given)
        self._bound_said = False
        answer = self._targets(cq, ws, requests, frs)
        kept[key] = (epoch, tuple(answer))
        if across is not None:
            _keep(cq.searches, asked, (across[0], across[1], _named(answer)))
        if keep_bounds and self._bound_said:
            bounds_key = (id(cq), tuple(requests), tuple(frs))
            said = self._bounds.get(bounds_key)
            if said is None or said[0] != epoch:
                said = self._bounds[bounds_key] = (epoch, [])
            if len(said[1]) < _KEPT_BOUNDS_LIMIT:
                said[1].append((ws.priority, tuple(requests.values())))
        return answer

    def _moved_targets(self, cq: ClusterQueueState, ws: WorkloadState, requests: dict[FR, int],
                       frs: list[FR], moved: tuple[object, ...]) -> list[Target]:
        """`targets` while usage is moved for the while (`reading_moved`): kept across events
        only, under what was moved too. Exact as `_across` says: the usage such a search reads
        is what the tree's workloads make up plus what was moved, named by value (nodes by
        identity, which stay while the configuration epoch does)."""
        if not KEEP_ACROSS_EVENTS:
            return self._targets(cq, ws, requests, frs)
        across = self._across(cq, cq.node.root(), requests, frs)
        if across is None:
            return self._targets(cq, ws, requests, frs)
        asked = (_asked(preemptor_reads(cq, ws), requests, frs), moved)
        searches = cq.searches
        held = searches.get(asked)
        if held is not None and held[0] == across[0] and held[1] == across[1]:
            return list(self._given(held[2]))
        answer = self._targets(cq, ws, requests, frs)
        _keep(searches, asked, (across[0], across[1], _named(answer)))
        return answer

    def _given(self, named: tuple[object, ...]) -> tuple[Target, ...]:
        """The targets of an answer kept across events (`_named`). While it is given again, each
        victim still holds its quota where it did (its queue's index has not changed in the
        flavor-resources it holds and the search reads), so its state is the one named."""
        workloads = self.state.workloads
        cluster_queues = self.state.cluster_queues
        return tuple([Target(workloads[key], reason, cluster_queues[cq_name])
                      for key, reason, cq_name in cast(tuple[tuple[str, str, str], ...], named)])

    def _across(self, cq: ClusterQueueState, root: QuotaNode, requests: dict[FR, int],
                frs: list[FR]) -> tuple[int, int] | None:
        """What a search for these requests reads that may change between events, as two
        numbers that stay only while it does not (None: its answer is not kept across events).

        Speed-up, exact: a search (nominating: no usage moved for the while) reads the
        preemptor's priority and queue time (the key it is kept under), the configuration (its
        queue's policy, the tree's shape, quotas and which queues are active: the state's
        configuration epoch), the input offset, and of the workloads holding quota in the tree
        only those holding some of the flavor-resources it asks for or searches in, and the
        usage of those flavor-resources, which they make up: Kueue's quota is reckoned per
        flavor-resource (`available`, `fits`, the shortfall bound), and a workload that holds
        none of the ones searched in is no candidate (`uses`). Every change to such a workload
        (admitted, evicted, re-prioritised, released) counts in its queue's candidate index
        (`CandidateIndex.changes`), and the counts only grow: while their sum over the tree's
        queues stays, so does each, and the search would read the same. The offset is read
        only where a workload of the tree was admitted by the event being applied after a
        preemption by it (`preemptible_now`, and the search's one side effect, `defer`): an
        answer is kept, and given again, only when none is. Not with admission fair sharing,
        whose order of the own queue's candidates reads usage that decays with time."""
        state = self.state
        if wants_fair(state, cq):
            return None
        read = list(requests)
        for fr in frs:
            if fr not in requests:
                read.append(fr)
        # Within the pass, the same for every search of the tree's epoch asking for these.
        root_id = id(root)
        memo_key = (root_id, self._epochs.get(root_id, 0), tuple(read))
        memo = self._tokens
        if memo_key in memo:
            return memo[memo_key]
        token: tuple[int, int] | None = None
        if root_id not in state.admitted_roots or not self._shields(root):
            changes = 0
            cluster_queues = state.cluster_queues
            for leaf in root.leaves():
                member = cluster_queues.get(leaf.name)
                if member is not None:
                    changes += member.candidates.changes(read)
            token = (state.config_epoch, changes)
        memo[memo_key] = token
        return token

    def _targets(
        self,
        cq: ClusterQueueState,
        ws: WorkloadState,
        requests: dict[FR, int],
        frs: list[FR],
    ) -> list[Target]:
        if never_preempts(cq):
            return []  # a non-preemptive queue: no candidate can exist
        if cannot_fit(self.state, cq, ws, requests):
            # Speed-up, exact (shortfall.py): even every workload it could take would leave the
            # preemptor short; only the search's side effect is kept.
            self.defer(cq, requests, frs)
            self._bound_said = True
            return []
        policy = cq.spec.preemption
        same_queue: list[Source] = [] if policy.within_cluster_queue == NEVER else [(cq, False, None)]
        cohort = self._cohort(cq, frs) if policy.reclaim_within_cohort != NEVER else None
        shared: SharedGroups | None = None
        if cohort is None:
            hierarchy, priority = self._cohort_sources(cq, requests, frs)
            self._defer_if_admitted_now(cq, (same_queue, hierarchy, priority))
            shared_kind, advantage = NO_SHARED_KIND, False
        else:
            # What _cohort_sources and _defer_if_admitted_now find, from the shared cohort: its
            # one level gives every queue to hierarchy if the preemptor fits in its own nominal
            # quota, else to priority.
            hierarchy, priority = [], []
            advantage = within_quota(cq.node, requests)
            shared_kind = HIERARCHY if advantage else PRIORITY
            if (same_queue and cq.candidates.shields_at(self.state.offset)) or any(
                m is not cq for m in cohort.admitted_now
            ):
                self.state.deferred[cq.name] = None
            # The cohort's candidates, classified for this preemptor (`_groups`), are made when
            # first read: a search that reads none of them (a queue over its nominal quota
            # without borrowWithinCohort only looks at its own) leaves them unmade. Making them
            # reads, and changes, nothing else, and nothing changes during the nomination.
            if shared_kind == PRIORITY and policy.borrow_within_cohort == NEVER and not own_may_yield(cq, ws):
                # Speed-up, exact: no target can be found. The preemptor does not fit in its own
                # nominal quota, so it borrows (the same test, usage + request > subtree quota),
                # and its own queue holds no candidate under its policy. In an attempt with
                # borrowing, the cohort's queues are all priority sources, none valid without
                # borrowWithinCohort (skipped there); in one without, only the preemptor's own
                # victims could end its borrowing (own_too_high), and there are none.
                return []
        # The queues of each kind; each group's streams (by its place in GROUPS) are made when
        # first needed.
        sources_of = (hierarchy, priority, same_queue)
        made: list[list[Stream] | None] = [None] * len(GROUPS)

        def group(evicted: bool, kind: int) -> list[Stream]:
            g = kind if evicted else len(KINDS) + kind
            streams = made[g]
            if streams is None:
                made[g] = streams = []
                for source in sources_of[kind]:
                    stream = self._stream(cq, ws, source, evicted, frs, source[0] is cq)
                    if stream is not None:
                        streams.append(stream)
            return streams

        forbidden = cq.spec.preemption.borrow_within_cohort == NEVER
        attempts: tuple[bool, ...]
        if forbidden and not under_nominal(cq, frs):
            attempts = (True,)
        else:
            if cohort is None:
                any_hierarchy = any_candidate(group(True, HIERARCHY)) or any_candidate(group(False, HIERARCHY))
                any_priority = any_candidate(group(True, PRIORITY)) or any_candidate(group(False, PRIORITY))
            else:
                shared = self._groups(cohort, cq, ws, frs, advantage)
                any_hierarchy = any_priority = shared.any_besides(cq)
                if shared_kind == HIERARCHY:
                    any_priority = False
                else:
                    any_hierarchy = False
            if not any_hierarchy and not any_priority:
                attempts = (True,)
            elif forbidden and not any_hierarchy:
                attempts = (False, True)
            else:
                attempts = (True, False)
        for allow_borrowing in attempts:
            chosen: list[Candidate] = []
            # Speed-up of asking `fits` after every victim, exact: without borrowing, the
            # preemptor fits only once its own queue is low enough; other queues' victims never
            # change that, so fits need not be asked after each of them.
            own_too_high = not allow_borrowing and borrows(cq, requests)
            # A victim whose `at` is the common ancestor is removed there, not from its queue:
            # `below` keeps what its queue would have lost, for `within_nominal_without`. Meanwhile
            # (own_too_high) such removals wait in `waiting` and are made, added up per node,
            # just before fits is asked: until then only the queue's own usage is read.
            below: Pending = {}
            waiting: Pending = {}
            try:
                for evicted, kind in GROUPS:
                    if allow_borrowing and forbidden and kind == PRIORITY:
                        # Without borrowWithinCohort every candidate of the priority groups is
                        # one that may only be reclaimed without borrowing: none is valid here.
                        continue
                    source: Iterator[Candidate]
                    if cohort is None or kind == SAME_QUEUE:
                        if not sources_of[kind]:
                            continue
                        source = read_group(group(evicted, kind), allow_borrowing, frs, below)
                        checked = True
                    elif kind != shared_kind:
                        continue
                    else:
                        if shared is None:
                            shared = self._groups(cohort, cq, ws, frs, advantage)
                        if own_too_high:
                            # Speed-up of the loop below, exact: it would take every candidate
                            # of the shared group and, each being removed at the root rather
                            # than at its queue, only note its usage in `waiting` (own_too_high
                            # changes only with a victim of the preemptor's own queue, and the
                            # shared group has none). So take them all at once, with their
                            # usage summed once per cycle. (Only when the group holds none of
                            # the preemptor's own queue: no subtraction of its part.)
                            taken = shared.taken_by(evicted, allow_borrowing, cq)
                            if taken is not None:
                                chosen.extend(taken[0])
                                for node, total in taken[1].values():
                                    note(waiting, node, total)
                                continue
                        source = shared.read(evicted, allow_borrowing, cq)
                        checked = False  # the shared merge has, for the flat cohort
                    for candidate in source:
                        own = candidate.cq is cq
                        # read_group has checked the rest of the validity check for this candidate, now
                        if checked and not own and not path_valid(candidate, frs):
                            continue
                        chosen.append(candidate)
                        at = candidate.at
                        assert at is not None and candidate.ws.admission is not None
                        usage = candidate.ws.admission.usage
                        if at is not candidate.cq.node:
                            if checked:
                                note(below, candidate.cq.node, usage)
                            if own_too_high:
                                note(waiting, at, usage)
                                continue  # fits would say no, as below
                        at.add_usages(usage, -1)
                        if own:
                            own_too_high = not allow_borrowing and borrows(cq, requests)
                        elif own_too_high:
                            continue  # fits would say no: only the preemptor's own usage decides that
                        if waiting:
                            apply_pending(waiting, -1)
                        if fits(cq, requests, allow_borrowing):
                            chosen = fill_back(cq, requests, allow_borrowing, chosen)
                            return [Target(c.ws, VARIANT_REASON[c.variant], c.cq) for c in chosen]
            finally:
                if waiting:
                    apply_pending(waiting, -1)  # now every victim in `chosen` is removed
                add_back(chosen, 1)
        return []

    def defer(self, cq: ClusterQueueState, requests: dict[FR, int], frs: list[FR]) -> None:
        """Only the side effect of `targets`: defer the ClusterQueue to the next event when a
        queue it may take from holds a workload admitted by the event being applied (such a
        workload is no candidate now, but may be at the next event). For callers that need no
        targets, only this; it looks at the same queues `targets` does."""
        state = self.state
        if cq.name in state.deferred or never_preempts(cq):
            return
        root = cq.node.root()
        if id(root) not in state.admitted_roots:
            return  # no queue of its tree, where all its sources are, holds a workload admitted now
        if not self._shields(root):
            return  # none of them holds one that is no candidate now: the sources need not be found
        policy = cq.spec.preemption
        same_queue: list[Source] = [] if policy.within_cluster_queue == NEVER else [(cq, False, None)]
        hierarchy, priority = self._cohort_sources(cq, requests, frs)
        self._defer_if_admitted_now(cq, (same_queue, hierarchy, priority))

    def _shields(self, root: QuotaNode) -> bool:
        """Does some queue of root's tree hold a workload admitted by the event being applied
        that is no candidate within it (`CandidateIndex.shields_at`)? Only an admission changes
        that within a pass: with the answers kept (KEEP_ANSWERS), kept per tree epoch."""
        key = id(root)
        epoch = self._epochs.get(key, 0)
        if self._kept is not None:
            seen = self._shielding.get(key)
            if seen is not None and seen[0] == epoch:
                return seen[1]
        offset = self.state.offset
        cluster_queues = self.state.cluster_queues
        shields = False
        for leaf in root.leaves():
            member = cluster_queues.get(leaf.name)
            if member is not None and member.candidates.shields_at(offset):
                shields = True
                break
        self._shielding[key] = (epoch, shields)
        return shields

    def _defer_if_admitted_now(self, cq: ClusterQueueState, kinds: tuple[list[Source], ...]) -> None:
        offset = self.state.offset
        for sources in kinds:
            if any(member.candidates.shields_at(offset) for member, _, _ in sources):
                self.state.deferred[cq.name] = None
                return

    def _stream(self, cq: ClusterQueueState, preemptor: WorkloadState, source: Source,
                evicted: bool, frs: list[FR], own: bool) -> Stream | None:
        """None when the queue holds nothing this stream could read. `own`: the candidates are
        classified as the preemptor's own queue's."""
        member = source[0]
        spec = cq.spec.preemption
        policy = spec.within_cluster_queue if own else spec.reclaim_within_cohort
        bound = max_candidate_priority(policy, preemptor)
        if not member.candidates.holds(evicted, bound):
            return None
        # Workloads admitted by the event being applied are no candidates (preemptible_now).
        walk = member.candidates.ordered(evicted, bound, self.state.offset)
        if own and wants_fair(self.state, cq):
            walk = by_usage(self.state, walk)  # (a group of its own: read_group keeps its order)
        return Stream(member, own, self._candidates(cq, preemptor, source, walk, frs, own))

    def _candidates(self, cq: ClusterQueueState, preemptor: WorkloadState, source: Source,
                    walk: Iterator[tuple[int, int, int, str]], frs: list[FR],
                    own: bool) -> Iterator[tuple[Key, Candidate]]:
        """The candidates of one queue, in Kueue's order, as far as they are read."""
        member, advantage, lca = source
        workloads = self.state.workloads
        offset = self.state.offset
        at = removal_node(member.node, lca)
        for place in walk:
            candidate = workloads[place[3]]
            if not preemptible_now(candidate, offset):
                continue
            variant = classify(cq, preemptor, candidate, own, frs, advantage)
            if variant:
                yield place, Candidate(candidate, member, variant, lca, at)

    def _cohort_sources(self, cq: ClusterQueueState, requests: dict[FR, int],
                        frs: list[FR]) -> tuple[list[Source], list[Source]]:
        hierarchy: list[Source] = []
        priority: list[Source] = []
        if cq.node.parent is None or cq.spec.preemption.reclaim_within_cohort == NEVER:
            return hierarchy, priority
        advantage, remaining = fit_in_quota(cq.node, requests)
        previous: QuotaNode | None = None
        for subtree in cq.node.ancestors():
            target = hierarchy if advantage else priority
            self._collect(cq, subtree, subtree, previous, frs, advantage, target)
            fits, remaining = fit_in_quota(subtree, remaining)
            advantage = advantage or fits
            previous = subtree
        return hierarchy, priority

    def _collect(self, cq: ClusterQueueState, node: QuotaNode, subtree_root: QuotaNode,
                 skip: QuotaNode | None, frs: list[FR], advantage: bool, out: list[Source]) -> None:
        children = node.children
        for name in over_nominal(node, frs):  # the children not within nominal, in name order
            child = children[name]
            if child is skip or child is cq.node:
                continue
            if child.is_cluster_queue:
                member = self.state.cluster_queues.get(name)
                # An inactive queue (stopped, terminating, missing a flavor or check) is not in
                # Kueue's scheduling snapshot (pkg/cache/scheduler/snapshot.go Snapshot,
                # skipInactiveCQReason): its workloads are no candidates.
                if member is not None and member.active:
                    out.append((member, advantage, subtree_root))
            else:
                self._collect(cq, child, subtree_root, skip, frs, advantage, out)
