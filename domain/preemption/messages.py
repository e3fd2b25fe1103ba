"""The message a preempted workload's decision carries, worded as Kueue words it."""

from __future__ import annotations

from domain import reasons
from domain.preemption.policy import Target
from domain.state import ClusterQueueState, WorkloadState

HUMAN_REASON = {
    reasons.IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    reasons.IN_COHORT_RECLAMATION: "reclamation within the cohort",
    reasons.IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    reasons.IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}


def cq_path(cq: ClusterQueueState) -> str:
    parts = [cq.name] + [node.name for node in cq.node.ancestors()]
    return "/" + "/".join(reversed(parts))


def preemption_message(preemptor: WorkloadState, preemptor_cq: ClusterQueueState, target: Target) -> str:
    return (
        f"Preempted to accommodate a workload (UID: {preemptor.uid}, JobUID: {preemptor.job_uid}) due to "
        f"{HUMAN_REASON.get(target.reason, 'UNKNOWN')}; preemptor path: {cq_path(preemptor_cq)}; "
        f"preemptee path: {cq_path(target.cq)}"
    )
