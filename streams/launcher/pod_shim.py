"""One pod, run on this machine: the small supervisor `quotaflow launch` starts per pod.

It is started in a session (and process group) of its own and runs the pod's containers as its
children, in that group, so that the launcher stops the whole pod with one signal to the group.
It imports nothing from quotaflow (it runs as a script, `python -I pod_shim.py SPEC`), so it
starts fast and outlives a launcher that is killed.

Why it exists (rather than the launcher running the command itself): a process's exit status can
only be read by its parent, and the launcher may be SIGKILLed and restarted while pods run. The
shim is the pod's parent for its whole life and writes the pod's outcome to a file (atomically:
written aside, then renamed), where a restarted launcher finds it. It also closes the one window
in which a crash could start a pod twice: it waits for the line `go` on its standard input, which
the launcher writes only after it has durably recorded the shim's pid. If the launcher dies
before that, the pipe reaches end-of-file, the shim writes `{"aborted": true}` and exits without
running anything, and the restarted launcher starts the pod again.

The pod, as the kubelet runs one (simplified to processes): init containers in order, each to
completion (a failure fails the pod); init containers with `restartPolicy: Always` (sidecars) are
started in order and run beside the rest; then the containers all at once. When every container
has exited, the sidecars get SIGTERM. The pod succeeded when every init container and container
exited 0. SIGTERM to the group reaches the containers directly; the shim only waits for them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

TERM_WAIT_S = 5.0  # how long sidecars get after the main containers ended


def _status(code: int) -> dict[str, Any]:
    # As Kubernetes reports a container killed by a signal: 128 + the signal number.
    if code < 0:
        return {"exitCode": 128 - code, "signal": signal.Signals(-code).name}
    return {"exitCode": code}


def _start(container: dict[str, Any], logs: str) -> subprocess.Popen[bytes]:
    name = container["name"]
    env = {**os.environ, **container.get("env", {})}
    with open(os.path.join(logs, f"{name}.stdout"), "ab") as out, open(os.path.join(logs, f"{name}.stderr"), "ab") as err:
        return subprocess.Popen(
            container["argv"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            cwd=container.get("workingDir") or None,
        )


def _write(path: str, outcome: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(outcome, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _run(spec: dict[str, Any]) -> dict[str, Any]:
    logs = spec["logDir"]
    os.makedirs(logs, exist_ok=True)
    statuses: list[dict[str, Any]] = []
    sidecars: list[tuple[str, subprocess.Popen[bytes]]] = []
    failed: str | None = None
    try:
        for init in spec.get("initContainers", []):
            if init.get("sidecar"):
                sidecars.append((init["name"], _start(init, logs)))
                continue
            code = _start(init, logs).wait()
            statuses.append({"name": init["name"], "init": True, **_status(code)})
            if code != 0:
                failed = f"init container {init['name']} exited with code {statuses[-1]['exitCode']}"
                return {"phase": "Failed", "message": failed, "containers": statuses}
        running = [(c["name"], _start(c, logs)) for c in spec["containers"]]
        for name, proc in running:
            code = proc.wait()
            statuses.append({"name": name, **_status(code)})
            if code != 0 and failed is None:
                failed = f"container {name} exited with code {statuses[-1]['exitCode']}"
    finally:
        for _, proc in sidecars:
            if proc.poll() is None:
                proc.terminate()
        for _, proc in sidecars:
            try:
                proc.wait(TERM_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if failed is not None:
        return {"phase": "Failed", "message": failed, "containers": statuses}
    return {"phase": "Succeeded", "containers": statuses}


def main() -> int:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    # The group's SIGTERM is for the containers; the shim outlives them to record how they ended.
    signal.signal(signal.SIGTERM, lambda *_: None)
    signal.signal(signal.SIGINT, lambda *_: None)
    if sys.stdin.readline().strip() != "go":
        _write(spec["exitFile"], {"aborted": True})
        return 0
    try:
        outcome = _run(spec)
    except OSError as exc:  # the command could not be started (not found, not executable)
        outcome = {"phase": "Failed", "message": f"cannot start: {exc}", "containers": []}
    _write(spec["exitFile"], outcome)
    return 0


if __name__ == "__main__":
    sys.exit(main())
