"""Kueue's reason vocabulary, as constants, so messages stay greppable and identical to Kueue's.

Pending reasons are the granular `QuotaReserved=False` reasons Kueue sets with its default
UnadmittedWorkloadsObservability gate; eviction and preemption reasons are those of the
`Evicted` / `Preempted` conditions. Rejection reasons are quotaflow's own: Kueue rejects bad
objects at its webhook, quotaflow rejects bad input events in the log.
"""

from typing import Final

# --- Pending (QuotaReserved=False) reasons -------------------------------------------------
NO_MATCHING_FLAVOR: Final = "NoMatchingFlavor"
EXCEEDS_MAX_QUOTA: Final = "ExceedsMaxQuota"
WAITING_FOR_QUOTA: Final = "WaitingForQuota"
WAITING_FOR_PREEMPTED_WORKLOADS: Final = "WaitingForPreemptedWorkloads"
MISCONFIGURED: Final = "Misconfigured"
SUSPENDED: Final = "Suspended"
PENDING_EVALUATION: Final = "PendingEvaluation"
DEACTIVATED: Final = "Deactivated"
# quotaflow addition: a workload that was never evaluated because workloads ahead of it in a
# StrictFIFO ClusterQueue block it (Kueue leaves such a workload without a condition).
QUEUED: Final = "Queued"

# Severity used to pick one NoFit reason for a workload (Kueue's resolveNoFitReason).
NO_FIT_SEVERITY: Final[dict[str, int]] = {
    WAITING_FOR_QUOTA: 1,
    EXCEEDS_MAX_QUOTA: 2,
    NO_MATCHING_FLAVOR: 3,
}

# --- Preemption reasons --------------------------------------------------------------------
IN_CLUSTER_QUEUE: Final = "InClusterQueue"
IN_COHORT_RECLAMATION: Final = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING: Final = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING: Final = "InCohortFairSharing"

# --- Eviction reasons ----------------------------------------------------------------------
CLUSTER_QUEUE_STOPPED: Final = "ClusterQueueStopped"
LOCAL_QUEUE_STOPPED: Final = "LocalQueueStopped"
EVICTED_DEACTIVATED: Final = "Deactivated"
ADMISSION_CHECK: Final = "AdmissionCheck"

# --- Rejection reasons (quotaflow) ---------------------------------------------------------
MALFORMED_EVENT: Final = "MalformedEvent"
UNKNOWN_EVENT_TYPE: Final = "UnknownEventType"
UNKNOWN_KIND: Final = "UnknownKind"
INVALID_OBJECT: Final = "InvalidObject"
INVALID_WORKLOAD: Final = "InvalidWorkload"
# A field or kind of Kueue's API that quotaflow does not implement (refused, not ignored).
NOT_SUPPORTED: Final = "NotSupported"
DUPLICATE_WORKLOAD: Final = "DuplicateWorkload"
UNKNOWN_WORKLOAD: Final = "UnknownWorkload"
IMMUTABLE_FIELD: Final = "ImmutableField"
NOT_FOUND: Final = "NotFound"
NOT_EVICTED: Final = "NotEvicted"
# The record is over a size, depth or count limit (domain/limits.py); nothing in it was read.
LIMIT_EXCEEDED: Final = "LimitExceeded"
# The event's source may not send it (domain/authority.py): Kubernetes' word for an RBAC refusal.
FORBIDDEN: Final = "Forbidden"

# --- Messages ------------------------------------------------------------------------------
MSG_LQ_MISSING: Final = "LocalQueue {lq} doesn't exist"
MSG_LQ_INACTIVE: Final = "LocalQueue {lq} is inactive"
MSG_CQ_MISSING: Final = "ClusterQueue {cq} doesn't exist"
MSG_CQ_INACTIVE: Final = "ClusterQueue {cq} is inactive"
MSG_NAMESPACE_MISMATCH: Final = "workload namespace doesn't match ClusterQueue selector"
# Kueue pkg/workload/resources.go: ErrInvalidWLResources and RequestsMustNotExceedLimitMessage.
MSG_RESOURCES_VALIDATION_FAILED: Final = "resources validation failed"
MSG_REQUESTS_ABOVE_LIMITS: Final = "requests must not exceed its limits"
MSG_NO_LONGER_FITS: Final = "Workload no longer fits after processing another workload"
MSG_DEACTIVATED: Final = "The workload is deactivated"
MSG_CQ_STOPPED: Final = "The ClusterQueue is stopped"
MSG_LQ_STOPPED: Final = "The LocalQueue is stopped"
MSG_QUEUED_STRICT: Final = (
    "Workload is queued behind {head} in StrictFIFO ClusterQueue {cq}"
)
MSG_NOT_EVALUATED: Final = "The workload ended in its own Batch, before the admission cycle evaluated it"
MSG_FAILED_CHECKS: Final = "The workload has failed admission checks"
MSG_OVERLAPPING_TARGETS: Final = "Workload has overlapping preemption targets with another workload"
MSG_DEFERRED_FIT: Final = (
    "Workload has overlapping preemption targets with another workload, but will fit after these "
    "preemptions complete"
)
MSG_QUEUED_BEHIND_PREEMPTOR: Final = (
    "Workload is queued behind {head}, which waits for preempted workloads in ClusterQueue {cq}"
)
MSG_PENDING_PREEMPTION: Final = "{message}. Pending the preemption of {count} workload(s)"

# Time-driven rules (Kueue's apis/kueue/v1beta2/workload_types.go and workload controller).
PODS_READY_TIMEOUT: Final = "PodsReadyTimeout"
MSG_PODS_READY_TIMEOUT: Final = "Exceeded the PodsReady timeout {key}"
MSG_MAX_EXEC_EXCEEDED: Final = "The workload is deactivated due to exceeding the maximum execution time"
MSG_REQUEUING_LIMIT_EXCEEDED: Final = (
    "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
)
WAITING_FOR_PODS_READY: Final = "WaitingForPodsReady"
MSG_WAITING_FOR_PODS_READY: Final = "waiting for all admitted workloads to be in PodsReady condition"
NOT_ADMITTED: Final = "NotAdmitted"
