"""The admission cycle, run to a fixed point after every input event.

One cycle, as Kueue's scheduler does it: take the head of every ClusterQueue that may have one
(heads), evaluate each against the current quota (nominate: flavor assignment), order the entries
(no borrowing first, then priority, then queue time), and process them in that order against the
same, updated quota: admit what still fits, park what cannot fit, requeue what lost its room to an
entry processed earlier in the cycle. Cycles repeat until no ClusterQueue has a head to try.

Termination: in every cycle the first entry is processed against exactly the quota it was
nominated on, so it is admitted or parked; parked heads only come back through `wake_tree`.
"""

from __future__ import annotations

from dataclasses import dataclass

from domain import reasons
from domain.decisions import PodSetAssignment
from domain.emitter import Emitter
from domain.flavor_assigner import MODE_FIT, MODE_NO_FIT, Assignment, FlavorAssigner
from domain.lifecycle import admit, set_pending
from domain.objects import ANY
from domain.quantity import format_amount
from domain.quota import FR
from domain.state import Admission, ClusterQueueState, State, WorkloadState


@dataclass(slots=True)
class Entry:
    cq: ClusterQueueState
    ws: WorkloadState
    assignment: Assignment

    def order(self) -> tuple[int, int, int, int]:
        return (self.assignment.borrowing, -self.ws.priority, self.ws.queue_time, self.ws.seq)


def assigner_for(state: State, cq: ClusterQueueState) -> FlavorAssigner:
    return FlavorAssigner(cq.spec, cq.node, cq.groups, state.flavors)


def heads(state: State) -> list[tuple[ClusterQueueState, WorkloadState]]:
    out: list[tuple[ClusterQueueState, WorkloadState]] = []
    for name in sorted(state.ready):
        cq = state.cluster_queues.get(name)
        key = cq.queue.head() if cq is not None and cq.active else None
        if cq is None or key is None:
            del state.ready[name]
            continue
        out.append((cq, state.workloads[key[3]]))
    return out


def schedule(state: State, out: Emitter) -> None:
    while True:
        batch = heads(state)
        if not batch:
            return
        run_cycle(state, out, batch)


def run_cycle(
    state: State, out: Emitter, batch: list[tuple[ClusterQueueState, WorkloadState]]
) -> None:
    entries: list[Entry] = []
    for cq, ws in batch:
        if not cq.spec.namespace_selector.matches(state.namespace_labels(ws.spec.namespace)):
            status = (reasons.MISCONFIGURED, reasons.MSG_NAMESPACE_MISMATCH)
            cq.queue.park_head(status, blocks=False)
            set_pending(state, out, ws, status)
            continue
        entries.append(Entry(cq, ws, assigner_for(state, cq).assign(ws.spec)))
    entries.sort(key=Entry.order)

    reserved: list[tuple[ClusterQueueState, dict[FR, int]]] = []
    for entry in entries:
        cq, ws, assignment = entry.cq, entry.ws, entry.assignment
        if assignment.mode == MODE_NO_FIT:
            _park(state, out, entry, (assignment.no_fit_reason, assignment.message()))
            continue
        if assignment.mode != MODE_FIT:
            # Preemption would be needed and no victims can be had.
            _park(state, out, entry, (reasons.WAITING_FOR_QUOTA, assignment.message()))
            if cq.spec.preemption.reclaim_within_cohort != ANY:
                hold = _capacity_to_reserve(cq, assignment)
                cq.node.add_usages(hold)
                reserved.append((cq, hold))
            continue
        if not _fits(cq, assignment):
            # Another entry of this cycle took the room; try again next cycle.
            set_pending(state, out, ws, (reasons.WAITING_FOR_QUOTA, reasons.MSG_NO_LONGER_FITS))
            continue
        admit(state, out, cq, ws, _admission(cq, assignment, out))
    for cq, hold in reserved:
        cq.node.add_usages(hold, -1)


def _park(state: State, out: Emitter, entry: Entry, status: tuple[str, str]) -> None:
    entry.cq.queue.park_head(status)
    set_pending(state, out, entry.ws, status)


def _fits(cq: ClusterQueueState, assignment: Assignment) -> bool:
    node = cq.node
    return all(value <= max(0, node.available(fr)) for fr, value in assignment.usage.items())


def _capacity_to_reserve(cq: ClusterQueueState, assignment: Assignment) -> dict[FR, int]:
    """Kueue's reserveCapacityForUnreclaimablePreempt: keep lower-ranked entries off the quota
    this workload is waiting for, for the rest of the cycle."""
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
