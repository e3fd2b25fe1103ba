"""A throwaway single-node Apache Kafka (KRaft) broker on 127.0.0.1.

There is no Docker engine on the development and CI machines, but there is
Java 17 and Maven, so the broker jars are resolved from Maven Central once,
cached outside the repository, and run as a plain JVM.

Library use::

    broker = start_broker(owner_pid=os.getpid())
    try:
        ... broker.bootstrap ...
    finally:
        stop_broker(broker)

Command line (used by the Makefile and benchmarks)::

    python -m devtools.local_broker fetch            # resolve + cache jars only
    python -m devtools.local_broker start [--state F] [--owner-pid PID]
    python -m devtools.local_broker stop  [--state F]
    python -m devtools.local_broker status [--state F]
    python -m devtools.local_broker run              # foreground until Ctrl-C
    ... start|run --scram-user broker=SECRET --scram-user alice=PW   # secured (see start_broker)

``start`` prints only the bootstrap address on stdout so that shells can
capture it; everything meant for people goes to stderr.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TextIO

KAFKA_VERSION = os.environ.get("QUOTAFLOW_KAFKA_VERSION", "4.1.1")
SCALA_VERSION = "2.13"
# Kafka's own pom leaves the slf4j backend to the distribution tarball; without
# one the broker is silent and we could not see the "started" line.
LOG4J_VERSION = "2.24.3"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

START_TIMEOUT_S = 60.0
STOP_GRACE_S = 20.0
MVN_TIMEOUT_S = 900.0
DEFAULT_HEAP = "512m"
# A single-node broker for tests and benchmarks shares a small machine with its clients, so
# its JVM is tuned for CPU, not peak throughput. With G1's default 1 MB regions every request
# of 512 KB or more (a 1,000-event Batch is ~480 KB, a transaction's batch of decisions more)
# is a humongous allocation straight into the old generation, and each one can start a
# concurrent marking cycle: 140 of them in two runs of Kueue's large-scale suite, 1.5 of the
# broker's 6.2 CPU seconds, with 2.2 s more in the C2 compiler. 4 MB regions and C1 alone cut
# a fresh broker's run to ~1.9 s, its request handlers no slower (bench/figures.md).
# Options in $QUOTAFLOW_KAFKA_JVM_OPTS come after these and win (-XX:TieredStopAtLevel=4
# restores C2).
BROKER_JVM_OPTS = ("-XX:G1HeapRegionSize=4m", "-XX:TieredStopAtLevel=1")
JVM_OPTS_ENV = "QUOTAFLOW_KAFKA_JVM_OPTS"
READY_MARKER = "Kafka Server started"
MAIN_CLASS = "kafka.Kafka"

_MARKER_NAME = ".resolved.json"

# JVMs started by this process, so stopping one also reaps it (no zombies).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class LocalBrokerError(RuntimeError):
    """The local broker could not be resolved, started or stopped."""


def _say(message: str, stream: TextIO | None = None) -> None:
    print(f"[local-broker] {message}", file=stream or sys.stderr, flush=True)


# --------------------------------------------------------------------------
# jar resolution and cache


def cache_root() -> Path:
    explicit = os.environ.get("QUOTAFLOW_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "quotaflow"


@dataclass(frozen=True)
class Resolution:
    libs: Path
    jar_count: int
    # "cache" (marker present, Maven not run), "maven-offline" or "maven-online"
    source: str
    seconds: float


def _pom(version: str) -> str:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>quotaflow.local</groupId>
  <artifactId>kafka-broker-runtime</artifactId>
  <version>{version}</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_{SCALA_VERSION}</artifactId>
      <version>{version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>{LOG4J_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>{LOG4J_VERSION}</version>
    </dependency>
  </dependencies>
</project>
"""


def _cached_libs(version_dir: Path) -> Path | None:
    """The libs dir if a previous resolution completed and is still intact."""
    marker = version_dir / _MARKER_NAME
    libs = version_dir / "libs"
    try:
        jars: list[str] = json.loads(marker.read_text())["jars"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if jars and all((libs / name).is_file() for name in jars):
        return libs
    return None


def _run_mvn(pom: Path, repo: Path, out: Path, offline: bool, log: Path) -> bool:
    cmd = [
        "mvn",
        "-B",
        "-q",
        "-f",
        str(pom),
        f"-Dmaven.repo.local={repo}",
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={out}",
    ]
    if offline:
        cmd.insert(1, "-o")
    with log.open("ab") as sink:
        sink.write(f"\n$ {' '.join(cmd)}\n".encode())
        sink.flush()
        try:
            done = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                timeout=MVN_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False
    return done.returncode == 0


def resolve_jars(version: str = KAFKA_VERSION) -> Resolution:
    """Return a directory holding the broker's runtime classpath.

    A completed resolution leaves a marker listing the jars; when it is
    present and intact Maven is not invoked at all.
    """
    began = time.monotonic()
    root = cache_root()
    version_dir = root / f"kafka-{version}"
    cached = _cached_libs(version_dir)
    if cached is not None:
        return Resolution(cached, len(list(cached.glob("*.jar"))), "cache", 0.0)

    if shutil.which("mvn") is None:
        raise LocalBrokerError("`mvn` not found on PATH; cannot resolve Kafka jars")
    version_dir.mkdir(parents=True, exist_ok=True)
    # Two test sessions starting at once must not interleave their downloads.
    with (root / f"kafka-{version}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cached = _cached_libs(version_dir)
        if cached is not None:
            return Resolution(cached, len(list(cached.glob("*.jar"))), "cache", 0.0)

        pom = version_dir / "pom.xml"
        pom.write_text(_pom(version))
        repo = root / "m2"
        log = version_dir / "mvn.log"
        staging = Path(tempfile.mkdtemp(prefix="libs-", dir=version_dir))
        try:
            have_artifact = (
                repo / "org/apache/kafka" / f"kafka_{SCALA_VERSION}" / version
            ).is_dir()
            ok = have_artifact and _run_mvn(pom, repo, staging, offline=True, log=log)
            source = "maven-offline"
            if not ok:
                source = "maven-online"
                _say(f"downloading Kafka {version} jars from Maven Central ...")
                ok = _run_mvn(pom, repo, staging, offline=False, log=log)
            if not ok:
                raise LocalBrokerError(
                    f"mvn could not resolve org.apache.kafka:kafka_{SCALA_VERSION}:"
                    f"{version}; see {log}"
                )
            jars = sorted(p.name for p in staging.glob("*.jar"))
            if not any(n.startswith(f"kafka_{SCALA_VERSION}-") for n in jars):
                raise LocalBrokerError(f"mvn finished but no broker jar landed; see {log}")
            libs = version_dir / "libs"
            shutil.rmtree(libs, ignore_errors=True)
            staging.rename(libs)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        (version_dir / _MARKER_NAME).write_text(
            json.dumps({"version": version, "jars": jars}, indent=1)
        )
    return Resolution(libs, len(jars), source, time.monotonic() - began)


# --------------------------------------------------------------------------
# broker process


@dataclass(frozen=True)
class LocalBroker:
    version: str
    pid: int
    port: int
    controller_port: int
    workdir: str
    log_file: str
    started_in_s: float
    # "PLAINTEXT", or "SASL_PLAINTEXT" for a broker started with `scram_users` (SCRAM-SHA-512
    # logins, Kafka's StandardAuthorizer, the first user the super user).
    security_protocol: str = "PLAINTEXT"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "bootstrap": self.bootstrap}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> LocalBroker:
        raw = json.loads(text)
        raw.pop("bootstrap", None)
        return cls(**raw)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SCRAM_MECHANISM = "SCRAM-SHA-512"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _listener_properties(port: int, controller_port: int, super_user: tuple[str, str] | None) -> list[str]:
    if super_user is None:
        return [
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        ]
    name, password = super_user
    jaas = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{name}" password="{password}";'
    return [
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        f"advertised.listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name=SASL_PLAINTEXT",
        "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        f"sasl.enabled.mechanisms={SCRAM_MECHANISM}",
        f"sasl.mechanism.inter.broker.protocol={SCRAM_MECHANISM}",
        f"listener.name.sasl_plaintext.{SCRAM_MECHANISM.lower()}.sasl.jaas.config={jaas}",
        f"authorizer.class.name={AUTHORIZER}",
        "allow.everyone.if.no.acl.found=false",
        # The controller listener is loopback-only PLAINTEXT, where the broker (the same JVM)
        # talks to the controller as ANONYMOUS; clients connect only to the SASL listener.
        f"super.users=User:{name};User:ANONYMOUS",
    ]


def _server_properties(
    data_dir: Path, port: int, controller_port: int, super_user: tuple[str, str] | None = None
) -> str:
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
            "controller.listener.names=CONTROLLER",
            *_listener_properties(port, controller_port, super_user),
            f"log.dirs={data_dir}",
            "num.partitions=1",
            "auto.create.topics.enable=true",
            # A single node cannot satisfy the default replication of 3 for the
            # internal topics that groups and transactions depend on.
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            # 50 partitions each (the default) costs seconds on first use.
            "offsets.topic.num.partitions=4",
            "transaction.state.log.num.partitions=4",
            "group.initial.rebalance.delay.ms=0",
            "log.flush.interval.messages=9223372036854775807",
            "",
        ]
    )


_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


def _java_cmd(libs: Path, workdir: Path, heap: str, main: Sequence[str]) -> list[str]:
    java = shutil.which("java")
    if java is None:
        raise LocalBrokerError("`java` not found on PATH")
    return [
        java,
        f"-Xmx{heap}",
        "-Xss1m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={workdir / 'log4j2.properties'}",
        # Lets `stop` and the watchdog recognise this JVM by its command line.
        f"-Dquotaflow.local.broker={workdir}",
        "-cp",
        f"{libs}/*",
        *main,
    ]


def broker_command(libs: Path, workdir: Path, heap: str, props: Path) -> list[str]:
    """The broker's JVM command line: the common options, BROKER_JVM_OPTS, then the user's."""
    cmd = _java_cmd(libs, workdir, heap, [MAIN_CLASS, str(props)])
    cp = cmd.index("-cp")
    cmd[cp:cp] = [*BROKER_JVM_OPTS, *shlex.split(os.environ.get(JVM_OPTS_ENV, ""))]
    return cmd


def _alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _is_our_jvm(pid: int, workdir: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"-Dquotaflow.local.broker={workdir}".encode() in cmdline


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _spawn_watchdog(owner_pid: int, jvm_pid: int, workdir: Path) -> None:
    # Joins the JVM's process group, so stopping the group also removes it.
    subprocess.Popen(
        [
            sys.executable,
            "-I",  # never pick up modules from the caller's cwd or PYTHONPATH
            str(Path(__file__).resolve()),
            "_watchdog",
            str(owner_pid),
            str(jvm_pid),
            str(workdir),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        process_group=jvm_pid,
        close_fds=True,
    )


def start_broker(
    *,
    version: str = KAFKA_VERSION,
    port: int | None = None,
    owner_pid: int | None = None,
    heap: str = DEFAULT_HEAP,
    timeout_s: float = START_TIMEOUT_S,
    scram_users: Mapping[str, str] | None = None,
) -> LocalBroker:
    """Format fresh KRaft storage in a temp dir and start a broker+controller.

    With `owner_pid`, a watchdog stops the broker once that process is gone,
    so a killed test run or shell cannot leave a JVM behind.

    With `scram_users` (name -> password, at least one), the broker is secured: its one client
    listener is SASL_PLAINTEXT with SCRAM-SHA-512 logins, the users' SCRAM credentials are
    written at format time, Kafka's StandardAuthorizer decides every request, and nothing is
    allowed without an ACL (`create_acls`) except to the first user, the super user the broker
    also logs in as.
    """
    resolution = resolve_jars(version)
    if resolution.source == "cache":
        _say(f"using {resolution.jar_count} cached jars from {resolution.libs}")
    else:
        _say(
            f"resolved {resolution.jar_count} jars into {resolution.libs} "
            f"({resolution.source}) in {resolution.seconds:.1f} s"
        )

    began = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="quotaflow-kafka-"))
    data_dir = workdir / "data"
    log_file = workdir / "kafka.log"
    port = port or _free_port()
    controller_port = _free_port()
    while controller_port == port:
        controller_port = _free_port()
    props = workdir / "server.properties"
    users = list((scram_users or {}).items())
    super_user = users[0] if users else None
    props.write_text(_server_properties(data_dir, port, controller_port, super_user))
    (workdir / "log4j2.properties").write_text(_LOG4J2)

    # Kafka's cluster ids are 16 random bytes in unpadded url-safe base64.
    # An id starting with "-" would be read by the storage tool's argument parser as an option,
    # so draw until it does not (1 in 64 draws would otherwise fail the start).
    cluster_id = "-"
    while cluster_id.startswith("-"):
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    fmt_cmd = _java_cmd(
        resolution.libs,
        workdir,
        "256m",
        [
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(props),
            *(
                arg
                for name, password in users
                for arg in ("--add-scram", f"{SCRAM_MECHANISM}=[name={name},password={password}]")
            ),
        ],
    )
    # Short-lived JVM: C1 only starts noticeably faster.
    fmt_cmd.insert(1, "-XX:TieredStopAtLevel=1")
    with log_file.open("ab") as sink:
        formatted = subprocess.run(
            fmt_cmd,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            timeout=timeout_s,
            check=False,
        )
    if formatted.returncode != 0:
        raise LocalBrokerError(
            f"formatting KRaft storage failed (exit {formatted.returncode}):\n"
            f"{_tail(log_file)}"
        )

    cmd = broker_command(resolution.libs, workdir, heap, props)
    with log_file.open("ab") as sink:
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            # Own process group: the terminal's Ctrl-C does not reach it, and
            # one killpg takes down everything we started. Not a new session,
            # because the watchdog must be able to join this group.
            process_group=0,
        )
    _CHILDREN[proc.pid] = proc
    broker = LocalBroker(
        version=version,
        pid=proc.pid,
        port=port,
        controller_port=controller_port,
        workdir=str(workdir),
        log_file=str(log_file),
        started_in_s=0.0,
        security_protocol="SASL_PLAINTEXT" if users else "PLAINTEXT",
    )
    try:
        if owner_pid is not None:
            _spawn_watchdog(owner_pid, proc.pid, workdir)
        _wait_ready(proc, log_file, port, timeout_s, began)
    except BaseException:
        # Covers Ctrl-C during startup as well as a failed start.
        _terminate_group(proc.pid, workdir=str(workdir), popen=_CHILDREN.pop(proc.pid))
        raise
    elapsed = time.monotonic() - began
    _say(f"Kafka {version} ready at {broker.bootstrap} in {elapsed:.1f} s (logs: {log_file})")
    return replace(broker, started_in_s=round(elapsed, 2))


def _log_contains(path: Path, needle: bytes, offset: int) -> tuple[bool, int]:
    try:
        with path.open("rb") as f:
            f.seek(max(0, offset - len(needle)))
            chunk = f.read()
            return needle in chunk, offset + max(0, len(chunk) - len(needle))
    except OSError:
        return False, offset


def _port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


def _wait_ready(
    proc: subprocess.Popen[bytes], log_file: Path, port: int, timeout_s: float, began: float
) -> None:
    # The port is bound well before requests are served; the log line comes
    # only after the broker has registered with the controller and is unfenced.
    offset = 0
    needle = READY_MARKER.encode()
    while time.monotonic() < began + timeout_s:
        code = proc.poll()
        if code is not None:
            raise LocalBrokerError(f"Kafka exited with {code} during startup:\n{_tail(log_file)}")
        found, offset = _log_contains(log_file, needle, offset)
        if found and _port_open(port):
            return
        time.sleep(0.1)
    raise LocalBrokerError(
        f"Kafka not ready within {timeout_s:.0f} s; log tail:\n{_tail(log_file)}"
    )


def _terminate_group(
    pid: int,
    *,
    workdir: str,
    popen: subprocess.Popen[bytes] | None = None,
    grace_s: float = STOP_GRACE_S,
) -> bool:
    """SIGTERM the broker's process group, SIGKILL it after `grace_s`.

    Returns True when the JVM went down gracefully.
    """
    if popen is None and not _is_our_jvm(pid, workdir):
        return True  # already gone, or the pid now belongs to someone else
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    graceful = False
    while time.monotonic() < deadline:
        if popen is not None and popen.poll() is not None:
            graceful = True
            break
        if popen is None and not _alive(pid):
            graceful = True
            break
        time.sleep(0.1)
    # Also sweeps up the watchdog and anything else left in the group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if popen is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(5)
    return graceful


def stop_broker(broker: LocalBroker, *, keep_data: bool = False) -> None:
    """Stop the JVM (and its watchdog); keep the log, drop the data dir."""
    graceful = _terminate_group(
        broker.pid, workdir=broker.workdir, popen=_CHILDREN.pop(broker.pid, None)
    )
    if not keep_data:
        shutil.rmtree(Path(broker.workdir) / "data", ignore_errors=True)
    how = "stopped" if graceful else "killed after timeout"
    _say(f"Kafka at {broker.bootstrap} {how} (log kept at {broker.log_file})")


@contextlib.contextmanager
def running_broker(
    *,
    version: str = KAFKA_VERSION,
    port: int | None = None,
    heap: str = DEFAULT_HEAP,
    scram_users: Mapping[str, str] | None = None,
) -> Iterator[LocalBroker]:
    """`start_broker` for the duration of a with-block, owned by this process."""
    broker = start_broker(version=version, port=port, heap=heap, owner_pid=os.getpid(), scram_users=scram_users)
    try:
        yield broker
    finally:
        stop_broker(broker)


@dataclass(frozen=True)
class Acl:
    """One ALLOW (or DENY) entry: `principal` may do `operation` on the resource(s) named.

    resource_type: TOPIC, GROUP, TRANSACTIONAL_ID, CLUSTER; pattern_type: LITERAL or PREFIXED."""

    principal: str
    resource_type: str
    pattern_type: str
    name: str
    operation: str
    deny: bool = False

    def line(self) -> str:
        parts = [self.principal, self.resource_type, self.pattern_type, self.name, self.operation]
        if any(not p or any(c.isspace() for c in p) for p in parts):
            raise LocalBrokerError(f"an ACL's fields cannot be empty or hold spaces: {self}")
        return " ".join([*parts, "DENY" if self.deny else "ALLOW"])


ACL_TOOL = Path(__file__).with_name("KafkaAcls.java")


def create_acls(broker: LocalBroker, super_user: tuple[str, str], acls: Iterable[Acl]) -> None:
    """Create `acls` on a secured broker through Kafka's Admin API (devtools/KafkaAcls.java,
    run by Java's single-file source launcher on the broker's own jars), as `super_user`."""
    resolution = resolve_jars(broker.version)
    java = shutil.which("java")
    if java is None:
        raise LocalBrokerError("`java` not found on PATH")
    name, password = super_user
    text = "".join(acl.line() + "\n" for acl in acls)
    done = subprocess.run(
        [java, "-XX:TieredStopAtLevel=1", "-cp", f"{resolution.libs}/*", str(ACL_TOOL), broker.bootstrap, name, password],
        input=text.encode(),
        capture_output=True,
        timeout=START_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise LocalBrokerError(
            f"creating ACLs failed (exit {done.returncode}):\n{done.stderr.decode(errors='replace')[-2000:]}"
        )


# --------------------------------------------------------------------------
# watchdog (runs as its own tiny process)


def _watchdog(owner_pid: int, jvm_pid: int, workdir: str) -> int:
    # The group SIGTERM meant for the JVM must not kill us before we could
    # escalate to SIGKILL; we leave by ourselves once the JVM is gone.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while _alive(jvm_pid):
        if not _alive(owner_pid):
            _terminate_group(jvm_pid, workdir=workdir)
            return 0
        time.sleep(0.5)
    return 0


# --------------------------------------------------------------------------
# command line


def default_state_file() -> Path:
    explicit = os.environ.get("QUOTAFLOW_BROKER_STATE")
    if explicit:
        return Path(explicit)
    return Path(tempfile.gettempdir()) / f"quotaflow-local-broker-{os.getuid()}.json"


def _load_state(path: Path) -> LocalBroker | None:
    try:
        return LocalBroker.from_json(path.read_text())
    except (OSError, ValueError, TypeError):
        return None


def _scram_users(specs: Sequence[str] | None) -> dict[str, str] | None:
    """`NAME=PASSWORD` options, in order (the first is the super user), or None: not secured."""
    users: dict[str, str] = {}
    for spec in specs or ():
        name, sep, password = spec.partition("=")
        if not sep or not name or not password:
            raise LocalBrokerError(f"--scram-user {spec!r}: expected NAME=PASSWORD")
        users[name] = password
    return users or None


def _cmd_start(args: argparse.Namespace) -> int:
    state: Path = args.state
    previous = _load_state(state)
    if previous is not None and _is_our_jvm(previous.pid, previous.workdir):
        _say(f"already running at {previous.bootstrap} (state {state})")
        print(previous.bootstrap)
        return 0
    broker = start_broker(
        version=args.version,
        port=args.port,
        owner_pid=args.owner_pid,
        heap=args.heap,
        scram_users=_scram_users(args.scram_user),
    )
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(broker.to_json())
    print(broker.bootstrap, flush=True)
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    state: Path = args.state
    broker = _load_state(state)
    if broker is None:
        _say(f"no broker recorded in {state}; nothing to stop")
        return 0
    stop_broker(broker)
    state.unlink(missing_ok=True)
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    broker = _load_state(args.state)
    if broker is None or not _is_our_jvm(broker.pid, broker.workdir):
        print("stopped")
        return 1
    print(broker.to_json())
    return 0


def _cmd_fetch(args: argparse.Namespace) -> int:
    res = resolve_jars(args.version)
    _say(f"{res.jar_count} jars in {res.libs} (from {res.source}, {res.seconds:.1f} s)")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    with running_broker(
        version=args.version, port=args.port, heap=args.heap, scram_users=_scram_users(args.scram_user)
    ) as broker:
        _say("Ctrl-C to stop")
        print(broker.bootstrap, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            # SIGINT may arrive ignored (e.g. started as a background job).
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.default_int_handler)
            while _alive(broker.pid):
                time.sleep(0.5)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_watchdog"]:
        return _watchdog(int(argv[1]), int(argv[2]), argv[3])

    parser = argparse.ArgumentParser(
        prog="python -m devtools.local_broker",
        description="Single-node KRaft Kafka broker on 127.0.0.1 for tests and benchmarks.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, *, state: bool, broker: bool) -> None:
        p.add_argument("--version", default=KAFKA_VERSION, help="Kafka version")
        if state:
            p.add_argument("--state", type=Path, default=default_state_file())
        if broker:
            p.add_argument("--port", type=int, default=None, help="default: a free port")
            p.add_argument("--heap", default=DEFAULT_HEAP)
            p.add_argument(
                "--scram-user",
                action="append",
                metavar="NAME=PASSWORD",
                help="secure the broker: SASL/SCRAM-SHA-512 logins and the StandardAuthorizer; "
                "repeat for each user, the first is the super user",
            )

    p_start = sub.add_parser("start", help="start in the background, print bootstrap")
    common(p_start, state=True, broker=True)
    p_start.add_argument(
        "--owner-pid",
        type=int,
        default=None,
        help="stop the broker automatically once this process exits",
    )
    p_start.set_defaults(func=_cmd_start)
    p_stop = sub.add_parser("stop", help="stop the broker recorded in --state")
    common(p_stop, state=True, broker=False)
    p_stop.set_defaults(func=_cmd_stop)
    p_status = sub.add_parser("status", help="exit 0 and print state if running")
    common(p_status, state=True, broker=False)
    p_status.set_defaults(func=_cmd_status)
    p_fetch = sub.add_parser("fetch", help="resolve and cache the jars only")
    common(p_fetch, state=False, broker=False)
    p_fetch.set_defaults(func=_cmd_fetch)
    p_run = sub.add_parser("run", help="run in the foreground until interrupted")
    common(p_run, state=False, broker=True)
    p_run.set_defaults(func=_cmd_run)

    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except LocalBrokerError as exc:
        _say(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
