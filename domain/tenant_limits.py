"""Limits per tenant: the `quotaflow.tenantLimits` stanza of the Configuration.

`maxPendingWorkloads` per namespace (as YuniKorn's queue `maxapplications`) and `maxEventBytes`
per record from a tenant topic. The engine applies them (this module, and pending workloads
in domain/authority.py). They are configuration in the
input log, so `replay` and `audit` reproduce every refusal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from domain import reasons
from domain.fields import Fields, InvalidInput
from domain.names import label_problem

TENANT_PREFIX: Final = "tenant:"


@dataclass(frozen=True, slots=True)
class NamespaceLimits:
    max_pending_workloads: int | None = None
    max_event_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """`quotaflow.tenantLimits`: defaults for every namespace, and per-namespace overrides."""

    default: NamespaceLimits = NamespaceLimits()
    namespaces: Mapping[str, NamespaceLimits] = field(default_factory=dict)

    def of(self, namespace: str) -> NamespaceLimits:
        return self.namespaces.get(namespace, self.default)


NO_TENANT_LIMITS: Final = TenantLimits()


def _limits(f: Fields, inherited: NamespaceLimits) -> NamespaceLimits:
    pending = f.opt_int("maxPendingWorkloads")
    size = f.opt_int("maxEventBytes")
    if pending is not None and pending < 0:
        raise f.fail("maxPendingWorkloads", "must be greater than or equal to 0")
    if size is not None and size < 1:
        raise f.fail("maxEventBytes", "must be greater than 0")
    return NamespaceLimits(
        inherited.max_pending_workloads if pending is None else pending,
        inherited.max_event_bytes if size is None else size,
    )


def parse_tenant_limits(own: Fields) -> TenantLimits:
    """`tenantLimits: {maxPendingWorkloads, maxEventBytes, namespaces: {NS: {...}}}` of the
    Configuration's `quotaflow` stanza; a namespace's own value overrides the default."""
    section = own.opt_sub("tenantLimits")
    if section is None:
        return NO_TENANT_LIMITS
    default = _limits(section, NamespaceLimits())
    listed = section.sub("namespaces")
    namespaces: dict[str, NamespaceLimits] = {}
    for name in sorted(listed.data, key=str):
        if not isinstance(name, str) or label_problem(name) is not None:
            raise listed.fail(str(name), "not a namespace name")
        namespaces[name] = _limits(listed.sub(name), default)
    return TenantLimits(default, namespaces)


def check_event_size(limits: TenantLimits, source: str | None, size: int | None) -> None:
    """A tenant topic's record over its namespace's `maxEventBytes` is refused whole."""
    if size is None or source is None or not source.startswith(TENANT_PREFIX):
        return
    namespace = source[len(TENANT_PREFIX) :]
    limit = limits.of(namespace).max_event_bytes
    if limit is not None and size > limit:
        raise InvalidInput(
            reasons.LIMIT_EXCEEDED,
            f'record is {size} bytes, over tenantLimits maxEventBytes of {limit} bytes for source "{source}"',
        )


