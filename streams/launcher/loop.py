"""The launcher's loop: follow the decisions, and make the pod processes match the state file.

Two tasks share one state file. The follower (`streams.launcher.decisions`) applies each decision
to the file; the reconciler, every `poll` seconds and whenever decisions were applied, compares
each run in the file with its processes and acts:

- `Running`: resolve its pods from the Workload as submitted (once), start every pod not yet
  started, record the outcome of every pod that exited; when all have, it is `Finishing`. Pods
  are started only once the follower has read the decision log to its end, so a launcher that
  starts behind does not start what a later decision already stopped; and a workload's new
  admission starts only once the pods of its previous one are all gone (at most one run of a
  workload at a time).
- `Stopping`: SIGTERM to each pod's process group, SIGKILL to those still there after the grace
  period (the pod template's `terminationGracePeriodSeconds`, else `--grace-period`); once every
  group is gone, publish `WorkloadReleased` if the quota is still held, and forget the run. If
  every pod had already exited on its own before the stop (they ended while the launcher was
  down), the job completed: it publishes `WorkloadFinished` instead, which releases it too.
- `Finishing`: SIGKILL whatever the pods left behind in their groups, publish
  `WorkloadFinished` with Kueue's finished reason (`Succeeded` or `Failed`) and a message, and
  forget the run.

Every publish uses an event id derived from the decision log (`decisions.release_id`,
`finish_id`), and the run is forgotten only after the publish returned: a crash in between
publishes it again after the restart, and the engine treats the repeat as a producer's retry.
Stopping the launcher leaves its pods running; the next start adopts them by pid and start time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from projections.follower import Follower, fetch_records
from streams.client import Client
from streams.launcher import processes
from streams.launcher.decisions import LaunchFold, finish_id, pods_ready_id
from streams.launcher.pods import Assignment, Unrunnable, pods_of
from streams.launcher.state import FINISHING, RUNNING, STOPPING, LauncherState, Pod, Run
from streams.log import EventLog, Topics
from streams.settings import Settings

log = structlog.get_logger("quotaflow.launch")

BATCH_SLOTS = 1 << 16  # a submission's position: input offset * 2^16 + its index in a Batch
DEFAULT_GRACE_PERIOD_S = 30.0  # Kubernetes' default terminationGracePeriodSeconds
SUCCEEDED, FAILED = "Succeeded", "Failed"  # Kueue's WorkloadFinishedReason* (apis/kueue/v1beta2/workload_types.go)


@dataclass
class LaunchConfig:
    state_dir: Path
    grace_period: float = DEFAULT_GRACE_PERIOD_S
    poll: float = 0.2
    log_dir: Path | None = None  # default: <state_dir>/logs

    @property
    def pod_logs(self) -> Path:
        return self.log_dir or self.state_dir / "logs"


Notify = Callable[[str, dict[str, Any]], None]


def _split(workload: str) -> tuple[str, str]:
    namespace, _, name = workload.partition("/")
    return namespace, name


def finished_result(pods: list[dict[str, Any]], outcomes: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Kueue's Finished condition for the run: reason `Succeeded` when every pod succeeded, else
    `Failed`; the message counts pods as Kueue's pod-group integration does ("Pods succeeded:
    2/3.", pkg/controller/jobs/pod/pod_controller.go Finished) and names the first failed pod."""
    succeeded = [p["pod"] for p in pods if outcomes[p["pod"]].get("phase") == SUCCEEDED]
    message = f"Pods succeeded: {len(succeeded)}/{len(pods)}."
    failed = [p["pod"] for p in pods if p["pod"] not in succeeded]
    if not failed:
        return {"reason": SUCCEEDED, "message": message}
    first = outcomes[failed[0]]
    return {"reason": FAILED, "message": f"{message} Pod {failed[0]}: {first.get('message') or 'failed'}."}


class Launcher:
    """`quotaflow launch`: start admitted workloads as local processes, stop evicted ones."""

    def __init__(self, log_: EventLog, topics: Topics, config: LaunchConfig, *, notify: Notify | None = None) -> None:
        self.log = log_
        self.topics = topics
        self.config = config
        self.notify = notify
        self.state = LauncherState(config.state_dir / "launcher.db")
        self.fold = LaunchFold(self.state, self._decision_applied)
        self.follower = Follower(log_, topics, self.fold)
        settings = Settings(input_topic=topics.input, decisions_topic=topics.decisions, snapshots_topic=topics.snapshots)
        self.client = Client(log=log_, settings=settings, source="/quotaflow/launch")
        self.children: dict[int, processes.Spawned] = {}
        self._wake = asyncio.Event()
        self._terminated: set[int] = set()  # runs whose pods got SIGTERM from this process
        self._ready_reported: set[int] = set()  # runs whose WorkloadPodsReady this process published

    # -- running ---------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event | None = None) -> None:
        stop = stop or asyncio.Event()
        self.state.bind(f"{self.log.url} {self.topics.input} {self.topics.decisions}")
        await self.client.start()
        self.follower.on_progress(self._wake.set)
        follow = asyncio.create_task(self.follower.run(stop, poll=self.config.poll))
        self._emit("up", position=self.state.position, runs=len(self.state.runs()))
        try:
            while not stop.is_set():
                if follow.done():
                    follow.result()  # the follower failed: say why
                    break
                await self.reconcile()
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.config.poll)
        finally:
            stop.set()
            await asyncio.gather(follow, return_exceptions=True)
            await self.follower.close()

    async def close(self) -> None:
        await self.client.close()
        self.state.close()

    def _decision_applied(self, kind: str, d: Any) -> None:
        self._wake.set()

    def _emit(self, event: str, **fields: Any) -> None:
        log.info(event, **fields)
        if self.notify is not None:
            self.notify(event, fields)

    # -- reconciling -----------------------------------------------------------------------------
    async def reconcile(self) -> None:
        processes.reap(self.children)
        runs = self.state.runs()
        caught_up = self.follower.status.caught_up
        for listed in runs:
            # Decisions applied while this loop awaited may have changed it: act on it as it is now.
            run = self.state.run(listed.id)
            if run is None:
                continue
            if run.phase == RUNNING:
                earlier = any(r.workload == run.workload and r.id < run.id for r in runs)
                await self._running(run, caught_up and not earlier)
            elif run.phase == STOPPING:
                await self._stopping(run)
            elif run.phase == FINISHING:
                await self._finishing(run)

    async def _resolve(self, run: Run) -> list[dict[str, Any]] | None:
        """The run's pods, from the Workload as submitted; None when it cannot run (it is then
        finishing as Failed)."""
        offset, index = divmod(run.submission, BATCH_SLOTS)
        records = await fetch_records(self.log, self.topics.input, [offset])
        value = records.get(offset, (None, 0))[0]
        try:
            event = json.loads(value or b"")
            if isinstance(event, dict) and event.get("type") == "Batch":
                event = event["events"][index]
            workload = event["workload"]
            pods = pods_of(workload, Assignment(run.workload, run.admission, run.cluster_queue, run.assignments))
        except Unrunnable as exc:
            result = {"reason": FAILED, "message": f"not run: {exc}"}
            self.state.finishing(run.id, result)
            self._emit("not runnable", workload=run.workload, admission=run.admission, message=str(exc))
            return None
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            # The projection said this record holds the accepted submission: it must.
            raise RuntimeError(f"input offset {offset} does not hold the submission of {run.workload}: {exc}") from None
        self.state.set_pods(run.id, pods)
        return pods

    async def _running(self, run: Run, may_start: bool) -> None:
        pods = run.pods
        if pods is None:
            if not may_start:
                return
            pods = await self._resolve(run)
            current = self.state.run(run.id)
            if pods is None or current is None or current.phase != RUNNING:
                return
        recorded = {p.pod: p for p in self.state.pods(run.id)}
        if may_start:
            started = [self._start(run, pod) for pod in pods if pod["pod"] not in recorded]
            if started:
                self._emit("started", workload=run.workload, admission=run.admission, pods=started)
                recorded = {p.pod: p for p in self.state.pods(run.id)}
        if run.id not in self._ready_reported and all(p["pod"] in recorded for p in pods):
            # Every pod was started: a local process is ready once it runs, and waitForPodsReady
            # (domain/pods_ready.py) waits for this report. Its id makes a resend after a
            # restart a producer's retry.
            ns, name = _split(run.workload)
            ready = {"type": "WorkloadPodsReady", "namespace": ns, "name": name,
                     "id": pods_ready_id(run.workload, run.admission)}
            if await self._publish(ready):
                self._ready_reported.add(run.id)
                self._emit("ready", workload=run.workload, admission=run.admission)
        outcomes: dict[str, dict[str, Any]] = {}
        for pod in recorded.values():
            outcome = pod.outcome if pod.outcome is not None else self._outcome(pod)
            if outcome is not None:
                outcomes[pod.pod] = outcome
        if len(outcomes) == len(pods) and all(p["pod"] in outcomes for p in pods):
            result = finished_result(pods, outcomes)
            self.state.finishing(run.id, result)
            self._emit("exited", workload=run.workload, admission=run.admission, **result)
            await self._finishing(self.state.run(run.id) or run)

    def _outcome(self, pod: Pod) -> dict[str, Any] | None:
        """The outcome of a pod that has exited (None while it runs), recorded in the state."""
        if processes.alive(pod.pid, pod.start_ticks):
            return None
        outcome = processes.read_outcome(pod.exit_file)
        if outcome is not None and outcome.get("aborted"):
            self.state.pod_aborted(pod.run, pod.pod)  # never ran: started again next round
            return None
        if outcome is None:
            outcome = {"phase": FAILED, "message": "killed (its process ended without recording how)"}
        self.state.pod_exited(pod.run, pod.pod, outcome)
        return outcome

    def _start(self, run: Run, pod: dict[str, Any]) -> str:
        attempt = self.state.attempts(run.id, pod["pod"])
        ns, name = _split(run.workload)
        # Files of their own for every shim: one that a crash left waiting writes its "aborted"
        # where no later attempt looks.
        where = self._run_dir(run) / f"{pod['pod']}.{attempt}.{uuid.uuid4().hex[:12]}"
        exit_file = where.with_name(where.name + ".exit")
        log_dir = self.config.pod_logs / ns / name / run.admission / pod["pod"]
        spawned = processes.spawn(pod, where.with_name(where.name + ".json"), exit_file, log_dir)
        self.children[spawned.pid] = spawned
        # Durable before the pod may run: a crash before this line leaves a shim that never runs it.
        self.state.started(Pod(run.id, pod["pod"], attempt, spawned.pid, spawned.ticks, str(exit_file), None))
        spawned.go()
        return str(pod["pod"])

    def _run_dir(self, run: Run) -> Path:
        ns, name = _split(run.workload)
        return self.config.state_dir / "pods" / ns / name / run.admission

    def _forget(self, run: Run) -> None:
        self.state.forget(run.id)
        shutil.rmtree(self._run_dir(run), ignore_errors=True)  # its shims' spec and outcome files

    async def _stopping(self, run: Run) -> None:
        pods = self.state.pods(run.id)
        live = [p for p in pods if processes.group_alive(p.pid)]
        if live:
            now = time.time()
            deadline = run.stop_deadline
            if deadline is None:
                grace = max(
                    (p["grace"] if p.get("grace") is not None else self.config.grace_period for p in run.pods or []),
                    default=self.config.grace_period,
                )
                # Recorded before the first signal: after a crash, pods that died of it are known
                # to have been stopped (not to have ended on their own).
                deadline = now + grace
                self.state.set_stop_deadline(run.id, deadline)
                self._emit("stopping", workload=run.workload, admission=run.admission, pods=[p.pod for p in live], grace=grace)
            if run.id not in self._terminated:  # once per life: a crash may have come before it
                self._terminated.add(run.id)
                for p in live:
                    processes.signal_group(p.pid, signal.SIGTERM)
            if now >= deadline:
                for p in live:
                    processes.signal_group(p.pid, signal.SIGKILL)
            return
        if run.release is not None and run.stop_deadline is None and run.pods is not None:
            outcomes = self._outcomes(run)
            if outcomes is not None:
                # Every pod had exited on its own before it was told to stop (the launcher was
                # down, or the eviction came as they ended): the job completed, as Kueue would
                # find it; a finish also gives an evicted workload's quota back.
                result = finished_result(run.pods, outcomes)
                if await self._publish_finish(run, result):
                    self._forget(run)
                return
        if run.release is not None:
            ns, name = _split(run.workload)
            if not await self._publish({"type": "WorkloadReleased", "namespace": ns, "name": name, "id": run.release}):
                return
            self._emit("released", workload=run.workload, admission=run.admission)
        else:
            self._emit("stopped", workload=run.workload, admission=run.admission)
        self._forget(run)

    async def _finishing(self, run: Run) -> None:
        pods = self.state.pods(run.id)
        stragglers = [p for p in pods if processes.group_alive(p.pid)]
        if stragglers:  # what a pod's containers left running in its group
            for p in stragglers:
                processes.signal_group(p.pid, signal.SIGKILL)
            return
        if await self._publish_finish(run, run.result or {"reason": FAILED, "message": ""}):
            self._forget(run)

    def _outcomes(self, run: Run) -> dict[str, dict[str, Any]] | None:
        """Every pod's outcome when all of the run's pods ran and exited on their own, else None."""
        recorded = {p.pod: p for p in self.state.pods(run.id)}
        outcomes: dict[str, dict[str, Any]] = {}
        for pod in run.pods or []:
            row = recorded.get(pod["pod"])
            outcome = None if row is None else row.outcome or processes.read_outcome(row.exit_file)
            if outcome is None or outcome.get("aborted"):
                return None
            outcomes[pod["pod"]] = outcome
        return outcomes

    async def _publish_finish(self, run: Run, result: dict[str, str]) -> bool:
        ns, name = _split(run.workload)
        event = {
            "type": "WorkloadFinished",
            "namespace": ns,
            "name": name,
            "id": finish_id(run.workload, run.admission),
            "reason": result["reason"],
            "message": result["message"],
        }
        if not await self._publish(event):
            return False
        self._emit("finished", workload=run.workload, admission=run.admission, **result)
        return True

    async def _publish(self, event: dict[str, Any]) -> bool:
        try:
            await self.client.publish(event)
        except Exception as exc:  # the log is unreachable: the run stays, and it is sent again
            log.warning("publish failed", event=event["type"], id=event["id"], error=f"{type(exc).__name__}: {exc}")
            return False
        return True
