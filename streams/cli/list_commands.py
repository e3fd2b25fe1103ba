"""`quotaflow list ...`, kueuectl's `list`: one row per object from the projection, with the
columns kueuectl prints, less the job columns (the log does not know a workload's job). AGE is
this machine's clock less the object's creationTimestamp: a workload's own (the submission
event's time when it has none); a queue's, flavor's or cohort's is the time of the event the
agent applied to create it (projections/config_following.py). `-o json|yaml` prints the objects
themselves (projections/views.py), in a `v1` `List`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import typer

from streams.cli.common import broker_option, fail, require_existing_log, run
from streams.cli.output import Output, age, output_option, print_list

list_app = typer.Typer(help="List Kueue objects as the logs have them (as kueuectl list).", no_args_is_help=True)


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
    if output.document:
        print_list(objects, output)
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
    return output_option()


def _ns_options() -> tuple[Any, Any]:
    return (
        typer.Option(None, "-n", "--namespace", help="the namespace (default: default)"),
        typer.Option(False, "-A", "--all-namespaces", help="every namespace"),
    )


# -- rows: one per object, shared with `get` (get_commands.py) ---------------------------------
CQ_COLUMNS = ["NAME", "COHORT", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "ACTIVE", "AGE"]
CQ_WIDE = ["RESERVING WORKLOADS", "STOP POLICY"]
LQ_COLUMNS = ["NAMESPACE", "NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "AGE"]
LQ_WIDE = ["RESERVING WORKLOADS", "ACTIVE", "STOP POLICY"]
WL_COLUMNS = ["NAMESPACE", "NAME", "LOCALQUEUE", "CLUSTERQUEUE", "STATUS", "POSITION IN QUEUE", "AGE"]
WL_WIDE = ["PRIORITY", "ACTIVE"]
RF_COLUMNS = ["NAME", "NODE LABELS", "AGE"]
RF_WIDE = ["NODE TAINTS", "CLUSTERQUEUES"]
COHORT_COLUMNS = ["NAME", "PARENT", "CLUSTERQUEUES", "AGE"]
COHORT_WIDE = ["EXPLICIT", "COHORTS"]


def cq_row(o: dict[str, Any], now: float) -> dict[str, Any]:
    from domain.objects import STOP_NONE

    spec = o.get("spec") or {}
    return {
        "NAME": o["metadata"]["name"],
        "COHORT": spec.get("cohort") or spec.get("cohortName") or "",
        "PENDING WORKLOADS": o["status"]["pendingWorkloads"],
        "ADMITTED WORKLOADS": o["status"]["admittedWorkloads"],
        "ACTIVE": _active(o),
        "AGE": age(o, now),
        "RESERVING WORKLOADS": o["status"]["reservingWorkloads"],
        "STOP POLICY": spec.get("stopPolicy") or STOP_NONE,
    }


def lq_row(o: dict[str, Any], now: float) -> dict[str, Any]:
    from domain.objects import STOP_NONE

    return {
        "NAMESPACE": o["metadata"]["namespace"],
        "NAME": o["metadata"]["name"],
        "CLUSTERQUEUE": o["spec"]["clusterQueue"],
        "PENDING WORKLOADS": o["status"]["pendingWorkloads"],
        "ADMITTED WORKLOADS": o["status"]["admittedWorkloads"],
        "AGE": age(o, now),
        "RESERVING WORKLOADS": o["status"]["reservingWorkloads"],
        "ACTIVE": _active(o),
        "STOP POLICY": o["spec"].get("stopPolicy") or STOP_NONE,
    }


def wl_row(o: dict[str, Any], now: float) -> dict[str, Any]:
    status = o["status"]
    return {
        "NAMESPACE": o["metadata"]["namespace"],
        "NAME": o["metadata"]["name"],
        "LOCALQUEUE": status.get("localQueue") or "",
        "CLUSTERQUEUE": status.get("clusterQueue") or "",
        "STATUS": status["phase"],
        "POSITION IN QUEUE": status.get("positionInClusterQueue", ""),
        "AGE": age(o, now),
        "PRIORITY": status.get("priority", ""),
        "ACTIVE": status.get("active", ""),
    }


def _taint(t: Any) -> str:
    return f"{t.get('key')}={t.get('value') or ''}:{t.get('effect')}" if isinstance(t, dict) else str(t)


def rf_row(o: dict[str, Any], now: float) -> dict[str, Any]:
    spec = o.get("spec") or {}
    return {
        "NAME": o["metadata"]["name"],
        "NODE LABELS": ",".join(f"{k}={v}" for k, v in (spec.get("nodeLabels") or {}).items()),
        "AGE": age(o, now),
        "NODE TAINTS": ",".join(_taint(t) for t in spec.get("nodeTaints") or []),
        "CLUSTERQUEUES": ",".join(o["status"]["clusterQueues"]),
    }


def cohort_row(o: dict[str, Any], now: float) -> dict[str, Any]:
    status = o["status"]
    return {
        "NAME": o["metadata"]["name"],
        "PARENT": status.get("parent") or "",
        "CLUSTERQUEUES": ",".join(status["clusterQueues"]),
        "AGE": age(o, now),
        "EXPLICIT": status["explicit"],
        "COHORTS": ",".join(status["cohorts"]),
    }


# -- the commands -------------------------------------------------------------------------------
@list_app.command("clusterqueues")
def list_cluster_queues(broker: str = broker_option(), output: Output = _output()) -> None:
    """ClusterQueues: NAME, COHORT, PENDING WORKLOADS, ADMITTED WORKLOADS, ACTIVE, AGE."""
    from projections import views

    objects = views.cluster_queues(_projection(broker))
    now = time.time()
    _print([cq_row(o, now) for o in objects], objects, CQ_COLUMNS, CQ_WIDE, output)


_NS, _ALL = _ns_options()


@list_app.command("localqueues")
def list_local_queues(
    namespace: str | None = _NS, all_namespaces: bool = _ALL, broker: str = broker_option(), output: Output = _output()
) -> None:
    """LocalQueues: NAMESPACE, NAME, CLUSTERQUEUE, PENDING WORKLOADS, ADMITTED WORKLOADS, AGE."""
    from projections import views

    keep = _namespaces(namespace, all_namespaces)
    objects = [o for o in views.local_queues(_projection(broker)) if keep(o["metadata"]["namespace"])]
    now = time.time()
    _print([lq_row(o, now) for o in objects], objects, LQ_COLUMNS, LQ_WIDE, output)


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
    from projections import views

    if admitted and pending:
        raise fail("list", "--admitted and --pending exclude each other", 2)
    proj = _projection(broker)
    now = time.time()
    keep = _namespaces(namespace, all_namespaces)
    objects: list[dict[str, Any]] = []
    for key in sorted(proj.workloads):
        if not keep(proj.workloads[key].lq[0]):
            continue
        obj = views.workload(proj, key)
        assert obj is not None  # every workload the fold holds has a view
        phase = obj["status"]["phase"]
        if (admitted and phase != "Admitted") or (pending and phase != "Pending"):
            continue
        objects.append(obj)
    _print([wl_row(o, now) for o in objects], objects, WL_COLUMNS, WL_WIDE, output)


@list_app.command("resourceflavors")
def list_resource_flavors(broker: str = broker_option(), output: Output = _output()) -> None:
    """ResourceFlavors: NAME, NODE LABELS, AGE."""
    from projections import views

    objects = views.resource_flavors(_projection(broker))
    now = time.time()
    _print([rf_row(o, now) for o in objects], objects, RF_COLUMNS, RF_WIDE, output)


@list_app.command("cohorts")
def list_cohorts(broker: str = broker_option(), output: Output = _output()) -> None:
    """Cohorts: NAME, PARENT, CLUSTERQUEUES, AGE."""
    from projections import views

    objects = views.cohorts(_projection(broker))
    now = time.time()
    _print([cohort_row(o, now) for o in objects], objects, COHORT_COLUMNS, COHORT_WIDE, output)


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
