"""Stopping and restarting a local broker with its data, for the broker-restart crash test.

`devtools.local_broker` starts a fresh broker and stops it (optionally keeping the data dir); this
restarts a stopped one from the same work dir: same server.properties, so the same data dir,
ports and cluster id. It reuses local_broker's own pieces (jar cache, JVM command line,
watchdog), so the restarted JVM is cleaned up exactly like the first one.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from pathlib import Path

from devtools import local_broker
from devtools.local_broker import LocalBroker, LocalBrokerError


def stop_keeping_data(broker: LocalBroker) -> None:
    local_broker.stop_broker(broker, keep_data=True)


def restart(broker: LocalBroker, timeout_s: float = 60.0) -> LocalBroker:
    libs = local_broker.resolve_jars(broker.version).libs
    workdir = Path(broker.workdir)
    log_file = Path(broker.log_file)
    seen = log_file.stat().st_size if log_file.exists() else 0
    cmd = local_broker._java_cmd(
        libs, workdir, local_broker.DEFAULT_HEAP, [local_broker.MAIN_CLASS, str(workdir / "server.properties")]
    )
    with log_file.open("ab") as sink:
        proc = subprocess.Popen(
            cmd, cwd=workdir, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, process_group=0
        )
    local_broker._CHILDREN[proc.pid] = proc
    local_broker._spawn_watchdog(os.getpid(), proc.pid, workdir)
    restarted = dataclasses.replace(broker, pid=proc.pid)
    deadline = time.monotonic() + timeout_s
    marker = local_broker.READY_MARKER.encode()
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LocalBrokerError(f"restarted Kafka exited with {proc.returncode}; see {log_file}")
        with log_file.open("rb") as f:
            f.seek(seen)
            if marker in f.read() and local_broker._port_open(broker.port):
                return restarted
        time.sleep(0.1)
    local_broker.stop_broker(restarted)
    raise LocalBrokerError(f"restarted Kafka not ready within {timeout_s:.0f} s; see {log_file}")
