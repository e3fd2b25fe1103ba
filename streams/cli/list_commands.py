"""`quotaflow list ...`, kueuectl's `list`: one row per object from the projection, with the
columns kueuectl prints, less the job columns (the log does not know a workload's job) and the
queues' and flavors' AGE (the projection keeps no time for configuration objects). A workload's
AGE is this machine's clock less its creationTimestamp (the submission event's time when it has
none), computed here: the views and the engine keep times from the log only."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from enum import Enum
from typing import Any

import typer

from domain.objects import STOP_NONE
from streams.cli.common import broker_option, fail, require_existing_log, run

list_app = typer.Typer(help="List Kueue objects as the logs have them (as kueuectl list).", no_args_is_help=True)


class Output(str, Enum):
    table = "table"
    wide = "wide"
    json = "json"
    yaml = "yaml"


def _projection(broker: str) -> Any:
    from projections.follower import rebuild
    from streams import settings as defaults
    from streams.log import Topics, open_log

    async def go() -> Any:
        require_existing_log(broker)
        settings = defaults.Settings.from_env()
        log = open_log(broker, settings)
        await log.start()
        try:
            return (await rebuild(log, Topics.from_settings(settings), history=False))[0]
        finally:
            await log.close()

    return run("list", go)


def _print(rows: list[dict[str, Any]], objects: list[Any], columns: list[str], wide: list[str], output: Output) -> None:
    if output in (Output.json, Output.yaml):
        doc = {"apiVersion": "v1", "kind": "List", "items": objects}
        if output == Output.json:
            import json

            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        else:
            import yaml

            sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))
        return
    from rich import box
    from rich.table import Table

    from streams.cli.render import output_console

    shown = columns + (wide if output == Output.wide else [])
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold", pad_edge=False)
    for col in shown:
        table.add_column(col, no_wrap=True)
    for row in rows:
        table.add_row(*(str(row.get(col, "")) for col in shown))
    output_console().print(table)


def _namespaces(namespace: str | None, all_namespaces: bool) -> Callable[[str], bool]:
    if all_namespaces:
        return lambda ns: True
    wanted = namespace or "default"
    return lambda ns: ns == wanted


def _active(obj: dict[str, Any]) -> str:
    conditions = obj.get("status", {}).get("conditions") or [{}]
    return str(conditions[0].get("status") == "True")


def _output() -> Any:
    return typer.Option(Output.table, "-o", "--output", help="table, wide, json or yaml")


def _ns_options() -> tuple[Any, Any]:
    return (
        typer.Option(None, "-n", "--namespace", help="the namespace (default: default)"),
        typer.Option(False, "-A", "--all-namespaces", help="every namespace"),
    )


@list_app.command("clusterqueues")
def list_cluster_queues(broker: str = broker_option(), output: Output = _output()) -> None:
    """ClusterQueues: NAME, COHORT, PENDING WORKLOADS, ADMITTED WORKLOADS, ACTIVE."""
    from projections import views

    objects = views.cluster_queues(_projection(broker))
    rows = [
        {
            "NAME": o["metadata"]["name"],
            "COHORT": (o.get("spec") or {}).get("cohort") or (o.get("spec") or {}).get("cohortName") or "",
            "PENDING WORKLOADS": o["status"]["pendingWorkloads"],
            "ADMITTED WORKLOADS": o["status"]["admittedWorkloads"],
            "ACTIVE": _active(o),
            "STOP POLICY": (o.get("spec") or {}).get("stopPolicy") or STOP_NONE,
        }
        for o in objects
    ]
    _print(rows, objects, ["NAME", "COHORT", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "ACTIVE"], ["STOP POLICY"], output)


_NS, _ALL = _ns_options()


@list_app.command("localqueues")
def list_local_queues(
    namespace: str | None = _NS, all_namespaces: bool = _ALL, broker: str = broker_option(), output: Output = _output()
) -> None:
    """LocalQueues: NAMESPACE, NAME, CLUSTERQUEUE, PENDING WORKLOADS, ADMITTED WORKLOADS."""
    from projections import views

    keep = _namespaces(namespace, all_namespaces)
    objects = [o for o in views.local_queues(_projection(broker)) if keep(o["metadata"]["namespace"])]
    rows = [
        {
            "NAMESPACE": o["metadata"]["namespace"],
            "NAME": o["metadata"]["name"],
            "CLUSTERQUEUE": o["spec"]["clusterQueue"],
            "PENDING WORKLOADS": o["status"]["pendingWorkloads"],
            "ADMITTED WORKLOADS": o["status"]["admittedWorkloads"],
            "ACTIVE": _active(o),
        }
        for o in objects
    ]
    _print(rows, objects, ["NAMESPACE", "NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS"], ["ACTIVE"], output)


def _status(wv: Any) -> str:
    if not wv.active:
        return "Inactive"
    if wv.evicted:
        return "Evicted"
    if wv.admitted:
        return "Admitted"
    if wv.cluster_queue is not None:
        return "QuotaReserved"
    return "Pending"


@list_app.command("workloads")
def list_workloads(
    namespace: str | None = _NS,
    all_namespaces: bool = _ALL,
    admitted: bool = typer.Option(False, "--admitted", help="only admitted workloads"),
    pending: bool = typer.Option(False, "--pending", help="only pending workloads"),
    broker: str = broker_option(),
    output: Output = _output(),
) -> None:
    """Workloads: NAMESPACE, NAME, LOCALQUEUE, CLUSTERQUEUE, STATUS, POSITION IN QUEUE, AGE."""
    from domain.timestamps import format_time
    from streams.cli.render import human_duration

    if admitted and pending:
        raise fail("list", "--admitted and --pending exclude each other", 2)
    proj = _projection(broker)
    now_us = time.time_ns() // 1000
    keep = _namespaces(namespace, all_namespaces)
    positions: dict[str, int] = {}
    for cq in proj.cluster_queues.values():
        for index, order in enumerate(cq.pending):
            positions[order[3]] = index
    rows: list[dict[str, Any]] = []
    objects: list[Any] = []
    for key in sorted(proj.workloads):
        wv = proj.workloads[key]
        ns, name = wv.lq[0], key.partition("/")[2]
        status = _status(wv)
        if not keep(ns) or (admitted and status != "Admitted") or (pending and status != "Pending"):
            continue
        row = {
            "NAMESPACE": ns,
            "NAME": name,
            "LOCALQUEUE": wv.lq[1],
            "CLUSTERQUEUE": wv.cluster_queue or (lq.cluster_queue if (lq := proj.local_queues.get(wv.lq)) else ""),
            "STATUS": status,
            "POSITION IN QUEUE": positions.get(key, ""),
            "AGE": human_duration((now_us - wv.created_us) / 1e6),
            "PRIORITY": wv.priority,
        }
        rows.append(row)
        objects.append({**{k.lower().replace(" ", "_"): v for k, v in row.items()},
                        "creation_timestamp": format_time(wv.created_us)})
    _print(rows, objects, ["NAMESPACE", "NAME", "LOCALQUEUE", "CLUSTERQUEUE", "STATUS", "POSITION IN QUEUE", "AGE"],
           ["PRIORITY"], output)


@list_app.command("resourceflavors")
def list_resource_flavors(broker: str = broker_option(), output: Output = _output()) -> None:
    """ResourceFlavors: NAME, NODE LABELS."""
    proj = _projection(broker)
    rows = [
        {"NAME": name, "NODE LABELS": ",".join(f"{k}={v}" for k, v in flavor.node_labels)}
        for name, flavor in sorted(proj.flavors.items())
    ]
    _print(rows, [{"name": r["NAME"], "nodeLabels": dict(proj.flavors[r["NAME"]].node_labels)} for r in rows], ["NAME", "NODE LABELS"], [], output)


@list_app.command("cohorts")
def list_cohorts(broker: str = broker_option(), output: Output = _output()) -> None:
    """Cohorts: NAME, PARENT."""
    from projections import views

    objects = views.cohorts(_projection(broker))
    rows = [{"NAME": o["metadata"]["name"], "PARENT": (o.get("spec") or {}).get("parentName") or ""} for o in objects]
    _print(rows, objects, ["NAME", "PARENT"], [], output)


# kubectl accepts the singular and the short name too
for _name, _fn in (
    ("clusterqueue", list_cluster_queues), ("cq", list_cluster_queues),
    ("localqueue", list_local_queues), ("lq", list_local_queues),
    ("workload", list_workloads), ("wl", list_workloads),
    ("resourceflavor", list_resource_flavors), ("rf", list_resource_flavors),
    ("cohort", list_cohorts),
):
    list_app.command(_name, hidden=True)(_fn)


def register(app: typer.Typer) -> None:
    app.add_typer(list_app, name="list")
