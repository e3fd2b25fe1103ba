"""Kueue's scheduler-performance `generator.yaml`, read as Kueue's runner reads it.

The schema is Kueue's (test/performance/scheduler/runner/generator): cohort sets, each with
queue sets, each with workload sets. Only the non-TAS part is modelled; a config that asks for
topology-aware scheduling is refused rather than silently run without it.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import yaml

from domain.quantity import amount

CONFIGS = Path(__file__).parent / "configs"
DEFAULT_FLAVOR = "rf"  # Kueue's generator names its single flavor so when the config does not


class WorkloadTemplate(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    class_name: str
    runtime_ms: int
    priority: int
    request: str | int
    pod_count: int = 0
    tas_constraint: str = ""
    tas_level: str = ""
    slice_size: int = 0


class WorkloadsSet(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    count: int
    creation_interval_ms: int
    workloads: list[WorkloadTemplate]


class QueuesSet(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    class_name: str
    count: int
    nominal_quota: str | int
    borrowing_limit: str | int | None = None
    reclaim_within_cohort: str = "Never"
    within_cluster_queue: str = "Never"
    workloads_sets: list[WorkloadsSet] = msgspec.field(default_factory=list)


class CohortSet(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    class_name: str
    count: int
    queues_sets: list[QueuesSet]


class ResourceFlavorConfig(msgspec.Struct, rename="camel"):
    name: str


class Config(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    cohorts: list[CohortSet]
    resource_flavor: ResourceFlavorConfig | None = None
    topology: dict[str, object] | None = None

    @property
    def flavor(self) -> str:
        return self.resource_flavor.name if self.resource_flavor else DEFAULT_FLAVOR


class ConfigError(ValueError):
    pass


def resolve(name_or_path: str) -> Path:
    """`baseline` / `large-scale` name a shipped config; anything else is a path."""
    shipped = CONFIGS / name_or_path / "generator.yaml"
    return shipped if shipped.exists() else Path(name_or_path)


def load(name_or_path: str) -> Config:
    return parse(resolve(name_or_path).read_text())


def parse(text: str) -> Config:
    try:
        config = msgspec.convert(yaml.safe_load(text), Config)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"not a Kueue generator config: {exc}") from None
    if not config.cohorts:
        raise ConfigError("config must contain at least one cohort")  # as Kueue's LoadConfig
    if config.topology is not None or any(
        t.tas_level or t.pod_count > 1
        for c in config.cohorts
        for q in c.queues_sets
        for s in q.workloads_sets
        for t in s.workloads
    ):
        raise ConfigError("topology-aware configs (topology, tasLevel, podCount > 1) are not modelled")
    for c in config.cohorts:
        for q in c.queues_sets:
            amount("cpu", q.nominal_quota)  # a bad quantity fails here, not mid-run
            for s in q.workloads_sets:
                for t in s.workloads:
                    amount("cpu", t.request)
    return config
