"""Everything the command line shows to people (rich): decisions, usage, and the projections' views.

One rich line per decision (`watch`, `demo`); the views' tables (`status`, `pending`, `history`,
`explain`); and `Usage`, the demo's quota table.

`Usage` folds the input log's ClusterQueue objects (nominal quota, borrowing limit) and the
decision log (who holds quota where) into a table per ClusterQueue, flavor and resource. Per the
contract, a workload holds quota from its `Admitted` or `QuotaReserved` decision until its
`Finished`, `Deleted` or `QuotaReleased` decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from domain.decisions import (
    Admitted,
    AnyDecision,
    Applied,
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
from projections.fold import FR, Projection


def output_console() -> Console:
    """The console for stdout: a terminal's width on a terminal; piped, lines are never cut or
    wrapped, so `grep` and `awk` see whole records."""
    import sys

    if sys.stdout.isatty():
        return Console(highlight=False)
    return Console(highlight=False, width=100_000, soft_wrap=True)


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
    "Applied": "cyan",
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
    if isinstance(decision, Applied):
        where = f"{decision.namespace}/" if decision.namespace else ""
        return f"{decision.kind} {where}{decision.name or ''} {decision.action}".replace("  ", " ")
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


BAR_WIDTH = 20


def usage_bar(used: int, nominal: int, admitted: int, width: int = BAR_WIDTH) -> Text:
    """▇ admitted, ▒ reserved (not yet admitted), red past nominal quota (borrowed)."""
    scale = max(nominal, used, 1)

    def cells(v: int) -> int:
        return round(width * v / scale)

    nominal_cells = cells(nominal) if nominal else 0
    text = Text()
    for i in range(width):
        if i < cells(admitted):
            char, style = "█", "green"
        elif i < cells(used):
            char, style = "▒", "cyan"
        elif i < nominal_cells:
            char, style = "░", "dim"
        else:
            char, style = " ", ""
        if i >= nominal_cells and char != " ":
            style = "red" if char == "█" else "magenta"
        text.append(char, style=style)
    return text


def status_table(p: Projection, *, wide: bool = True, more: bool = False) -> Table:
    """ClusterQueues as `kubectl get clusterqueues -o wide` shows them; `more` (`status -o
    wide`): also reserving workloads, Active, stop policy and age."""
    from projections import views
    from streams.cli.output import age

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    table.add_column("NAME", no_wrap=True)
    table.add_column("COHORT", no_wrap=True)
    if wide:
        table.add_column("STRATEGY", no_wrap=True)
    table.add_column("PENDING WORKLOADS", justify="right")
    if wide:
        table.add_column("ADMITTED WORKLOADS", justify="right")
    if more:
        for column in ("RESERVING WORKLOADS", "ACTIVE", "STOP POLICY", "AGE"):
            table.add_column(column, justify="right" if column == "RESERVING WORKLOADS" else "left", no_wrap=True)
    for name in sorted(p.cluster_queues):
        cq = p.cluster_queues[name]
        row: list[Any] = [Text(name, style="strike" if cq.terminating else ""), cq.spec.cohort or ""]
        if wide:
            row.append(cq.spec.queueing_strategy)
        row.append(str(len(cq.pending)))
        if wide:
            row.append(str(cq.admitted))
        if more:
            view = views.cluster_queue(p, name) or {}
            row += [str(len(cq.holders)), str(views.cluster_queue_active(p, cq)[0]), cq.spec.stop_policy, age(view)]
        table.add_row(*row)
    return table


def usage_table(p: Projection, bar_width: int = BAR_WIDTH) -> Table:
    """Quota per ClusterQueue, flavor and resource: a bar (█ admitted, ▒ reserved, ░ free; red
    past nominal), reserved/nominal, and what is borrowed."""
    frs_all = [(n, fr) for n, cq in p.cluster_queues.items() for fr in list(cq.quotas) + list(cq.reservation)]

    def width(items: list[str], header: str) -> int:
        return max([len(header), *map(len, items)])

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    table.add_column("CLUSTERQUEUE", no_wrap=True, min_width=width([n for n, _ in frs_all], "CLUSTERQUEUE"))
    table.add_column("FLAVOR", no_wrap=True, min_width=width([fr[0] for _, fr in frs_all], "FLAVOR"))
    table.add_column("RESOURCE", no_wrap=True, min_width=width([fr[1] for _, fr in frs_all], "RESOURCE"))
    table.add_column("USAGE", no_wrap=True, overflow="crop", width=bar_width)
    table.add_column("RESERVED/NOMINAL", justify="right", no_wrap=True, min_width=16)
    table.add_column("BORROWED", justify="right", no_wrap=True, min_width=8)
    for name in sorted(p.cluster_queues):
        cq = p.cluster_queues[name]
        frs: list[FR] = list(cq.quotas) + sorted(fr for fr in cq.reservation if fr not in cq.quotas)
        for i, fr in enumerate(frs):
            flavor, res = fr
            q = cq.quotas.get(fr)
            nominal = q.nominal if q is not None else 0
            used = cq.reservation.get(fr, 0)
            admitted = cq.usage.get(fr, 0)
            borrowed = max(0, used - nominal)
            table.add_row(
                name if i == 0 else "",
                flavor,
                res,
                usage_bar(used, nominal, admitted, bar_width),
                f"{format_amount(res, used)}/{format_amount(res, nominal)}",
                Text(format_amount(res, borrowed), style="red" if borrowed else "dim"),
            )
    return table


def history_table(entries: list[dict[str, Any]], *, wide: bool = False) -> Table:
    """`wide`: also each decision's offset in the decision log and when its event was written."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold")
    if wide:
        table.add_column("DECISION OFFSET", no_wrap=True, justify="right")
        table.add_column("WRITTEN", no_wrap=True)
    table.add_column("CAUSE", no_wrap=True)
    table.add_column("EVENT")
    table.add_column("DECISION", no_wrap=True)
    table.add_column("DETAILS")
    for e in entries:
        d = e.get("decision") or {}
        event = e.get("event") or {}
        cause = e.get("cause") or {}
        kind = d.get("type", "?") if isinstance(d, dict) else "?"
        etype = event.get("type", "(not JSON)") if isinstance(event, dict) else "?"
        if etype == "Batch" and isinstance(event.get("events"), list):
            etype = f"Batch[{len(event['events'])}]"
        time = event.get("time") if isinstance(event, dict) else None
        details = ""
        if kind in ("Admitted", "QuotaReserved"):
            parts = []
            for ps in d.get("podSetAssignments", []):
                usage = " ".join(f"{r}={q}[{ps.get('flavors', {}).get(r, '?')}]" for r, q in ps.get("resourceUsage", {}).items())
                parts.append(f"{ps.get('name')}×{ps.get('count')} {usage}")
            details = f"→ {d.get('clusterQueue')}: " + "; ".join(parts)
        elif kind == "Preempted":
            details = f"by {d.get('preemptor')} ({d.get('reason')}): {d.get('message')}"
        elif kind in ("Pending", "Evicted", "Rejected"):
            details = f"{d.get('reason')}: {d.get('message')}"
        elif kind == "QuotaReleased":
            details = f"quota back to {d.get('clusterQueue')}"
        table.add_row(
            *([str(e.get("decisionOffset", "")), e.get("eventTime") or ""] if wide else []),
            f"@{cause.get('offset')}.{cause.get('index')}",
            f"{etype}" + (f" {time}" if time else ""),
            Text(kind, style=STYLES.get(kind, "")),
            Text(details),  # not markup: "[flavor]" is text
        )
    return table


def _pairs(mapping: Any) -> str:
    """{'cpu': '100m', 'memory': '1Gi'} as `cpu=100m memory=1Gi`, as kubectl shows requests."""
    if isinstance(mapping, Mapping):
        return " ".join(f"{k}={v}" for k, v in mapping.items())
    return str(mapping)


def explain_renderables(result: dict[str, Any], *, wide: bool = False) -> list[Any]:
    out: list[Any] = []
    state = result.get("state") or {}
    title = Text(f"Workload {result['workload']}", style="bold")
    phase = state.get("phase", "unknown")
    title.append(f"  {phase}", style=STYLES.get(phase, "yellow" if phase == "Pending" else ""))
    out.append(title)
    as_of = result.get("asOf", {})
    out.append(Text(f"as of input offset {as_of.get('inputOffset')}", style="dim"))
    if state:
        facts = []
        for key in ("clusterQueue", "localQueue", "priority", "priorityClassName", "positionInClusterQueue", "positionInLocalQueue"):
            if state.get(key) is not None:
                facts.append(f"{key}={state[key]}")
        out.append(Text("  " + "  ".join(facts)))
    out.append(Text("\nHistory", style="bold"))
    out.append(history_table(result.get("history", []), wide=wide))
    why = result.get("why")
    if why:
        out.append(Text("\nWhy it is pending", style="bold"))
        if why.get("reason"):
            out.append(Text(f"  {why['reason']}: {why.get('message', '')}"))
        if why.get("explanation"):
            out.append(Text(f"  {why['explanation']}"))
        if why.get("blockedBy"):
            out.append(Text(f"  StrictFIFO: blocked behind {why['blockedBy']}"))
        assignment = why.get("assignment")
        if assignment:
            fits = "fits" if assignment.get("fitsWithoutPreemption") else "does not fit"
            out.append(Text(f"  flavor assignment now, without preemption: {fits}"
                            + (f" (borrowing level {assignment['borrowing']})" if assignment.get("borrowing") else "")))
            if assignment.get("message"):
                out.append(Text(f"  {assignment['message']}", style="yellow"))
            pre = why.get("preemption", {})
            out.append(Text("  preemption: " + ", ".join(f"{k}={v}" for k, v in pre.items()), style="dim"))
        for ps in why.get("podSets", []):
            tried = "; ".join(f"{res}: {' → '.join(fl)}" for res, fl in ps["flavorsTried"].items())
            modes = ", ".join(f"{res}: {m}" for res, m in ps["modes"].items())
            out.append(Text(f"  pod set {ps['name']} ×{ps['count']} requests {_pairs(ps['requests'])} — flavors tried {tried}"
                            + (f" — modes {modes}" if modes else "")))
        if why.get("quota"):
            table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold", title="quota", title_justify="left")
            for col in ("FLAVOR", "RESOURCE", "REQUESTED", "NOMINAL", "BORROWING LIMIT", "USED BY CQ", "AVAILABLE", "MAX", "SHORT"):
                table.add_column(col, justify="left" if col in ("FLAVOR", "RESOURCE") else "right")
            for q in why["quota"]:
                table.add_row(q["flavor"], q["resource"], q["requested"], q["nominalQuota"], q["borrowingLimit"] or "-",
                              q["usedByClusterQueue"], q["available"], q["maximumCapacity"],
                              Text(q["short"], style="red" if q["short"] not in ("0", "0Gi") else "dim"))
            out.append(table)
        if why.get("heldBy"):
            table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold", title="held by", title_justify="left")
            for col in ("WORKLOAD", "CLUSTERQUEUE", "PRIORITY", "STATE", "USES"):
                table.add_column(col)
            for h in why["heldBy"]:
                table.add_row(h["workload"], h["clusterQueue"], str(h["priority"]), h["state"],
                              " ".join(f"{k}={v}" for k, v in h["uses"].items()))
            out.append(table)
    return out


def pending_table(summary: dict[str, Any], *, cluster_queue: str | None = None) -> Table:
    """Kueue's PendingWorkloadsSummary; given the `cluster_queue` (`pending -o wide`), with it
    and each workload's age."""
    from streams.cli.output import age

    wide = cluster_queue is not None
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold")
    columns = ["POSITION IN CQ", "POSITION IN LQ", "NAMESPACE", "NAME", "LOCALQUEUE", "PRIORITY", "CREATED"]
    for col in columns + (["CLUSTERQUEUE", "AGE"] if wide else []):
        table.add_column(col, justify="right" if col.startswith("POSITION") or col == "PRIORITY" else "left")
    for item in summary.get("items", []):
        meta = item["metadata"]
        table.add_row(str(item["positionInClusterQueue"]), str(item["positionInLocalQueue"]), meta["namespace"], meta["name"],
                      item["localQueueName"], str(item["priority"]), meta.get("creationTimestamp", ""),
                      *([cluster_queue or "", age(item)] if wide else []))
    return table


def human_duration(seconds: float) -> str:
    """An age as kubectl and kueuectl print it (k8s.io/apimachinery's duration.HumanDuration,
    which kueuectl's list printers use for AGE): exact while short, coarser as it grows."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"  # a clock more than a second behind the event's time
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        return f"{years}y{days % 365}d" if days % 365 else f"{years}y"
    return f"{years}y"
