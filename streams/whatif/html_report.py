"""The what-if report as one self-contained HTML file with plots (plotly, its JavaScript inline):
usage over time per ClusterQueue and resource, recorded and each changed world on one chart,
and the time-to-admission distributions side by side (Kueue's histogram buckets), overall and
per ClusterQueue, after the summary table."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

COLORS = ("#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _worlds(report: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("recorded", report["recorded"])] + [(v["name"], v) for v in report["whatIf"]]


def _div(fig: go.Figure, div_id: str) -> str:
    fig.update_layout(template="plotly_white", height=360, margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id)


def _usage_figure(report: dict[str, Any], cq: str, res: str) -> go.Figure:
    win = report["window"]
    step = win["seconds"] / max(win["bins"], 1)
    fig = go.Figure()
    for i, (name, w) in enumerate(_worlds(report)):
        u = w["groups"]["ClusterQueue"].get(cq, {}).get("usage", {}).get(res)
        if u is None:
            continue
        xs = [(b + 0.5) * step / 3600 for b in range(len(u["series"]))]
        fig.add_trace(go.Scatter(x=xs, y=u["series"], mode="lines", name=name, line={"color": COLORS[i % len(COLORS)]}))
    fig.update_layout(title=f"{cq}: {res} in use (mean per interval)", xaxis_title="hours from the start",
                      yaxis_title=f"{res} (base units)")
    return fig


def _wait_figure(report: dict[str, Any], title: str, pick: Any) -> go.Figure:
    fig = go.Figure()
    for i, (name, w) in enumerate(_worlds(report)):
        stats = pick(w)
        if stats is None:
            continue
        hist = stats["timeToAdmission"]["histogram"]
        labels = [f"≤ {le:g} s" for le in hist["le"]] + [f"> {hist['le'][-1]:g} s"]
        fig.add_trace(go.Bar(x=labels, y=hist["counts"], name=name, marker_color=COLORS[i % len(COLORS)]))
    fig.update_layout(title=title, barmode="group", xaxis_title="time to admission", yaxis_title="workloads")
    return fig


def _summary(report: dict[str, Any]) -> str:
    cols = ("admitted", "neverAdmitted", "admissions", "preemptions", "evictions")
    head = "".join(f"<th>{c}</th>" for c in ("world", *cols, "wait mean", "p50", "p90", "p99", "max"))
    rows = []
    for name, w in _worlds(report):
        t = w["totals"]
        ta = t["timeToAdmission"]
        cells = [html.escape(name)] + [str(t[c]) for c in cols] + [f"{ta[k]:.1f} s" for k in ("mean", "p50", "p90", "p99", "max")]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def render(report: dict[str, Any]) -> str:
    divs: list[str] = []
    n = 0
    cqs = sorted({cq for _, w in _worlds(report) for cq in w["groups"]["ClusterQueue"]})
    divs.append("<h2>Time to admission</h2>")
    divs.append(_div(_wait_figure(report, "All workloads", lambda w: w["totals"]), f"plot-{n}"))
    n += 1
    for cq in cqs:
        divs.append(_div(_wait_figure(report, f"ClusterQueue {cq}", lambda w, cq=cq: w["groups"]["ClusterQueue"].get(cq)),
                         f"plot-{n}"))
        n += 1
    divs.append("<h2>Usage over time</h2>")
    for cq in cqs:
        resources = sorted({r for _, w in _worlds(report) for r in w["groups"]["ClusterQueue"].get(cq, {}).get("usage", {})})
        for res in resources:
            divs.append(_div(_usage_figure(report, cq, res), f"plot-{n}"))
            n += 1
    changes = "".join(f"<li><b>{html.escape(v['name'])}</b> from {html.escape(v['at'])}: "
                      f"{html.escape('; '.join(v['change']) or 'nothing changed')}</li>" for v in report["whatIf"])
    win = report["window"]
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>quotaflow what if</title>
<style>body{{font-family:sans-serif;margin:2em;}} table{{border-collapse:collapse;}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right;}} td:first-child,th:first-child{{text-align:left;}}</style>
<script type="text/javascript">{get_plotlyjs()}</script></head>
<body><h1>What if?</h1>
<p>{report['events']} recorded events, {html.escape(win['start'])} to {html.escape(win['end'])}.</p>
<ul>{changes}</ul>
{_summary(report)}
{''.join(divs)}
</body></html>
"""
