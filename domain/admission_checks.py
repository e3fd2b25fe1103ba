"""The admission-check state machine: what an `AdmissionCheckStateChanged` does to a workload
holding a quota reservation, as Kueue's workload controller and scheduler do
(pkg/controller/core/workload_controller.go, `reconcileCheckBasedEviction` and
`syncAdmittedCondition`; pkg/workload/admissionchecks.go).

- `Pending`: nothing changes.
- `Ready`: once every check of the reservation is Ready, the workload is `Admitted`.
- `Retry`: the workload is evicted (reason `AdmissionCheck`) and, its quota back, queued again
  by its eviction time: behind the others.
- `Rejected`: the workload is deactivated and evicted.

Which checks a reservation carries is decided when quota is reserved (lifecycle.admit).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from domain import local_queue_usage, reasons
from domain.decisions import Admitted, Applied
from domain.emitter import Emitter
from domain.fields import Fields, InvalidInput
from domain.lifecycle import evict, order_by_eviction
from domain.names import subdomain_problem
from domain.objects import checked
from domain.state import State
from domain.workload_events import UPDATED, lookup

CHECK_STATES = ("Pending", "Ready", "Retry", "Rejected")
CONDITION_MESSAGE_MAX = 32768  # a Kubernetes condition's message


def retry_queue_time(queue_time: int, clock: int) -> int:
    """Kueue requeues a Retry-evicted workload by its eviction time (the log's clock): behind
    the others, until it reserves quota again (lifecycle.order_by_creation)."""
    return max(queue_time, clock)


def check_state_changed(state: State, raw: Mapping[str, Any], out: Emitter, batch_index: int | None) -> None:
    key = lookup(raw)
    ws = state.workloads.get(key)
    if ws is None:
        raise InvalidInput(reasons.UNKNOWN_WORKLOAD, f"workload {key} not found")
    f = Fields(raw, "", reasons.MALFORMED_EVENT)
    check = f.str("check")
    checked(f, "check", check, subdomain_problem(check))
    new_state = f.enum("state", CHECK_STATES, "Pending")
    message = f.str("message", "")
    if len(message) > CONDITION_MESSAGE_MAX:
        raise f.fail("message", f"Too long: may not be more than {CONDITION_MESSAGE_MAX} bytes")
    admission = ws.admission
    if admission is None or ws.evicted or check not in admission.checks:
        raise InvalidInput(
            reasons.NOT_FOUND,
            f"admission check {check!r} is not pending on workload {key} (it holds no quota reservation "
            "that this check applies to)",
        )
    # Its own outcome: the Workload's check state is updated (Pending, or Ready while other
    # checks wait, changes nothing another decision shows).
    namespace, _, name = key.partition("/")
    out.emit(Applied, kind="Workload", name=name, namespace=namespace, action=UPDATED, batchIndex=batch_index)
    admission.checks[check] = new_state
    detail = f'"{check}" ({message})' if message else f'"{check}"'
    if new_state == "Ready":
        if not admission.admitted and all(v == "Ready" for v in admission.checks.values()):
            admission.admitted = True
            local_queue_usage.admitted(state, ws)
            out.emit(Admitted, key, clusterQueue=admission.cluster_queue, podSetAssignments=admission.pod_sets)
    elif new_state == "Retry":
        order_by_eviction(ws, retry_queue_time(ws.queue_time, state.clock))
        evict(state, out, ws, reasons.ADMISSION_CHECK, f"Evicted due to AdmissionCheck in Retry state: {detail}")
    elif new_state == "Rejected":
        ws.spec = msgspec.structs.replace(ws.spec, active=False)
        evict(
            state, out, ws, reasons.ADMISSION_CHECK,
            f"The workload is deactivated due to AdmissionCheck in Rejected state: {detail}",
        )
