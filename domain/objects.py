"""Kueue's configuration objects, parsed and validated as Kueue's webhooks and CRDs would.

Each `parse_*` takes the decoded YAML/JSON object and returns an immutable spec, or raises
`InvalidInput` with Kueue's own wording where Kueue has one. Both `kueue.x-k8s.io/v1beta1` and
`v1beta2` field spellings are accepted (`cohort`/`cohortName`, `Borrow`/`MayStopSearch`, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from domain import reasons
from domain.admission_fair_sharing import (
    ADMISSION_MODES,
    AdmissionFairSharing,
    parse_admission_fair_sharing,
)
from domain.api_fields import check_api_version, check_strict, unsupported_kind
from domain.fields import Fields, InvalidInput
from domain.names import (
    invalid,
    label_problem,
    labels_message,
    shown,
    subdomain_problem,
)
from domain.pods_ready_config import PodsReadyConfig, parse_pods_ready
from domain.quantity import QuantityError, amount
from domain.quota import FR, fr_key
from domain.resource_transformations import (
    NO_RESOURCES,
    ResourcesConfig,
    parse_resources,
)
from domain.selectors import LabelSelector, SelectorError
from domain.tenant_limits import NO_TENANT_LIMITS, TenantLimits, parse_tenant_limits

KUEUE_GROUP = "kueue.x-k8s.io"

BEST_EFFORT_FIFO = "BestEffortFIFO"
STRICT_FIFO = "StrictFIFO"
NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"
LOWER_OR_NEWER_EQUAL = "LowerOrNewerEqualPriority"
ANY = "Any"
MAY_STOP_SEARCH = "MayStopSearch"
TRY_NEXT_FLAVOR = "TryNextFlavor"
BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"
STOP_NONE = "None"
HOLD = "Hold"
HOLD_AND_DRAIN = "HoldAndDrain"
CLASSICAL = "Classical"
FAIR_SHARING = "FairSharing"
# When the quota of an evicted workload is given back (quotaflow's eviction lifecycle).
ON_RELEASE = "OnRelease"  # when a WorkloadReleased event confirms its pods are gone (Kueue's behaviour)
IMMEDIATE = "Immediate"  # at once, for launchers that stop workloads synchronously
EVICTION_RELEASE_ANNOTATION = "quotaflow.dev/eviction-release"
# Objects carrying this annotation with value "YuniKorn" follow YuniKorn's hierarchical quota
# rule that a child's max may not exceed its parent's (Kueue itself silently caps instead).
QUOTA_MODEL_ANNOTATION = "quotaflow.dev/quota-model"
YUNIKORN = "YuniKorn"


def _invalid(message: str) -> InvalidInput:
    return InvalidInput(reasons.INVALID_OBJECT, message)


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: str
    node_labels: tuple[tuple[str, str], ...] = ()
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    # A TAS flavor's Topology. quotaflow has no Topology objects (not supported), so a
    # ClusterQueue using such a flavor is inactive, TopologyNotFound, as in Kueue without one.
    topology_name: str | None = None


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: str
    resources: tuple[tuple[str, ResourceQuota], ...]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


def quotas_by_flavor_resource(groups: tuple[ResourceGroup, ...]) -> dict[FR, ResourceQuota]:
    out: dict[FR, ResourceQuota] = {}
    for group in groups:
        for flavor in group.flavors:
            for resource, quota in flavor.resources:
                out[fr_key(flavor.name, resource)] = quota
    return out


@dataclass(frozen=True, slots=True)
class Preemption:
    within_cluster_queue: str = NEVER
    reclaim_within_cohort: str = NEVER
    borrow_within_cohort: str = NEVER
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    when_can_borrow: str = MAY_STOP_SEARCH
    when_can_preempt: str = TRY_NEXT_FLAVOR
    preference: str | None = None


@dataclass(frozen=True, slots=True)
class AdmissionCheckRule:
    name: str
    on_flavors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterQueueSpec:
    name: str
    cohort: str | None
    namespace_selector: LabelSelector
    queueing_strategy: str
    resource_groups: tuple[ResourceGroup, ...]
    preemption: Preemption
    flavor_fungibility: FlavorFungibility
    stop_policy: str
    fair_weight: int  # milli-weight: fairSharing.weight as a quantity, in milli-units
    admission_checks: tuple[AdmissionCheckRule, ...]
    eviction_release: str | None = None  # overrides Configuration.eviction_release
    yunikorn_rules: bool = False
    # spec.admissionScope.admissionMode (domain/admission_fair_sharing.py), if set
    admission_mode: str | None = None

    def quotas(self) -> dict[FR, ResourceQuota]:
        return quotas_by_flavor_resource(self.resource_groups)

    def flavor_names(self) -> tuple[str, ...]:
        return tuple(f.name for g in self.resource_groups for f in g.flavors)


@dataclass(frozen=True, slots=True)
class CohortSpec:
    name: str
    parent: str | None
    resource_groups: tuple[ResourceGroup, ...]
    fair_weight: int
    yunikorn_rules: bool = False

    def quotas(self) -> dict[FR, ResourceQuota]:
        return quotas_by_flavor_resource(self.resource_groups)


@dataclass(frozen=True, slots=True)
class LocalQueueSpec:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: str
    fair_weight: int = 1000  # spec.fairSharing.weight in milli-units (admission fair sharing)


@dataclass(frozen=True, slots=True)
class WorkloadPriorityClass:
    name: str
    value: int


@dataclass(frozen=True, slots=True)
class PodPriorityClass:
    """A Kubernetes PriorityClass (scheduling.k8s.io/v1), which Kueue reads for the priority of
    workloads whose priority class source is scheduling.k8s.io/priorityclass."""

    name: str
    value: int
    global_default: bool = False


# Kubernetes' own PriorityClasses, present in every cluster (k8s.io/api/scheduling/v1).
SYSTEM_PRIORITY_CLASSES: dict[str, int] = {
    "system-node-critical": 2000001000,
    "system-cluster-critical": 2000000000,
}
HIGHEST_USER_DEFINABLE_PRIORITY = 1000000000


@dataclass(frozen=True, slots=True)
class AdmissionCheckSpec:
    name: str
    controller_name: str


@dataclass(frozen=True, slots=True)
class NamespaceSpec:
    name: str
    labels: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Configuration:
    """The parts of Kueue's Configuration that change admission decisions."""

    preemption_policy: str = CLASSICAL
    fair_sharing_strategies: tuple[str, ...] = (
        "LessThanOrEqualToFinalShare",
        "LessThanInitialShare",
    )
    eviction_release: str = ON_RELEASE
    # featureGates (Kueue's defaults): PrioritizePreemptorWorkloads, alpha, off.
    prioritize_preemptor_workloads: bool = False
    # WorkloadPriorityClassDefaulting: beta, on since Kueue 0.20.
    workload_priority_class_defaulting: bool = True
    # `resources`: excludeResourcePrefixes and transformations (domain/resource_transformations.py).
    resources: ResourcesConfig = NO_RESOURCES
    # `admissionFairSharing`, None unless it is set and the AdmissionFairSharing gate is on (beta,
    # on by default), as Kueue's afs.Enabled.
    admission_fair_sharing: AdmissionFairSharing | None = None
    # quotaflow's `quotaflow.tenantLimits` (domain/authority.py).
    tenant_limits: TenantLimits = NO_TENANT_LIMITS
    # `waitForPodsReady` (domain/pods_ready_config.py), None while it is off.
    pods_ready: PodsReadyConfig | None = None


# Kueue feature gates quotaflow implements, with Kueue's defaults. Kueue refuses to start on a
# gate it does not know; quotaflow refuses a gate it does not implement, since accepting it
# silently would promise a behaviour the engine does not have.
PRIORITIZE_PREEMPTOR_WORKLOADS = "PrioritizePreemptorWorkloads"
WORKLOAD_PRIORITY_CLASS_DEFAULTING = "WorkloadPriorityClassDefaulting"
ADMISSION_FAIR_SHARING = "AdmissionFairSharing"  # beta, on since Kueue 0.15 (pkg/features)
# DisableWaitForPodsReady: alpha since 0.19, off; turns waitForPodsReady off whatever the
# Configuration says (pkg/util/waitforpodsready), for v1beta2, which turns it on by default.
DISABLE_WAIT_FOR_PODS_READY = "DisableWaitForPodsReady"
FEATURE_GATES: dict[str, bool] = {
    ADMISSION_FAIR_SHARING: True,
    PRIORITIZE_PREEMPTOR_WORKLOADS: False,
    WORKLOAD_PRIORITY_CLASS_DEFAULTING: True,
    DISABLE_WAIT_FOR_PODS_READY: False,
}


ConfigObject = (
    ResourceFlavor
    | ClusterQueueSpec
    | CohortSpec
    | LocalQueueSpec
    | WorkloadPriorityClass
    | PodPriorityClass
    | AdmissionCheckSpec
    | NamespaceSpec
    | Configuration
)

NAMESPACED_KINDS = ("LocalQueue",)
KINDS = (
    "ResourceFlavor",
    "ClusterQueue",
    "LocalQueue",
    "Cohort",
    "WorkloadPriorityClass",
    "AdmissionCheck",
    "Namespace",
    "PriorityClass",
    "Configuration",
)


# --------------------------------------------------------------------------------------------
def _quantity(f: Fields, key: str, resource: str) -> int:
    raw = f.raw(key)
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise f.fail(key, f"expected a quantity, got {raw!r}")
    try:
        value = amount(resource, raw)
    except QuantityError as exc:
        raise f.fail(key, str(exc)) from None
    if value < 0:
        raise f.fail(key, "must be greater than or equal to 0")
    return value


def _opt_quantity(f: Fields, key: str, resource: str) -> int | None:
    if not f.has(key):
        return None
    return _quantity(f, key, resource)


def _name(meta: Fields) -> str:
    name = meta.str("name")
    if not name:
        raise meta.fail("name", "required value")
    return checked(meta, "name", name, subdomain_problem(name))


def checked(f: Fields, key: str, value: str, problem: str | None) -> str:
    """`value`, read from `f[key]`, unless Kubernetes' naming rules found a `problem` with it."""
    if problem is not None:
        raise f.fail(key, invalid(value, problem))
    return value


def _reference(f: Fields, *keys: str) -> str | None:
    """The name in the first of `keys` that is set (a reference to another object), checked."""
    for key in keys:
        value = f.opt_str(key)
        if value:
            return checked(f, key, value, subdomain_problem(value))
    return None


def _labels(meta: Fields, key: str) -> dict[str, str]:
    labels = meta.str_map(key)
    message = labels_message(labels.items())
    if message is not None:
        raise meta.fail(key, message)
    return labels


def _resource_groups(spec: Fields, is_cluster_queue: bool) -> tuple[ResourceGroup, ...]:
    groups: list[ResourceGroup] = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for g in spec.objects("resourceGroups"):
        covered = g.str_list("coveredResources")
        if not covered:
            raise g.fail("coveredResources", "Required value")
        for i, res in enumerate(covered):
            if res in seen_resources:
                raise g.fail(f"coveredResources[{i}]", f'Duplicate value: "{res}"')
            seen_resources.add(res)
        flavors: list[FlavorQuotas] = []
        for fq in g.objects("flavors"):
            fname = fq.str("name")
            checked(fq, "name", fname, subdomain_problem(fname))
            if fname in seen_flavors:
                raise fq.fail("name", f'Duplicate value: "{fname}"')
            seen_flavors.add(fname)
            items = fq.objects("resources")
            if len(items) != len(covered):
                raise fq.fail(
                    "resources",
                    "flavors must have the same number of resources as the coveredResources",
                )
            quotas: list[tuple[str, ResourceQuota]] = []
            for i, r in enumerate(items):
                rname = r.str("name")
                if rname != covered[i]:
                    raise r.fail("name", f'Invalid value: "{rname}": must match the name in coveredResources')
                nominal = _quantity(r, "nominalQuota", rname)
                borrowing = _opt_quantity(r, "borrowingLimit", rname)
                lending = _opt_quantity(r, "lendingLimit", rname)
                if is_cluster_queue and lending is not None and lending > nominal:
                    raise r.fail("lendingLimit", "must be less than or equal to the nominalQuota")
                quotas.append((rname, ResourceQuota(nominal, borrowing, lending)))
            flavors.append(FlavorQuotas(fname, tuple(quotas)))
        if not flavors:
            raise g.fail("flavors", "Required value")
        groups.append(ResourceGroup(tuple(covered), tuple(flavors)))
    return tuple(groups)


def _has_limits(groups: tuple[ResourceGroup, ...]) -> bool:
    return any(
        q.borrowing_limit is not None or q.lending_limit is not None
        for g in groups
        for f in g.flavors
        for _, q in f.resources
    )


def _fair_weight(spec: Fields) -> int:
    fs = spec.opt_sub("fairSharing")
    if fs is None or not fs.has("weight"):
        return 1000
    weight = _quantity(fs, "weight", "cpu")  # milli-units, like cpu
    return weight


def _selector(spec: Fields, key: str) -> LabelSelector:
    raw = spec.raw(key)
    if raw is not None and not isinstance(raw, Mapping):
        raise spec.fail(key, "expected an object")
    try:
        return LabelSelector.parse(raw)
    except SelectorError as exc:
        raise spec.fail(key, str(exc)) from None


def parse_resource_flavor(obj: Fields) -> ResourceFlavor:
    name = _name(obj.sub("metadata"))
    spec = obj.sub("spec")
    taints = tuple(
        Taint(t.str("key"), t.str("value", ""), t.enum("effect", ("NoSchedule", "PreferNoSchedule", "NoExecute"), "NoSchedule"))
        for t in spec.objects("nodeTaints")
    )
    tolerations = tuple(_toleration(t) for t in spec.objects("tolerations"))
    labels = tuple(_labels(spec, "nodeLabels").items())
    topology = _reference(spec, "topologyName")
    if topology is not None and not labels:
        # Kueue's CRD rule (apis/kueue/v1beta2/resourceflavor_types.go).
        raise spec.fail("nodeLabels", "at least one nodeLabel is required when topology is set")
    return ResourceFlavor(name, labels, taints, tolerations, topology)


def _toleration(t: Fields) -> Toleration:
    return Toleration(
        t.str("key", ""),
        t.enum("operator", ("Exists", "Equal"), "Equal"),
        t.str("value", ""),
        t.str("effect", ""),
    )


def parse_cluster_queue(obj: Fields) -> ClusterQueueSpec:
    name = _name(obj.sub("metadata"))
    spec = obj.sub("spec")
    cohort = _reference(spec, "cohortName", "cohort")
    groups = _resource_groups(spec, is_cluster_queue=True)
    if cohort is None and _has_limits(groups):
        raise spec.fail("resourceGroups", "borrowingLimit and lendingLimit must be nil when cohort is empty")
    pre = spec.sub("preemption")
    bwc = pre.sub("borrowWithinCohort")
    preemption = Preemption(
        pre.enum("withinClusterQueue", (NEVER, LOWER_PRIORITY, LOWER_OR_NEWER_EQUAL), NEVER),
        pre.enum("reclaimWithinCohort", (NEVER, LOWER_PRIORITY, ANY), NEVER),
        bwc.enum("policy", (NEVER, LOWER_PRIORITY), NEVER),
        bwc.opt_int("maxPriorityThreshold"),
    )
    if preemption.reclaim_within_cohort == NEVER and preemption.borrow_within_cohort != NEVER:
        raise pre.fail("borrowWithinCohort", "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
    ff = spec.sub("flavorFungibility")
    borrow = ff.enum("whenCanBorrow", ("Borrow", MAY_STOP_SEARCH, TRY_NEXT_FLAVOR), MAY_STOP_SEARCH)
    preempt = ff.enum("whenCanPreempt", ("Preempt", MAY_STOP_SEARCH, TRY_NEXT_FLAVOR), TRY_NEXT_FLAVOR)
    fungibility = FlavorFungibility(
        TRY_NEXT_FLAVOR if borrow == TRY_NEXT_FLAVOR else MAY_STOP_SEARCH,
        TRY_NEXT_FLAVOR if preempt == TRY_NEXT_FLAVOR else MAY_STOP_SEARCH,
        ff.opt_str("preference"),
    )
    if fungibility.preference is not None:
        if fungibility.preference not in (BORROWING_OVER_PREEMPTION, PREEMPTION_OVER_BORROWING):
            raise ff.fail("preference", f'Unsupported value: "{fungibility.preference}"')
        if not (fungibility.when_can_borrow == TRY_NEXT_FLAVOR and fungibility.when_can_preempt == TRY_NEXT_FLAVOR):
            raise ff.fail("preference", "can only be set when whenCanBorrow and whenCanPreempt are TryNextFlavor")
    checks = _admission_checks(spec, groups)
    release = obj.sub("metadata").sub("annotations").opt_str(EVICTION_RELEASE_ANNOTATION)
    if release is not None and release not in (ON_RELEASE, IMMEDIATE):
        raise obj.fail(
            f"metadata.annotations.{EVICTION_RELEASE_ANNOTATION}",
            f'Unsupported value: "{release}": supported values: "{ON_RELEASE}", "{IMMEDIATE}"',
        )
    return ClusterQueueSpec(
        name=name,
        cohort=cohort,
        namespace_selector=_selector(spec, "namespaceSelector"),
        queueing_strategy=spec.enum("queueingStrategy", (BEST_EFFORT_FIFO, STRICT_FIFO), BEST_EFFORT_FIFO),
        resource_groups=groups,
        preemption=preemption,
        flavor_fungibility=fungibility,
        stop_policy=spec.enum("stopPolicy", (STOP_NONE, HOLD, HOLD_AND_DRAIN), STOP_NONE),
        fair_weight=_fair_weight(spec),
        admission_checks=checks,
        eviction_release=release,
        yunikorn_rules=_quota_model(obj) == YUNIKORN,
        admission_mode=_admission_mode(spec),
    )


def _admission_mode(spec: Fields) -> str | None:
    scope = spec.opt_sub("admissionScope")
    if scope is None:
        return None
    mode = scope.opt_str("admissionMode")
    if mode is None:
        raise scope.fail("admissionMode", "Required value")
    if mode not in ADMISSION_MODES:
        choices = ", ".join(f'"{m}"' for m in ADMISSION_MODES)
        raise scope.fail("admissionMode", f'Unsupported value: "{mode}": supported values: {choices}')
    return mode


def _admission_checks(spec: Fields, groups: tuple[ResourceGroup, ...]) -> tuple[AdmissionCheckRule, ...]:
    names = spec.str_list("admissionChecks")
    for i, check in enumerate(names):
        checked(spec, f"admissionChecks[{i}]", check, subdomain_problem(check))
    strategy = spec.opt_sub("admissionChecksStrategy")
    if names and strategy is not None:
        raise spec.fail("admissionChecks", "Either AdmissionChecks or AdmissionCheckStrategy can be set, but not both")
    if strategy is None:
        return tuple(AdmissionCheckRule(n) for n in names)
    flavors = {f.name for g in groups for f in g.flavors}
    rules: list[AdmissionCheckRule] = []
    for rule in strategy.objects("admissionChecks"):
        on = rule.str_list("onFlavors")
        for i, fl in enumerate(on):
            if fl not in flavors:
                raise rule.fail(f"onFlavors[{i}]", f'Invalid value: "{fl}": must be one of the ClusterQueue flavors')
        check = rule.str("name")
        checked(rule, "name", check, subdomain_problem(check))
        rules.append(AdmissionCheckRule(check, tuple(on)))
    return tuple(rules)


def parse_cohort(obj: Fields) -> CohortSpec:
    name = _name(obj.sub("metadata"))
    spec = obj.sub("spec")
    parent = _reference(spec, "parentName", "parent")
    groups = _resource_groups(spec, is_cluster_queue=False)
    if parent is None and _has_limits(groups):
        raise spec.fail("resourceGroups", "borrowingLimit and lendingLimit must be nil when parent is empty")
    if parent == name:
        raise spec.fail("parentName", "a Cohort cannot be its own parent")
    return CohortSpec(name, parent, groups, _fair_weight(spec), _quota_model(obj) == YUNIKORN)


def _quota_model(obj: Fields) -> str | None:
    model = obj.sub("metadata").sub("annotations").opt_str(QUOTA_MODEL_ANNOTATION)
    if model is not None and model not in ("Kueue", YUNIKORN):
        raise obj.fail(f"metadata.annotations.{QUOTA_MODEL_ANNOTATION}", f'Unsupported value: "{model}"')
    return model


def parse_local_queue(obj: Fields) -> LocalQueueSpec:
    meta = obj.sub("metadata")
    spec = obj.sub("spec")
    namespace = meta.str("namespace", "default")
    cluster_queue = spec.str("clusterQueue")
    return LocalQueueSpec(
        checked(meta, "namespace", namespace, label_problem(namespace)),
        _name(meta),
        checked(spec, "clusterQueue", cluster_queue, subdomain_problem(cluster_queue)),
        spec.enum("stopPolicy", (STOP_NONE, HOLD, HOLD_AND_DRAIN), STOP_NONE),
        _fair_weight(spec),
    )


def parse_priority_class(obj: Fields) -> WorkloadPriorityClass:
    value = obj.int("value")
    if not -(2**31) <= value < 2**31:
        raise obj.fail("value", "must be a 32-bit integer")
    return WorkloadPriorityClass(_name(obj.sub("metadata")), value)


def parse_pod_priority_class(obj: Fields) -> PodPriorityClass:
    """As Kubernetes' API server validates a PriorityClass (pkg/apis/scheduling/validation)."""
    meta = obj.sub("metadata")
    name = _name(meta)
    value = obj.int("value")
    if not -(2**31) <= value < 2**31:
        raise obj.fail("value", "must be a 32-bit integer")
    global_default = obj.bool("globalDefault", False)
    obj.enum("preemptionPolicy", ("PreemptLowerPriority", "Never"), "PreemptLowerPriority")
    if name.startswith("system-"):
        if SYSTEM_PRIORITY_CLASSES.get(name) != value or global_default:
            raise meta.fail(
                "name", "Forbidden: priority class names with 'system-' prefix are reserved for system use only"
            )
    elif value > HIGHEST_USER_DEFINABLE_PRIORITY:
        raise obj.fail(
            "value", f"Forbidden: maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
        )
    return PodPriorityClass(name, value, global_default)


MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"


def parse_admission_check(obj: Fields) -> AdmissionCheckSpec:
    spec = obj.sub("spec")
    name = _name(obj.sub("metadata"))
    controller = spec.str("controllerName", "")
    if controller == MULTIKUEUE_CONTROLLER:
        # Kueue runs this check itself, dispatching to worker clusters: nothing would report on it.
        raise InvalidInput(
            reasons.NOT_SUPPORTED,
            f'{spec.path}.controllerName: Unsupported: "{MULTIKUEUE_CONTROLLER}": MultiKueue is not supported',
        )
    return AdmissionCheckSpec(name, controller)


def parse_namespace(obj: Fields) -> NamespaceSpec:
    meta = obj.sub("metadata")
    name = meta.str("name")
    if not name:
        raise meta.fail("name", "required value")
    checked(meta, "name", name, label_problem(name))  # a namespace name is a DNS label
    labels = _labels(meta, "labels")
    labels["kubernetes.io/metadata.name"] = name
    return NamespaceSpec(name, tuple(sorted(labels.items())))


def parse_configuration(obj: Fields) -> Configuration:
    fs = obj.opt_sub("fairSharing")
    policy = CLASSICAL
    strategies = Configuration().fair_sharing_strategies
    if fs is not None and fs.bool("enable", True):
        policy = FAIR_SHARING
        listed = fs.str_list("preemptionStrategies")
        allowed = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
        for i, strategy in enumerate(listed):
            if strategy not in allowed:
                raise fs.fail(f"preemptionStrategies[{i}]", f'Unsupported value: "{strategy}"')
        if listed:
            strategies = tuple(listed)
    # quotaflow's own spelling: `preemptionPolicy: Classical | FairSharing`.
    explicit = obj.opt_str("preemptionPolicy")
    if explicit is not None:
        if explicit not in (CLASSICAL, FAIR_SHARING):
            raise obj.fail("preemptionPolicy", f'Unsupported value: "{explicit}"')
        policy = explicit
    own = obj.sub("quotaflow")
    release = own.enum("evictionRelease", (ON_RELEASE, IMMEDIATE), ON_RELEASE)
    tenant_limits = parse_tenant_limits(own)
    gates = _feature_gates(obj)
    # The stanza is validated either way; with the gate off it changes nothing (afs.Enabled).
    afs = parse_admission_fair_sharing(obj)
    return Configuration(
        policy,
        strategies,
        release,
        prioritize_preemptor_workloads=gates[PRIORITIZE_PREEMPTOR_WORKLOADS],
        workload_priority_class_defaulting=gates[WORKLOAD_PRIORITY_CLASS_DEFAULTING],
        resources=parse_resources(obj),
        admission_fair_sharing=afs if gates[ADMISSION_FAIR_SHARING] else None,
        tenant_limits=tenant_limits,
        pods_ready=None if gates[DISABLE_WAIT_FOR_PODS_READY] else parse_pods_ready(obj, obj.str("apiVersion", "")),
    )


def _feature_gates(obj: Fields) -> dict[str, bool]:
    """`featureGates: {Name: bool}`, Kueue's map; unset gates keep Kueue's default."""
    gates = dict(FEATURE_GATES)
    listed = obj.sub("featureGates")
    for name in sorted(listed.data, key=str):
        if name not in FEATURE_GATES:
            known = ", ".join(sorted(FEATURE_GATES))
            raise listed.fail(
                str(name), f'unrecognized feature gate "{name}"; quotaflow implements: {known}'
            )
        gates[name] = listed.bool(name, FEATURE_GATES[name])
    return gates


_PARSERS: dict[str, Callable[[Fields], ConfigObject]] = {
    "ResourceFlavor": parse_resource_flavor,
    "ClusterQueue": parse_cluster_queue,
    "LocalQueue": parse_local_queue,
    "Cohort": parse_cohort,
    "WorkloadPriorityClass": parse_priority_class,
    "AdmissionCheck": parse_admission_check,
    "Namespace": parse_namespace,
    "PriorityClass": parse_pod_priority_class,
    "Configuration": parse_configuration,
}


def parse_object(raw: object) -> ConfigObject:
    """Parse one Kueue object; raises `InvalidInput` (reason UnknownKind, NotSupported or
    InvalidObject). Decoded first as Kubernetes' API server decodes it (the kind served in that
    apiVersion, no unknown field: domain/api_fields.py), then validated as Kueue's webhooks do."""
    obj = Fields(raw, "object", reasons.INVALID_OBJECT)
    kind = obj.str("kind")
    parser = _PARSERS.get(kind)
    if parser is None:
        refused = unsupported_kind(kind)
        if refused is not None:
            raise refused
        raise InvalidInput(
            reasons.UNKNOWN_KIND,
            f'object.kind: unknown kind "{shown(kind)}"; expected one of {", ".join(KINDS)}',
        )
    try:
        version = check_api_version(kind, obj.str("apiVersion", ""))
    except InvalidInput as exc:
        raise InvalidInput(exc.reason, f"{described(kind, obj.data)}: {exc.message}") from None
    check_strict(kind, version, obj.data, described(kind, obj.data), reasons.INVALID_OBJECT)
    try:
        if kind == "ClusterQueue" and version == "v1beta2":
            # v1beta2 dropped v1beta1's old names `Borrow` and `Preempt` (for MayStopSearch).
            ff = obj.sub("spec").sub("flavorFungibility")
            ff.enum("whenCanBorrow", (MAY_STOP_SEARCH, TRY_NEXT_FLAVOR), MAY_STOP_SEARCH)
            ff.enum("whenCanPreempt", (MAY_STOP_SEARCH, TRY_NEXT_FLAVOR), TRY_NEXT_FLAVOR)
        return parser(obj)
    except InvalidInput as exc:
        raise InvalidInput(exc.reason, f"{kind}: {exc.message}") from None


def described(kind: str, raw: Mapping[str, Any]) -> str:
    """`Kind "name"` (`Kind "namespace/name"` for a LocalQueue or a Workload), as messages name an
    object; the name quoted as given, cut short."""
    meta = raw.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        return kind
    if kind in ("LocalQueue", "Workload"):
        namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
        name = f"{namespace if isinstance(namespace, str) and namespace else 'default'}/{name}"
    return f'{kind} "{shown(name)}"'


def object_key(kind: str, name: str, namespace: str | None = None) -> str:
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"
