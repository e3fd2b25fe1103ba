"""The fold's configuration, following the engine's `Applied` decisions.

Whether a configuration event took effect, and whether it created, replaced or deleted its
object, is the decision log's word (`Applied`; a refused one is `Rejected` and changes nothing).
What the object says -- quotas, LocalQueue -> ClusterQueue, cohorts, priority values -- is read
from the input event the decision names (`cause.offset`, and `events[batchIndex]` in a Batch),
parsed with the engine's own parser (`domain.objects.parse_object`), so it means exactly what it
means to the engine. Nothing here decides whether an object is valid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from domain.admission_fair_sharing import USAGE_BASED
from domain.fields import InvalidInput
from domain.objects import (
    AdmissionCheckSpec,
    ClusterQueueSpec,
    CohortSpec,
    Configuration,
    LocalQueueSpec,
    NamespaceSpec,
    PodPriorityClass,
    ResourceFlavor,
    WorkloadPriorityClass,
    parse_object,
)
from domain.priority import apply_pod_priority_class
from domain.timestamps import TimestampError, parse_time
from projections.local_queue_usage import LocalQueueUsage
from projections.records import Applied
from projections.view_model import ClusterQueueView, LQKey, OrderKey

if TYPE_CHECKING:
    from projections.view_model import WorkloadView

CREATED = "created"
DELETED = "deleted"


class ConfigFollower:
    """The configuration half of `Projection` (projections/fold.py holds the state)."""

    if TYPE_CHECKING:
        flavors: dict[str, ResourceFlavor]
        cluster_queues: dict[str, ClusterQueueView]
        cohorts: dict[str, CohortSpec]
        cohort_raw: dict[str, Mapping[str, Any]]
        flavor_raw: dict[str, Mapping[str, Any]]
        config_created: dict[tuple[str, str, str], int]
        event_time_us: int
        local_queues: dict[LQKey, LocalQueueSpec]
        priority_classes: dict[str, int]
        pod_priority_classes: dict[str, PodPriorityClass]
        lq_usage: LocalQueueUsage
        clock: int
        admission_checks: dict[str, AdmissionCheckSpec]
        namespaces: dict[str, dict[str, str]]
        configuration: Configuration
        workloads: dict[str, WorkloadView]
        by_priority_class: dict[str, dict[str, None]]

        def _anomaly(self, text: str) -> None: ...
        def _dequeue(self, wv: WorkloadView) -> None: ...
        def _reroute(self, wv: WorkloadView) -> None: ...
        def _reroute_lq(self, key: LQKey) -> None: ...
        def _reroute_cq(self, name: str) -> None: ...

    def _follow_config(self, raw: Mapping[str, Any], applied: Applied) -> None:
        """A `ConfigApplied` or `ConfigDeleted` event the engine decided `applied`."""
        identity = (applied.kind, applied.namespace or "", applied.name or "")
        if applied.action == DELETED:
            if applied.kind != "ClusterQueue":  # one lingers while workloads hold its quota
                self.config_created.pop(identity, None)
            self._delete_object(applied.kind, applied.name or "", applied.namespace)
            return
        raw_object = raw.get("object")
        try:
            obj = parse_object(raw_object)
        except InvalidInput as exc:
            self._anomaly(f"{applied.kind} {applied.name}: applied by the engine, unreadable to the fold: {exc}")
            return
        assert isinstance(raw_object, Mapping)
        if applied.action == CREATED:
            self.config_created[identity] = self._created_at(raw_object)
        self._apply_object(obj, raw_object)

    def _created_at(self, raw_object: Mapping[str, Any]) -> int:
        """An object's creation time for AGE: its own creationTimestamp when it carries one (an
        object imported from a cluster), else the time of the event the engine decided `created`
        for (its `time`, else its record's). Re-applying an object keeps it; deleting and applying
        it again starts a new one, as Kubernetes would."""
        metadata = raw_object.get("metadata")
        stamp = metadata.get("creationTimestamp") if isinstance(metadata, Mapping) else None
        if stamp is not None:
            try:
                return parse_time(stamp)
            except TimestampError:
                pass  # the engine does not read it either: the event's time stands
        return self.event_time_us

    def _apply_object(self, obj: Any, raw_object: Mapping[str, Any]) -> None:
        if isinstance(obj, ResourceFlavor):
            self.flavors[obj.name] = obj
            self.flavor_raw[obj.name] = raw_object
        elif isinstance(obj, ClusterQueueSpec):
            self._apply_cluster_queue(obj, raw_object)
        elif isinstance(obj, LocalQueueSpec):
            key = (obj.namespace, obj.name)
            old = self.local_queues.get(key)
            self.local_queues[key] = obj
            self.lq_usage.local_queue_applied(key, self.clock)
            if old is None or old.stop_policy != obj.stop_policy:
                self._reroute_lq(key)
        elif isinstance(obj, CohortSpec):
            self.cohorts[obj.name] = obj
            self.cohort_raw[obj.name] = raw_object
        elif isinstance(obj, WorkloadPriorityClass):
            self.priority_classes[obj.name] = obj.value
            for wl in list(self.by_priority_class.get(obj.name, {})):
                wv = self.workloads[wl]
                if wv.spec.priority is None and wv.priority != obj.value:
                    self._dequeue(wv)
                    wv.priority = obj.value
                    self._reroute(wv)
        elif isinstance(obj, AdmissionCheckSpec):
            self.admission_checks[obj.name] = obj
        elif isinstance(obj, PodPriorityClass):
            try:
                apply_pod_priority_class(self.pod_priority_classes, obj)
            except InvalidInput as exc:
                self._anomaly(f"PriorityClass {obj.name}: applied by the engine, refused by the fold: {exc}")
        elif isinstance(obj, NamespaceSpec):
            self.namespaces[obj.name] = dict(obj.labels)
        elif isinstance(obj, Configuration):
            self._configuration(obj)

    def _configuration(self, configuration: Configuration) -> None:
        self.configuration = configuration
        self.lq_usage.configuration(configuration, list(self.local_queues), self.clock)
        for cq in self.cluster_queues.values():
            self._fair_order(cq)

    def _fair_order(self, cq: ClusterQueueView) -> None:
        """Order cq's pending workloads by LocalQueue usage first where the engine does
        (admission fair sharing)."""
        fair = self.lq_usage.enabled and cq.spec.admission_mode == USAGE_BASED
        if fair != (cq.pending.rank is not None):
            cq.pending.set_rank(self._usage_rank if fair else None)

    def _usage_rank(self, key: OrderKey) -> Any:
        lq = self.workloads[key[3]].lq
        spec = self.local_queues.get(lq)
        return self.lq_usage.rank(lq, 1000 if spec is None else spec.fair_weight, self.clock)

    def _apply_cluster_queue(self, spec: ClusterQueueSpec, raw_object: Mapping[str, Any]) -> None:
        cq = self.cluster_queues.get(spec.name)
        if cq is None:
            cq = ClusterQueueView(spec.name, spec, raw_object, spec.quotas())
            self.cluster_queues[spec.name] = cq
            self._fair_order(cq)
            self._reroute_cq(spec.name)
        else:
            cq.spec = spec
            cq.raw = raw_object
            cq.quotas = spec.quotas()
            cq.terminating = False
            self._fair_order(cq)

    def _delete_object(self, kind: str, name: str, namespace: str | None) -> None:
        if kind == "ClusterQueue":
            cq = self.cluster_queues.get(name)
            if cq is None:
                self._anomaly(f"ClusterQueue {name}: deleted by the engine, unknown to the fold")
                return
            cq.terminating = True  # it lingers, inactive, while workloads hold its quota
            if not cq.holders:
                self._remove_cluster_queue(cq)
        elif kind == "LocalQueue":
            key = (namespace or "default", name)
            self.local_queues.pop(key, None)
            self.lq_usage.local_queue_deleted(key)
            self._reroute_lq(key)
        elif kind == "ResourceFlavor":
            self.flavors.pop(name, None)
            self.flavor_raw.pop(name, None)
        elif kind == "Cohort":
            self.cohorts.pop(name, None)
            self.cohort_raw.pop(name, None)
        elif kind == "WorkloadPriorityClass":
            self.priority_classes.pop(name, None)
        elif kind == "AdmissionCheck":
            self.admission_checks.pop(name, None)
        elif kind == "Namespace":
            self.namespaces.pop(name, None)
        elif kind == "PriorityClass":
            self.pod_priority_classes.pop(name, None)
        elif kind == "Configuration":
            self._configuration(Configuration())

    def _remove_cluster_queue(self, cq: ClusterQueueView) -> None:
        # The workloads that waited in it now wait for a ClusterQueue that does not exist (taken out
        # now, so that a ClusterQueue applied again in the same event starts empty).
        waiting = [self.workloads[order[3]] for order in cq.pending]
        for wv in waiting:
            self._dequeue(wv)
        self.cluster_queues.pop(cq.name, None)
        self.config_created.pop(("ClusterQueue", "", cq.name), None)
        for wv in waiting:
            self._reroute(wv)
