"""`quotaflow` commands that report what happened to a workload outside the engine: its evicted
pods are gone (`release`), its pods are ready or lost (`ready`), an admission check
controller's verdict (`check`)."""

from __future__ import annotations

from enum import Enum
from typing import Any

import typer

from streams.cli.common import broker_option
from streams.cli.publishing import publish, publish_by_name
from streams.cli.refs import NAMESPACE_HELP, WORKLOAD_REF_HELP, workload_ref
from streams.cli.waiting import timeout_option, wait_option


class CheckState(str, Enum):
    Pending = "Pending"
    Ready = "Ready"
    Retry = "Retry"
    Rejected = "Rejected"


def register(app: typer.Typer) -> None:
    """Add the workload commands to the `quotaflow` typer app."""

    @app.command()
    def release(
        workload: str = typer.Argument(..., metavar="NS/NAME", help=WORKLOAD_REF_HELP),
        namespace: str | None = typer.Option(None, "-n", "--namespace", help=NAMESPACE_HELP),
        broker: str = broker_option(),
        wait: bool | None = wait_option(),
        timeout: float = timeout_option(),
    ) -> None:
        """Report that an evicted or preempted workload's pods are gone (WorkloadReleased)."""
        publish_by_name("release", "WorkloadReleased", "released", workload, namespace, broker, wait=wait, timeout=timeout)

    @app.command()
    def ready(
        workload: str = typer.Argument(..., metavar="NS/NAME", help=WORKLOAD_REF_HELP),
        lost: bool = typer.Option(False, "--lost", help="a pod was lost: its pods are not ready any more"),
        namespace: str | None = typer.Option(None, "-n", "--namespace", help=NAMESPACE_HELP),
        broker: str = broker_option(),
        wait: bool | None = wait_option(),
        timeout: float = timeout_option(),
    ) -> None:
        """Report that an admitted workload's pods are ready, or with --lost no longer (WorkloadPodsReady)."""
        ns, name = workload_ref("ready", workload, namespace, broker)
        event: dict[str, Any] = {"type": "WorkloadPodsReady", "namespace": ns, "name": name}
        if lost:
            event["ready"] = False
        publish(
            "ready", broker, [event], lambda e: f"workload/{ns}/{name} pods {'lost' if lost else 'ready'}",
            wait=wait, timeout=timeout,
        )

    @app.command()
    def check(
        workload: str = typer.Argument(..., metavar="NS/NAME", help=WORKLOAD_REF_HELP),
        check_name: str = typer.Argument(..., metavar="CHECK", help="the AdmissionCheck's name"),
        state: CheckState = typer.Argument(..., metavar="STATE", help="Pending, Ready, Retry or Rejected"),
        message: str | None = typer.Option(None, "--message", "-m", help="the controller's message"),
        namespace: str | None = typer.Option(None, "-n", "--namespace", help=NAMESPACE_HELP),
        broker: str = broker_option(),
        wait: bool | None = wait_option(),
        timeout: float = timeout_option(),
    ) -> None:
        """Report an admission check's state for a workload (AdmissionCheckStateChanged)."""
        ns, name = workload_ref("check", workload, namespace, broker)
        event = {
            "type": "AdmissionCheckStateChanged",
            "namespace": ns,
            "name": name,
            "check": check_name,
            "state": state.value,
        }
        if message is not None:
            event["message"] = message
        publish(
            "check", broker, [event], lambda e: f"workload/{ns}/{name} check {check_name} {state.value}",
            wait=wait, timeout=timeout,
        )
