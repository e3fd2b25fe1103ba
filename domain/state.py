"""The engine's state: what the input log has folded into so far.

Plain containers only; the rules that change them live in `engine.py` (event handling) and
`scheduler.py` (the admission cycle). Every mapping here is a dict, iterated in insertion order or
sorted, never a set iterated into a decision: Python's per-process string hashing must not reach
the output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from domain.admission_fair_sharing import UsageLedger
from domain.candidate_index import CandidateIndex
from domain.decisions import PodSetAssignment
from domain.flavor_assigner import Assignment, Plans
from domain.objects import (
    AdmissionCheckSpec,
    ClusterQueueSpec,
    CohortSpec,
    Configuration,
    LocalQueueSpec,
    PodPriorityClass,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
)
from domain.queues import OrderKey, PendingQueue, Status
from domain.quota import FR, QuotaNode
from domain.timers import Timers
from domain.workload import WorkloadSpec

LQKey = tuple[str, str]  # (namespace, name)


@dataclass(slots=True)
class Admission:
    cluster_queue: str
    pod_sets: list[PodSetAssignment]
    usage: dict[FR, int]
    sequence: tuple[int, int]  # (input offset, decision index): "admitted most recently" order
    # Admission checks that apply, by name -> state (Pending, Ready, Retry, Rejected). The
    # workload holds quota from the reservation; it is Admitted once every check is Ready.
    checks: dict[str, str] = field(default_factory=dict)
    admitted: bool = True


@dataclass(slots=True)
class WorkloadState:
    spec: WorkloadSpec
    seq: int  # position in the input log (offset × 2^16 + index within a Batch)
    queue_time: int  # what orders it in its queue (Kueue's GetQueueOrderTimestamp)
    priority: int
    order_key: OrderKey
    cluster_queue: str | None = None  # ClusterQueue whose queue holds it, or that admitted it
    queued: bool = False
    admission: Admission | None = None
    last_status: Status | None = None
    parked_on: str | None = None  # key in State.parked while it waits for a missing object
    # Evicted (or preempted) but still holding its quota until its pods are gone (WorkloadReleased).
    evicted: bool = False
    # The input offset that last preempted it (-1: none), and the offset whose admission of it
    # came after a preemption by that same offset (-1: none): no victim within that offset
    # (preemption.policy.preemptible_now). Compared with the offset being applied only, so a
    # snapshot (taken between events) need not keep them.
    preempted_at: int = -1
    shielded_at: int = -1
    # (input offset, flavor scan progress) of a cycle that skipped it because another entry took
    # its room: its next assignment in that offset resumes the scan (scheduler.Scheduler.assign).
    # The progress is None once that assignment used it: the answer it holds came from a scan
    # that skipped earlier flavors, and its next assignment scans afresh.
    resume_flavors: tuple[int, list[dict[str, int]] | None] | None = None
    # Its creation's queue time while an eviction's time orders it instead (an admission check's
    # Retry, a PodsReady timeout with `timestamp: Eviction`); None otherwise. Kueue reads the
    # eviction time only while that Evicted condition stands, and a new quota reservation resets
    # it (pkg/workload/workload.go SetQuotaReservation, GetQueueOrderTimestamp).
    created_queue_time: int | None = None
    # The input offset in which a cycle met only its failed first flavor scan, leaving the
    # resumed scan that works to the next cycle (scheduler.Scheduler._deferred); -1: none. Once
    # per offset, so that an event's cycles reach a fixed point. Compared with the offset being
    # applied only, so a snapshot need not keep it.
    deferred_at: int = -1

    @property
    def key(self) -> str:
        return cast(str, self.order_key[3])  # spec.key, already built: the order key ends with it

    @property
    def uid(self) -> str:
        return self.spec.uid or self.spec.key

    @property
    def job_uid(self) -> str:
        return dict(self.spec.labels).get("kueue.x-k8s.io/job-uid", "UNKNOWN")


@dataclass(slots=True)
class ClusterQueueState:
    spec: ClusterQueueSpec
    node: QuotaNode
    queue: PendingQueue
    groups: dict[str, ResourceGroup]  # covered resource -> its resource group
    quotas: dict[FR, ResourceQuota] = field(default_factory=dict)  # spec.quotas(), kept with spec
    admitted: dict[str, None] = field(default_factory=dict)  # workloads holding quota here
    candidates: CandidateIndex = field(default_factory=CandidateIndex)  # the same, in preemption order
    active: bool = True
    inactive_message: str = ""
    terminating: bool = False
    sticky: str | None = None  # BestEffortFIFO: the workload that last issued preemptions
    # Kueue's preemptor workload (pkg/cache/queue/cluster_queue.go, preemptorWorkload): the
    # workload that last issued preemptions here, kept until it leaves the queue (admitted,
    # deleted, moved) or another preemptor replaces it, also while it waits parked after a
    # failure; `sticky` is the same workload only while it heads the queue waiting for victims.
    preemptor: str | None = None
    # Flavor-assignment plans for `groups` (flavor_assigner._plan): derived, never serialized.
    plans: Plans = field(default_factory=dict)
    # Flavor assignments kept across events (scheduler.Scheduler._kept_across): per pod-sets
    # tuple (by id; the tuple kept), the usage they read and the assignment; and what of the
    # configuration they were made under (objects compared by identity). Derived, never serialized.
    assignments: dict[int, tuple[object, tuple[int, ...], Assignment]] = field(default_factory=dict)
    assignments_made_under: tuple[object, ...] = ()
    assignments_height: int = -1  # the cohort's tree height they were made under
    # The flavor-resources whose usage they read (scheduler.Scheduler._usage_read), found at
    # the configuration epoch `assignments_epoch` (-1: not yet).
    assignments_reads: list[FR] = field(default_factory=list)
    assignments_epoch: int = -1
    # Classical search answers kept across events (preemption.classical.ClassicalPreemptor
    # `targets`): per what a search reads of its preemptor and its requests, the configuration
    # epoch and the tree's candidate changes they were found under, and the targets by name. Derived,
    # never serialized.
    searches: dict[tuple[object, ...], tuple[int, int, tuple[object, ...]]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(slots=True)
class CohortState:
    node: QuotaNode
    spec: CohortSpec | None = None  # None: implicit, named by a member only


@dataclass(slots=True)
class State:
    flavors: dict[str, ResourceFlavor] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueueState] = field(default_factory=dict)
    cohorts: dict[str, CohortState] = field(default_factory=dict)
    local_queues: dict[LQKey, LocalQueueSpec] = field(default_factory=dict)
    priority_classes: dict[str, int] = field(default_factory=dict)
    pod_priority_classes: dict[str, PodPriorityClass] = field(default_factory=dict)  # scheduling.k8s.io
    admission_checks: dict[str, AdmissionCheckSpec] = field(default_factory=dict)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    configuration: Configuration = field(default_factory=Configuration)
    # The raw config objects in force, by "Kind/name" (or "Kind/namespace/name"), in the order
    # first applied: what a snapshot stores to rebuild the configuration exactly.
    objects: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    workloads: dict[str, WorkloadState] = field(default_factory=dict)
    finished: dict[str, None] = field(default_factory=dict)  # names stay taken until deleted
    # Workloads waiting for a missing or stopped LocalQueue ("lq:ns/name") or a missing
    # ClusterQueue ("cq:name"), in arrival order.
    parked: dict[str, dict[str, None]] = field(default_factory=dict)
    by_local_queue: dict[LQKey, dict[str, None]] = field(default_factory=dict)
    by_priority_class: dict[str, dict[str, None]] = field(default_factory=dict)
    ready: dict[str, None] = field(default_factory=dict)  # ClusterQueues that may have a head to try
    # ClusterQueues whose sticky preemptor sleeps until its victims' quota comes back.
    waiting_preemptors: dict[str, None] = field(default_factory=dict)
    # ClusterQueues with a head that could not preempt a workload admitted by the same event:
    # they try again at the next input event, whatever it is (see preemption.policy.preemptible_now).
    deferred: dict[str, None] = field(default_factory=dict)
    seen_ids: set[str] = field(default_factory=set)  # membership only; never iterated
    clock: int = 0  # latest event time seen (µs), for workloads that carry no timestamp
    offset: int = -1  # the input offset being applied (not part of snapshots: set per event)
    # Roots (by id) of the cohort trees where the event being applied admitted a workload: where
    # none did, no ClusterQueue of the tree holds one admitted by this event (not part of
    # snapshots: cleared per event, and a restored admission is always from an earlier one).
    admitted_roots: dict[int, None] = field(default_factory=dict)
    # How many configuration objects were applied or deleted (or queues' activeness refreshed):
    # what is kept while it stays reads the configuration as it was (not part of snapshots).
    config_epoch: int = 0
    # Admission fair sharing: each LocalQueue's decayed usage (domain/admission_fair_sharing.py).
    afs: UsageLedger = field(default_factory=UsageLedger)
    # Deadlines the log's time fires, and what the time-driven rules keep (domain/timers.py).
    timers: Timers = field(default_factory=Timers)

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        labels = self.namespaces.get(namespace)
        if labels is None:
            return {"kubernetes.io/metadata.name": namespace}
        return labels
