"""Topology-aware scheduling, as far as quotaflow follows it: not at all, and visibly so.

quotaflow has no Topology objects (the kind is refused as not supported), so a ResourceFlavor
that names one (`topologyName`) names a Topology that does not exist, and Kueue keeps a
ClusterQueue using such a flavor inactive with reason TopologyNotFound
(pkg/cache/scheduler/clusterqueue.go, inactiveReason). Its workloads wait, `Suspended`, rather
than being admitted without the topology they were meant to get.
"""

from __future__ import annotations

from collections.abc import Mapping

from domain import reasons
from domain.fields import InvalidInput
from domain.objects import ClusterQueueSpec, ResourceFlavor

TOPOLOGY_NOT_FOUND = "TopologyNotFound"  # Kueue's ClusterQueueActiveReasonTopologyNotFound


def topology_problems(spec: ClusterQueueSpec, flavors: Mapping[str, ResourceFlavor]) -> list[str]:
    """Kueue's inactive messages for the TAS flavors of `spec`, in the ClusterQueue's order."""
    out: list[str] = []
    for name in spec.flavor_names():
        flavor = flavors.get(name)
        if flavor is not None and flavor.topology_name is not None:
            out.append(f'there is no Topology "{flavor.topology_name}" for TAS flavor "{name}"')
    return out




def check_flavor_update(old: ResourceFlavor | None, new: ResourceFlavor) -> None:
    """Kueue's CRD rule: once set, a flavor's topologyName cannot change or go away."""
    if old is not None and old.topology_name is not None and new.topology_name != old.topology_name:
        raise InvalidInput(
            reasons.IMMUTABLE_FIELD,
            f'ResourceFlavor "{new.name}": spec: Invalid value: "object": topologyName is immutable when '
            "topologyName is set",
        )


__all__ = ["TOPOLOGY_NOT_FOUND", "check_flavor_update", "topology_problems"]
