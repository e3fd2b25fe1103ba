"""The typed Python client: write input events, read decisions, on either log.

    async with Client("kafka://localhost:9092") as qf:      # or "sqlite:///quotaflow.db"
        await qf.apply(cluster_queue)                      # ConfigApplied
        offset = await qf.submit(workload)                 # WorkloadSubmitted
        await qf.submit_jobs([job_manifest])               # a Kueue-integrated job -> its Workload(s)
        await qf.finish("team-a", "job-1")                 # WorkloadFinished
        await qf.delete("ClusterQueue", "team-a-cq")       # ConfigDeleted
        async for decision in qf.decisions():              # domain.decisions structs, in order
            ...

Every write method returns the input log offset of the event it appended: decisions caused by
it carry that offset as `cause.offset`. Events are written as the contract's JSON with the
CloudEvents headers of `streams.log.envelope`; the client never adds fields to an event (an `id` or
`time` is included only when given), so what the engine folds is exactly what the caller passed.
Objects may be dicts (as parsed from Kueue YAML) or msgspec Structs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Literal, Self

import msgspec

from domain.decisions import AnyDecision, decode
from streams.log import EventLog, Record, Topics, open_log
from streams.log.envelope import event_message
from streams.settings import Settings

# kubectl-style names for kinds (lower case, plural, short) -> the Kind
KIND_ALIASES: dict[str, str] = {}
for _kind, _short in (
    ("ResourceFlavor", "rf"),
    ("ClusterQueue", "cq"),
    ("LocalQueue", "lq"),
    ("Cohort", None),
    ("WorkloadPriorityClass", "wpc"),
    ("AdmissionCheck", None),
    ("Namespace", "ns"),
    ("PriorityClass", "pc"),  # Kubernetes' (scheduling.k8s.io/v1)
    ("Configuration", None),
    ("Workload", "wl"),
):
    for alias in (_kind, _kind.lower(), _kind.lower() + "s", _short):
        if alias:
            KIND_ALIASES[alias] = _kind
KIND_ALIASES["namespaces"] = "Namespace"
KIND_ALIASES["workloadpriorityclasses"] = "WorkloadPriorityClass"
KIND_ALIASES["priorityclasses"] = "PriorityClass"

Event = Mapping[str, Any]


def canonical_kind(kind: str) -> str:
    return KIND_ALIASES.get(kind, KIND_ALIASES.get(kind.lower(), kind))


def _plain(obj: Any) -> Any:
    if isinstance(obj, msgspec.Struct):
        return msgspec.to_builtins(obj)
    return obj


def _envelope(event: dict[str, Any], id: str | None, time: str | None) -> dict[str, Any]:
    if id is not None:
        event["id"] = id
    if time is not None:
        event["time"] = time
    return event


def _object_of(event: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    kind = event.get("type")
    if kind == "ConfigApplied" and isinstance(event.get("object"), dict):
        return event["object"].get("kind"), event["object"]
    if kind in ("WorkloadSubmitted", "WorkloadUpdated") and isinstance(event.get("workload"), dict):
        return "Workload", event["workload"]
    return None, None


def _deletes(event: dict[str, Any], kind: str, name: str, namespace: str | None) -> bool:
    if event.get("name") != name:
        return False
    if event.get("type") == "WorkloadDeleted":
        return kind == "Workload" and (namespace is None or event.get("namespace") == namespace)
    if event.get("type") == "ConfigDeleted":
        return event.get("kind") == kind and (namespace is None or event.get("namespace") in (None, namespace))
    return False


class Client:
    def __init__(
        self,
        broker_url: str | None = None,
        *,
        settings: Settings | None = None,
        log: EventLog | None = None,
        source: str = "/quotaflow/client",
        create_topics: bool = True,
    ) -> None:
        self.settings = settings or Settings.from_env()
        self.topics = Topics.from_settings(self.settings)
        self.log = log or open_log(broker_url or self.settings.broker_url, self.settings)
        self.source = source
        self._create_topics = create_topics
        self._started = False

    async def start(self) -> None:
        if self._started:
            return
        await self.log.start()
        if self._create_topics:
            await self.log.ensure_topics(self.topics.specs(), single_partition=[self.topics.input, self.topics.decisions])
        self._started = True

    async def close(self) -> None:
        await self.log.close()
        self._started = False

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- writing ---------------------------------------------------------------------------------
    async def publish(self, event: Event | bytes) -> int:
        """Append one input event (a contract event object, or raw bytes as they are)."""
        return (await self.publish_many([event]))[0]

    async def publish_many(self, events: Iterable[Event | bytes]) -> list[int]:
        """Append events in order (one round trip); returns their offsets."""
        await self.start()
        messages = [event_message(e if isinstance(e, bytes) else _plain(e), source=self.source) for e in events]
        return await self.log.append(self.topics.input, messages) if messages else []

    async def apply(self, obj: Any, *, id: str | None = None, time: str | None = None) -> int:
        """`ConfigApplied`: create or replace a Kueue object (ClusterQueue, LocalQueue, ...)."""
        return await self.publish(_envelope({"type": "ConfigApplied", "object": _plain(obj)}, id, time))

    async def delete(
        self, kind: str, name: str, namespace: str | None = None, *, id: str | None = None, time: str | None = None
    ) -> int:
        """`ConfigDeleted` for a configuration kind, `WorkloadDeleted` for kind Workload."""
        kind = canonical_kind(kind)
        if kind == "Workload":
            event: dict[str, Any] = {"type": "WorkloadDeleted", "namespace": namespace or "default", "name": name}
        else:
            event = {"type": "ConfigDeleted", "kind": kind, "name": name}
            if namespace is not None:
                event["namespace"] = namespace
        return await self.publish(_envelope(event, id, time))

    async def submit(self, workload: Any, *, id: str | None = None, time: str | None = None) -> int:
        """`WorkloadSubmitted`: a Kueue Workload asks for admission."""
        return await self.publish(_envelope({"type": "WorkloadSubmitted", "workload": _plain(workload)}, id, time))

    async def submit_jobs(self, manifests: Iterable[Mapping[str, Any]], *, naming: Any = None) -> list[int]:
        """`WorkloadSubmitted` for the Workloads Kueue's integrations build from job manifests
        (Job, JobSet, PyTorchJob, RayJob, Pod and pod groups, ...; a Workload passes as it is),
        in one append; returns their offsets. Nothing is published when any manifest is refused:
        JobsRefused lists each with its reason. `naming` (streams.importers.kueue_jobs.Naming)
        fixes generated names, for tests."""
        from streams.importers.kueue_jobs import JobsRefused, convert_documents

        result = convert_documents(
            ((f"manifest {i + 1}", m) for i, m in enumerate(manifests)), naming=naming
        )
        if result.refused:
            raise JobsRefused(result.refused)
        return await self.publish_many({"type": "WorkloadSubmitted", "workload": w} for w in result.workloads)

    async def workloads_owned_by(self, kind: str, namespace: str, name: str) -> list[str]:
        """Names of the workloads in the input log that the job `kind` `namespace/name` owns (as
        its Workload's ownerReferences record), in the order first submitted, without those
        deleted since. Reads the whole input log."""
        import json

        from streams.importers.kueue_jobs import owned_by

        await self.start()
        names: dict[str, None] = {}
        for record in await self.log.read_all(self.topics.input):
            try:
                event = json.loads(record.value or b"")
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            workload = event.get("workload")
            if event.get("type") == "WorkloadSubmitted" and isinstance(workload, dict) and owned_by(workload, kind, namespace, name):
                names[str((workload.get("metadata") or {}).get("name"))] = None
            elif event.get("type") == "WorkloadDeleted" and event.get("namespace") == namespace:
                names.pop(str(event.get("name")), None)
        return list(names)

    async def update(self, workload: Any, *, id: str | None = None, time: str | None = None) -> int:
        """`WorkloadUpdated`: the whole Workload again, with changed mutable fields."""
        return await self.publish(_envelope({"type": "WorkloadUpdated", "workload": _plain(workload)}, id, time))

    async def finish(self, namespace: str, name: str, *, id: str | None = None, time: str | None = None) -> int:
        """`WorkloadFinished`: the workload completed; its quota is released."""
        return await self.publish(_envelope({"type": "WorkloadFinished", "namespace": namespace, "name": name}, id, time))

    async def release(self, namespace: str, name: str, *, id: str | None = None, time: str | None = None) -> int:
        """`WorkloadReleased`: an evicted or preempted workload's pods are gone."""
        return await self.publish(_envelope({"type": "WorkloadReleased", "namespace": namespace, "name": name}, id, time))

    async def pods_ready(
        self, namespace: str, name: str, *, ready: bool = True, id: str | None = None, time: str | None = None
    ) -> int:
        """`WorkloadPodsReady`: an admitted workload's pods are ready (waitForPodsReady waits for
        it); `ready=False`: a pod was lost and they are not ready any more."""
        event: dict[str, Any] = {"type": "WorkloadPodsReady", "namespace": namespace, "name": name}
        if not ready:
            event["ready"] = False
        return await self.publish(_envelope(event, id, time))

    async def admission_check(
        self,
        namespace: str,
        name: str,
        check: str,
        state: Literal["Pending", "Ready", "Retry", "Rejected"],
        message: str | None = None,
    ) -> int:
        """`AdmissionCheckStateChanged`: an admission check controller reports."""
        event: dict[str, Any] = {
            "type": "AdmissionCheckStateChanged",
            "namespace": namespace,
            "name": name,
            "check": check,
            "state": state,
        }
        if message is not None:
            event["message"] = message
        return await self.publish(event)

    async def stop_queue(self, kind: str, name: str, namespace: str | None = None, *, policy: str = "HoldAndDrain") -> int:
        """`ConfigApplied` of a ClusterQueue or LocalQueue as last applied, with spec.stopPolicy
        `policy` (HoldAndDrain, Hold, or None to resume), as kueuectl's stop and resume do."""
        kind = canonical_kind(kind)
        obj = await self.latest_object(kind, name, namespace)
        if obj is None:
            raise LookupError(f"{kind.lower()}/{namespace + '/' if namespace else ''}{name} is not in the input log")
        obj.setdefault("spec", {})["stopPolicy"] = policy
        return await self.apply(obj)

    async def update_workload(self, namespace: str, name: str, change: Mapping[str, Any]) -> int:
        """`WorkloadUpdated`: the workload as last submitted or updated, with `change` merged
        into its spec (e.g. {"active": False}, {"priority": 10})."""
        obj = await self.latest_object("Workload", name, namespace)
        if obj is None:
            raise LookupError(f"workload/{namespace}/{name} is not in the input log")
        obj.setdefault("spec", {}).update(change)
        return await self.update(obj)

    # -- reading ---------------------------------------------------------------------------------
    async def latest_object(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object as the input log last set it (applied, submitted or updated), or None when
        it was never set or was deleted since. Reads the whole input log."""
        import json

        kind = canonical_kind(kind)
        await self.start()
        found: dict[str, Any] | None = None
        for record in await self.log.read_all(self.topics.input):
            try:
                event = json.loads(record.value or b"")
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            kind_of, obj = _object_of(event)
            if obj is not None:
                meta = obj.get("metadata") or {}
                if (
                    kind_of == kind
                    and meta.get("name") == name
                    and (namespace is None or (meta.get("namespace") or "default") == namespace)
                ):
                    found = obj
            elif _deletes(event, kind, name, namespace):
                found = None
        return found

    async def decision_records(
        self, *, start: int | Literal["beginning", "end"] = "beginning", follow: bool = True
    ) -> AsyncIterator[tuple[Record, AnyDecision | None]]:
        """(record, decoded decision) from the decision log; the decision is None if this client
        cannot decode it (a decision type newer than this client)."""
        await self.start()
        topic = self.topics.decisions
        if start == "beginning":
            first = 0
        elif start == "end":
            first = await self.log.end_offset(topic)
        else:
            first = start
        end = None if follow else await self.log.end_offset(topic)
        async with await self.log.reader(topic, first) as reader:
            while end is None or reader.position < end:
                for record in await reader.read(timeout=0.5):
                    if end is not None and record.offset >= end:
                        return
                    try:
                        decision: AnyDecision | None = decode(record.value or b"")
                    except msgspec.DecodeError:
                        decision = None
                    yield record, decision

    async def decisions(
        self, *, start: int | Literal["beginning", "end"] = "beginning", follow: bool = True
    ) -> AsyncIterator[AnyDecision]:
        """The decisions, in order, as `domain.decisions` structs; with `follow`, forever."""
        async for _, decision in self.decision_records(start=start, follow=follow):
            if decision is not None:
                yield decision
