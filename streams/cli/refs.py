"""Naming a namespaced object on the command line: `NS/NAME`, or `NAME` with `-n NS`, as kubectl
and kueuectl accept both."""

from __future__ import annotations

from streams.cli.common import fail

NAMESPACE_HELP = "the namespace, when NAME does not say it as NS/NAME"


def split_ref(command: str, ref: str, namespace: str | None, *, default: str | None = "default") -> tuple[str, str]:
    """(namespace, name) from `NS/NAME` or `NAME` plus `-n NS`; both forms must agree."""
    ns, sep, name = ref.rpartition("/")
    if not sep:
        ns, name = "", ref
    if sep and (not ns or "/" in ns):
        raise fail(command, f"expected NAMESPACE/NAME or NAME, got {ref!r}", 2)
    if not name:
        raise fail(command, f"expected NAMESPACE/NAME or NAME, got {ref!r}", 2)
    if ns and namespace and ns != namespace:
        raise fail(command, f"{ref!r} names namespace {ns!r} but -n says {namespace!r}", 2)
    ns = ns or namespace or default or ""
    if not ns:
        raise fail(command, f"{ref!r}: give the namespace as NS/NAME or -n NS", 2)
    return ns, name


WORKLOAD_REF_HELP = "the workload: NS/NAME, NAME with -n, or its job as KIND/NAME (job/sample-job, pytorchjob/NS/NAME, ...)"


def kind_ref(ref: str) -> tuple[str, str] | None:
    """(Kind, `NAME` or `NS/NAME`) when `ref` starts with a kind as kubectl names it: a job kind
    Kueue integrates (`job/NAME`, `rayjob/NS/NAME`, `deploy/NAME`) or `workload/`. A kind name wins
    over a namespace of the same name (`workload/NS/NAME` says it is a namespace)."""
    head, sep, rest = ref.partition("/")
    if not sep or not rest:
        return None
    if head.lower() in ("workload", "workloads", "wl"):
        return "Workload", rest
    from streams.importers.kueue_jobs.registry import canonical_job_kind

    kind = canonical_job_kind(head)
    return (kind, rest) if kind else None


def workload_ref(command: str, ref: str, namespace: str | None, broker: str) -> tuple[str, str]:
    """(namespace, workload name) of `ref`: a workload's NS/NAME (or NAME with -n), or a job as
    KIND/NAME, resolved through the ownerReferences of the Workloads in the input log."""
    found = kind_ref(ref)
    if found is None:
        return split_ref(command, ref, namespace)
    kind, rest = found
    ns, name = split_ref(command, rest, namespace)
    if kind == "Workload":
        return ns, name
    names = owned_workloads(command, broker, kind, ns, name)
    if not names:
        raise fail(command, f"{kind.lower()}/{ns}/{name}: no workload in the input log is owned by {kind} {ns}/{name}")
    if len(names) > 1:
        raise fail(
            command,
            f"{kind.lower()}/{ns}/{name} owns {len(names)} workloads ({', '.join(names)}): name one as NS/NAME",
            2,
        )
    return ns, names[0]


def owned_workloads(command: str, broker: str, kind: str, namespace: str, name: str) -> list[str]:
    from streams.cli.common import require_existing_log, run
    from streams.client import Client
    from streams.log.envelope import CLI_SOURCE

    async def go() -> list[str]:
        require_existing_log(broker)
        async with Client(broker, source=CLI_SOURCE) as qf:
            return await qf.workloads_owned_by(kind, namespace, name)

    return run(command, go)
