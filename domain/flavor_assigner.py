"""Flavor assignment: which ResourceFlavor each pod set gets, per resource group, and how it fits.

Mirrors Kueue's flavorassigner: pod sets in spec order; per (pod set, resource group) one flavor,
tried in the ClusterQueue's order; each flavor is classified per resource (fit, preempt or no fit,
with the borrowing level), the worst resource represents the flavor, and flavorFungibility decides
whether to stop or try the next flavor. Reasons from every tried flavor are kept, sorted, joined
as Kueue joins them, so a Kueue user reads the same pending messages.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import TypeVar

from domain import reasons
from domain.objects import (
    PREEMPTION_OVER_BORROWING,
    TRY_NEXT_FLAVOR,
    ClusterQueueSpec,
    FlavorFungibility,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
)
from domain.quantity import format_amount
from domain.quota import FR, QuotaNode, borrowing_level, fr_key
from domain.selectors import node_affinity_matches
from domain.workload import PodSet, WorkloadSpec

# Granular modes, worst to best (Kueue: noFit < noCandidates < preempt < reclaim < fit).
NO_FIT = 0
NO_CANDIDATES = 1
PREEMPT = 2
RECLAIM = 3
FIT = 4

# The external vocabulary, ordered NoFit < Preempt < Fit.
MODE_NO_FIT = "NoFit"
MODE_PREEMPT = "Preempt"
MODE_FIT = "Fit"


def external_mode(granular: int) -> str:
    if granular == FIT:
        return MODE_FIT
    if granular == NO_FIT:
        return MODE_NO_FIT
    return MODE_PREEMPT


# The result types below are plain slotted classes rather than dataclasses: several are built
# for every head tried in every cycle, and dataclass initialisers (frozen ones, default
# factories) cost several times a plain __init__.
class GranularMode:
    """How a flavor (or one resource of it) fits: granular mode and borrowing level. Never
    mutated once built."""

    __slots__ = ("mode", "borrow")

    def __init__(self, mode: int, borrow: int) -> None:
        self.mode = mode
        self.borrow = borrow

    def __repr__(self) -> str:
        return f"GranularMode(mode={self.mode}, borrow={self.borrow})"


BEST = GranularMode(FIT, 0)
WORST = GranularMode(NO_FIT, 1 << 30)

# A preemption oracle answers: with this much requested of this flavor-resource, could
# preemption make room? It returns the granular mode (RECLAIM, PREEMPT or NO_CANDIDATES)
# and the borrowing level once the victims are gone.
PreemptionOracle = Callable[[FR, int], tuple[int, int]]


def no_preemption(fr: FR, value: int) -> tuple[int, int]:
    return NO_CANDIDATES, 0


def is_preferred(a: GranularMode, b: GranularMode, fungibility: FlavorFungibility) -> bool:
    if a.mode == NO_FIT:
        return False
    if b.mode == NO_FIT:
        return True
    a_none = a.mode == NO_CANDIDATES
    b_none = b.mode == NO_CANDIDATES
    if a_none != b_none:
        return not a_none
    if fungibility.preference == PREEMPTION_OVER_BORROWING:
        if a.borrow != b.borrow:
            return a.borrow < b.borrow
        return a.mode > b.mode
    if a.mode != b.mode:
        return a.mode > b.mode
    return a.borrow < b.borrow


def should_try_next_flavor(rep: GranularMode, fungibility: FlavorFungibility) -> bool:
    if rep.mode in (NO_FIT, NO_CANDIDATES):
        return True
    if rep.mode in (PREEMPT, RECLAIM) and fungibility.when_can_preempt == TRY_NEXT_FLAVOR:
        return True
    return rep.borrow > 0 and fungibility.when_can_borrow == TRY_NEXT_FLAVOR


class PodSetResult:
    __slots__ = ("name", "count", "requests", "flavors", "modes", "borrows", "reasons", "fits")

    def __init__(self, name: str, count: int, requests: dict[str, int]) -> None:
        self.name = name
        self.count = count
        self.requests = requests  # pod-set totals, by resource
        self.flavors: dict[str, str] = {}
        self.modes: dict[str, int] = {}  # granular mode per resource
        self.borrows: dict[str, int] = {}  # borrowing level per resource
        self.reasons: list[str] = []
        self.fits = True

    def message(self) -> str:
        return ", ".join(sorted(self.reasons))


class Assignment:
    __slots__ = ("pod_sets", "mode", "borrowing", "usage", "no_fit_reason", "tried")

    def __init__(self, pod_sets: list[PodSetResult]) -> None:
        self.pod_sets = pod_sets
        self.mode = MODE_FIT
        self.borrowing = 0
        self.usage: dict[FR, int] = {}
        self.no_fit_reason = ""
        # Per pod set that got flavors, per resource group (by its first resource in the plan):
        # the index of the flavor the scan stopped at, -1 when it reached the group's last one
        # (Kueue's LastTriedFlavorIdx).
        self.tried: list[dict[str, int]] = []

    def pending_flavors(self) -> bool:
        """Kueue's AssignmentClusterQueueState.PendingFlavors: some scan stopped before the
        last flavor of its group."""
        return any(idx != -1 for per_group in self.tried for idx in per_group.values())

    def message(self) -> str:
        parts = [
            f"couldn't assign flavors to pod set {ps.name}: {ps.message()}"
            for ps in self.pod_sets
            if ps.reasons and (not ps.fits or self.mode != MODE_FIT)
        ]
        return "; ".join(parts)

    def preempt_frs(self) -> list[FR]:
        """The flavor-resources that need preemption, in a stable order."""
        out: list[FR] = []
        for ps in self.pod_sets:
            for res in sorted(ps.flavors):
                if ps.modes.get(res, FIT) != FIT:
                    fr = (ps.flavors[res], res)
                    if fr not in out:
                        out.append(fr)
        return out


class FlavorAssigner:
    """Assigns flavors for one workload in one ClusterQueue against the current quota tree."""

    __slots__ = (
        "cq", "node", "groups", "flavors", "oracle", "can_preempt_while_borrowing", "quotas", "flat_parent", "plans",
    )

    def __init__(
        self,
        cq: ClusterQueueSpec,
        node: QuotaNode,
        resource_groups: Mapping[str, ResourceGroup],
        flavors: Mapping[str, ResourceFlavor],
        oracle: PreemptionOracle | None = no_preemption,
        can_preempt_while_borrowing: bool = False,
        quotas: Mapping[FR, ResourceQuota] | None = None,
        plans: Plans | None = None,
    ) -> None:
        self.cq = cq
        self.node = node
        self.groups = resource_groups
        self.flavors = flavors
        self.oracle = oracle
        self.can_preempt_while_borrowing = can_preempt_while_borrowing
        self.quotas = cq.quotas() if quotas is None else quotas
        self.plans = plans
        # The usual ClusterQueue: in a flat cohort, with no lending or borrowing limits. Its
        # available() is the cohort's free quota (see QuotaNode.available), read inline in _fits.
        parent = node.parent
        self.flat_parent = (
            parent
            if parent is not None and parent.parent is None and not node.lending_limit and not node.borrowing_limit
            else None
        )

    def assign(self, wl: WorkloadSpec, counts: list[int] | None = None,
               resume: list[dict[str, int]] | None = None) -> Assignment:
        """One flavor scan. `resume`: a previous scan's `tried`; each pod set's resource groups
        start after the flavor it stopped at (Kueue's LastTriedFlavorIdx, KEP 582: workload.go
        NextFlavorToTryForPodSetResource), the others at the first flavor."""
        result = Assignment(pod_sets=[])
        usage = result.usage
        # The assignment's mode is the lowest mode of any assigned resource, whatever the
        # borrowing: Kueue's Assignment.RepresentativeMode (flavorassigner.go) takes the minimum
        # of its pod sets' flavor modes. (Ranking by the fungibility preference instead let a
        # resource that fits by borrowing hide, under PreemptionOverBorrowing, one that needs
        # preemption: a "Fit" that the admission check then refused in every cycle.)
        worst_mode = FIT
        severity = 0
        borrowing = 0
        tracks_pods = "pods" in self.groups
        for i, ps in enumerate(wl.pod_sets):
            count = ps.count if counts is None else counts[i]
            # The pod set's requests times count (a fresh dict: "pods" may be added to it).
            requests = dict(ps.per_pod) if count == 1 else {res: q * count for res, q in ps.per_pod}
            if tracks_pods:
                requests["pods"] = count
            psr = PodSetResult(ps.name, count, requests)
            result.pod_sets.append(psr)
            tried: dict[str, int] = {}
            starts = resume[i] if resume is not None and i < len(resume) else None
            failed_reason = self._assign_pod_set(ps, psr, usage, starts, tried)
            if failed_reason is None:
                result.tried.append(tried)
            modes, borrows = psr.modes, psr.borrows
            for res, flavor in psr.flavors.items():  # borrows has the same keys
                fr = fr_key(flavor, res)
                usage[fr] = usage.get(fr, 0) + requests.get(res, 0)
                mode, borrow = modes[res], borrows[res]
                if borrow > borrowing:
                    borrowing = borrow
                if mode < worst_mode:
                    worst_mode = mode
            if failed_reason is not None:
                psr.fits = False
                worst_mode = NO_FIT
                severity = max(severity, reasons.NO_FIT_SEVERITY.get(failed_reason, 0))
                break
        result.mode = external_mode(worst_mode)
        result.borrowing = borrowing  # the highest level of any assigned resource
        if result.mode == MODE_NO_FIT:
            result.no_fit_reason = _BY_SEVERITY.get(severity, reasons.WAITING_FOR_QUOTA)
        elif result.mode == MODE_PREEMPT:
            result.no_fit_reason = reasons.WAITING_FOR_QUOTA
        return result

    def _assign_pod_set(self, ps: PodSet, psr: PodSetResult, assigned: dict[FR, int],
                        starts: dict[str, int] | None, tried: dict[str, int]) -> str | None:
        """Fill psr; return the NoFit reason if some resource group found no flavor. Each group's
        scan starts after the flavor `starts` names for it (by the group's first resource), and
        where it stopped goes to `tried`."""
        requests = psr.requests
        for res, group, covered in _plan(self.groups, requests, self.plans):
            if group is None:
                if requests[res] == 0:
                    continue
                psr.reasons.append(f"resource {res} unavailable in ClusterQueue")
                return reasons.NO_MATCHING_FLAVOR
            start = starts.get(res, -1) + 1 if starts is not None else 0
            failed = self._find_flavor(ps, group, covered, requests, assigned, psr, start, tried, res)
            if failed is not None:
                return failed
        return None

    def _find_flavor(
        self,
        ps: PodSet,
        group: ResourceGroup,
        covered: tuple[str, ...],
        requests: dict[str, int],
        assigned: dict[FR, int],
        psr: PodSetResult,
        start: int = 0,
        tried: dict[str, int] | None = None,
        first: str = "",
    ) -> str | None:
        """One flavor for the group's resources `covered` (sorted) among the pod set's requests,
        added to psr with its reasons; returns the NoFit reason if no flavor was found. The scan
        starts at flavor index `start`; where it stopped is recorded in `tried[first]`."""
        fungibility = self.cq.flavor_fungibility
        reasons_out: list[str] = []
        best: dict[str, str] | None = None  # the chosen flavor's resources, their modes and levels
        best_modes: dict[str, int] | None = None
        best_borrows: dict[str, int] | None = None
        best_mode = WORST
        least_severe = 0
        flavors = self.flavors
        group_flavors = group.flavors
        attempted = -1
        for idx in range(start, len(group_flavors)):
            attempted = idx
            fname = group_flavors[idx].name
            rf = flavors.get(fname)
            if rf is not None and not rf.node_taints and not ((ps.node_selector or ps.node_affinity) and rf.node_labels):
                problem = None  # nothing that could make it ineligible (see _eligibility)
            else:
                problem = self._eligibility(ps, fname)
            if problem is not None:
                reasons_out.append(problem)
                least_severe = _less_severe(least_severe, reasons.NO_MATCHING_FLAVOR)
                continue
            rep = BEST
            flavor_reason = 0
            chosen: dict[str, str] = {}
            modes: dict[str, int] = {}
            # Each resource keeps its own borrowing level, not the representative mode's: Kueue's
            # FlavorAssignment.borrow (flavorassigner.go findFlavorForPodSets), whose maximum is
            # the assignment's Borrowing (Assignment.append), the classical order's first key. A
            # resource that needs preemption without borrowing stands for the flavor while another
            # of it fits only by borrowing: the entry borrows all the same.
            levels: dict[str, int] = {}
            for res in covered:
                fr = fr_key(fname, res)
                mode, borrow, text, no_fit = self._fits(fr, assigned.get(fr, 0), requests[res])
                if text:
                    reasons_out.append(text)
                if no_fit:
                    flavor_reason = max(flavor_reason, reasons.NO_FIT_SEVERITY[no_fit])
                if mode != FIT or borrow != 0:  # a perfect fit is never preferred over rep
                    candidate = GranularMode(mode, borrow)
                    if is_preferred(rep, candidate, fungibility):
                        rep = candidate
                if rep.mode == NO_FIT:
                    continue
                chosen[res] = fname
                modes[res] = mode
                levels[res] = borrow
            if rep is BEST:
                # Every resource fits without borrowing: should_try_next_flavor(BEST) is false
                # whatever the fungibility, so the flavor is taken as below, one call sooner.
                best, best_modes, best_borrows, best_mode = chosen, modes, levels, rep
                break
            if rep.mode == NO_FIT and flavor_reason:
                least_severe = _less_severe(least_severe, _reason_of(flavor_reason))
            if not should_try_next_flavor(rep, fungibility):
                best, best_modes, best_borrows, best_mode = chosen, modes, levels, rep
                break
            if is_preferred(rep, best_mode, fungibility):
                best, best_modes, best_borrows, best_mode = chosen, modes, levels, rep
        # A flavor ranked as a borrowing fit may hold a resource that needs preemption (under
        # PreemptionOverBorrowing): its reasons say why, as for any flavor that needs it.
        if best_mode.mode != FIT or (best_modes is not None and any(m != FIT for m in best_modes.values())):
            psr.reasons.extend(reasons_out)
        if not best or best_modes is None or best_borrows is None:
            return _reason_of(least_severe) if least_severe else reasons.WAITING_FOR_QUOTA
        if tried is not None:
            tried[first] = -1 if attempted == len(group_flavors) - 1 else attempted
        psr.flavors.update(best)
        psr.modes.update(best_modes)
        psr.borrows.update(best_borrows)
        return None

    def _fits(self, fr: FR, assumed: int, request: int) -> tuple[int, int, str, str]:
        """Kueue's fitsResourceQuota: (granular mode, borrowing level, reason text, NoFit reason)."""
        node = self.node
        value = assumed + request
        parent = self.flat_parent
        if parent is not None:
            # A flat cohort's ClusterQueue without limits: its parent is the root, so
            # borrowing_level is 0 within its own subtree quota and the root's height beyond it,
            # and potential_available is the root's subtree quota (the formulas, unrolled).
            usage = node.usage.get(fr, 0)
            available = parent.subtree.get(fr, 0) - parent.usage.get(fr, 0)
            if usage < 0:
                available -= usage
            if available < 0:
                available = 0
            within = usage + value <= node.subtree.get(fr, 0)
            if value <= available:
                return _FIT_NO_BORROWING if within else (FIT, parent.tree_height, "", "")
            capacity = parent.subtree.get(fr, 0)
            if within:
                borrow, may_reclaim = 0, True
            else:
                borrow, may_reclaim = parent.tree_height, False
        else:
            available = node.available(fr)
            if available < 0:
                available = 0
            if value <= available:
                if node.parent is None or node.usage.get(fr, 0) + value <= node.subtree.get(fr, 0):
                    return _FIT_NO_BORROWING  # borrowing_level is 0 without borrowing
                return FIT, borrowing_level(node, fr, value)[0], "", ""
            capacity = node.potential_available(fr)
            borrow, may_reclaim = -1, False  # computed below, once the capacity allows it
        flavor, res = fr
        if value > capacity:
            text = (
                f"insufficient quota for {res} in flavor {flavor}, previously considered podsets "
                f"requests ({format_amount(res, assumed)}) + current podset request "
                f"({format_amount(res, request)}) > maximum capacity ({format_amount(res, capacity)})"
            )
            return NO_FIT, 0, text, reasons.EXCEEDS_MAX_QUOTA
        if parent is None:
            borrow, may_reclaim = borrowing_level(node, fr, value)
        text = (
            f"insufficient unused quota for {res} in flavor {flavor}, "
            f"{format_amount(res, value - available)} more needed"
        )
        quota = self.quotas.get(fr)
        nominal = quota.nominal if quota is not None else 0
        if nominal >= value or may_reclaim or self.can_preempt_while_borrowing:
            oracle = self.oracle
            if oracle is None:
                # No preemption can help (the caller's word): no candidates, at the borrowing
                # level it needs as it stands, which is `borrow` (borrowing_level of this value).
                return NO_CANDIDATES, borrow, text, ""
            mode, borrow_after = oracle(fr, value)
            return mode, borrow_after, text, "" if mode != NO_FIT else reasons.WAITING_FOR_QUOTA
        return NO_FIT, borrow, text, reasons.WAITING_FOR_QUOTA

    def _eligibility(self, ps: PodSet, fname: str) -> str | None:
        rf = self.flavors.get(fname)
        if rf is None:
            return f"flavor {fname} not found"
        for taint in rf.node_taints:
            if taint.effect not in ("NoSchedule", "NoExecute"):
                continue
            if not any(t.tolerates(taint) for t in ps.tolerations + rf.tolerations):
                return f"untolerated taint {{{taint.key} {taint.value} {taint.effect} <nil>}} in flavor {fname}"
        # Kueue's flavorSelector: only the keys this flavor labels count, for the nodeSelector and
        # for required node affinity alike.
        if (ps.node_selector or ps.node_affinity) and rf.node_labels:
            labels = dict(rf.node_labels)
            for key, value in ps.node_selector:
                if key in labels and labels[key] != value:
                    return f"flavor {fname} doesn't match node affinity"
            if ps.node_affinity and not node_affinity_matches(ps.node_affinity, labels):
                return f"flavor {fname} doesn't match node affinity"
        return None


_FIT_NO_BORROWING = (FIT, 0, "", "")

_BY_SEVERITY = {v: k for k, v in reasons.NO_FIT_SEVERITY.items()}

# A pod set visits its resources in resource_order; each resource group is tried once, at its
# first resource, for the group's covered resources that the pod set requests (sorted by name);
# a resource no group covers fails the pod set unless its request is 0. That plan depends only
# on the ClusterQueue's groups and the requested resource names, which come in a handful of
# combinations, so it is computed once per combination. The groups mapping is rebuilt on every
# ClusterQueue change; the plan keeps it alive, so its id is not reused while the plan is kept.
# A caller may keep the plans of one ClusterQueue itself (`plans`, by requested names): a small
# memo beside the ClusterQueue's own state rather than entries of a global one spread over
# memory (with thousands of ClusterQueues, reading those missed the CPU caches). Either memo
# keeps the groups mapping each plan was made for and answers only for that very mapping.
Plan = list[tuple[str, "ResourceGroup | None", tuple[str, ...]]]
Plans = dict[tuple[str, ...], tuple[Mapping[str, ResourceGroup], Plan]]
_PLANS: dict[tuple[int, tuple[str, ...]], tuple[Mapping[str, ResourceGroup], Plan]] = {}
_PLANS_LIMIT = 4096
_OWN_PLANS_LIMIT = 64


def _plan(groups: Mapping[str, ResourceGroup], requests: dict[str, int], plans: Plans | None = None) -> Plan:
    names = tuple(requests)
    if plans is None:
        return _memo(_PLANS, (id(groups), names), _PLANS_LIMIT, groups, requests)
    return _memo(plans, names, _OWN_PLANS_LIMIT, groups, requests)


_K = TypeVar("_K", bound=Hashable)


def _memo(store: dict[_K, tuple[Mapping[str, ResourceGroup], Plan]], key: _K, limit: int,
          groups: Mapping[str, ResourceGroup], requests: dict[str, int]) -> Plan:
    cached = store.get(key)
    if cached is not None and cached[0] is groups:
        return cached[1]
    plan = _make_plan(groups, requests)
    if len(store) >= limit:
        store.clear()
    store[key] = (groups, plan)
    return plan


def _make_plan(groups: Mapping[str, ResourceGroup], requests: dict[str, int]) -> Plan:
    plan: Plan = []
    seen: list[ResourceGroup] = []
    for res in sorted(requests, key=resource_order):
        group = groups.get(res)
        if group is None:
            plan.append((res, None, ()))
        elif not any(g is group for g in seen):
            seen.append(group)
            plan.append((res, group, tuple(sorted(r for r in group.covered if r in requests))))
    return plan


_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_ORDER: dict[str, tuple[int, str]] = {}


def resource_order(name: str) -> tuple[int, str]:
    """Kueue's iteration order over a pod set's requests: by the 64-bit FNV-1a hash of the
    resource name, then the name. It decides which failing resource group a message names."""
    key = _ORDER.get(name)
    if key is None:
        h = _FNV_OFFSET
        for byte in name.encode():
            h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
        key = _ORDER[name] = (h, name)
    return key


def _less_severe(current: int, reason: str) -> int:
    sev = reasons.NO_FIT_SEVERITY[reason]
    return sev if current == 0 else min(current, sev)


def _reason_of(severity: int) -> str:
    for reason, sev in reasons.NO_FIT_SEVERITY.items():
        if sev == severity:
            return reason
    return reasons.WAITING_FOR_QUOTA
