"""kueuectl's `stop` and `resume`: a queue is re-applied with spec.stopPolicy (HoldAndDrain, or
Hold with --keep-already-running; None to resume), a workload is updated with spec.active; and
`set priority`. Each starts from the object as the input log last set it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from streams.cli.common import broker_option, fail, run
from streams.cli.publishing import publish
from streams.cli.refs import NAMESPACE_HELP, WORKLOAD_REF_HELP, split_ref, workload_ref
from streams.cli.waiting import WAIT_WHEN_ASKED, timeout_option, wait_option

stop_app = typer.Typer(help="Stop admission to a queue, or deactivate a workload (as kueuectl stop).", no_args_is_help=True)
resume_app = typer.Typer(help="Resume a stopped queue or workload (as kueuectl resume).", no_args_is_help=True)
set_app = typer.Typer(help="Change a workload's mutable fields.", no_args_is_help=True)


def _latest(command: str, broker: str, kind: str, name: str, namespace: str | None) -> dict[str, Any]:
    from streams.client import Client
    from streams.log.envelope import CLI_SOURCE

    async def go() -> dict[str, Any] | None:
        async with Client(broker, source=CLI_SOURCE) as qf:
            return await qf.latest_object(kind, name, namespace)

    obj = run(command, go)
    if obj is None:
        where = f"{namespace}/" if namespace else ""
        raise fail(command, f"{kind.lower()}/{where}{name} was never applied or submitted (or was deleted)")
    return obj


def _reapply(
    command: str, broker: str, kind: str, name: str, namespace: str | None, policy: str, wait: bool | None, timeout: float
) -> None:
    obj = _latest(command, broker, kind, name, namespace)
    obj.setdefault("spec", {})["stopPolicy"] = policy
    where = f"{namespace}/" if namespace else ""
    publish(
        command, broker, [{"type": "ConfigApplied", "object": obj}],
        lambda e: f"{kind.lower()}/{where}{name} stopPolicy={policy}", wait=wait, timeout=timeout, config=True,
    )


def _update(command: str, broker: str, ref: str, namespace: str | None, change: dict[str, Any], what: str, wait: bool | None, timeout: float) -> None:
    ns, name = workload_ref(command, ref, namespace, broker)
    obj = _latest(command, broker, "Workload", name, ns)
    obj.setdefault("spec", {}).update(change)
    publish(command, broker, [{"type": "WorkloadUpdated", "workload": obj}], lambda e: f"workload/{ns}/{name} {what}", wait=wait, timeout=timeout)


def _queue_commands(app: typer.Typer, command: str, policy: Callable[[bool], str], keep_flag: bool) -> None:
    for kind, names in (("ClusterQueue", ("clusterqueue", "cq")), ("LocalQueue", ("localqueue", "lq"))):

        def make(kind: str = kind) -> Callable[..., None]:
            namespaced = kind == "LocalQueue"

            def cmd(
                name: str = typer.Argument(..., metavar="NS/NAME" if namespaced else "NAME"),
                # accepted and ignored for a ClusterQueue, as kubectl does for cluster-scoped kinds
                namespace: str | None = typer.Option(None, "-n", "--namespace", help=NAMESPACE_HELP, hidden=not namespaced),
                keep_already_running: bool = typer.Option(
                    False, "--keep-already-running", help="hold new admissions only; admitted workloads keep running (Hold)",
                    hidden=not keep_flag,
                ),
                broker: str = broker_option(),
                wait: bool | None = wait_option(WAIT_WHEN_ASKED),
                timeout: float = timeout_option(),
            ) -> None:
                ns = split_ref(command, name, namespace)[0] if namespaced else None
                bare = split_ref(command, name, namespace)[1] if namespaced else name
                _reapply(command, broker, kind, bare, ns, policy(keep_already_running), wait, timeout)

            cmd.__doc__ = f"{command.capitalize()} a {kind} (spec.stopPolicy)."
            return cmd

        for i, alias in enumerate(names):
            app.command(alias, hidden=i > 0)(make())


def _stop_policy(keep_already_running: bool) -> str:
    from domain.objects import HOLD, HOLD_AND_DRAIN

    return HOLD if keep_already_running else HOLD_AND_DRAIN


def _no_stop_policy(keep_already_running: bool) -> str:
    from domain.objects import STOP_NONE

    return STOP_NONE


_queue_commands(stop_app, "stop", _stop_policy, keep_flag=True)
_queue_commands(resume_app, "resume", _no_stop_policy, keep_flag=False)


def _workload_commands(app: typer.Typer, command: str, active: bool) -> None:
    def cmd(
        workload: str = typer.Argument(..., metavar="NS/NAME", help=WORKLOAD_REF_HELP),
        namespace: str | None = typer.Option(None, "-n", "--namespace", help=NAMESPACE_HELP),
        broker: str = broker_option(),
        wait: bool | None = wait_option(),
        timeout: float = timeout_option(),
    ) -> None:
        _update(command, broker, workload, namespace, {"active": active}, f"active={str(active).lower()}", wait, timeout)

    cmd.__doc__ = f"{'Resume' if active else 'Stop'} a workload (spec.active={str(active).lower()}, WorkloadUpdated)."
    for i, alias in enumerate(("workload", "wl")):
        app.command(alias, hidden=i > 0)(cmd)


_workload_commands(stop_app, "stop", active=False)
_workload_commands(resume_app, "resume", active=True)


@set_app.command("priority")
def set_priority(
    workload: str = typer.Argument(..., metavar="NS/NAME", help=WORKLOAD_REF_HELP),
    priority: int = typer.Argument(..., metavar="N"),
    namespace: str | None = typer.Option(None, "-n", "--namespace", help=NAMESPACE_HELP),
    broker: str = broker_option(),
    wait: bool | None = wait_option(),
    timeout: float = timeout_option(),
) -> None:
    """Set a workload's spec.priority (WorkloadUpdated)."""
    _update("set", broker, workload, namespace, {"priority": priority}, f"priority={priority}", wait, timeout)


def register(app: typer.Typer) -> None:
    app.add_typer(stop_app, name="stop")
    app.add_typer(resume_app, name="resume")
    app.add_typer(set_app, name="set")
