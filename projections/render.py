"""Rendering views for people (rich): `quotaflow status`, `history`, `explain`, `pending`."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from domain.quantity import format_amount
from projections.fold import FR, Projection
from streams.render import STYLES

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


def status_table(p: Projection, *, wide: bool = True) -> Table:
    """ClusterQueues as `kubectl get clusterqueues -o wide` shows them."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    table.add_column("NAME", no_wrap=True)
    table.add_column("COHORT", no_wrap=True)
    if wide:
        table.add_column("STRATEGY", no_wrap=True)
    table.add_column("PENDING WORKLOADS", justify="right")
    if wide:
        table.add_column("ADMITTED WORKLOADS", justify="right")
    for name in sorted(p.cluster_queues):
        cq = p.cluster_queues[name]
        row: list[Any] = [Text(name, style="strike" if cq.terminating else ""), cq.spec.cohort or ""]
        if wide:
            row.append(cq.spec.queueing_strategy)
        row.append(str(len(cq.pending)))
        if wide:
            row.append(str(cq.admitted))
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


def history_table(entries: list[dict[str, Any]]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold")
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
            f"@{cause.get('offset')}.{cause.get('index')}",
            f"{etype}" + (f" {time}" if time else ""),
            Text(kind, style=STYLES.get(kind, "")),
            details,
        )
    return table


def explain_renderables(result: dict[str, Any]) -> list[Any]:
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
    out.append(history_table(result.get("history", [])))
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
            out.append(Text(f"  pod set {ps['name']} ×{ps['count']} requests {ps['requests']} — flavors tried {tried}"
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


def pending_table(summary: dict[str, Any]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold")
    for col in ("POSITION IN CQ", "POSITION IN LQ", "NAMESPACE", "NAME", "LOCALQUEUE", "PRIORITY", "CREATED"):
        table.add_column(col, justify="right" if col.startswith("POSITION") or col == "PRIORITY" else "left")
    for item in summary.get("items", []):
        meta = item["metadata"]
        table.add_row(str(item["positionInClusterQueue"]), str(item["positionInLocalQueue"]), meta["namespace"], meta["name"],
                      item["localQueueName"], str(item["priority"]), meta.get("creationTimestamp", ""))
    return table
