"""What the launcher runs for an admission (pods, commands, environment), how it words a finish,
and the per-pod shim: it runs nothing unless told to go, and records how the pod ended."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from agent_harness import running

from streams.launcher import processes
from streams.launcher.loop import finished_result
from streams.launcher.pods import Assignment, Unrunnable, expand, pods_of

pytestmark = pytest.mark.timeout(60)


def workload(*pod_sets: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": "w"}, "spec": {"queueName": "q", "podSets": list(pod_sets)}}


def pod_set(name: str, count: int, *containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"name": name, "count": count, "template": {"spec": {"containers": list(containers), **spec}}}


def assignment(*pod_sets: dict[str, Any]) -> Assignment:
    return Assignment("ns/w", "12.0", "cq", list(pod_sets))


def test_each_assigned_pod_gets_its_commands_and_the_assignment_in_its_environment() -> None:
    wl = workload(
        pod_set("driver", 1, {"name": "d", "command": ["run", "$(QUOTAFLOW_POD_SET)"], "args": ["--gpu=$(QUOTAFLOW_FLAVOR_NVIDIA_COM_GPU)"]}),
        pod_set("workers", 4, {"name": "w", "command": ["work"], "env": [{"name": "RANK", "value": "$(QUOTAFLOW_POD_INDEX)"}]}),
    )
    pods = pods_of(
        wl,
        assignment(
            {"name": "driver", "flavors": {"cpu": "on-demand", "nvidia.com/gpu": "a100"}, "resourceUsage": {"cpu": "1", "nvidia.com/gpu": "1"}, "count": 1},
            # partial admission: 2 of the 4 workers
            {"name": "workers", "flavors": {"cpu": "spot"}, "resourceUsage": {"cpu": "2"}, "count": 2},
        ),
    )
    assert [p["pod"] for p in pods] == ["driver-0", "workers-0", "workers-1"]
    driver = pods[0]["containers"][0]
    assert driver["argv"] == ["run", "driver", "--gpu=a100"]
    env = driver["env"]
    assert env["QUOTAFLOW_WORKLOAD"] == "ns/w" and env["QUOTAFLOW_WORKLOAD_NAMESPACE"] == "ns" and env["QUOTAFLOW_WORKLOAD_NAME"] == "w"
    assert env["QUOTAFLOW_CLUSTER_QUEUE"] == "cq" and env["QUOTAFLOW_ADMISSION"] == "12.0"
    assert env["QUOTAFLOW_FLAVORS"] == "cpu=on-demand,nvidia.com/gpu=a100"
    assert env["QUOTAFLOW_FLAVOR_CPU"] == "on-demand" and env["QUOTAFLOW_FLAVOR_NVIDIA_COM_GPU"] == "a100"
    assert env["QUOTAFLOW_RESOURCE_USAGE"] == "cpu=1,nvidia.com/gpu=1"
    assert env["QUOTAFLOW_CONTAINER"] == "d"
    second = pods[2]["containers"][0]["env"]
    assert (second["QUOTAFLOW_POD_SET"], second["QUOTAFLOW_POD_SET_COUNT"], second["QUOTAFLOW_POD_INDEX"]) == ("workers", "2", "1")
    assert second["RANK"] == "1"


def test_references_expand_as_the_kubelet_expands_them() -> None:
    env = {"A": "x"}
    assert expand("$(A)-$(B)-$$(A)-$$", env) == "x-$(B)-$(A)-$"


@pytest.mark.parametrize(
    ("pod_sets", "words"),
    [
        ([pod_set("main", 1, {"name": "c", "image": "busybox"})], "pod set main container c has no command"),
        ([pod_set("main", 1, {"name": "c", "args": ["-c", "true"]})], "container c has no command"),
        ([pod_set("main", 1, {"name": "c", "command": ["true"]}, initContainers=[{"name": "i"}])], "init container i has no command"),
        ([{"name": "main", "count": 1, "requests": {"cpu": "1"}}], "pod set main has no pod template with containers"),
        (
            [pod_set("main", 1, {"name": "c", "command": ["true"], "env": [{"name": "T", "valueFrom": {"secretKeyRef": {}}}]})],
            "env T: valueFrom cannot be resolved outside a cluster",
        ),
    ],
)
def test_what_cannot_run_as_a_local_process_is_refused_naming_it(pod_sets: list[dict[str, Any]], words: str) -> None:
    with pytest.raises(Unrunnable, match=words):
        pods_of(workload(*pod_sets), assignment({"name": "main", "flavors": {}, "resourceUsage": {}, "count": 1}))


def test_a_finish_is_worded_as_kueue_records_one() -> None:
    pods = [{"pod": "main-0"}, {"pod": "main-1"}]
    ok = {"phase": "Succeeded"}
    assert finished_result(pods, {"main-0": ok, "main-1": ok}) == {"reason": "Succeeded", "message": "Pods succeeded: 2/2."}
    bad = {"phase": "Failed", "message": "container c exited with code 2"}
    assert finished_result(pods, {"main-0": ok, "main-1": bad}) == {
        "reason": "Failed",
        "message": "Pods succeeded: 1/2. Pod main-1: container c exited with code 2.",
    }


def _shim_pod(tmp: Path, script: str, *, init: str | None = None, sidecar: bool = False) -> dict[str, Any]:
    def container(name: str, code: str, **extra: Any) -> dict[str, Any]:
        return {"name": name, "argv": [sys.executable, "-c", code], "env": {"MARK": str(tmp / "ran")}, **extra}

    inits = []
    if init is not None:
        inits.append(container("init", init))
    if sidecar:
        inits.append(container("side", "import time; time.sleep(30)", sidecar=True))
    return {"pod": "main-0", "initContainers": inits, "containers": [container("c", script)]}


def _wait_gone(pid: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while processes.group_alive(pid):
        assert time.monotonic() < deadline, "the pod's group is still there"
        time.sleep(0.02)


def test_the_shim_runs_nothing_when_the_launcher_dies_before_saying_go(tmp_path: Path) -> None:
    pod = _shim_pod(tmp_path, "import os; open(os.environ['MARK'], 'w').write('ran')")
    spawned = processes.spawn(pod, tmp_path / "p.json", tmp_path / "p.exit", tmp_path / "logs")
    assert spawned.ticks > 0 and processes.alive(spawned.pid, spawned.ticks)
    assert spawned.proc.stdin is not None
    spawned.proc.stdin.close()  # what the launcher's death does to the pipe
    spawned.proc.wait(20)
    assert processes.read_outcome(str(tmp_path / "p.exit")) == {"aborted": True}
    assert not (tmp_path / "ran").exists()


def test_the_shim_runs_the_pod_and_records_how_it_ended(tmp_path: Path) -> None:
    pod = _shim_pod(
        tmp_path,
        "import os, sys; print('out'); print('err', file=sys.stderr); sys.exit(4)",
        init="import os; open(os.environ['MARK'], 'w').write('init')",
        sidecar=True,
    )
    spawned = processes.spawn(pod, tmp_path / "p.json", tmp_path / "p.exit", tmp_path / "logs")
    spawned.go()
    spawned.proc.wait(30)
    outcome = processes.read_outcome(str(tmp_path / "p.exit"))
    assert outcome == {
        "phase": "Failed",
        "message": "container c exited with code 4",
        "containers": [{"name": "init", "init": True, "exitCode": 0}, {"name": "c", "exitCode": 4}],
    }
    assert (tmp_path / "ran").read_text() == "init"
    assert (tmp_path / "logs" / "c.stdout").read_text() == "out\n"
    assert (tmp_path / "logs" / "c.stderr").read_text() == "err\n"
    _wait_gone(spawned.pid)  # the sidecar was stopped with the pod


def test_a_stopped_pod_records_the_signal_and_its_whole_group_goes(tmp_path: Path) -> None:
    pod = _shim_pod(tmp_path, "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)")
    spawned = processes.spawn(pod, tmp_path / "p.json", tmp_path / "p.exit", tmp_path / "logs")
    assert os.getpgid(spawned.pid) == spawned.pid != os.getpgid(0), "a process group of its own"
    spawned.go()
    time.sleep(0.5)
    processes.signal_group(spawned.pid, signal.SIGTERM)
    spawned.proc.wait(20)
    outcome = processes.read_outcome(str(tmp_path / "p.exit"))
    assert outcome is not None and outcome["containers"] == [{"name": "c", "exitCode": 143, "signal": "SIGTERM"}]
    _wait_gone(spawned.pid)
    assert not running(spawned.pid)
