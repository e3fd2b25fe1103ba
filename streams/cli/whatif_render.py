"""`quotaflow whatif` on a terminal: the report of streams/whatif/run.py as rich tables.

One change: per ClusterQueue, LocalQueue, cohort and priority the recorded and what-if figures
side by side (`recorded → what-if`, green where the change helps, red where it hurts), a
sparkline of each ClusterQueue's usage over time, and the workloads whose admission moved most.
A sweep: one summary table with a row per change, then each ClusterQueue's mean wait and usage
per change.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

SPARK = "▁▂▃▄▅▆▇█"
GROUP_TITLES = {"ClusterQueue": "CLUSTERQUEUE", "LocalQueue": "LOCALQUEUE", "Cohort": "COHORT", "Priority": "PRIORITY"}


def seconds(v: float | None) -> str:
    if v is None:
        return "—"
    a = abs(v)
    if a >= 86_400:
        return f"{v / 86_400:.1f}d"
    if a >= 3_600:
        return f"{v / 3_600:.1f}h"
    if a >= 60:
        return f"{v / 60:.1f}m"
    return f"{v:.1f}s"


def _table(*headers: str) -> Table:
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for i, h in enumerate(headers):
        t.add_column(h, no_wrap=True, justify="left" if i == 0 else "right")
    return t


def pair(a: float, b: float, fmt: Any = str, lower_is_better: bool = True) -> Text:
    """`a → b`, coloured by whether b is better."""
    if a == b:
        return Text(fmt(a), style="dim")
    better = (b < a) if lower_is_better else (b > a)
    return Text(f"{fmt(a)} → {fmt(b)}", style="green" if better else "red")


def spark(series: list[float], top: float) -> str:
    if top <= 0:
        return " " * len(series)
    return "".join(SPARK[min(len(SPARK) - 1, int(v / top * (len(SPARK) - 1) + 0.5))] if v > 0 else " " for v in series)


def _usage(e: dict[str, Any] | None) -> dict[str, Any]:
    return e["usage"] if e else {}


def group_table(kind: str, recorded: dict[str, Any], changed: dict[str, Any]) -> Table:
    t = _table(GROUP_TITLES[kind], "ADMITTED", "NEVER", "ADMISSIONS", "PREEMPTED", "EVICTED", "WAIT MEAN", "P50", "P90", "P99",
               "MAX", "USAGE (MEAN)")
    names = sorted(set(recorded) | set(changed))
    zero = {"admitted": 0, "neverAdmitted": 0, "admissions": 0, "preemptions": 0, "evictions": 0,
            "timeToAdmission": {k: 0.0 for k in ("mean", "p50", "p90", "p99", "max")}, "usage": {}}
    for name in names:
        a, b = recorded.get(name, zero), changed.get(name, zero)
        wa, wb = a["timeToAdmission"], b["timeToAdmission"]
        usage = Text()
        for res in sorted(set(_usage(a)) | set(_usage(b))):
            ua, ub = a["usage"].get(res), b["usage"].get(res)
            ma, mb = (ua or {}).get("mean", "0"), (ub or {}).get("mean", "0")
            if usage:
                usage.append("  ")
            share = ""
            if ub and "ofNominal" in ub:
                share = f" ({(ua or {}).get('ofNominal', 0) * 100:.0f}%→{ub['ofNominal'] * 100:.0f}%)" if ua else f" ({ub['ofNominal'] * 100:.0f}%)"
            usage.append(f"{res} {ma}" if ma == mb else f"{res} {ma} → {mb}", style="dim" if ma == mb else "")
            usage.append(share, style="dim")
        t.add_row(name, pair(a["admitted"], b["admitted"], lower_is_better=False), pair(a["neverAdmitted"], b["neverAdmitted"]),
                  pair(a["admissions"], b["admissions"], lower_is_better=False), pair(a["preemptions"], b["preemptions"]),
                  pair(a["evictions"], b["evictions"]),
                  *(pair(wa[k], wb[k], seconds) for k in ("mean", "p50", "p90", "p99", "max")), usage)
    return t


def usage_sparklines(recorded: dict[str, Any], changed: dict[str, Any]) -> Table:
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    t.add_column("CLUSTERQUEUE", no_wrap=True)
    t.add_column("RESOURCE", no_wrap=True)
    t.add_column("RECORDED", no_wrap=True)
    t.add_column("WHAT IF", no_wrap=True)
    for name in sorted(set(recorded) | set(changed)):
        for res in sorted(set(_usage(recorded.get(name))) | set(_usage(changed.get(name)))):
            sa = (recorded.get(name) or {}).get("usage", {}).get(res, {}).get("series", [])
            sb = (changed.get(name) or {}).get("usage", {}).get(res, {}).get("series", [])
            top = max(sa + sb + [0.0])
            t.add_row(name, res, Text(spark(sa, top), style="cyan"), Text(spark(sb, top), style="green"))
    return t


def moved_table(title: str, rows: list[dict[str, Any]]) -> Table:
    t = _table(title, "LOCALQUEUE", "PRIORITY", "RECORDED WAIT", "WHAT-IF WAIT", "MOVED")
    for r in rows:
        t.add_row(r["workload"], r["localQueue"], r["priority"], seconds(r["recordedWait"]), seconds(r["whatIfWait"]),
                  seconds(r.get("moved")) if "moved" in r else "—")
    return t


def summary_table(report: dict[str, Any]) -> Table:
    t = _table("WORLD", "ADMITTED", "NEVER", "ADMISSIONS", "PREEMPTED", "EVICTED", "WAIT MEAN", "P50", "P90", "P99", "MAX",
               "EARLIER", "LATER")
    rec = report["recorded"]["totals"]

    def row(name: str, tot: dict[str, Any], moved: dict[str, Any] | None) -> None:
        w = tot["timeToAdmission"]
        cells: list[Any] = [name]
        for key, lower in (("admitted", False), ("neverAdmitted", True), ("admissions", False), ("preemptions", True),
                           ("evictions", True)):
            cells.append(pair(rec[key], tot[key], lower_is_better=lower) if moved is not None else str(tot[key]))
        for k in ("mean", "p50", "p90", "p99", "max"):
            cells.append(pair(rec["timeToAdmission"][k], w[k], seconds) if moved is not None else seconds(w[k]))
        counts = (moved or {}).get("counts", {})
        cells += [str(counts.get("earlier", "")), str(counts.get("later", ""))]
        t.add_row(*cells)

    row("recorded", rec, None)
    for v in report["whatIf"]:
        row(v["name"], v["totals"], v["moved"])
    return t


def sweep_queue_table(report: dict[str, Any]) -> Table:
    """Per ClusterQueue: mean wait and mean usage, recorded and per change."""
    worlds = [("recorded", report["recorded"])] + [(v["name"], v) for v in report["whatIf"]]
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    t.add_column("CLUSTERQUEUE", no_wrap=True)
    for name, _ in worlds:
        t.add_column(name, justify="right")
    names = sorted({n for _, w in worlds for n in w["groups"]["ClusterQueue"]})
    for cq in names:
        cells = [cq]
        for _, w in worlds:
            e = w["groups"]["ClusterQueue"].get(cq)
            if e is None:
                cells.append("—")
                continue
            use = ", ".join(f"{r} {u['mean']}" + (f" ({u['ofNominal'] * 100:.0f}%)" if "ofNominal" in u else "")
                            for r, u in sorted(e["usage"].items()))
            cells.append(f"wait {seconds(e['timeToAdmission']['mean'])}  {use}")
        t.add_row(*cells)
    return t


def renderables(report: dict[str, Any]) -> list[Any]:
    win = report["window"]
    out: list[Any] = [Text(f"{report['events']} recorded events, {win['start']} → {win['end']} ({seconds(win['seconds'])})",
                           style="bold")]
    out += [Text(f"warning: {w}", style="bold yellow") for w in report.get("warnings", [])]
    variants = report["whatIf"]
    if len(variants) > 1:
        out += [Text(""), Text("Sweep", style="bold underline"), summary_table(report), Text(""),
                Text("Per ClusterQueue: mean time to admission and mean usage", style="bold"), sweep_queue_table(report)]
        return out
    v = variants[0]
    out.append(Text(f"What if: {v['name']} (from {v['at']})" + ("" if v["change"] else ": nothing changed"), style="bold"))
    for op in v["change"]:
        out.append(Text(f"  {op}", style="dim"))
    out += [Text(""), summary_table(report)]
    for kind in ("ClusterQueue", "LocalQueue", "Cohort", "Priority"):
        out += [Text(""), group_table(kind, report["recorded"]["groups"][kind], v["groups"][kind])]
    out += [Text(""), Text("Usage over time (recorded / what if, one scale per row)", style="bold"),
            usage_sparklines(report["recorded"]["groups"]["ClusterQueue"], v["groups"]["ClusterQueue"])]
    m = v["moved"]
    c = m["counts"]
    out += [Text(""), Text(f"Admission moved: {c['earlier']} earlier, {c['later']} later, {c['never']} never admitted, "
                           f"{c['newlyAdmitted']} newly admitted", style="bold")]
    for title, key in (("EARLIER", "earlier"), ("LATER", "later"), ("NEVER ADMITTED", "never"), ("NEWLY ADMITTED", "newlyAdmitted")):
        if m[key]:
            out += [moved_table(title, m[key])]
    return out
