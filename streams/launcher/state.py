"""The launcher's durable state: where it stands in the decision log, and what it runs.

One SQLite file in the launcher's state directory (WAL, synchronous=FULL: a committed change
survives a SIGKILL of the launcher and a power cut). It holds:

- `position`: the decision log offset of the last decision the launcher has applied here. A
  decision changes only this file (in one transaction with the new position), never a process;
  the processes are then made to match the file (`streams.launcher.loop`). So a decision is
  applied exactly once, and whatever it asked for is still asked for after a crash.
- `runs`: one per admission the launcher acts on: the workload, the admission (the `Admitted`
  decision's id, `<cause.offset>.<cause.index>`), its assignment, where the Workload was
  submitted, the pods once resolved, and the phase:
  - `Running`: its pods should run; when all have exited it becomes `Finishing`;
  - `Stopping`: preempted, evicted, finished or deleted by someone else: its pods are stopped
    (SIGTERM, the grace period, SIGKILL); once they are gone, `release` (a `WorkloadReleased`
    event id, or none when the quota is already given back) is published and the run forgotten;
  - `Finishing`: its pods exited; `WorkloadFinished` with `result` is published, then forgotten.
- `pods`: one per pod process started: its pid, its start time in clock ticks since boot (with
  the pid, what tells the process from a later one that reuses the pid), the attempt, the file
  its shim writes its outcome to, and that outcome once read.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RUNNING, STOPPING, FINISHING = "Running", "Stopping", "Finishing"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    workload TEXT NOT NULL,
    admission TEXT NOT NULL,
    cluster_queue TEXT NOT NULL,
    assignments TEXT NOT NULL,
    submission INTEGER NOT NULL,
    pods TEXT,
    phase TEXT NOT NULL,
    release TEXT,
    stop_deadline REAL,
    result TEXT,
    UNIQUE (workload, admission)
);
CREATE TABLE IF NOT EXISTS pods (
    run INTEGER NOT NULL,
    pod TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    start_ticks INTEGER NOT NULL,
    exit_file TEXT NOT NULL,
    outcome TEXT,
    PRIMARY KEY (run, pod)
);
"""


@dataclass
class Run:
    id: int
    workload: str
    admission: str
    cluster_queue: str
    assignments: list[dict[str, Any]]
    submission: int
    pods: list[dict[str, Any]] | None
    phase: str
    release: str | None
    stop_deadline: float | None
    result: dict[str, str] | None


@dataclass
class Pod:
    run: int
    pod: str
    attempt: int
    pid: int
    start_ticks: int
    exit_file: str
    outcome: dict[str, Any] | None


class StateError(RuntimeError):
    """The state directory cannot be used (another log's, or unreadable)."""


class LauncherState:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(_SCHEMA)
        row = self.db.execute("SELECT value FROM meta WHERE key='position'").fetchone()
        self._position = int(row[0]) if row else -1

    def close(self) -> None:
        self.db.close()

    # -- identity and position -------------------------------------------------------------------
    def bind(self, log_identity: str) -> None:
        """Refuse a state directory made for another log: its runs and position mean nothing here."""
        row = self.db.execute("SELECT value FROM meta WHERE key='log'").fetchone()
        if row is None:
            self.db.execute("INSERT INTO meta VALUES ('log', ?)", (log_identity,))
        elif row[0] != log_identity:
            raise StateError(f"this state directory belongs to another log ({row[0]}), not {log_identity}")

    @property
    def position(self) -> int:
        return self._position

    def _set_position(self, offset: int) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES ('position', ?)", (str(offset),))
        self._position = offset

    def advance(self, offset: int) -> None:
        """Decisions up to `offset` that changed nothing here are applied too."""
        if offset > self.position:
            self._set_position(offset)

    # -- decisions (each one transaction, with the position) ------------------------------------
    def admitted(
        self, offset: int, workload: str, admission: str, cluster_queue: str, assignments: list[dict[str, Any]], submission: int
    ) -> None:
        with self._tx():
            # Defensive: a new admission ends any run of the workload still marked running.
            self.db.execute(
                "UPDATE runs SET phase=?, release=NULL WHERE workload=? AND phase=?", (STOPPING, workload, RUNNING)
            )
            self.db.execute(
                "INSERT OR IGNORE INTO runs (workload, admission, cluster_queue, assignments, submission, phase) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (workload, admission, cluster_queue, json.dumps(assignments), submission, RUNNING),
            )
            self._set_position(offset)

    def evicted(self, offset: int, workload: str, release_id: str) -> None:
        """Preempted or Evicted: stop its running run, then release its quota under `release_id`.
        A run already finishing keeps finishing (a finish also releases an evicted workload)."""
        with self._tx():
            self.db.execute(
                "UPDATE runs SET phase=?, release=? WHERE workload=? AND phase=?", (STOPPING, release_id, workload, RUNNING)
            )
            self._set_position(offset)

    def quota_released(self, offset: int, workload: str) -> None:
        """The quota came back without the launcher (Immediate release, someone else's release)."""
        with self._tx():
            self.db.execute("UPDATE runs SET release=NULL WHERE workload=? AND phase=?", (workload, STOPPING))
            self._set_position(offset)

    def ended(self, offset: int, workload: str) -> None:
        """Finished or Deleted: whatever runs is stopped, and nothing is published for it."""
        with self._tx():
            self.db.execute("UPDATE runs SET phase=?, release=NULL WHERE workload=?", (STOPPING, workload))
            self._set_position(offset)

    # -- runs ------------------------------------------------------------------------------------
    def runs(self) -> list[Run]:
        rows = self.db.execute(
            "SELECT id, workload, admission, cluster_queue, assignments, submission, pods, phase, release, "
            "stop_deadline, result FROM runs ORDER BY id"
        ).fetchall()
        return [
            Run(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], json.loads(r[6]) if r[6] else None, r[7], r[8], r[9],
                json.loads(r[10]) if r[10] else None)
            for r in rows
        ]

    def run(self, run_id: int) -> Run | None:
        return next((r for r in self.runs() if r.id == run_id), None)

    def set_pods(self, run_id: int, pods: list[dict[str, Any]]) -> None:
        self.db.execute("UPDATE runs SET pods=? WHERE id=?", (json.dumps(pods), run_id))

    def finishing(self, run_id: int, result: dict[str, str]) -> None:
        """All pods exited (or it could not be run): finish it with `result` (reason, message)."""
        self.db.execute(
            "UPDATE runs SET phase=?, result=? WHERE id=? AND phase=?", (FINISHING, json.dumps(result), run_id, RUNNING)
        )

    def set_stop_deadline(self, run_id: int, deadline: float) -> None:
        self.db.execute("UPDATE runs SET stop_deadline=? WHERE id=?", (deadline, run_id))

    def forget(self, run_id: int) -> None:
        with self._tx():
            self.db.execute("DELETE FROM pods WHERE run=?", (run_id,))
            self.db.execute("DELETE FROM meta WHERE key LIKE ?", (f"attempts:{run_id}:%",))
            self.db.execute("DELETE FROM runs WHERE id=?", (run_id,))

    # -- pods ------------------------------------------------------------------------------------
    def pods(self, run_id: int | None = None) -> list[Pod]:
        query = "SELECT run, pod, attempt, pid, start_ticks, exit_file, outcome FROM pods"
        rows = self.db.execute(query + (" WHERE run=?" if run_id is not None else ""), (() if run_id is None else (run_id,)))
        return [Pod(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]) if r[6] else None) for r in rows.fetchall()]

    def attempts(self, run_id: int, pod: str) -> int:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (f"attempts:{run_id}:{pod}",)).fetchone()
        return int(row[0]) if row else 0

    def started(self, pod: Pod) -> None:
        """A pod's shim is running (not yet told to go): durable before it is told."""
        with self._tx():
            self.db.execute(
                "INSERT OR REPLACE INTO pods VALUES (?, ?, ?, ?, ?, ?, NULL)",
                (pod.run, pod.pod, pod.attempt, pod.pid, pod.start_ticks, pod.exit_file),
            )
            self.db.execute(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)", (f"attempts:{pod.run}:{pod.pod}", str(pod.attempt + 1))
            )

    def pod_exited(self, run_id: int, pod: str, outcome: dict[str, Any]) -> None:
        self.db.execute("UPDATE pods SET outcome=? WHERE run=? AND pod=?", (json.dumps(outcome), run_id, pod))

    def pod_aborted(self, run_id: int, pod: str) -> None:
        """Its shim never ran the pod (the launcher died before telling it to): start it again."""
        self.db.execute("DELETE FROM pods WHERE run=? AND pod=?", (run_id, pod))

    def _tx(self) -> _Tx:
        return _Tx(self.db)


class _Tx:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *_: object) -> None:
        self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")
