"""Classical preemption: which admitted workloads a pending one may evict, and the fewest of them.

Follows Kueue's classical preemptor (pkg/scheduler/preemption): candidates come from the
preemptor's own ClusterQueue (per `withinClusterQueue`) and from ClusterQueues of its cohort tree
that use more than their nominal quota (per `reclaimWithinCohort`, with `borrowWithinCohort` and
`maxPriorityThreshold` deciding whether the preemptor may borrow while reclaiming). Candidates are
taken in Kueue's order (already evicted first; other ClusterQueues before its own; lower priority
first; most recently admitted first) until the preemptor fits, then every victim that turns out
not to be needed is given back, last to first.

Cost: each ClusterQueue keeps its workloads in candidate order (domain/candidates.py); an attempt
chooses the queues to take from (one look at each queue of the cohort tree), then merges their
candidates lazily, reading only as many as the search examines: k·log q for k candidates from q
queues, whatever the number of workloads the cohort holds.

While a cycle nominates its heads nothing changes, and the heads of one flat cohort would each
collect the same reclaimable queues and read and merge the same candidates (less their own
queue's): those searches share that work (`_Cohort`, switched on by the scheduler around
nomination). Victims are removed where it is cheapest with the same effect on what the search
reads (`_at`), and given back in runs (`_fill_back`).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass

from domain import reasons
from domain.objects import ANY, LOWER_OR_NEWER_EQUAL, LOWER_PRIORITY, NEVER
from domain.quota import FR, QuotaNode, over_nominal
from domain.state import ClusterQueueState, State, WorkloadState

# Preemption variants (Kueue's classical.preemptionVariant).
WITHIN_CQ = 1
HIERARCHICAL_RECLAIM = 2
RECLAIM_WITHOUT_BORROWING = 3
RECLAIM_WHILE_BORROWING = 4

VARIANT_REASON = {
    WITHIN_CQ: reasons.IN_CLUSTER_QUEUE,
    HIERARCHICAL_RECLAIM: reasons.IN_COHORT_RECLAMATION,
    RECLAIM_WITHOUT_BORROWING: reasons.IN_COHORT_RECLAMATION,
    RECLAIM_WHILE_BORROWING: reasons.IN_COHORT_RECLAIM_WHILE_BORROWING,
}

HUMAN_REASON = {
    reasons.IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    reasons.IN_COHORT_RECLAMATION: "reclamation within the cohort",
    reasons.IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    reasons.IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}


@dataclass(frozen=True, slots=True)
class Target:
    ws: WorkloadState
    reason: str
    cq: ClusterQueueState


@dataclass(slots=True)
class _Candidate:
    ws: WorkloadState
    cq: ClusterQueueState
    variant: int
    lca: QuotaNode | None
    # Where a search removes the victim's usage (`_at`); None: at its ClusterQueue.
    at: QuotaNode | None = None


def satisfies_policy(preemptor: WorkloadState, candidate: WorkloadState, policy: str) -> bool:
    if policy == LOWER_PRIORITY:
        return preemptor.priority > candidate.priority
    if policy == LOWER_OR_NEWER_EQUAL:
        if preemptor.priority > candidate.priority:
            return True
        return preemptor.priority == candidate.priority and preemptor.queue_time < candidate.queue_time
    return policy == ANY


def within_nominal(node: QuotaNode, frs: list[FR]) -> bool:
    return all(node.usage.get(fr, 0) <= node.subtree.get(fr, 0) for fr in frs)


def uses(ws: WorkloadState, frs: list[FR]) -> bool:
    admission = ws.admission
    if admission is None:
        return False
    usage = admission.usage
    if len(frs) == 1:
        return usage.get(frs[0], 0) > 0
    return any(usage.get(fr, 0) > 0 for fr in frs)


def preemptible_now(ws: WorkloadState, offset: int) -> bool:
    """A workload admitted by the event being applied is not a victim within that same event.

    Each step of a preemption chain can be right by Kueue's rules and still lead back to where it
    started (A reclaims from B, C preempts A, B takes the room back, A reclaims again...). Kueue
    takes one step per scheduling cycle, with pods stopping in between; with Immediate release
    quotaflow would take them all inside one input event and never return. Deferring a victim
    admitted by this very event to the next event keeps every step and bounds each event's work;
    it also spares a launcher a start immediately followed by a stop."""
    admission = ws.admission
    return admission is not None and admission.sequence[0] != offset


def cq_path(cq: ClusterQueueState) -> str:
    parts = [cq.name] + [node.name for node in cq.node.ancestors()]
    return "/" + "/".join(reversed(parts))


def preemption_message(preemptor: WorkloadState, preemptor_cq: ClusterQueueState, target: Target) -> str:
    return (
        f"Preempted to accommodate a workload (UID: {preemptor.uid}, JobUID: {preemptor.job_uid}) due to "
        f"{HUMAN_REASON.get(target.reason, 'UNKNOWN')}; preemptor path: {cq_path(preemptor_cq)}; "
        f"preemptee path: {cq_path(target.cq)}"
    )


_Key = tuple[int, int, int, str]  # a candidate's place in Kueue's order (see candidates.py)


class _Stream:
    """One ClusterQueue's candidates (evicted or not), read lazily in Kueue's order and kept
    for the next attempt of the same search."""

    __slots__ = ("member", "own", "taken", "_source")

    def __init__(self, member: ClusterQueueState, own: bool, source: Iterator[tuple[_Key, _Candidate]]) -> None:
        self.member = member
        self.own = own
        self.taken: list[tuple[_Key, _Candidate]] = []
        self._source = source

    def at(self, i: int) -> tuple[_Key, _Candidate] | None:
        taken = self.taken
        while len(taken) <= i:
            item = next(self._source, None)
            if item is None:
                return None
            taken.append(item)
        return taken[i]


def _any(group: list[_Stream]) -> bool:
    return any(stream.at(0) is not None for stream in group)


# Usage per node (by id; insertion-ordered): victims' usage a search has removed, or will
# remove, at a node other than their ClusterQueue's (see `_at`).
_Pending = dict[int, tuple[QuotaNode, dict[FR, int]]]


def _within_nominal(node: QuotaNode, below: _Pending, frs: list[FR]) -> bool:
    """Is the queue within its nominal quota once the victims taken from it are gone, also
    those removed at its parent instead (`below`)? A ClusterQueue is a leaf: removing usage
    from it lowers its own usage by exactly that much."""
    held = below.get(id(node)) if below else None
    if held is None:
        return within_nominal(node, frs)
    usage, subtree, less = node.usage, node.subtree, held[1]
    return all(usage.get(fr, 0) - less.get(fr, 0) <= subtree.get(fr, 0) for fr in frs)


def _read(group: list[_Stream], allow_borrowing: bool, frs: list[FR], below: _Pending) -> Iterator[_Candidate]:
    """The candidates of a group, merged across its queues in Kueue's order, skipping every
    queue that can no longer yield a valid candidate in this attempt.

    Only removals happen while an attempt reads (usage only goes down until it ends), and a
    queue's candidates come in ascending priority; so once another queue is within its nominal
    quota, or (borrowing allowed) shows a candidate that may only be reclaimed without
    borrowing, every later candidate of it is invalid too (Kueue's validity check: another
    queue's candidate is valid while that queue and every cohort up to the common ancestor is
    above nominal; `_path_valid` checks the cohorts): dropping the queue skips exactly
    candidates the search would have examined and rejected."""
    heap: list[tuple[_Key, int, int]] = []
    for s, stream in enumerate(group):
        first = stream.at(0)
        if first is not None:
            heap.append((first[0], s, 0))
    heapq.heapify(heap)
    while heap:
        _, s, pos = heap[0]
        stream = group[s]
        candidate = stream.taken[pos][1]
        if not stream.own and (
            (allow_borrowing and candidate.variant == RECLAIM_WITHOUT_BORROWING)
            or _within_nominal(stream.member.node, below, frs)
        ):
            heapq.heappop(heap)
            continue
        following = stream.at(pos + 1)
        if following is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (following[0], s, pos + 1))
        yield candidate


# A ClusterQueue whose workloads may be candidates: (queue, hierarchical advantage, lowest
# common ancestor with the preemptor for the validity check).
_Source = tuple[ClusterQueueState, bool, "QuotaNode | None"]


class _Merged:
    """`_read` of one group, kept as a list for every search that reads it alike (`_Cohort`).

    Every candidate it yields is taken (as a search of a flat cohort takes every one `_read`
    gives it), so its removal is noted in `below` before the next is read: the queue leaves the
    merge once it is within nominal, as in each search. `before`, the evicted group of the
    same attempt, is read to its end first (a search reads it whole before this one anyway; the
    merge does not rely on that)."""

    __slots__ = ("items", "_source", "_below", "_before", "_totals")

    def __init__(self, group: list[_Stream], allow_borrowing: bool, frs: list[FR], below: _Pending,
                 before: _Merged | None) -> None:
        self.items: list[_Candidate] = []
        self._source = _read(group, allow_borrowing, frs, below)
        self._below = below
        self._before = before
        # Once read to the end: the usage of all items per node where each is removed, and the
        # ClusterQueues they come from (by id); None if some item is removed at its own queue.
        self._totals: tuple[_Pending, dict[int, None]] | None | bool = False

    def all_of_others(self, cq: ClusterQueueState) -> tuple[list[_Candidate], _Pending] | None:
        """When no item is of `cq` and none is removed at its own queue: every item, and their
        usage per node where each is removed (not to be changed). Else None."""
        self.at(1 << 62)
        totals = self._totals
        if totals is False:
            totals = self._totals = self._sum()
        if totals is None or isinstance(totals, bool) or id(cq) in totals[1]:
            return None
        return self.items, totals[0]

    def _sum(self) -> tuple[_Pending, dict[int, None]] | None:
        everything: _Pending = {}
        members: dict[int, None] = {}
        for c in self.items:
            at = c.at
            if at is None or at is c.cq.node:
                return None
            assert c.ws.admission is not None
            _note(everything, at, c.ws.admission.usage)
            members[id(c.cq)] = None
        return everything, members

    def at(self, i: int) -> _Candidate | None:
        items = self.items
        while len(items) <= i:
            before = self._before
            if before is not None:
                self._before = None
                before.at(1 << 62)
            c = next(self._source, None)
            if c is None:
                return None
            assert c.ws.admission is not None
            _note(self._below, c.cq.node, c.ws.admission.usage)
            items.append(c)
        return items[i]


class _Groups:
    """The candidates of a flat cohort's reclaimable queues, classified for one kind of
    preemptor: its two groups (evicted, then not) of each attempt, merged once."""

    __slots__ = ("frs", "evicted", "holding", "_merged")

    def __init__(self, evicted: list[_Stream], holding: list[_Stream], frs: list[FR]) -> None:
        self.frs = frs
        self.evicted = evicted
        self.holding = holding
        self._merged: dict[bool, tuple[_Merged, _Merged]] = {}

    def any_besides(self, cq: ClusterQueueState) -> bool:
        return any(s.member is not cq and s.at(0) is not None for group in (self.evicted, self.holding) for s in group)

    def _group(self, evicted: bool, allow_borrowing: bool) -> _Merged:
        merged = self._merged.get(allow_borrowing)
        if merged is None:
            below: _Pending = {}
            first = _Merged(self.evicted, allow_borrowing, self.frs, below, None)
            merged = self._merged[allow_borrowing] = (first, _Merged(self.holding, allow_borrowing, self.frs, below, first))
        return merged[0] if evicted else merged[1]

    def taken_by(self, evicted: bool, allow_borrowing: bool,
                 cq: ClusterQueueState) -> tuple[list[_Candidate], _Pending] | None:
        """All of `read` and their usage per node where each is removed, when the group holds
        none of `cq`'s candidates (`_Merged.all_of_others`); else None."""
        return self._group(evicted, allow_borrowing).all_of_others(cq)

    def read(self, evicted: bool, allow_borrowing: bool, cq: ClusterQueueState) -> Iterator[_Candidate]:
        """The group as `_read` would give it to this preemptor: its own queue is no source."""
        group = self._group(evicted, allow_borrowing)
        i = 0
        while True:
            c = group.at(i)
            if c is None:
                return
            i += 1
            if c.cq is not cq:
                yield c


class _Cohort:
    """A flat cohort (a root whose ClusterQueues over nominal all hang directly under it and
    lend all their quota) while nothing changes: the queues every search of a head in it
    collects (all of them but the head's own), those holding admissions of this event, and
    their candidates per kind of preemptor (`_Groups`).

    Why one merge serves every head: each such queue's candidates are removed at the root
    (`_at`), `_path_valid` is true for all of them, and whether a queue still yields a valid
    candidate depends only on what the search took from that queue itself; so the candidates
    a search reads are the merge of all queues, each up to where it leaves, less its own
    queue's (leaving them out changes no other queue's place or end)."""

    __slots__ = ("root", "members", "admitted_now", "groups")

    def __init__(self, root: QuotaNode, members: list[ClusterQueueState], offset: int) -> None:
        self.root = root
        self.members = members
        self.admitted_now = [m for m in members if m.candidates.admitted_at(offset)]
        self.groups: dict[tuple[object, ...], _Groups] = {}


def max_candidate_priority(policy: str, preemptor: WorkloadState) -> int | None:
    """The highest priority a candidate can have under this policy (None: any); the candidate
    index is read no further."""
    if policy == ANY:
        return None
    if policy == LOWER_OR_NEWER_EQUAL:
        return preemptor.priority
    if policy == LOWER_PRIORITY:
        return preemptor.priority - 1
    return -(1 << 63)  # Never: nothing qualifies


def never_preempts(cq: ClusterQueueState) -> bool:
    """A non-preemptive ClusterQueue: `ClassicalPreemptor.targets` and
    `FairSharingPreemptor.targets` return no target for it, whatever is asked, and neither they
    nor `defer` change anything (the scheduler then skips asking)."""
    policy = cq.spec.preemption
    return policy.within_cluster_queue == NEVER and (cq.node.parent is None or policy.reclaim_within_cohort == NEVER)


class ClassicalPreemptor:
    def __init__(self, state: State) -> None:
        self.state = state
        # Flat cohorts' shared reading, by (root, flavor-resources), while the caller
        # guarantees that no usage and no workload changes (`share_while_unchanged`).
        self._cohorts: dict[tuple[int, tuple[FR, ...]], _Cohort | None] | None = None

    def share_while_unchanged(self) -> None:
        """From now until `stop_sharing`, nothing but these searches touches the quota or the
        workloads (a nomination phase): searches of heads of one flat cohort share their
        reading of it (`_Cohort`)."""
        self._cohorts = {}

    def stop_sharing(self) -> None:
        self._cohorts = None

    def _cohort(self, cq: ClusterQueueState, frs: list[FR]) -> _Cohort | None:
        cohorts = self._cohorts
        root = cq.node.parent
        if cohorts is None or root is None or root.parent is not None:
            return None
        key = (id(root), tuple(frs))
        if key in cohorts:
            return cohorts[key]
        members: list[ClusterQueueState] = []
        cohort: _Cohort | None = None
        for name in over_nominal(root, frs):  # as _collect finds them, the head's own included
            child = root.children[name]
            if not child.is_cluster_queue or child.lending_limit:
                break
            member = self.state.cluster_queues.get(name)
            if member is not None:
                members.append(member)
        else:
            cohort = _Cohort(root, members, self.state.offset)
        cohorts[key] = cohort
        return cohort

    def _groups(self, cohort: _Cohort, cq: ClusterQueueState, ws: WorkloadState, frs: list[FR],
                advantage: bool) -> _Groups:
        """The cohort's candidates classified for this preemptor: `_classify` of another
        queue's candidate reads only these (and `max_candidate_priority` the first two)."""
        spec = cq.spec.preemption
        policy = spec.reclaim_within_cohort
        key = (advantage, policy, ws.priority, ws.queue_time if policy == LOWER_OR_NEWER_EQUAL else None,
               spec.borrow_within_cohort == NEVER, spec.max_priority_threshold)
        groups = cohort.groups.get(key)
        if groups is None:
            made: list[list[_Stream]] = [[], []]
            for evicted in (True, False):
                for member in cohort.members:
                    stream = self._stream(cq, ws, (member, advantage, cohort.root), evicted, frs, False)
                    if stream is not None:
                        made[0 if evicted else 1].append(stream)
            groups = cohort.groups[key] = _Groups(made[0], made[1], frs)
        return groups

    def targets(
        self,
        cq: ClusterQueueState,
        ws: WorkloadState,
        requests: dict[FR, int],
        frs: list[FR],
    ) -> list[Target]:
        if never_preempts(cq):
            return []  # a non-preemptive queue: no candidate can exist
        policy = cq.spec.preemption
        same_queue: list[_Source] = [] if policy.within_cluster_queue == NEVER else [(cq, False, None)]
        cohort = self._cohort(cq, frs) if policy.reclaim_within_cohort != NEVER else None
        shared: _Groups | None = None
        if cohort is None:
            hierarchy, priority = self._cohort_sources(cq, requests, frs)
            self._defer_if_admitted_now(cq, (same_queue, hierarchy, priority))
            shared_kind, advantage = -1, False
        else:
            # What _cohort_sources and _defer_if_admitted_now find, from the shared cohort: its
            # one level gives every queue to hierarchy if the preemptor fits in its own nominal
            # quota, else to priority.
            hierarchy, priority = [], []
            advantage = within_quota(cq.node, requests)
            shared_kind = 0 if advantage else 1
            if (same_queue and cq.candidates.admitted_at(self.state.offset)) or any(
                m is not cq for m in cohort.admitted_now
            ):
                self.state.deferred[cq.name] = None
            # The cohort's candidates, classified for this preemptor (`_groups`), are made when
            # first read: a search that reads none of them (a queue over its nominal quota
            # without borrowWithinCohort only looks at its own) leaves them unmade. Making them
            # reads, and changes, nothing else, and nothing changes during the nomination.
            if shared_kind == 1 and policy.borrow_within_cohort == NEVER and not own_may_yield(cq, ws):
                # No target can be found: the preemptor does not fit in its own nominal quota,
                # so it borrows (the same test, usage + request > subtree quota), and its own
                # queue holds no candidate under its policy. In an attempt with borrowing, the
                # cohort's queues are all priority sources, none valid without
                # borrowWithinCohort (skipped there); in one without, only the preemptor's own
                # victims could end its borrowing (own_too_high), and there are none.
                return []
        # Six groups, read in this order: (evicted, then not) x (hierarchy, priority, own queue),
        # each made when first needed.
        kinds = (hierarchy, priority, same_queue)
        made: list[list[_Stream] | None] = [None] * 6

        def group(g: int) -> list[_Stream]:
            streams = made[g]
            if streams is None:
                made[g] = streams = []
                for source in kinds[g % 3]:
                    stream = self._stream(cq, ws, source, g < 3, frs, source[0] is cq)
                    if stream is not None:
                        streams.append(stream)
            return streams

        forbidden = cq.spec.preemption.borrow_within_cohort == NEVER
        attempts: tuple[bool, ...]
        if forbidden and not self._under_nominal(cq, frs):
            attempts = (True,)
        else:
            if cohort is None:
                any_hierarchy = _any(group(0)) or _any(group(3))
                any_priority = _any(group(1)) or _any(group(4))
            else:
                shared = self._groups(cohort, cq, ws, frs, advantage)
                any_hierarchy = any_priority = shared.any_besides(cq)
                if shared_kind == 0:
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
            chosen: list[_Candidate] = []
            # Without borrowing, the preemptor fits only once its own queue is low enough; other
            # queues' victims never change that, so _fits need not be asked after each of them.
            own_too_high = not allow_borrowing and self._borrows(cq, requests)
            # A victim whose `at` is the common ancestor is removed there, not from its queue:
            # `below` keeps what its queue would have lost, for `_within_nominal`. Meanwhile
            # (own_too_high) such removals wait in `waiting` and are made, added up per node,
            # just before _fits is asked: until then only the queue's own usage is read.
            below: _Pending = {}
            waiting: _Pending = {}
            try:
                for g in range(6):
                    kind = g % 3
                    if allow_borrowing and forbidden and kind == 1:
                        # Without borrowWithinCohort every candidate of the priority groups is
                        # one that may only be reclaimed without borrowing: none is valid here.
                        continue
                    source: Iterator[_Candidate]
                    if cohort is None or kind == 2:
                        if not kinds[kind]:
                            continue
                        source = _read(group(g), allow_borrowing, frs, below)
                        checked = True
                    elif kind != shared_kind:
                        continue
                    else:
                        if shared is None:
                            shared = self._groups(cohort, cq, ws, frs, advantage)
                        if own_too_high:
                            # The loop below would take every candidate of the shared group and,
                            # each being removed at the root rather than at its queue, only note
                            # its usage in `waiting` (own_too_high changes only with a victim of
                            # the preemptor's own queue, and the shared group has none). So take
                            # them all at once, with their usage summed once per cycle. (Only
                            # when the group holds none of the preemptor's own queue: no
                            # subtraction of its part.)
                            taken = shared.taken_by(g < 3, allow_borrowing, cq)
                            if taken is not None:
                                chosen.extend(taken[0])
                                for node, total in taken[1].values():
                                    _note(waiting, node, total)
                                continue
                        source = shared.read(g < 3, allow_borrowing, cq)
                        checked = False  # the shared merge has, for the flat cohort
                    for candidate in source:
                        own = candidate.cq is cq
                        # _read has checked the rest of the validity check for this candidate, now
                        if checked and not own and not _path_valid(candidate, frs):
                            continue
                        chosen.append(candidate)
                        at = candidate.at
                        assert at is not None and candidate.ws.admission is not None
                        usage = candidate.ws.admission.usage
                        if at is not candidate.cq.node:
                            if checked:
                                _note(below, candidate.cq.node, usage)
                            if own_too_high:
                                _note(waiting, at, usage)
                                continue  # _fits would say no, as below
                        at.add_usages(usage, -1)
                        if own:
                            own_too_high = not allow_borrowing and self._borrows(cq, requests)
                        elif own_too_high:
                            continue  # _fits would say no: only the preemptor's own usage decides that
                        if waiting:
                            _apply(waiting, -1)
                        if self._fits(cq, requests, allow_borrowing):
                            chosen = self._fill_back(cq, requests, allow_borrowing, chosen)
                            return [Target(c.ws, VARIANT_REASON[c.variant], c.cq) for c in chosen]
            finally:
                if waiting:
                    _apply(waiting, -1)  # now every victim in `chosen` is removed
                _add_back(chosen, 1)
        return []

    def defer(self, cq: ClusterQueueState, requests: dict[FR, int], frs: list[FR]) -> None:
        """Only the side effect of `targets`: defer the ClusterQueue to the next event when a
        queue it may take from holds a workload admitted by the event being applied (such a
        workload is no candidate now, but may be at the next event). For callers that need no
        targets, only this; it looks at the same queues `targets` does."""
        state = self.state
        if cq.name in state.deferred or never_preempts(cq):
            return
        if id(cq.node.root()) not in state.admitted_roots:
            return  # no queue of its tree, where all its sources are, holds a workload admitted now
        policy = cq.spec.preemption
        same_queue: list[_Source] = [] if policy.within_cluster_queue == NEVER else [(cq, False, None)]
        hierarchy, priority = self._cohort_sources(cq, requests, frs)
        self._defer_if_admitted_now(cq, (same_queue, hierarchy, priority))

    def _defer_if_admitted_now(self, cq: ClusterQueueState, kinds: tuple[list[_Source], ...]) -> None:
        offset = self.state.offset
        for sources in kinds:
            if any(member.candidates.admitted_at(offset) for member, _, _ in sources):
                self.state.deferred[cq.name] = None
                return

    # -- candidates -------------------------------------------------------------------------
    def _classify(self, cq: ClusterQueueState, preemptor: WorkloadState, candidate: WorkloadState,
                  own: bool, frs: list[FR], advantage: bool) -> int:
        if not uses(candidate, frs):
            return 0
        spec = cq.spec.preemption
        policy = spec.within_cluster_queue if own else spec.reclaim_within_cohort
        if not satisfies_policy(preemptor, candidate, policy):
            return 0
        if own:
            return WITHIN_CQ
        if advantage:
            return HIERARCHICAL_RECLAIM
        if spec.borrow_within_cohort == NEVER:
            return RECLAIM_WITHOUT_BORROWING
        threshold = spec.max_priority_threshold
        if candidate.priority >= preemptor.priority or (threshold is not None and candidate.priority > threshold):
            return RECLAIM_WITHOUT_BORROWING
        return RECLAIM_WHILE_BORROWING

    def _stream(self, cq: ClusterQueueState, preemptor: WorkloadState, source: _Source,
                evicted: bool, frs: list[FR], own: bool) -> _Stream | None:
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
        return _Stream(member, own, self._candidates(cq, preemptor, source, walk, frs, own))

    def _candidates(self, cq: ClusterQueueState, preemptor: WorkloadState, source: _Source,
                    walk: Iterator[tuple[int, int, int, str]], frs: list[FR],
                    own: bool) -> Iterator[tuple[_Key, _Candidate]]:
        """The candidates of one queue, in Kueue's order, as far as they are read."""
        member, advantage, lca = source
        workloads = self.state.workloads
        offset = self.state.offset
        at = _at(member.node, lca)
        for place in walk:
            candidate = workloads[place[3]]
            if not preemptible_now(candidate, offset):
                continue
            variant = self._classify(cq, preemptor, candidate, own, frs, advantage)
            if variant:
                yield place, _Candidate(candidate, member, variant, lca, at)

    def _cohort_sources(self, cq: ClusterQueueState, requests: dict[FR, int],
                        frs: list[FR]) -> tuple[list[_Source], list[_Source]]:
        hierarchy: list[_Source] = []
        priority: list[_Source] = []
        if cq.node.parent is None or cq.spec.preemption.reclaim_within_cohort == NEVER:
            return hierarchy, priority
        advantage, remaining = _fit_in_quota(cq.node, requests)
        previous: QuotaNode | None = None
        for subtree in cq.node.ancestors():
            target = hierarchy if advantage else priority
            self._collect(cq, subtree, subtree, previous, frs, advantage, target)
            fits, remaining = _fit_in_quota(subtree, remaining)
            advantage = advantage or fits
            previous = subtree
        return hierarchy, priority

    def _collect(self, cq: ClusterQueueState, node: QuotaNode, subtree_root: QuotaNode,
                 skip: QuotaNode | None, frs: list[FR], advantage: bool, out: list[_Source]) -> None:
        children = node.children
        for name in over_nominal(node, frs):  # the children not within nominal, in name order
            child = children[name]
            if child is skip or child is cq.node:
                continue
            if child.is_cluster_queue:
                member = self.state.cluster_queues.get(name)
                if member is not None:
                    out.append((member, advantage, subtree_root))
            else:
                self._collect(cq, child, subtree_root, skip, frs, advantage, out)

    # -- simulation -------------------------------------------------------------------------
    @staticmethod
    def _under_nominal(cq: ClusterQueueState, frs: list[FR]) -> bool:
        return all(cq.node.usage.get(fr, 0) < cq.node.nominal.get(fr, 0) for fr in frs)

    @staticmethod
    def _borrows(cq: ClusterQueueState, requests: dict[FR, int]) -> bool:
        node = cq.node
        return any(node.borrowing_with(fr, value) for fr, value in requests.items())

    @staticmethod
    def _fits(cq: ClusterQueueState, requests: dict[FR, int], allow_borrowing: bool) -> bool:
        node = cq.node
        for fr, value in requests.items():
            if not allow_borrowing and node.borrowing_with(fr, value):
                return False
            if value > max(0, node.available(fr)):
                return False
        return True

    def _fill_back(self, cq: ClusterQueueState, requests: dict[FR, int], allow_borrowing: bool,
                   chosen: list[_Candidate]) -> list[_Candidate]:
        """Give back, last to first (the last one is needed by construction), every victim the
        preemptor still fits without; Kueue swaps the last element into the freed slot.

        Kueue asks "does it still fit" once per victim. Here runs of victims are given back at
        once: adding usage back never raises what a ClusterQueue has available, nor lowers
        whether it borrows (QuotaNode.available is non-increasing in every usage), so if the
        preemptor fits with a whole run restored, it fits at each step of restoring it one by
        one, and each is given back; a run that does not fit is halved until one victim is
        left, which is kept, as one by one. Runs double after each success (galloping), so a
        search that gives back most of its victims asks _fits a logarithmic number of times."""
        n = len(chosen)
        given = [False] * n
        i = n - 2  # the next victim to decide; those after it are decided
        run = 1
        # After a run that does not fit, the next one (its right half) is already given back:
        # only its left half is removed again. The usage _fits reads is the same sums either
        # way. `restored`: how many victims up to i are given back now.
        restored = 0
        back = _Runs(chosen)
        while i >= 0:
            if run > i + 1:
                run = i + 1
            if restored > run:
                back.move(i - restored + 1, i - run + 1, -1)
            elif restored < run:
                back.move(i - run + 1, i - restored + 1, 1)
            restored = run
            if self._fits(cq, requests, allow_borrowing):
                for j in range(i - run + 1, i + 1):
                    given[j] = True
                i -= run
                run *= 2
                restored = 0
            elif run == 1:
                back.move(i, i + 1, -1)
                i -= 1  # kept
                restored = 0
            else:
                run //= 2
        for i in range(n - 2, -1, -1):  # Kueue's list operations, with the decisions made
            if given[i]:
                chosen[i] = chosen[-1]
                chosen.pop()
        return chosen


_RUNS_MAX_NODES = 4  # more nodes than this: a search gives back as _add_back does


class _Runs:
    """Gives back (or removes again) runs of consecutive victims of one search's `chosen`.

    A give-back walks `chosen` from its end in runs that grow and shrink, so summing each run's
    usage victim by victim (`_add_back`) sums most victims several times. When every victim
    holds one and the same flavor-resource (Kueue's perf configs, most clusters' CPU-only
    cohorts) and they are removed at a few nodes (a flat cohort's common ancestor, the
    preemptor's own queue), each node keeps its victims' positions in `chosen` with running
    sums, built once, and a run's usage at a node is the difference of two of them. The
    additions are `_add_back`'s: one per node the run meets, in the order it first meets them.
    Otherwise it is `_add_back`."""

    __slots__ = ("chosen", "fr", "nodes", "positions", "sums")

    def __init__(self, chosen: list[_Candidate]) -> None:
        self.chosen = chosen
        self.fr: FR | None = None
        self.nodes: list[QuotaNode] = []
        self.positions: list[list[int]] = []  # [node]: where its victims are in chosen
        self.sums: list[list[int]] = []  # [node][j]: the usage of its first j victims
        fr: FR | None = None
        nodes: list[QuotaNode] = []
        positions: list[list[int]] = []
        sums: list[list[int]] = []
        for i, c in enumerate(chosen):
            admission = c.ws.admission
            assert admission is not None
            usage = admission.usage
            if len(usage) != 1:
                return
            if fr is None:
                fr = next(iter(usage))
            value = usage.get(fr)
            if value is None:
                return
            node = c.at or c.cq.node
            g = 0
            while g < len(nodes) and nodes[g] is not node:
                g += 1
            if g == len(nodes):
                if g == _RUNS_MAX_NODES:
                    return
                nodes.append(node)
                positions.append([])
                sums.append([0])
            positions[g].append(i)
            group_sums = sums[g]
            group_sums.append(group_sums[-1] + value)
        self.fr, self.nodes, self.positions, self.sums = fr, nodes, positions, sums

    def move(self, lo: int, hi: int, sign: int) -> None:
        """Restore (1) or remove again (-1) the usage of chosen[lo:hi]."""
        fr = self.fr
        if fr is None:
            _add_back(self.chosen[lo:hi], sign)
            return
        nodes, positions, sums = self.nodes, self.positions, self.sums
        if len(nodes) == 1:
            a, b = _first_at(positions[0], lo), _first_at(positions[0], hi)
            nodes[0].add_usage(fr, sign * (sums[0][b] - sums[0][a]))
            return
        met: list[tuple[int, int, int]] = []  # (first position in the run, node, usage)
        for g in range(len(nodes)):
            at = positions[g]
            a = _first_at(at, lo)
            if a < len(at) and at[a] < hi:
                b = _first_at(at, hi)
                met.append((at[a], g, sums[g][b] - sums[g][a]))
        met.sort()
        for _, g, usage in met:
            nodes[g].add_usage(fr, sign * usage)


def _first_at(positions: list[int], i: int) -> int:
    """bisect_left, compiled: the index of the first position >= i."""
    lo, hi = 0, len(positions)
    while lo < hi:
        mid = (lo + hi) // 2
        if positions[mid] < i:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _add_back(victims: list[_Candidate], sign: int) -> None:
    """Restore (1) or remove again (-1) these victims' usage where the search removed it, one
    addition per node."""
    if len(victims) == 1:
        c = victims[0]
        assert c.ws.admission is not None
        (c.at or c.cq.node).add_usages(c.ws.admission.usage, sign)
        return
    total: _Pending = {}
    for c in victims:
        assert c.ws.admission is not None
        _note(total, c.at or c.cq.node, c.ws.admission.usage)
    _apply(total, sign)


def _at(member: QuotaNode, lca: QuotaNode | None) -> QuotaNode:
    """Where a search removes the usage of a victim from this ClusterQueue: at the common
    ancestor with the preemptor when the queue hangs directly under it and lends all of its
    quota (no lendingLimit, localQuota 0), else at the queue.

    The same for everything the search reads afterwards: the ancestor's usage then changes by
    exactly the victim's usage either way (the queue's usage stays >= 0, all of it visible to
    its parent), so do the ancestors above it; `_fits` reads only the preemptor's queue and its
    ancestors, `_path_valid` only cohorts below a common ancestor. What differs is the queue's
    own usage (and its parent's over-nominal set, read only before a search), which
    `_within_nominal` reads with `below`. A removal at the ancestor walks a shorter path and
    adds up across queues."""
    if lca is not None and member.parent is lca and not member.lending_limit:
        return lca
    return member


def _note(pending: _Pending, node: QuotaNode, usage: dict[FR, int]) -> None:
    held = pending.get(id(node))
    if held is None:
        held = pending[id(node)] = (node, {})
    total = held[1]
    for fr, value in usage.items():
        total[fr] = total.get(fr, 0) + value


def _apply(pending: _Pending, sign: int) -> None:
    for node, total in pending.values():
        node.add_usages(total, sign)
    pending.clear()


def _path_valid(c: _Candidate, frs: list[FR]) -> bool:
    """No cohort between the candidate's ClusterQueue and the common ancestor is within nominal."""
    for node in c.cq.node.ancestors():
        if node is c.lca:
            return True
        if within_nominal(node, frs):
            return False
    return True


def own_may_yield(cq: ClusterQueueState, preemptor: WorkloadState) -> bool:
    """Could the preemptor's own queue give a candidate stream (`ClassicalPreemptor._stream`
    of its own queue, evicted or not)?"""
    policy = cq.spec.preemption.within_cluster_queue
    if policy == NEVER:
        return False
    bound = max_candidate_priority(policy, preemptor)
    return cq.candidates.holds(True, bound) or cq.candidates.holds(False, bound)


def within_quota(node: QuotaNode, requests: dict[FR, int]) -> bool:
    """Do the requests fit in the node's own subtree quota (Kueue's fitInQuota)? Alone on the
    per-search hot path; `_fit_in_quota` adds what remains beyond the node's local quota."""
    subtree, usage = node.subtree, node.usage
    for fr, value in requests.items():
        if subtree.get(fr, 0) < usage.get(fr, 0) + value:
            return False
    return True


def _fit_in_quota(node: QuotaNode, requests: dict[FR, int]) -> tuple[bool, dict[FR, int]]:
    remaining = {fr: max(0, value - node.local_available(fr)) for fr, value in requests.items()}
    return within_quota(node, requests), remaining
