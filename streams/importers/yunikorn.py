"""Convert a YuniKorn queue configuration into quotaflow input events (Kueue objects).

`convert(text, capacity=...)` is a pure function: it reads the YAML of YuniKorn's queue
configuration (the `queues.yaml` of the `yunikorn-configs` ConfigMap) and returns the list of
contract events (`ConfigApplied` of Kueue objects) that reproduce its quota rules in quotaflow.
Nothing is read from or written to anywhere else; `quotaflow import yunikorn FILE` is the
command-line front (streams/cli/import_commands.py).

The input (YuniKorn's format, as in the YuniKorn docs)::

    partitions:
      - name: default
        queues:
          - name: root            # implicit when absent, as YuniKorn inserts it
            queues:
              - name: parent
                parent: true      # a parent queue even without children
                resources:
                  guaranteed: {vcore: 10, memory: 100G}
                  max: {vcore: 900}
                queues: [...]

Mapping (YuniKorn has no Kueue mode and Kueue no YuniKorn mode; this is quotaflow's choice):

- **Partitions.** Each partition becomes its own quota tree: partitions are disjoint node sets, so
  their quotas never mix. The tree's root Cohort is named `root` when the configuration has the
  single partition `default`, else after the partition. With more than one partition every other
  object name is prefixed with `<partition>-` so that names stay unique cluster-wide.
- **root queue → root Cohort.** YuniKorn's root carries no quota (a root with `resources` is a
  configuration error, as in YuniKorn); it is the cluster. Its Cohort's subtree quota is the
  cluster capacity: `--capacity` per resource if given, else the sum of the top-level queues'
  `max` (a resource without a `max` on some top-level queue then needs `--capacity`). Because
  Kueue adds the children's nominal quotas to a cohort's own, the root Cohort's `nominalQuota`
  is that capacity minus the guarantees below it (never negative), so that the tree holds exactly
  the cluster.
- **Inner queue (has children, or `parent: true`) → Cohort** with `parentName` = its parent.
  **Leaf queue → ClusterQueue** with `cohortName` = its parent, `namespaceSelector: {}`, and a
  LocalQueue of the same name in a namespace of the same name: a workload submitted to YuniKorn
  queue `root.a.b` is a Workload in namespace `b` with `spec.queueName: b` (this is also where
  YuniKorn's `tag: namespace` placement rule puts the applications of namespace `b`). Queues
  created at run time by placement rules (below a `parent: true` queue) are not known from the
  configuration and are not generated; add them as ClusterQueues whose cohort is that parent.
- **Names.** YuniKorn queue names are case-insensitive and may contain `_`; Kubernetes names may
  not, so names are lowercased and `_` becomes `-`. A name that two queues of a partition would
  share, or that is not a valid DNS-1123 label after this, is an error (rename the queue).
- **guaranteed → nominalQuota.** A leaf's nominal quota is its `guaranteed`. A cohort's own
  nominal quota is `max(0, guaranteed − Σ children's subtree quota)`, so its subtree quota is
  `max(guaranteed, Σ children's)`: YuniKorn requires the children's guarantees to fit in the
  parent's. Guarantees are lendable, as in YuniKorn (idle guaranteed capacity is used by others);
  no `lendingLimit` is generated.
- **max → borrowingLimit = max − the node's subtree quota**, so that Kueue's usage bound
  (subtree quota + borrowing limit) is exactly YuniKorn's max; Kueue's `available()` takes the
  minimum along the path to the root, which is YuniKorn's recursive enforcement ("a child's usage
  can never exceed its parent's quota"). A top-level max above the cluster capacity is capped at
  the capacity (YuniKorn's root has no configured max to exceed). **No max → no borrowingLimit**:
  the queue is bounded by its parent only.
- **Errors** (YuniKorn's own configuration checks): a child's max above its parent's (effective)
  max; guaranteed above max; children's guarantees summing above the parent's guaranteed or max.
  They are collected in `YuniKornConfigError.problems`; `convert(..., strict=False)` returns the
  events anyway, and then the engine itself rejects a child whose max exceeds its parent's, as every
  generated object carries the annotation `quotaflow.dev/quota-model: YuniKorn`.
- **Units** (YuniKorn ≥ 1.1 reads its configuration as Kubernetes quantities): `vcore` is Kueue's
  `cpu` (`vcore: 10` is 10 CPUs, `vcore: 250m` a quarter; YuniKorn counts both in milli-cores,
  as Kueue does), `memory` is bytes (`memory: 500G` is 5·10^11 bytes, `1Gi` is 1073741824), every
  other resource keeps its name and value (`nvidia.com/gpu: 2`). A YuniKorn resource named `cpu`
  would clash with the converted `vcore` and is an error.
- **Resources.** Every ClusterQueue and Cohort of a tree covers the same resources, in one
  resource group with one ResourceFlavor (`default-flavor` unless `flavor=` says otherwise): every
  resource named anywhere in the partition's configuration or in the capacity. A queue that does
  not mention a resource has nominal quota 0 and no borrowing limit for it (unlimited up to its
  parent), as YuniKorn treats a resource missing from `max` as unlimited.
- Preemption, queue properties (sort policies, `maxapplications`, ACLs, user/group limits) have
  no quota meaning here and are not converted; the ClusterQueues keep Kueue's defaults (no
  preemption, BestEffortFIFO). Each generated object records its YuniKorn queue path in the
  annotation `quotaflow.dev/yunikorn-queue`.

Events come out top-down (the flavor, then each tree from its root, parents before children,
siblings in configuration order), each ClusterQueue followed by its LocalQueue.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from domain.quantity import QuantityError, amount

QUOTA_MODEL_ANNOTATION = "quotaflow.dev/quota-model"
QUEUE_ANNOTATION = "quotaflow.dev/yunikorn-queue"
YUNIKORN = "YuniKorn"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
DEFAULT_FLAVOR = "default-flavor"
ROOT = "root"
DEFAULT_PARTITION = "default"

# YuniKorn's own queue-name rule (configs.QueueNameRegExp) and Kubernetes' DNS-1123 label.
_YUNIKORN_QUEUE_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# YuniKorn resource name -> Kueue resource name.
_RESOURCE_NAMES = {"vcore": "cpu"}


class YuniKornConfigError(ValueError):
    """The configuration cannot be converted, or YuniKorn itself would refuse it."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


@dataclass
class _Queue:
    path: str  # YuniKorn's dotted path, root.a.b
    name: str  # the Kubernetes object name
    parent_flag: bool
    guaranteed: dict[str, int]  # Kueue resource name -> amount (milli-cpu, bytes, count)
    max: dict[str, int]
    children: list[_Queue] = field(default_factory=list)
    subtree: dict[str, int] = field(default_factory=dict)  # Kueue SubtreeQuota, once computed
    nominal: dict[str, int] = field(default_factory=dict)

    @property
    def is_leaf(self) -> bool:
        return not self.children and not self.parent_flag


def parse_capacity(text: str) -> dict[str, int]:
    """`cpu=64,memory=256Gi,nvidia.com/gpu=8` (or `vcore=...`) -> Kueue amounts."""
    out: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name or not value.strip():
            raise YuniKornConfigError([f"--capacity: expected resource=quantity, got {item!r}"])
        resource = _RESOURCE_NAMES.get(name, name)
        if resource in out:
            raise YuniKornConfigError([f"--capacity: {resource} given twice"])
        try:
            out[resource] = amount(resource, value.strip())
        except QuantityError as exc:
            raise YuniKornConfigError([f"--capacity: {name}: {exc}"]) from None
    return out


def convert(
    text: str,
    capacity: Mapping[str, int] | None = None,
    flavor: str = DEFAULT_FLAVOR,
    strict: bool = True,
) -> list[dict[str, Any]]:
    """The contract events for a YuniKorn queue configuration (YAML text).

    `capacity` maps Kueue resource names to amounts (see `parse_capacity`). With `strict`
    (default) any problem raises `YuniKornConfigError` listing all of them; without it the events
    are returned whenever they can be built at all, problems notwithstanding."""
    events, problems = convert_with_problems(text, capacity, flavor)
    if problems and (strict or events is None):
        raise YuniKornConfigError(problems)
    assert events is not None
    return events


def convert_with_problems(
    text: str, capacity: Mapping[str, int] | None = None, flavor: str = DEFAULT_FLAVOR
) -> tuple[list[dict[str, Any]] | None, list[str]]:
    """Events (None if they cannot be built) and every problem found on the way."""
    import yaml  # (here: `quotaflow --help` imports this module for its default flavor)

    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return None, [f"not YAML: {exc}"]
    problems: list[str] = []
    partitions = _partitions(config, problems)
    if partitions is None:
        return None, problems
    cap = dict(capacity or {})
    if not _DNS_LABEL.match(flavor):
        return None, [*problems, f"flavor name {flavor!r} is not a valid DNS-1123 label"]
    events: list[dict[str, Any]] = [
        _event(_object("ResourceFlavor", flavor, None, {}, None))
    ]
    single_default = len(partitions) == 1 and partitions[0][0] == DEFAULT_PARTITION
    prefix_names = len(partitions) > 1
    names_seen: dict[str, str] = {}
    for pname, raw_queues in partitions:
        root = _build_tree(pname, raw_queues, prefix_names, single_default, problems)
        if root is None:
            continue
        for q in _walk(root):
            other = names_seen.get(q.name)
            if other is not None:
                problems.append(f"queues {other} and {q.path} both map to the Kubernetes name {q.name!r}; rename one")
            names_seen[q.name] = q.path
        resources = sorted(_resources_of(root) | set(cap))
        if not resources:
            problems.append(f"partition {pname}: no queue names any resource; nothing to convert")
            continue
        _size_tree(root, resources, cap, problems, pname)
        events.extend(_tree_events(root, resources, flavor))
    return events, problems


# -- reading YuniKorn's configuration -----------------------------------------------------------
def _partitions(config: object, problems: list[str]) -> list[tuple[str, list[Any]]] | None:
    if not isinstance(config, Mapping):
        problems.append("expected a mapping with 'partitions' at the top level")
        return None
    raw = config.get("partitions")
    if not isinstance(raw, list) or not raw:
        problems.append("'partitions' must be a non-empty list")
        return None
    out: list[tuple[str, list[Any]]] = []
    seen: set[str] = set()
    for i, part in enumerate(raw):
        if not isinstance(part, Mapping):
            problems.append(f"partitions[{i}]: expected a mapping")
            continue
        name = str(part.get("name") or "").strip().lower()
        if not name:
            problems.append(f"partitions[{i}]: a partition needs a name")
            continue
        if not _DNS_LABEL.match(name):
            problems.append(f"partition {name!r}: not a valid DNS-1123 label once lowercased")
            continue
        if name in seen:
            problems.append(f"partition {name}: defined twice")
            continue
        seen.add(name)
        queues = part.get("queues")
        if not isinstance(queues, list) or not queues:
            problems.append(f"partition {name}: 'queues' must be a non-empty list")
            continue
        out.append((name, queues))
    return out if out else None


def _build_tree(pname: str, raw_queues: list[Any], prefix: bool, single_default: bool,
                problems: list[str]) -> _Queue | None:
    # As YuniKorn does: a single top-level queue named root is the root; otherwise the listed
    # queues hang below an inserted root.
    root_raw: Mapping[str, Any]
    if len(raw_queues) == 1 and isinstance(raw_queues[0], Mapping) and str(raw_queues[0].get("name", "")).lower() == ROOT:
        root_raw = raw_queues[0]
        resources = root_raw.get("resources")
        if isinstance(resources, Mapping) and any(resources.get(k) for k in ("guaranteed", "max")):
            problems.append(f"partition {pname}: the root queue cannot have a quota (it is the whole cluster)")
    else:
        root_raw = {"name": ROOT, "queues": raw_queues}
    root_name = ROOT if single_default else pname
    root = _Queue(ROOT, root_name, True, {}, {})
    children = root_raw.get("queues") or []
    if not isinstance(children, list):
        problems.append(f"partition {pname}: root.queues must be a list")
        return None
    root.children = _children(root, children, pname, prefix, problems)
    return root


def _children(parent: _Queue, raw: list[Any], pname: str, prefix: bool, problems: list[str]) -> list[_Queue]:
    out: list[_Queue] = []
    siblings: set[str] = set()
    for i, item in enumerate(raw):
        where = f"{parent.path}.queues[{i}]"
        if not isinstance(item, Mapping):
            problems.append(f"{where}: expected a mapping")
            continue
        yk_name = str(item.get("name") or "")
        if not _YUNIKORN_QUEUE_NAME.match(yk_name):
            problems.append(f"{where}: invalid queue name {yk_name!r} (YuniKorn allows [a-zA-Z0-9_-], 1 to 64 characters)")
            continue
        lowered = yk_name.lower()
        path = f"{parent.path}.{lowered}"
        if lowered in siblings:
            problems.append(f"{path}: duplicate queue name below {parent.path}")
            continue
        siblings.add(lowered)
        name = lowered.replace("_", "-")
        if prefix:
            name = f"{pname}-{name}"
        if not _DNS_LABEL.match(name):
            problems.append(f"{path}: {name!r} is not a valid Kubernetes name (DNS-1123 label); rename the queue")
            continue
        resources = item.get("resources") or {}
        if not isinstance(resources, Mapping):
            problems.append(f"{path}: resources must be a mapping")
            resources = {}
        queue = _Queue(
            path,
            name,
            bool(item.get("parent", False)),
            _resource_map(resources.get("guaranteed"), f"{path}: guaranteed", problems),
            _resource_map(resources.get("max"), f"{path}: max", problems),
        )
        sub = item.get("queues") or []
        if not isinstance(sub, list):
            problems.append(f"{path}: queues must be a list")
            sub = []
        queue.children = _children(queue, sub, pname, prefix, problems)
        out.append(queue)
    return out


def _resource_map(raw: object, where: str, problems: list[str]) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: expected a mapping of resource to quantity")
        return {}
    out: dict[str, int] = {}
    for key, value in raw.items():
        yk = str(key)
        resource = _RESOURCE_NAMES.get(yk, yk)
        if yk == "cpu":
            problems.append(f"{where}: YuniKorn names CPU 'vcore'; a resource named 'cpu' would clash with it")
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            problems.append(f"{where}.{yk}: expected a quantity, got {value!r}")
            continue
        try:
            parsed = amount(resource, value)
        except QuantityError as exc:
            problems.append(f"{where}.{yk}: {exc}")
            continue
        if parsed < 0:
            problems.append(f"{where}.{yk}: negative resources are not permitted")
            continue
        out[resource] = parsed
    return out


# -- sizing the Kueue tree ----------------------------------------------------------------------
def _walk(node: _Queue) -> list[_Queue]:
    out = [node]
    for child in node.children:
        out.extend(_walk(child))
    return out


def _resources_of(root: _Queue) -> set[str]:
    found: set[str] = set()
    for q in _walk(root):
        found.update(q.guaranteed)
        found.update(q.max)
    return found


def _size_tree(root: _Queue, resources: list[str], capacity: Mapping[str, int], problems: list[str],
               pname: str) -> None:
    for child in root.children:
        _size(child, resources, problems)
    for r in resources:
        below = sum(c.subtree[r] for c in root.children)
        if r in capacity:
            cluster = capacity[r]
        else:
            missing = [c.path for c in root.children if r not in c.max]
            if missing or not root.children:
                problems.append(
                    f"partition {pname}: the cluster size for {r} is unknown ({', '.join(missing) or 'root'} "
                    f"has no max for it); give it with --capacity {r}=QUANTITY"
                )
                cluster = below
            else:
                cluster = sum(c.max[r] for c in root.children)
        if below > cluster:
            problems.append(
                f"partition {pname}: the guarantees of the top-level queues ({_fmt(r, below)} {r}) exceed "
                f"the cluster ({_fmt(r, cluster)})"
            )
        root.nominal[r] = max(0, cluster - below)
        root.subtree[r] = root.nominal[r] + below
    # YuniKorn's own check compares the configured maxes (the root has none).
    _check_max(root, dict.fromkeys(resources), problems)
    # No queue can use more than the cluster: a larger max means "no limit of its own", and is
    # capped so that no child's max exceeds its (capped) parent's in the Kueue tree either.
    for q in _walk(root)[1:]:
        for r, value in list(q.max.items()):
            q.max[r] = min(value, root.subtree[r])


def _size(node: _Queue, resources: list[str], problems: list[str]) -> None:
    for child in node.children:
        _size(child, resources, problems)
    for r in resources:
        g = node.guaranteed.get(r, 0)
        below = sum(c.subtree[r] for c in node.children)
        if node.children and r in node.guaranteed and below > g:
            problems.append(
                f"{node.path}: guaranteed {_fmt(r, g)} {r} is smaller than the sum of its children's "
                f"guarantees ({_fmt(r, below)})"
            )
        node.nominal[r] = max(0, g - below)
        node.subtree[r] = node.nominal[r] + below
        m = node.max.get(r)
        if m is not None and m < g:
            problems.append(f"{node.path}: guaranteed {_fmt(r, g)} {r} is larger than its max ({_fmt(r, m)})")
        elif m is not None and m < below:
            problems.append(
                f"{node.path}: max {_fmt(r, m)} {r} is smaller than the sum of its children's guarantees "
                f"({_fmt(r, below)})"
            )


def _check_max(node: _Queue, parent_max: dict[str, int | None], problems: list[str]) -> None:
    """YuniKorn: a queue's max may not exceed its parent's effective max (the min up the path)."""
    for child in node.children:
        effective: dict[str, int | None] = {}
        for r, limit in parent_max.items():
            own = child.max.get(r)
            if own is not None and limit is not None and own > limit:
                problems.append(
                    f"{child.path}: max {_fmt(r, own)} {r} exceeds its parent's max {_fmt(r, limit)} "
                    f"(YuniKorn: a child's quota cannot be above its parent's)"
                )
            effective[r] = own if limit is None else (limit if own is None else min(own, limit))
        _check_max(child, effective, problems)


# -- emitting events ----------------------------------------------------------------------------
def _tree_events(root: _Queue, resources: list[str], flavor: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []

    def visit(node: _Queue, parent: _Queue | None) -> None:
        groups = [_resource_group(node, resources, flavor, with_limits=parent is not None)]
        if node.is_leaf:
            assert parent is not None
            spec: dict[str, Any] = {"cohortName": parent.name, "namespaceSelector": {}, "resourceGroups": groups}
            events.append(_event(_object("ClusterQueue", node.name, None, spec, node.path)))
            lq = {"clusterQueue": node.name}
            events.append(_event(_object("LocalQueue", node.name, node.name, lq, node.path)))
            return
        spec = {"resourceGroups": groups}
        if parent is not None:
            spec = {"parentName": parent.name, **spec}
        events.append(_event(_object("Cohort", node.name, None, spec, node.path)))
        for child in node.children:
            visit(child, node)

    visit(root, None)
    return events


def _resource_group(node: _Queue, resources: list[str], flavor: str, with_limits: bool) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for r in resources:
        item: dict[str, Any] = {"name": r, "nominalQuota": _fmt(r, node.nominal[r])}
        if with_limits and r in node.max:
            item["borrowingLimit"] = _fmt(r, max(0, node.max[r] - node.subtree[r]))
        items.append(item)
    return {"coveredResources": list(resources), "flavors": [{"name": flavor, "resources": items}]}


def _object(kind: str, name: str, namespace: str | None, spec: dict[str, Any], path: str | None) -> dict[str, Any]:
    annotations = {QUOTA_MODEL_ANNOTATION: YUNIKORN}
    if path is not None:
        annotations[QUEUE_ANNOTATION] = path
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    metadata["annotations"] = annotations
    return {"apiVersion": KUEUE_API, "kind": kind, "metadata": metadata, "spec": spec}


def _event(obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": "ConfigApplied", "object": obj}


_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_DECIMAL = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))


def _fmt(resource: str, value: int) -> str:
    """A Kubernetes quantity for an amount: the shortest exact spelling (`64`, `250m`, `500G`, `1Gi`)."""
    if resource == "cpu":
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    best = str(value)
    if value == 0:
        return best
    for suffix, unit in (*_DECIMAL, *_BINARY):
        if value % unit == 0:
            spelled = f"{value // unit}{suffix}"
            if len(spelled) < len(best):
                best = spelled
    return best
