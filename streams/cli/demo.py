"""`quotaflow demo`: Kueue's own examples, run through the agent on the embedded log.

It needs nothing but this package: the agent runs in-process on a temporary SQLite log, the
scenario is published through `streams.client.Client` (as any producer would), the decisions are
read back from the decision log as they are committed, and the run ends with a quota usage table
per ClusterQueue and flavor computed from the two logs (`streams.cli.render.Usage`).

The scenario (from the seeds: Kueue's ClusterQueue concept page):
1. *Borrowing*: team-a-cq (9 CPU, 36Gi) and team-b-cq (12 CPU, 48Gi) share cohort team-ab; with
   team-b idle, team-a's 20-CPU job is admitted by borrowing 11 CPUs, and a 22nd CPU is not.
2. *borrowingLimit*: team-c-cq (9 CPU, borrowingLimit 1) and team-d-cq (12 CPU) share cohort
   team-cd; team-c can reach 9+1=10 CPUs and no more, though team-d is idle.
3. *StrictFIFO*: research-cq (8 CPU) admits job-1 (6 CPU); job-2 (4 CPU) must wait, and job-3
   (1 CPU) waits behind it although it would fit (older workloads block newer ones).
4. job-1 finishes: job-2 and then job-3 are admitted.
5. The whole loop, on a second log with `quotaflow launch` (streams/launcher) following it: the
   Kueue-style Jobs of demo_jobs/ are submitted in order; train (low priority) runs as local processes,
   urgent (high priority) preempts it, the launcher stops train's pods and releases its quota,
   urgent runs and finishes, train is admitted again and finishes; quota usage as it goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel

API = "kueue.x-k8s.io/v1beta1"


def flavor(name: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name}}


def cluster_queue(
    name: str,
    cpu: int,
    memory: str | None = None,
    *,
    cohort: str | None = None,
    borrowing_limit: int | None = None,
    strategy: str | None = None,
) -> dict[str, Any]:
    cpu_res: dict[str, Any] = {"name": "cpu", "nominalQuota": cpu}
    if borrowing_limit is not None:
        cpu_res["borrowingLimit"] = borrowing_limit
    resources = [cpu_res]
    covered = ["cpu"]
    if memory is not None:
        resources.append({"name": "memory", "nominalQuota": memory})
        covered.append("memory")
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": covered, "flavors": [{"name": "default-flavor", "resources": resources}]}],
    }
    if cohort:
        spec["cohort"] = cohort
    if strategy:
        spec["queueingStrategy"] = strategy
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(namespace: str, name: str, cq: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "LocalQueue", "metadata": {"namespace": namespace, "name": name}, "spec": {"clusterQueue": cq}}


def workload(namespace: str, name: str, count: int, cpu: str, memory: str | None = None) -> dict[str, Any]:
    requests = {"cpu": cpu}
    if memory is not None:
        requests["memory"] = memory
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"queueName": "user-queue", "podSets": [{"name": "main", "count": count, "requests": requests}]},
    }


def applied(obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": "ConfigApplied", "object": obj}


def submitted(wl: dict[str, Any]) -> dict[str, Any]:
    return {"type": "WorkloadSubmitted", "workload": wl}


STEPS: list[tuple[str, str, list[dict[str, Any]]]] = [
    (
        "1. Borrowing in a cohort",
        "team-a-cq has 9 CPUs and 36Gi, team-b-cq 12 CPUs and 48Gi, both in cohort team-ab. "
        "team-b is idle, so team-a may use up to 12+9=21 CPUs and 48+36=84Gi.",
        [
            applied(flavor("default-flavor")),
            applied(cluster_queue("team-a-cq", 9, "36Gi", cohort="team-ab")),
            applied(cluster_queue("team-b-cq", 12, "48Gi", cohort="team-ab")),
            applied(local_queue("team-a", "user-queue", "team-a-cq")),
            applied(local_queue("team-b", "user-queue", "team-b-cq")),
            submitted(workload("team-a", "big", 4, "5", "20Gi")),
            submitted(workload("team-a", "one-more", 1, "1", "4Gi")),
            submitted(workload("team-a", "too-many", 1, "1")),
        ],
    ),
    (
        "2. borrowingLimit",
        "team-c-cq has 9 CPUs with borrowingLimit 1, team-d-cq 12 CPUs, in cohort team-cd. "
        "team-d is idle, yet team-c can reach only 9+1=10 CPUs.",
        [
            applied(cluster_queue("team-c-cq", 9, cohort="team-cd", borrowing_limit=1)),
            applied(cluster_queue("team-d-cq", 12, cohort="team-cd")),
            applied(local_queue("team-c", "user-queue", "team-c-cq")),
            submitted(workload("team-c", "ten-cpus", 2, "5")),
            submitted(workload("team-c", "eleventh-cpu", 1, "1")),
        ],
    ),
    (
        "3. StrictFIFO",
        "research-cq has 8 CPUs and queueingStrategy StrictFIFO. job-1 takes 6; job-2 needs 4 and "
        "waits; job-3 needs 1 and would fit, but waits behind job-2: older workloads block newer ones.",
        [
            applied(cluster_queue("research-cq", 8, strategy="StrictFIFO")),
            applied(local_queue("research", "user-queue", "research-cq")),
            submitted(workload("research", "job-1", 1, "6")),
            submitted(workload("research", "job-2", 1, "4")),
            submitted(workload("research", "job-3", 1, "1")),
        ],
    ),
    (
        "4. A workload finishes",
        "job-1 finishes and gives its 6 CPUs back: job-2 is admitted, and job-3 after it.",
        [{"type": "WorkloadFinished", "namespace": "research", "name": "job-1"}],
    ),
]


async def _demo(console: Console, db: Path, pause: float) -> None:
    from streams.agent.loop import Agent, AgentConfig
    from streams.cli.render import Usage, decision_line
    from streams.client import Client
    from streams.log import Topics
    from streams.log.sqlite import SqliteLog
    from streams.settings import Settings

    settings = Settings()
    topics = Topics.from_settings(settings)
    agent_log = SqliteLog(db)
    agent = Agent(agent_log, AgentConfig(topics, snapshot_every_events=10, standby=False))
    agent_task = asyncio.create_task(agent.run())
    usage = Usage()
    seen = asyncio.Condition()
    last_cause = -1

    async with Client(settings=settings, log=SqliteLog(db), source="/quotaflow/demo") as qf:

        async def show() -> None:
            nonlocal last_cause
            async for record, decision in qf.decision_records():
                if decision is None:
                    continue
                console.print(decision_line(decision, record.offset))
                usage.add_decision(decision)
                async with seen:
                    last_cause = decision.cause.offset
                    seen.notify_all()

        watcher = asyncio.create_task(show())
        try:
            for title, text, events in STEPS:
                console.print()
                console.print(Panel(text, title=title, title_align="left", expand=False))
                for event in events:
                    usage.add_event(event)
                offsets = await qf.publish_many(events)
                progress = asyncio.ensure_future(agent.wait_processed(offsets[-1], timeout=30))
                await asyncio.wait({progress, agent_task}, return_when=asyncio.FIRST_COMPLETED)
                if not progress.done():
                    progress.cancel()
                    agent_task.result()  # the agent failed: say why
                    raise RuntimeError("the agent stopped early")
                progress.result()
                # every decision of this step is committed; wait until the watcher showed them
                last_decision = await agent_log.read_last(topics.decisions, 1)
                if last_decision:
                    from streams.agent.loop import cause_of

                    target = cause_of(last_decision[0]).offset
                    async with seen:
                        await asyncio.wait_for(seen.wait_for(lambda: last_cause >= target), 30)
                if pause:
                    await asyncio.sleep(pause)
        finally:
            watcher.cancel()
            agent.stop()
            await asyncio.gather(watcher, agent_task, return_exceptions=True)
            await agent_log.close()
    console.print()
    console.print(usage.table("Quota usage per ClusterQueue and flavor (from the decision log)"))
    s = agent.status
    console.print(
        f"[dim]{s.processed + 1} input events, {s.decisions} decisions in {s.transactions} transactions, "
        f"{s.snapshots} snapshots (last after input offset {s.last_snapshot_offset}).[/dim]"
    )


# The whole loop, with `quotaflow launch`: its inputs are the files of this directory (Kueue
# objects and Workloads whose pod templates have commands), published in file-name order.
JOBS_DIR = Path(__file__).with_name("demo_jobs")
LAUNCH_TEXT = (
    "A second log, with `quotaflow launch` following its decisions: it runs each admitted "
    "workload's pods as local processes (their command, with the assignment in QUOTAFLOW_* "
    "variables), stops a preempted one (SIGTERM, a grace period, SIGKILL) and releases its quota "
    "once its pods are gone, and reports each finished one. cluster-queue has 4 CPUs; train "
    "(low-priority, 3 pods of 1 CPU) runs first; urgent (high-priority, 2 pods) preempts it; train "
    "is released, admitted again once urgent finished, and finishes."
)


def demo_events(path: Path) -> list[dict[str, Any]]:
    """The input events a demo file stands for: its jobs are submitted as the Workloads Kueue's
    integrations build (what `quotaflow submit -f` does), the rest applied."""
    from streams.importers.kueue_jobs import convert_documents
    from streams.importers.kueue_jobs.registry import CONFIGURATION_KINDS
    from streams.log.event_files import load_yaml_documents

    docs = [d for d in load_yaml_documents(path.read_text()) if d]
    config = [d for d in docs if d.get("kind") in CONFIGURATION_KINDS]
    jobs = [(f"{path.name}#{i}", d) for i, d in enumerate(docs) if d.get("kind") not in CONFIGURATION_KINDS]
    converted = convert_documents(jobs)
    if converted.refused:
        raise ValueError(f"{path.name}: " + "; ".join(str(r) for r in converted.refused))
    return [applied(d) for d in config] + [submitted(w) for w in converted.workloads]


def launcher_line(event: str, fields: dict[str, Any]) -> str | None:
    wl = fields.get("workload")
    if event == "started":
        return f"[magenta]launch[/]  started   {wl}: pods {', '.join(fields['pods'])} [dim](admission {fields['admission']})[/dim]"
    if event == "stopping":
        return f"[magenta]launch[/]  stopping  {wl}: SIGTERM to pods {', '.join(fields['pods'])}, SIGKILL after {fields['grace']:g} s"
    if event == "released":
        return f"[magenta]launch[/]  released  {wl}: its pods are gone -> WorkloadReleased"
    if event == "finished":
        return f"[magenta]launch[/]  finished  {wl}: {fields['reason']} ({fields['message']}) -> WorkloadFinished"
    if event == "not runnable":
        return f"[magenta]launch[/]  not run   {wl}: {fields['message']}"
    return None


async def _launch_demo(console: Console, tmp: Path, pause: float) -> None:
    from domain import decisions
    from streams.agent.loop import Agent, AgentConfig
    from streams.cli.render import Usage, decision_line
    from streams.client import Client
    from streams.launcher.loop import LaunchConfig, Launcher
    from streams.log import Topics
    from streams.log.sqlite import SqliteLog
    from streams.settings import Settings

    settings = Settings()
    topics = Topics.from_settings(settings)
    db = tmp / "launch.db"
    agent_log = SqliteLog(db)
    agent = Agent(agent_log, AgentConfig(topics, snapshot_every_events=10, standby=False))
    agent_task = asyncio.create_task(agent.run())
    usage = Usage()
    started: set[str] = set()
    finished: set[str] = set()
    changed = asyncio.Event()

    def on_launcher(event: str, fields: dict[str, Any]) -> None:
        line = launcher_line(event, fields)
        if line:
            console.print(line)
        if event == "started":
            started.add(fields["workload"])
            changed.set()

    launcher = Launcher(
        SqliteLog(db), topics, LaunchConfig(state_dir=tmp / "launch-state", grace_period=5.0, poll=0.1), notify=on_launcher
    )
    stop = asyncio.Event()
    launcher_task = asyncio.create_task(launcher.run(stop))

    async def until(check: Any, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            for task in (agent_task, launcher_task):
                if task.done():
                    task.result()  # it failed: say why
                    raise RuntimeError("the agent or the launcher stopped early")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the demo waited {timeout:g} s for {what}")
            changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(changed.wait(), 0.5)

    async with Client(settings=settings, log=SqliteLog(db), source="/quotaflow/demo") as qf:

        async def show() -> None:
            async for record, decision in qf.decision_records():
                if decision is None:
                    continue
                console.print(decision_line(decision, record.offset))
                usage.add_decision(decision)
                if isinstance(decision, decisions.Finished) and decision.workload:
                    finished.add(decision.workload)
                if isinstance(decision, decisions.Admitted) and len(workloads) > 1 and decision.workload == workloads[-1]:
                    console.print(usage.table("Quota usage now: the preemptor runs, its victim waits for room"))
                changed.set()

        workloads: list[str] = []  # as submitted, in order
        watcher = asyncio.create_task(show())
        try:
            console.print()
            console.print(Panel(LAUNCH_TEXT, title="5. The whole loop: quotaflow launch", title_align="left", expand=False))
            files = sorted(JOBS_DIR.glob("*.yaml"))
            for path in files:
                events = demo_events(path)
                for event in events:
                    usage.add_event(event)
                    if event["type"] == "WorkloadSubmitted":
                        meta = event["workload"]["metadata"]
                        workloads.append(f"{meta.get('namespace') or 'default'}/{meta['name']}")
                offsets = await qf.publish_many(events)
                for event, offset in zip(events, offsets, strict=True):
                    obj = event.get("workload") or event.get("object") or {}
                    meta = obj.get("metadata") or {}
                    what = "submitted" if event["type"] == "WorkloadSubmitted" else "applied"
                    ns = f"{meta['namespace']}/" if meta.get("namespace") else ""
                    console.print(f"[dim]{offset:>6} {path.name}: {what} {str(obj.get('kind')).lower()}/{ns}{meta.get('name')}[/dim]")
                if any(e["type"] == "WorkloadSubmitted" for e in events):
                    # each workload is running before the next file comes
                    await until(lambda: set(workloads) <= started, f"{', '.join(workloads)} to start")
                if pause:
                    await asyncio.sleep(pause)
            await until(lambda: set(workloads) <= finished, "every workload to finish", timeout=120)
        finally:
            watcher.cancel()
            stop.set()
            agent.stop()
            await asyncio.gather(watcher, agent_task, launcher_task, return_exceptions=True)
            await launcher.close()
            await agent_log.close()
    outputs = sorted((tmp / "launch-state" / "logs").glob("*/*/*/*/*.stdout"))  # namespace/name/admission/pod/container
    if outputs:
        console.print(f"[dim]a pod's output ({outputs[0].relative_to(tmp)}):[/dim] {outputs[0].read_text().strip()}")
    console.print(usage.table("Quota usage at the end: everything finished, every CPU back"))


def run_demo(*, pause: float = 0.0, keep: bool = False) -> int:
    from streams.agent import structured_logs as logs

    logs.configure("warning")
    # Not a terminal (CI, a pipe): wide enough for the usage table instead of rich's 80 columns.
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
    tmp = Path(tempfile.mkdtemp(prefix="quotaflow-demo-"))
    db = tmp / "demo.db"
    console.print(
        Panel(
            "quotaflow demo: the agent runs on an embedded SQLite log (no Kafka needed) at "
            f"{db}.\nEach step publishes input events; each line below is a decision as it was "
            "committed to the decision log:\n[dim]decision-offset  @cause.offset.index  type  workload  details[/dim]",
            expand=False,
        )
    )
    began = time.monotonic()
    try:
        asyncio.run(_demo(console, db, pause))
        asyncio.run(_launch_demo(console, tmp, pause))
    finally:
        if keep:
            console.print(f"[dim]log kept: sqlite:///{db}  (try: quotaflow watch --no-follow --broker sqlite:///{db})[/dim]")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    console.print(f"[dim]done in {time.monotonic() - began:.1f} s[/dim]")
    return 0
