"""The fields of every object quotaflow reads, per kind and API version, as Kubernetes' API server
decodes them strictly: a field that is not in the schema is refused (`strict decoding error:
unknown field "spec.frobnicate"`), and a field of Kueue's API that quotaflow does not implement is
refused as not supported rather than accepted and ignored.

A schema is a tree: a dict maps each known field name to the schema of its value; `ListOf(s)` is a
list whose items follow `s`; `ANY` is a value that is not walked (a map of labels or resources,
whose keys are data, not field names, or a subtree quotaflow never reads and that cannot change an
admission, such as a container's probes); `Refused(why)` is a field of the API that quotaflow does
not implement, refused when set (`allowed` names the values that mean "off"). The field sets follow
Kueue's apis/kueue/v1beta1 and v1beta2 Go types and apis/config (their json tags), and
k8s.io/api/core/v1 for pod templates. CONTRACT.md, "Kueue's API, field by field", says the same per
field, with the reasons.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, Union

from domain import reasons
from domain.fields import InvalidInput
from domain.names import shown

KUEUE_GROUP: Final = "kueue.x-k8s.io"
CONFIG_GROUP: Final = "config.kueue.x-k8s.io"
SCHEDULING_GROUP: Final = "scheduling.k8s.io"
V1BETA1: Final = "v1beta1"
V1BETA2: Final = "v1beta2"
# Unknown fields listed in one message at most (the API server lists them all; a record of a
# thousand unknown fields must not make a huge decision).
UNKNOWN_SHOWN: Final = 10


class _Any:
    __slots__ = ()


ANY: Final = _Any()


class ListOf:
    __slots__ = ("item",)

    def __init__(self, item: Node) -> None:
        self.item = item


class Refused:
    """A field of Kueue's API that quotaflow does not implement. `allowed(value)`: the value
    leaves the feature off, so accepting it changes nothing."""

    __slots__ = ("why", "allowed")

    def __init__(self, why: str, allowed: Callable[[Any], bool] | None = None) -> None:
        self.why = why
        self.allowed = allowed


Node = Union[dict[str, "Node"], ListOf, _Any, Refused]
Schema = dict[str, Node]


# --- Kubernetes' common types -----------------------------------------------------------------
OBJECT_META: Final[Schema] = {
    field: ANY
    for field in (
        "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
        "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
        "annotations", "ownerReferences", "finalizers", "managedFields",
    )
}
LABEL_SELECTOR: Final[Schema] = {
    "matchLabels": ANY,
    "matchExpressions": ListOf({"key": ANY, "operator": ANY, "values": ANY}),
}
TOLERATION: Final[Schema] = {f: ANY for f in ("key", "operator", "value", "effect", "tolerationSeconds")}
TAINT: Final[Schema] = {f: ANY for f in ("key", "value", "effect", "timeAdded")}

_DRA = Refused(
    "dynamic resource allocation (DRA) claims are not supported: quotaflow cannot count the devices "
    "a claim asks for"
)
_NODE_SELECTOR_REQUIREMENT: Final[Schema] = {"key": ANY, "operator": ANY, "values": ANY}
_AFFINITY: Final[Schema] = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": ListOf({
                "matchExpressions": ListOf(_NODE_SELECTOR_REQUIREMENT),
                # Kueue's flavor assigner drops matchFields (they name nodes, not labels).
                "matchFields": ListOf(_NODE_SELECTOR_REQUIREMENT),
            }),
        },
        # Preferences never make a flavor ineligible in Kueue (kube-scheduler weighs them).
        "preferredDuringSchedulingIgnoredDuringExecution": ANY,
    },
    "podAffinity": ANY,
    "podAntiAffinity": ANY,
}
_RESOURCES: Final[Schema] = {"limits": ANY, "requests": ANY, "claims": _DRA}
# What kube-scheduler and the kubelet read and Kueue's quota does not: accepted, not walked.
_CONTAINER_OPAQUE = (
    "image", "command", "args", "workingDir", "ports", "envFrom", "env", "resizePolicy",
    "restartPolicyRules", "volumeMounts", "volumeDevices", "livenessProbe", "readinessProbe",
    "startupProbe", "lifecycle", "terminationMessagePath", "terminationMessagePolicy",
    "imagePullPolicy", "securityContext", "stdin", "stdinOnce", "tty",
)
CONTAINER: Final[Schema] = {
    "name": ANY,
    "resources": _RESOURCES,
    "restartPolicy": ANY,  # Always: a sidecar (pod_requests.py)
    **{f: ANY for f in _CONTAINER_OPAQUE},
}
_POD_OPAQUE = (
    "volumes", "ephemeralContainers", "restartPolicy", "terminationGracePeriodSeconds",
    "activeDeadlineSeconds", "dnsPolicy", "serviceAccountName", "serviceAccount",
    "automountServiceAccountToken", "nodeName", "hostNetwork", "hostPID", "hostIPC",
    "shareProcessNamespace", "securityContext", "imagePullSecrets", "hostname", "subdomain",
    "schedulerName", "hostAliases", "priority", "dnsConfig", "readinessGates", "runtimeClassName",
    "enableServiceLinks", "preemptionPolicy", "topologySpreadConstraints", "setHostnameAsFQDN",
    "os", "hostUsers", "schedulingGates", "hostnameOverride", "workloadRef",
)
POD_SPEC: Final[Schema] = {
    "containers": ListOf(CONTAINER),
    "initContainers": ListOf(CONTAINER),
    "nodeSelector": ANY,
    "affinity": _AFFINITY,
    "tolerations": ListOf(TOLERATION),
    "priorityClassName": ANY,
    "overhead": ANY,
    "resources": _RESOURCES,
    "resourceClaims": _DRA,
    **{f: ANY for f in _POD_OPAQUE},
}
POD_TEMPLATE: Final[Schema] = {"metadata": OBJECT_META, "spec": POD_SPEC}


def _top(spec: Node, **extra: Node) -> Schema:
    return {"apiVersion": ANY, "kind": ANY, "metadata": OBJECT_META, "spec": spec, "status": ANY, **extra}


# --- Kueue's kinds ------------------------------------------------------------------------------
_TAS = "topology-aware scheduling (TAS) is not supported"
_RESOURCE_GROUPS: Final = ListOf({
    "coveredResources": ANY,
    "flavors": ListOf({
        "name": ANY,
        "resources": ListOf({"name": ANY, "nominalQuota": ANY, "borrowingLimit": ANY, "lendingLimit": ANY}),
    }),
})
_FAIR_SHARING: Final[Schema] = {"weight": ANY}


def _cluster_queue(version: str) -> Schema:
    spec: Schema = {
        "resourceGroups": _RESOURCE_GROUPS,
        # Both spellings in either version: the contract's (the Alauda docs use `cohort` with v1beta2).
        "cohortName": ANY,
        "cohort": ANY,
        "queueingStrategy": ANY,
        "namespaceSelector": LABEL_SELECTOR,
        "flavorFungibility": {"whenCanBorrow": ANY, "whenCanPreempt": ANY, "preference": ANY},
        "preemption": {
            "reclaimWithinCohort": ANY,
            "borrowWithinCohort": {"policy": ANY, "maxPriorityThreshold": ANY},
            "withinClusterQueue": ANY,
        },
        "admissionChecksStrategy": {"admissionChecks": ListOf({"name": ANY, "onFlavors": ANY})},
        "stopPolicy": ANY,
        "fairSharing": _FAIR_SHARING,
        "admissionScope": {"admissionMode": ANY},
    }
    if version != V1BETA2:
        spec["admissionChecks"] = ANY
    if version != V1BETA1:
        spec["concurrentAdmissionPolicy"] = Refused("concurrentAdmissionPolicy is not supported")
    return _top(spec)


def _resource_flavor(version: str) -> Schema:
    # topologyName is accepted: the Topology it names never exists in quotaflow, so a
    # ClusterQueue using the flavor is inactive (TopologyNotFound), as Kueue makes it.
    return _top({"nodeLabels": ANY, "nodeTaints": ListOf(TAINT), "tolerations": ListOf(TOLERATION),
                 "topologyName": ANY})


def _cohort(version: str) -> Schema:
    return _top({"parentName": ANY, "resourceGroups": _RESOURCE_GROUPS, "fairSharing": _FAIR_SHARING})


def _local_queue(version: str) -> Schema:
    return _top({"clusterQueue": ANY, "stopPolicy": ANY, "fairSharing": _FAIR_SHARING})


def _priority_class(version: str) -> Schema:
    return {"apiVersion": ANY, "kind": ANY, "metadata": OBJECT_META, "value": ANY, "description": ANY}


def _admission_check(version: str) -> Schema:
    spec: Schema = {"controllerName": ANY, "parameters": {"apiGroup": ANY, "kind": ANY, "name": ANY}}
    if version != V1BETA2:
        spec["retryDelayMinutes"] = ANY  # deprecated, and a controller's business
    return _top(spec)


def _workload(version: str) -> Schema:
    spec: Schema = {
        "podSets": ListOf({
            "name": ANY,
            "template": POD_TEMPLATE,
            "count": ANY,
            "minCount": ANY,
            "topologyRequest": Refused(_TAS),
            "requests": ANY,  # quotaflow's compact form
        }),
        "queueName": ANY,
        "priority": ANY,
        "active": ANY,
        "maximumExecutionTimeSeconds": ANY,
    }
    if version != V1BETA2:
        spec["priorityClassName"] = ANY
        spec["priorityClassSource"] = ANY
    if version != V1BETA1:
        spec["priorityClassRef"] = {"group": ANY, "kind": ANY, "name": ANY}
        spec["preemptionGates"] = Refused("preemptionGates are not supported")
    return _top(spec)


def _namespace(version: str) -> Schema:
    return _top({"finalizers": ANY})


def _pod_priority_class(version: str) -> Schema:
    return {
        "apiVersion": ANY, "kind": ANY, "metadata": OBJECT_META, "value": ANY, "globalDefault": ANY,
        "description": ANY, "preemptionPolicy": ANY,
    }


def _configuration(version: str) -> Schema:
    fair_sharing: Schema = {"preemptionStrategies": ANY}
    wait: Schema = {
        "timeout": ANY,
        "blockAdmission": ANY,
        "recoveryTimeout": ANY,
        "requeuingStrategy": {
            "timestamp": ANY, "backoffLimitCount": ANY, "backoffBaseSeconds": ANY, "backoffMaxSeconds": ANY,
        },
    }
    if version != V1BETA2:
        fair_sharing["enable"] = ANY
        wait["enable"] = ANY
    schema: Schema = {
        "apiVersion": ANY,
        "kind": ANY,
        "fairSharing": fair_sharing,
        "featureGates": ANY,
        "admissionFairSharing": {"usageHalfLifeTime": ANY, "usageSamplingInterval": ANY, "resourceWeights": ANY},
        "resources": {
            "excludeResourcePrefixes": ANY,
            "transformations": ListOf({"input": ANY, "strategy": ANY, "outputs": ANY, "multiplyBy": ANY}),
            "deviceClassMappings": _DRA,
        },
        "waitForPodsReady": wait,
        # quotaflow's own (CONTRACT.md): `preemptionPolicy` and the `quotaflow` stanza.
        "preemptionPolicy": ANY,
        "quotaflow": {
            "evictionRelease": ANY,
            "tenantLimits": {"maxPendingWorkloads": ANY, "maxEventBytes": ANY, "namespaces": ANY},
        },
        # How Kueue's own controller runs, not what it admits: not applicable.
        **{f: ANY for f in (
            "namespace", "manageJobsWithoutQueueName", "managedJobsNamespaceSelector",
            "internalCertManagement", "clientConnection", "integrations", "multiKueue",
            "objectRetentionPolicies", "webhook", "leaderElection", "metrics", "health",
            "pprofBindAddress", "controller", "tls",
        )},
    }
    if version != V1BETA2:
        schema["queueVisibility"] = ANY
    if version != V1BETA1:
        schema["visibilityServer"] = ANY
        schema["resources"]["quotaCheckStrategy"] = ANY  # type: ignore[index]
    return schema


_Builder = Callable[[str], Schema]
# kind -> (API group, served versions, schema builder). Kueue serves v1beta1 (deprecated) and
# v1beta2 for every kind (config/components/crd/bases); an absent apiVersion reads either.
KINDS: Final[dict[str, tuple[str, tuple[str, ...], _Builder]]] = {
    "ClusterQueue": (KUEUE_GROUP, (V1BETA1, V1BETA2), _cluster_queue),
    "LocalQueue": (KUEUE_GROUP, (V1BETA1, V1BETA2), _local_queue),
    "ResourceFlavor": (KUEUE_GROUP, (V1BETA1, V1BETA2), _resource_flavor),
    "Cohort": (KUEUE_GROUP, (V1BETA1, V1BETA2), _cohort),
    "WorkloadPriorityClass": (KUEUE_GROUP, (V1BETA1, V1BETA2), _priority_class),
    "AdmissionCheck": (KUEUE_GROUP, (V1BETA1, V1BETA2), _admission_check),
    "Workload": (KUEUE_GROUP, (V1BETA1, V1BETA2), _workload),
    "Namespace": ("", ("v1",), _namespace),
    "PriorityClass": (SCHEDULING_GROUP, ("v1",), _pod_priority_class),
    "Configuration": (CONFIG_GROUP, (V1BETA1, V1BETA2), _configuration),
}

# Kueue's kinds quotaflow does not implement, and why.
UNSUPPORTED_KINDS: Final[dict[str, str]] = {
    "Topology": _TAS,
    "MultiKueueConfig": "MultiKueue is not supported",
    "MultiKueueCluster": "MultiKueue is not supported",
    "ProvisioningRequestConfig": "ProvisioningRequest admission checks are run by their own controller, "
    "which reports through AdmissionCheckStateChanged; their configuration is not read",
}

_SCHEMAS: dict[tuple[str, str], Schema] = {}


def schema_for(kind: str, version: str) -> Schema:
    """The schema of `kind` in `version` ("" when the object gave no apiVersion: either version's
    fields); `kind` must be in KINDS."""
    key = (kind, version)
    schema = _SCHEMAS.get(key)
    if schema is None:
        schema = _SCHEMAS[key] = KINDS[kind][2](version)
    return schema


def check_api_version(kind: str, api_version: str) -> str:
    """The version part of `api_version` if Kueue (or Kubernetes) serves `kind` in it ("" when
    absent); else InvalidInput with the message kubectl's REST mapper gives."""
    if not api_version:
        return ""
    group, version = KINDS[kind][0], KINDS[kind][1]
    want_group, slash, want_version = api_version.rpartition("/")
    if (want_group == group or (not slash and not group)) and want_version in version:
        return want_version
    raise InvalidInput(
        reasons.UNKNOWN_KIND,
        f'no matches for kind "{kind}" in version "{shown(api_version)}"',
    )


def unsupported_kind(kind: str) -> InvalidInput | None:
    why = UNSUPPORTED_KINDS.get(kind)
    if why is None:
        return None
    return InvalidInput(reasons.NOT_SUPPORTED, f"kind {kind}: Unsupported: {why}")


def strict_problems(raw: Mapping[str, Any], schema: Schema) -> tuple[list[str], list[tuple[str, str]]]:
    """(unknown field paths, (path, why) of refused fields set), in the order they appear."""
    unknown: list[str] = []
    refused: list[tuple[str, str]] = []
    _walk(raw, schema, "", unknown, refused)
    return unknown, refused


def _walk(raw: Mapping[str, Any], schema: Schema, path: str, unknown: list[str], refused: list[tuple[str, str]]) -> None:
    for key, value in raw.items():
        if value is None:
            continue  # null is unset, as everywhere in the contract
        here = f"{path}.{key}" if path else str(key)
        node = schema.get(key) if isinstance(key, str) else None
        if node is None:
            unknown.append(here)
        elif node is ANY:
            continue
        elif isinstance(node, dict):
            if isinstance(value, Mapping):
                _walk(value, node, here, unknown, refused)
        elif isinstance(node, ListOf):
            item = node.item
            if isinstance(item, dict) and isinstance(value, (list, tuple)):
                for i, element in enumerate(value):
                    if isinstance(element, Mapping):
                        _walk(element, item, f"{here}[{i}]", unknown, refused)
        elif isinstance(node, Refused):
            if node.allowed is None or not node.allowed(value):
                refused.append((here, node.why))


def check_strict(kind: str, version: str, raw: Mapping[str, Any], what: str, reason: str) -> None:
    """Refuse `raw` (a `kind` object, named `what` in messages) if it has a field the API server
    would not decode, or one quotaflow does not implement."""
    unknown, refused = strict_problems(raw, schema_for(kind, version))
    if unknown:
        listed = ", ".join(f'unknown field "{shown(p)}"' for p in unknown[:UNKNOWN_SHOWN])
        more = f" (and {len(unknown) - UNKNOWN_SHOWN} more)" if len(unknown) > UNKNOWN_SHOWN else ""
        as_version = f'{kind} in version "{version}"' if version else kind
        raise InvalidInput(
            reason,
            f"{what}: {as_version} cannot be handled as a {kind}: strict decoding error: {listed}{more}",
        )
    if refused:
        path, why = refused[0]
        raise InvalidInput(reasons.NOT_SUPPORTED, f"{what}: {path}: Unsupported: {why}")


__all__ = [
    "ANY",
    "KINDS",
    "ListOf",
    "Refused",
    "UNSUPPORTED_KINDS",
    "check_api_version",
    "check_strict",
    "schema_for",
    "strict_problems",
    "unsupported_kind",
]
