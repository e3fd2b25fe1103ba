"""`quotaflow get KIND NAME`: one object as kubectl's `get` and `describe` show it -- its row as
`list` prints it, then its spec as applied and its status: usage per flavor and resource,
conditions, workload counts; for a workload its state, admission and history.

`-o json|yaml` prints the object itself, as `list -o json` holds it and `quotaflow serve`
serves it (projections/views.py); a workload's carries its `history` besides (the decisions
about it with the input events that caused them, as `quotaflow history -o json`).
"""

from __future__ import annotations

import time
from typing import Any

import typer

from streams.cli import list_commands as rows
from streams.cli.common import broker_option, fail, require_existing_log, run
from streams.cli.output import Output, output_option, print_document
from streams.cli.refs import NAMESPACE_HELP, WORKLOAD_REF_HELP, split_ref

get_app = typer.Typer(help="One Kueue object: its spec as applied and its status (as kubectl get/describe).", no_args_is_help=True)


def _projection(command: str, broker: str, as_of: int | None, focus: str | None = None) -> Any:
    from projections.follower import rebuild
    from streams import settings as defaults
    from streams.log import Topics, open_log

    async def go() -> Any:
        require_existing_log(broker)
        settings = defaults.Settings.from_env()
        log = open_log(broker, settings)
        await log.start()
        try:
            return (await rebuild(log, Topics.from_settings(settings), as_of=as_of, focus=focus, history=False))[0]
        finally:
            await log.close()

    return run(command, go)


def _as_of() -> Any:
    return typer.Option(None, "--as-of", min=0, help="time travel: the object as of this input log offset")


# -- the human form ------------------------------------------------------------------------------
def _show(obj: dict[str, Any], row: dict[str, Any], columns: list[str], wide: list[str], output: Output, extra: list[Any]) -> None:
    if output.document:
        print_document(obj, output)
        return
    import yaml
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from streams.cli.render import output_console

    console = output_console()
    shown = columns + (wide if output == Output.wide else [])
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold", pad_edge=False)
    for col in shown:
        table.add_column(col, no_wrap=True)
    table.add_row(*(str(row.get(col, "")) for col in shown))
    console.print(table)
    metadata = obj.get("metadata") or {}
    if metadata.get("creationTimestamp"):
        console.print(Text(f"Created: {metadata['creationTimestamp']}", style="dim"))
    if obj.get("spec"):
        console.print(Text("Spec:", style="bold"))
        spec = yaml.safe_dump(obj["spec"], sort_keys=False, allow_unicode=True).rstrip("\n")
        console.print(Text("\n".join("  " + line for line in spec.splitlines())))
    for renderable in extra:
        console.print(renderable)


def _conditions(status: dict[str, Any]) -> list[Any]:
    from rich.text import Text

    out: list[Any] = []
    for c in status.get("conditions") or ():
        out.append(Text(f"  {c['type']}={c['status']}  {c['reason']}: {c['message']}"))
    return [Text("Conditions:", style="bold"), *out] if out else []


def _usage(status: dict[str, Any], borrowed: bool) -> list[Any]:
    """flavorsReservation and flavorsUsage side by side, per flavor and resource."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    usage_key = "flavorsUsage" if "flavorsUsage" in status else "flavorUsage"
    admitted = {(f["name"], r["name"]): r for f in status.get(usage_key) or () for r in f["resources"]}
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold", pad_edge=False)
    for col in ("FLAVOR", "RESOURCE", "RESERVED", "ADMITTED") + (("BORROWED",) if borrowed else ()):
        table.add_column(col, no_wrap=True, justify="left" if col in ("FLAVOR", "RESOURCE") else "right")
    for flavor in status.get("flavorsReservation") or ():
        for res in flavor["resources"]:
            cells = [flavor["name"], res["name"], res["total"], admitted.get((flavor["name"], res["name"]), {}).get("total", "0")]
            if borrowed:
                cells.append(res.get("borrowed", "0"))
            table.add_row(*cells)
    if not table.row_count:
        return []
    return [Text("Usage:", style="bold"), table]


def _counts(status: dict[str, Any]) -> list[Any]:
    from rich.text import Text

    return [Text(
        f"Workloads: {status['pendingWorkloads']} pending, {status['reservingWorkloads']} reserving quota, "
        f"{status['admittedWorkloads']} admitted", style="bold",
    )]


# -- the commands -------------------------------------------------------------------------------
@get_app.command("clusterqueue")
def get_cluster_queue(
    name: str = typer.Argument(..., help="the ClusterQueue"),
    broker: str = broker_option(),
    as_of: int | None = _as_of(),
    output: Output = output_option(),
) -> None:
    """A ClusterQueue: spec, Active condition, workload counts, usage per flavor and resource."""
    from projections import views

    obj = views.cluster_queue(_projection("get", broker, as_of), name)
    if obj is None:
        raise fail("get", f"ClusterQueue {name} not found")
    status = obj["status"]
    _show(obj, rows.cq_row(obj, time.time()), rows.CQ_COLUMNS, rows.CQ_WIDE, output,
          [*_counts(status), *_conditions(status), *_usage(status, borrowed=True)])


@get_app.command("localqueue")
def get_local_queue(
    ref: str = typer.Argument(..., metavar="NS/NAME", help="the LocalQueue as NS/NAME, or NAME with -n"),
    namespace: str | None = typer.Option(None, "-n", "--namespace", help=NAMESPACE_HELP),
    broker: str = broker_option(),
    as_of: int | None = _as_of(),
    output: Output = output_option(),
) -> None:
    """A LocalQueue: spec, Active condition, workload counts, usage per flavor and resource."""
    from projections import views

    ns, name = split_ref("get", ref, namespace)
    obj = views.local_queue(_projection("get", broker, as_of), ns, name)
    if obj is None:
        raise fail("get", f"LocalQueue {ns}/{name} not found")
    status = obj["status"]
    _show(obj, rows.lq_row(obj, time.time()), rows.LQ_COLUMNS, rows.LQ_WIDE, output,
          [*_counts(status), *_conditions(status), *_usage(status, borrowed=False)])


@get_app.command("workload")
def get_workload(
    ref: str = typer.Argument(..., metavar="NS/NAME", help=WORKLOAD_REF_HELP),
    namespace: str | None = typer.Option(None, "-n", "--namespace", help=NAMESPACE_HELP),
    broker: str = broker_option(),
    as_of: int | None = _as_of(),
    output: Output = output_option(),
) -> None:
    """A workload: spec, state (pending with its position and reason, or where it holds quota
    and how much), and its history."""
    from rich.text import Text

    from projections import views
    from projections.explain import focus_history
    from streams.cli.refs import workload_ref
    from streams.cli.render import history_table

    ns, name = workload_ref("get", ref, namespace, broker)
    key = f"{ns}/{name}"
    proj = _projection("get", broker, as_of, focus=key)
    obj = views.workload(proj, key)
    history = focus_history(proj)
    if obj is None:
        if not history:
            raise fail("get", f"workload {key} not found")
        # deleted: only its history is left
        obj = {"apiVersion": views.KUEUE_API, "kind": "Workload", "metadata": {"namespace": ns, "name": name},
               "spec": {}, "status": {"phase": "Deleted"}}
    if output.document:
        print_document({**obj, "history": history}, output)
        return
    status = obj["status"]
    facts = [f"{k}={status[k]}" for k in ("phase", "clusterQueue", "priority", "positionInClusterQueue", "positionInLocalQueue")
             if status.get(k) is not None]
    extra: list[Any] = [Text("State:", style="bold"), Text("  " + "  ".join(facts))]
    if status.get("reason"):
        extra.append(Text(f"  {status['reason']}: {status.get('message') or ''}"))
    if status.get("usage"):
        extra.append(Text("Admission:", style="bold"))
        extra.append(Text(f"  {status['clusterQueue']}: " + "  ".join(
            f"{u['resource']}={u['amount']}[{u['flavor']}]" for u in status["usage"])))
    extra += [Text("History:", style="bold"), history_table(history)]
    _show(obj, rows.wl_row({**obj, "status": {"localQueue": obj["spec"].get("queueName"), **status}}, time.time()),
          rows.WL_COLUMNS, rows.WL_WIDE, output, extra)


@get_app.command("resourceflavor")
def get_resource_flavor(
    name: str = typer.Argument(..., help="the ResourceFlavor"),
    broker: str = broker_option(),
    as_of: int | None = _as_of(),
    output: Output = output_option(),
) -> None:
    """A ResourceFlavor: spec, and the ClusterQueues that name it."""
    from rich.text import Text

    from projections import views

    obj = views.resource_flavor(_projection("get", broker, as_of), name)
    if obj is None:
        raise fail("get", f"ResourceFlavor {name} not found")
    users = ", ".join(obj["status"]["clusterQueues"]) or "none"
    _show(obj, rows.rf_row(obj, time.time()), rows.RF_COLUMNS, rows.RF_WIDE, output,
          [Text(f"Used by ClusterQueues: {users}", style="bold")])


@get_app.command("cohort")
def get_cohort(
    name: str = typer.Argument(..., help="the cohort"),
    broker: str = broker_option(),
    as_of: int | None = _as_of(),
    output: Output = output_option(),
) -> None:
    """A cohort: spec (when it is a Cohort object), members, totals per flavor and resource,
    and who lends to whom."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from projections import views

    obj = views.cohort(_projection("get", broker, as_of), name)
    if obj is None:
        raise fail("get", f"cohort {name} not found")
    status = obj["status"]
    extra: list[Any] = [
        Text(f"ClusterQueues: {', '.join(status['clusterQueues']) or 'none'}"
             f"   (whole subtree: {', '.join(status['subtreeClusterQueues']) or 'none'})", style="bold"),
    ]
    if status["cohorts"]:
        extra.append(Text(f"Child cohorts: {', '.join(status['cohorts'])}", style="bold"))
    if status["resources"]:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold", pad_edge=False)
        for col in ("FLAVOR", "RESOURCE", "NOMINAL", "RESERVED", "ADMITTED", "BORROWED", "UNUSED LENDABLE"):
            table.add_column(col, no_wrap=True, justify="left" if col in ("FLAVOR", "RESOURCE") else "right")
        for r in status["resources"]:
            table.add_row(r["flavor"], r["resource"], r["nominalQuota"], r["reservation"], r["usage"], r["borrowed"], r["unusedLendable"])
        extra += [Text("Usage:", style="bold"), table]
    if status["lending"]:
        extra.append(Text("Lending:", style="bold"))
        extra += [Text(f"  {e['from']} → {e['to']}: {e['resource']}={e['amount']} [{e['flavor']}]") for e in status["lending"]]
    _show(obj, rows.cohort_row(obj, time.time()), rows.COHORT_COLUMNS, rows.COHORT_WIDE, output, extra)


# kubectl accepts the plural and the short name too
for _name, _fn in (
    ("clusterqueues", get_cluster_queue), ("cq", get_cluster_queue),
    ("localqueues", get_local_queue), ("lq", get_local_queue),
    ("workloads", get_workload), ("wl", get_workload),
    ("resourceflavors", get_resource_flavor), ("rf", get_resource_flavor), ("flavor", get_resource_flavor),
    ("cohorts", get_cohort),
):
    get_app.command(_name, hidden=True)(_fn)


def register(app: typer.Typer) -> None:
    app.add_typer(get_app, name="get")
