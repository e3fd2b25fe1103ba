"""Showing decisions to people: one rich line per decision, and a quota usage table.

`Usage` folds the input log's ClusterQueue objects (nominal quota, borrowing limit) and the
decision log (who holds quota where) into a table per ClusterQueue, flavor and resource. Per the
contract, a workload holds quota from its `Admitted` or `QuotaReserved` decision until its
`Finished`, `Deleted` or `QuotaReleased` decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table
from rich.text import Text

from domain.decisions import (
    Admitted,
    AnyDecision,
    Deleted,
    Evicted,
    Finished,
    Pending,
    Preempted,
    QuotaReleased,
    QuotaReserved,
    Rejected,
)
from domain.quantity import QuantityError, amount, format_amount

STYLES = {
    "Admitted": "bold green",
    "QuotaReserved": "cyan",
    "Pending": "yellow",
    "Preempted": "bold magenta",
    "Evicted": "magenta",
    "QuotaReleased": "blue",
    "Finished": "dim green",
    "Deleted": "dim",
    "Rejected": "bold red",
}


def describe(decision: AnyDecision) -> str:
    """The type-specific part of a decision, in a few words."""
    if isinstance(decision, (Admitted, QuotaReserved)):
        parts = []
        for ps in decision.podSetAssignments:
            flavors = set(ps.flavors.values())
            if len(flavors) == 1:
                usage = " ".join(f"{res}={qty}" for res, qty in ps.resourceUsage.items()) + f" [{flavors.pop()}]"
            else:
                usage = " ".join(f"{res}={qty}[{ps.flavors.get(res, '?')}]" for res, qty in ps.resourceUsage.items())
            parts.append(f"{ps.name}×{ps.count} {usage}")
        return f"→ {decision.clusterQueue}: " + "; ".join(parts)
    if isinstance(decision, Preempted):
        return f"by {decision.preemptor} ({decision.reason}): {decision.message}"
    if isinstance(decision, (Pending, Evicted, Rejected)):
        return f"{decision.reason}: {decision.message}"
    if isinstance(decision, QuotaReleased):
        return f"quota back to {decision.clusterQueue}"
    return ""


def decision_line(decision: AnyDecision, offset: int | None = None) -> Text:
    kind = type(decision).__name__
    line = Text()
    if offset is not None:
        line.append(f"{offset:>6} ", style="dim")
    line.append(f"{'@' + str(decision.cause.offset) + '.' + str(decision.cause.index):<9} ", style="dim")
    line.append(f"{kind:<13} ", style=STYLES.get(kind, ""))
    line.append(f"{decision.workload or '-':<20} ", style="bold" if decision.workload else "dim")
    line.append(describe(decision))
    return line


@dataclass
class Quota:
    nominal: int = 0
    borrowing_limit: int | None = None


@dataclass
class Usage:
    # (cluster queue, flavor, resource) -> quota, in the order objects were applied
    quotas: dict[tuple[str, str, str], Quota] = field(default_factory=dict)
    cohorts: dict[str, str | None] = field(default_factory=dict)
    # workload -> (cluster queue, {(flavor, resource): amount})
    holding: dict[str, tuple[str, dict[tuple[str, str], int]]] = field(default_factory=dict)

    def add_event(self, event: Any) -> None:
        """Fold an input event: ClusterQueue objects set the quotas."""
        if not isinstance(event, Mapping):
            return
        if event.get("type") == "ConfigDeleted" and event.get("kind") == "ClusterQueue":
            name = event.get("name")
            self.quotas = {k: v for k, v in self.quotas.items() if k[0] != name}
            self.cohorts.pop(str(name), None)
            return
        obj = event.get("object")
        if event.get("type") != "ConfigApplied" or not isinstance(obj, Mapping) or obj.get("kind") != "ClusterQueue":
            return
        try:
            name = obj["metadata"]["name"]
            spec = obj.get("spec") or {}
            self.quotas = {k: v for k, v in self.quotas.items() if k[0] != name}
            self.cohorts[name] = spec.get("cohort") or spec.get("cohortName")
            for group in spec.get("resourceGroups") or ():
                for flavor in group.get("flavors") or ():
                    for res in flavor.get("resources") or ():
                        rname = res["name"]
                        limit = res.get("borrowingLimit")
                        self.quotas[(name, flavor["name"], rname)] = Quota(
                            amount(rname, res.get("nominalQuota", 0)),
                            None if limit is None else amount(rname, limit),
                        )
        except (KeyError, TypeError, AttributeError, QuantityError):
            return  # the engine rejects such an object too

    def add_decision(self, decision: AnyDecision) -> None:
        wl = decision.workload
        if wl is None:
            return
        if isinstance(decision, (Admitted, QuotaReserved)):
            used: dict[tuple[str, str], int] = {}
            for ps in decision.podSetAssignments:
                for res, qty in ps.resourceUsage.items():
                    key = (ps.flavors.get(res, "?"), res)
                    used[key] = used.get(key, 0) + amount(res, qty)
            self.holding[wl] = (decision.clusterQueue, used)
        elif isinstance(decision, (Finished, Deleted, QuotaReleased)):
            self.holding.pop(wl, None)

    def used(self) -> dict[tuple[str, str, str], int]:
        out: dict[tuple[str, str, str], int] = {}
        for cq, usage in self.holding.values():
            for (flavor, res), value in usage.items():
                out[(cq, flavor, res)] = out.get((cq, flavor, res), 0) + value
        return out

    def workloads_by_queue(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for cq, _ in self.holding.values():
            out[cq] = out.get(cq, 0) + 1
        return out

    def table(self, title: str = "Quota usage") -> Table:
        used = self.used()
        counts = self.workloads_by_queue()
        table = Table(title=title, title_justify="left")
        for column, justify in (
            ("ClusterQueue", "left"),
            ("cohort", "left"),
            ("flavor", "left"),
            ("resource", "left"),
            ("nominal", "right"),
            ("borrowingLimit", "right"),
            ("in use", "right"),
            ("borrowed", "right"),
            ("workloads", "right"),
        ):
            table.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
        keys = list(self.quotas) + [k for k in used if k not in self.quotas]
        previous = None
        for cq, flavor, res in keys:
            quota = self.quotas.get((cq, flavor, res), Quota())
            value = used.get((cq, flavor, res), 0)
            borrowed = max(0, value - quota.nominal)
            first = cq != previous
            previous = cq
            table.add_row(
                cq if first else "",
                (self.cohorts.get(cq) or "-") if first else "",
                flavor,
                res,
                format_amount(res, quota.nominal),
                "-" if quota.borrowing_limit is None else format_amount(res, quota.borrowing_limit),
                Text(format_amount(res, value), style="bold" if value else "dim"),
                Text(format_amount(res, borrowed), style="yellow" if borrowed else "dim"),
                str(counts.get(cq, 0)) if first else "",
            )
        return table
