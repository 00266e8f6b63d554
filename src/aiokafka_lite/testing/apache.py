"""Apache Kafka itself, for tests: resolved from Maven Central, run as local processes.

The embedded broker is a fast stand-in; Apache Kafka is the reference. This module
fetches a pinned Kafka release with Maven (``apache_kafka_pom.xml`` beside this file),
formats KRaft storage and runs combined broker+controller nodes on free loopback ports,
with no Docker::

    with ApacheCluster(brokers=3) as kafka:
        kafka.create_topic("t", 6, replication_factor=3)
        ... Producer(kafka.bootstrap) ...
        kafka.kill_node(2)          # SIGKILL, like a crash
        kafka.start_node(2)         # same ports, same data

``ApacheCluster`` offers the part of ``EmbeddedCluster``'s control API that a real
cluster can honour (topics, high watermarks, stopping, killing and restarting brokers),
so tests written against that part run on either. Fault injection at the request level
exists only in the embedded broker.

Needs Java 17+ and Maven on PATH (or ``JAVA_HOME`` / ``AIOKAFKA_LITE_MVN``). The jars
are copied to ``$AIOKAFKA_LITE_KAFKA_CACHE`` (default ``~/.cache/aiokafka_lite/kafka``),
one folder per version; Maven's own downloads stay in ``~/.m2``.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Final, NoReturn, Self, TypeVar

from aiokafka_lite.core.errors import KafkaError

if TYPE_CHECKING:
    from aiokafka_lite.admin.client import Admin
    from aiokafka_lite.wire.messages import MetadataResponse

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "KAFKA_VERSIONS",
    "ApacheCluster",
    "ApacheKafkaError",
    "ApacheNode",
    "EmbeddedOnlyError",
    "ThreadedApache",
    "cache_root",
    "java_executable",
    "kafka_classpath",
    "kafka_tools_classpath",
    "maven_executable",
    "resolve_version",
]

#: Pinned releases: the newest 4.x that resolves from Maven Central, and the first 4.x
#: line (still widely deployed). ``--kafka-version`` takes a key or a full version.
KAFKA_VERSIONS: Mapping[str, str] = {"latest": "4.4.0", "4.4": "4.4.0", "4.0": "4.0.2"}
DEFAULT_KAFKA_VERSION = KAFKA_VERSIONS["latest"]

T = TypeVar("T")

# Settings every test node gets. They differ from Kafka's defaults only where a test
# cluster of one to three nodes needs it (internal topics' replication) or where a
# default exists to wait for more members than a test will ever have.
_TEST_BROKER_CONFIG: Mapping[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    # Fewer partitions for the internal topics: creating 50 of them costs seconds.
    "offsets.topic.num.partitions": "10",
    "transaction.state.log.num.partitions": "10",
    "share.coordinator.state.topic.num.partitions": "10",
    # Share groups (KIP-932): let tests give a group short acquisition locks, and
    # heartbeat every second (Kafka's 5 s makes the first assignment take ~5 s).
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.heartbeat.interval.ms": "1000",
    "log.flush.interval.messages": "9223372036854775807",
    # Bounded heap-friendly segment size for short-lived test data.
    "log.segment.bytes": str(64 << 20),
}


class ApacheKafkaError(KafkaError):
    """Apache Kafka could not be fetched or started (missing Java/Maven, a failed
    download, a node that did not come up). The message says which and how to fix it."""


class EmbeddedOnlyError(ApacheKafkaError, AttributeError):
    """A test asked a real Kafka cluster for control the embedded broker alone has."""


def resolve_version(version: str | None) -> str:
    """``None``/``"latest"`` -> the newest pinned release; ``"4.0"`` -> 4.0.x; a full
    version is taken as given."""
    if version is None:
        return DEFAULT_KAFKA_VERSION
    return KAFKA_VERSIONS.get(version, version)


def cache_root() -> Path:
    """Where fetched Kafka releases and tools are kept (``$AIOKAFKA_LITE_KAFKA_CACHE``, else
    ``$XDG_CACHE_HOME/aiokafka_lite/kafka`` or ``~/.cache/aiokafka_lite/kafka``)."""
    env = os.environ.get("AIOKAFKA_LITE_KAFKA_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "aiokafka_lite" / "kafka"


def java_executable() -> str:
    """The ``java`` that runs Kafka and its tools (``$JAVA_HOME/bin/java``, else on PATH)."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if found is None:
        raise ApacheKafkaError(
            "Apache Kafka needs Java 17 or newer, and no `java` is on PATH (nor JAVA_HOME set): "
            "install a JDK, e.g. `apt-get install openjdk-17-jre-headless`"
        )
    return found


def maven_executable() -> str:
    """The ``mvn`` that fetches Kafka's jars (``$AIOKAFKA_LITE_MVN``, else on PATH)."""
    found = os.environ.get("AIOKAFKA_LITE_MVN") or shutil.which("mvn")
    if found is None:
        raise ApacheKafkaError(
            "fetching Apache Kafka needs Maven, and no `mvn` is on PATH: install it "
            "(e.g. `apt-get install maven`), or point AIOKAFKA_LITE_MVN at it"
        )
    return found


# The former private names, still used by tests written before the public ones.
_cache_root = cache_root
_java = java_executable
_mvn = maven_executable


def kafka_classpath(version: str | None = None) -> Path:
    """The folder holding Kafka ``version``'s jars, fetched with Maven on first use.

    Safe to call from several processes at once (a file lock serialises the download)."""
    version = resolve_version(version)
    target = cache_root() / version
    lib = target / "lib"
    done = target / ".complete"
    if done.exists():
        return lib
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return lib
        mvn = maven_executable()
        pom = resources.files("aiokafka_lite.testing").joinpath("apache_kafka_pom.xml")
        with resources.as_file(pom) as pom_path, tempfile.TemporaryDirectory(dir=target) as tmp:
            staging = Path(tmp) / "lib"
            cmd = [
                mvn,
                "-B",
                "-q",
                "-f",
                str(pom_path),
                "dependency:copy-dependencies",
                f"-Dkafka.version={version}",
                f"-DoutputDirectory={staging}",
                "-DincludeScope=runtime",
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, timeout=900)
            jars = list(staging.glob("*.jar")) if staging.exists() else []
            if proc.returncode != 0 or not any(j.name.startswith("kafka_2.13-") for j in jars):
                out = (proc.stdout + proc.stderr).strip().splitlines()
                tail = "\n".join(out[-15:])
                raise ApacheKafkaError(
                    f"Maven could not fetch Apache Kafka {version} (exit {proc.returncode}); is "
                    f"Maven Central reachable, and does org.apache.kafka:kafka_2.13:{version} exist?\n"
                    f"command: {' '.join(cmd)}\n{tail}"
                )
            if lib.exists():
                shutil.rmtree(lib)
            staging.rename(lib)
        done.write_text(version + "\n")
    return lib


def kafka_tools_classpath(version: str | None = None) -> str:
    """A Java classpath with Kafka ``version``'s jars plus its ``kafka-tools`` jar, for
    running Kafka's command-line tools (``org.apache.kafka.tools.TransactionsCommand``,
    ``MetadataQuorumCommand``...) with ``java -cp``; the jar is fetched with Maven on first use."""
    version = resolve_version(version)
    lib = kafka_classpath(version)
    folder = cache_root() / f"kafka-tools-{version}"
    jar = folder / f"kafka-tools-{version}.jar"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not jar.exists():
            cmd = [
                maven_executable(),
                "-B",
                "-q",
                "dependency:copy",
                f"-Dartifact=org.apache.kafka:kafka-tools:{version}",
                f"-DoutputDirectory={folder}",
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=folder, timeout=900)
            if proc.returncode != 0 or not jar.exists():
                raise ApacheKafkaError(
                    f"Maven could not fetch org.apache.kafka:kafka-tools:{version} "
                    f"(exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-2000:]}"
                )
    return f"{lib}/*:{folder}/*"


# Ports this interpreter has handed out: the kernel may give the same free port to two
# binds in a row once the first socket is closed, and one node's two listeners on one
# port make Kafka refuse to format ("two listeners on the same port").
_handed_out_ports: set[int] = set()


def _free_port(host: str) -> int:
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port not in _handed_out_ports:
            _handed_out_ports.add(port)
            return port


# Every Kafka process this interpreter started and has not seen exit. A test run that is
# interrupted (Ctrl-C, a timeout that ends the session) must not leave JVMs behind.
_live_processes: weakref.WeakSet[subprocess.Popen[bytes]] = weakref.WeakSet()
_exit_cleanup_installed = False


def _install_exit_cleanup() -> None:
    global _exit_cleanup_installed
    if not _exit_cleanup_installed:
        atexit.register(_kill_leftovers)
        _exit_cleanup_installed = True


def _kill_leftovers() -> None:
    for proc in list(_live_processes):
        if proc.poll() is None:
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), 0.5):
            return True
    except OSError:
        return False


def _random_cluster_id() -> str:
    """A base64url UUID, as ``kafka-storage random-uuid`` makes. Like Kafka's own, never
    one that starts with ``-``: the storage tool's argument parser would take it for an
    option."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


_SCRAM_MECHANISMS: Final = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_SASL_MECHANISMS: Final = ("PLAIN", *_SCRAM_MECHANISMS)


@dataclass(frozen=True)
class _Security:
    """How the client listener is secured. A secured cluster keeps a second, plaintext
    listener (INTERNAL) for replication and for the launcher's own admin client."""

    protocol: str = "PLAINTEXT"
    keystore: Path | None = None  # PEM file: private key (PKCS#8) and certificate chain
    sasl_users: Mapping[str, str] = field(default_factory=dict)
    sasl_mechanisms: tuple[str, ...] = ()

    @property
    def secured(self) -> bool:
        return self.protocol != "PLAINTEXT"

    def listener_configs(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.keystore is not None:
            out["listener.name.client.ssl.keystore.type"] = "PEM"
            out["listener.name.client.ssl.keystore.location"] = str(self.keystore)
        if self.sasl_mechanisms:
            out["listener.name.client.sasl.enabled.mechanisms"] = ",".join(self.sasl_mechanisms)
        for mech in self.sasl_mechanisms:
            if mech == "PLAIN":
                users = " ".join(f'user_{u}="{pw}"' for u, pw in self.sasl_users.items())
                module = f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
            elif mech == "OAUTHBEARER":  # the validator and its settings come from ``configs``
                module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
            elif mech == "GSSAPI":  # Krb5LoginModule with the broker's keytab comes from ``configs``
                continue
            else:  # SCRAM credentials live in the metadata log (format --add-scram)
                module = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            out[f"listener.name.client.{mech.lower()}.sasl.jaas.config"] = module
        return out

    def format_args(self) -> list[str]:
        args: list[str] = []
        for mech in self.sasl_mechanisms:
            if mech in _SCRAM_MECHANISMS:
                for user, pw in self.sasl_users.items():
                    args += ["--add-scram", f"{mech}=[name={user},password={pw}]"]
        return args


# Characters that the JAAS line or the storage tool's --add-scram syntax cannot carry.
_UNSAFE_CREDENTIAL_CHARS: Final = frozenset('"\\,[]=; \n')


class ApacheNode:
    """One Kafka process: a combined broker and KRaft controller with its own data dir.

    Its ports and data survive ``stop``/``kill`` and ``start``, like a restarted server."""

    def __init__(
        self,
        node_id: int,
        workdir: Path,
        *,
        classpath: Path,
        host: str,
        port: int,
        controller_port: int,
        heap: str,
        internal_port: int | None = None,
        advertised_port: int | None = None,
        extra_classpath: Sequence[str] = (),
        jvm_system_properties: Mapping[str, str] | None = None,
    ) -> None:
        self.node_id = node_id
        self.dir = workdir / f"node-{node_id}"
        self.data_dir = self.dir / "data"
        self.config_path = self.dir / "server.properties"
        self.log_path = self.dir / "server.log"
        self.host = host
        self.port = port
        self.controller_port = controller_port
        self.internal_port = internal_port
        # What Metadata tells clients (a test proxy's port); replication and the
        # launcher's admin client use the INTERNAL listener then, never the proxy.
        self.advertised_port = advertised_port
        # The metadata log directory id given at format time (ApacheCluster(dynamic_quorum=True)).
        self.directory_id: uuid.UUID | None = None
        self._classpath = classpath
        self._extra_classpath = tuple(extra_classpath)
        self._jvm_properties = [f"-D{k}={v}" for k, v in (jvm_system_properties or {}).items()]
        self._heap = heap
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def internal_address(self) -> str:
        """The plaintext listener (the client listener itself when it is plaintext)."""
        return f"{self.host}:{self.internal_port or self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running and self._proc is not None else None

    def write_config(self, quorum: str, configs: Mapping[str, str], security: _Security) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        controller = f"CONTROLLER://{self.host}:{self.controller_port}"
        if self.internal_port is not None:
            client = f"CLIENT://{self.host}:{self.port}"
            advertised = f"CLIENT://{self.host}:{self.advertised_port or self.port}"
            internal = f"INTERNAL://{self.host}:{self.internal_port}"
            listeners = {
                "listeners": f"{client},{internal},{controller}",
                "advertised.listeners": f"{advertised},{internal}",
                "inter.broker.listener.name": "INTERNAL",
                "listener.security.protocol.map": (
                    f"CLIENT:{security.protocol},INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
                ),
                **security.listener_configs(),
            }
        else:
            listeners = {
                "listeners": f"PLAINTEXT://{self.host}:{self.port},{controller}",
                "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            }
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": quorum,
            "controller.listener.names": "CONTROLLER",
            **listeners,
            "log.dirs": str(self.data_dir),
            **configs,
        }
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _java_cmd(self, main: str, *args: str) -> list[str]:
        return [
            java_executable(),
            f"-Xmx{self._heap}",
            "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients=warn",
            *self._jvm_properties,
            "-cp",
            os.pathsep.join([f"{self._classpath}/*", *self._extra_classpath]),
            main,
            *args,
        ]

    def format(self, cluster_id: str, extra: Sequence[str] = ()) -> None:
        cmd = self._java_cmd(
            "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.config_path), *extra
        )
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise ApacheKafkaError(
                f"formatting Kafka storage for node {self.node_id} failed (exit {proc.returncode}):\n"
                f"{(proc.stdout + proc.stderr).strip()[-2000:]}"
            )

    def start(self) -> None:
        if self.running:
            return
        _install_exit_cleanup()
        log = open(self.log_path, "ab")  # the child keeps its own copy of the descriptor
        try:
            self._proc = subprocess.Popen(
                self._java_cmd("kafka.Kafka", str(self.config_path)),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            _live_processes.add(self._proc)
        finally:
            log.close()

    def terminate(self) -> None:
        """Asks the process to shut down (SIGTERM) without waiting."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 30.0) -> None:
        """Controlled shutdown (SIGTERM); SIGKILL if it has not exited within ``timeout``."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def kill(self) -> None:
        """SIGKILL: a crash, with no controlled shutdown."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.kill()
        proc.wait(10)

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_listening(self, deadline: float) -> None:
        """Waits until every listener of the node accepts connections (the client one, and
        the internal one that the launcher's admin client uses: they open one by one)."""
        ports = [self.port] if self.internal_port is None else [self.port, self.internal_port]
        while True:
            proc = self._proc
            if proc is not None and proc.poll() is not None:
                raise ApacheKafkaError(
                    f"Kafka node {self.node_id} exited with code {proc.returncode} while starting; "
                    f"last lines of {self.log_path}:\n{self.log_tail()}"
                )
            while ports and _accepts(self.host, ports[0]):
                ports.pop(0)
            if not ports:
                return
            if time.monotonic() > deadline:
                raise ApacheKafkaError(
                    f"Kafka node {self.node_id} did not listen on {self.address} in time; "
                    f"last lines of {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(0.1)


class ApacheCluster:
    """A real Apache Kafka cluster of ``brokers`` KRaft nodes on loopback.

    Every node is broker and controller (the controller quorum is all nodes), so any
    single node of three may be stopped or killed while the cluster keeps serving.
    ``configs`` are extra broker settings for every node. ``tls=(certfile, keyfile)``
    (PEM; an unencrypted key) makes the client listener speak TLS and ``sasl_users``
    (user -> password) SASL (PLAIN and SCRAM-SHA-256/512 unless ``sasl_mechanisms`` says
    otherwise; ``"OAUTHBEARER"`` and ``"GSSAPI"`` may be listed too, the validator or
    the broker's Krb5LoginModule JAAS line set through ``configs``
    and ``jvm_system_properties``, the ``-D`` properties of every node's JVM), like ``EmbeddedCluster``'s ``ssl_context``/``sasl_users``; replication
    and the launcher's own admin client then use a second, plaintext listener, as they do
    when ``advertised_ports`` (one per broker) make Metadata send clients to other ports
    (a test proxy in front of each broker). ``dynamic_quorum=True`` formats a KIP-853
    dynamic quorum (``--initial-controllers``, each node's ``directory_id`` chosen by the
    launcher) instead of a static ``controller.quorum.voters`` one, so voters can be
    removed and added (Kafka 3.9+). ``features`` (name -> level) are formatted in
    (``--feature``, e.g. ``{"transaction.version": 1}``). The control methods are
    synchronous (they block on an admin client running on a private thread), so they
    work from sync and async tests alike; the ``async`` broker lifecycle methods mirror
    ``EmbeddedCluster``'s.
    """

    def __init__(
        self,
        brokers: int = 1,
        *,
        version: str | None = None,
        configs: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
        workdir: str | os.PathLike[str] | None = None,
        heap: str = "768m",
        start_timeout: float = 120.0,
        tls: tuple[str | os.PathLike[str], str | os.PathLike[str]] | None = None,
        sasl_users: Mapping[str, str] | None = None,
        sasl_mechanisms: Sequence[str] = _SASL_MECHANISMS,
        advertised_ports: Sequence[int] | None = None,
        dynamic_quorum: bool = False,
        features: Mapping[str, int] | None = None,
        extra_classpath: Sequence[str | os.PathLike[str]] = (),
        jvm_system_properties: Mapping[str, str] | None = None,
    ) -> None:
        # Feature levels set at format time (``kafka-storage format --feature name=level``),
        # e.g. {"transaction.version": 1} for a cluster without Transactions V2.
        self._features = dict(features or {})
        # Jars or class directories after Kafka's (a broker-side plugin a test compiled).
        self._extra_classpath = tuple(str(p) for p in extra_classpath)
        # -D properties of every node's JVM, e.g. Kafka's OAUTHBEARER allowed-URLs list
        # (org.apache.kafka.sasl.oauthbearer.allowed.urls).
        self._jvm_system_properties = dict(jvm_system_properties or {})
        if brokers < 1:
            raise ApacheKafkaError("a cluster needs at least one broker")
        if advertised_ports is not None and len(advertised_ports) != brokers:
            raise ApacheKafkaError("advertised_ports must give one port per broker")
        self._advertised_ports = tuple(advertised_ports) if advertised_ports is not None else None
        self._dynamic_quorum = dynamic_quorum
        unknown = sorted(set(sasl_mechanisms) - {*_SASL_MECHANISMS, "OAUTHBEARER", "GSSAPI"})
        if sasl_users is not None and unknown:
            raise ApacheKafkaError(f"unsupported SASL mechanisms {unknown} (choose from {_SASL_MECHANISMS})")
        for user, pw in (sasl_users or {}).items():
            if not user or not pw or _UNSAFE_CREDENTIAL_CHARS & set(user + pw):
                raise ApacheKafkaError(
                    f"SASL user {user!r}: names and passwords must be non-empty and free of "
                    f"{''.join(sorted(_UNSAFE_CREDENTIAL_CHARS))!r} (Kafka's JAAS and SCRAM set-up syntax)"
                )
        self._tls = (Path(tls[0]), Path(tls[1])) if tls is not None else None
        self._sasl_users = dict(sasl_users) if sasl_users is not None else None
        self._sasl_mechanisms = tuple(sasl_mechanisms) if sasl_users is not None else ()
        self.version = resolve_version(version)
        self.host = host
        self.brokers_count = brokers
        self._configs = dict(configs or {})
        self._workdir_arg = workdir
        self._heap = heap
        self._start_timeout = start_timeout
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.nodes: list[ApacheNode] = []
        self.cluster_id = _random_cluster_id()
        self._control: _ControlThread | None = None

    # -- lifetime --------------------------------------------------------------------
    def start(self) -> None:
        if self.nodes:
            raise ApacheKafkaError("this cluster was already started")
        classpath = kafka_classpath(self.version)
        if self._workdir_arg is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=f"apache-kafka-{self.version}-")
            workdir = Path(self._tmp.name)
        else:
            workdir = Path(self._workdir_arg)
            workdir.mkdir(parents=True, exist_ok=True)
        security = self._security(workdir)
        for i in range(self.brokers_count):
            self.nodes.append(
                ApacheNode(
                    i + 1,
                    workdir,
                    classpath=classpath,
                    host=self.host,
                    port=_free_port(self.host),
                    controller_port=_free_port(self.host),
                    heap=self._heap,
                    internal_port=_free_port(self.host)
                    if security.secured or self._advertised_ports is not None
                    else None,
                    advertised_port=self._advertised_ports[i] if self._advertised_ports else None,
                    extra_classpath=self._extra_classpath,
                    jvm_system_properties=self._jvm_system_properties,
                )
            )
        quorum = ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in self.nodes)
        rf = str(min(3, self.brokers_count))
        configs = {
            **_TEST_BROKER_CONFIG,
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": str(min(2, self.brokers_count)),
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": str(min(2, self.brokers_count)),
            **self._configs,
        }
        format_args = security.format_args()
        if self._dynamic_quorum:
            # KIP-853: the voters live in the metadata log (kraft.version 1), found through
            # controller.quorum.bootstrap.servers; every node is an initial voter with the
            # log directory id chosen here (node.directory_id).
            for n in self.nodes:
                n.directory_id = uuid.uuid4()
            initial = ",".join(
                f"{n.node_id}@{n.host}:{n.controller_port}:"
                + base64.urlsafe_b64encode(n.directory_id.bytes).rstrip(b"=").decode()
                for n in self.nodes
                if n.directory_id is not None
            )
            format_args += ["--initial-controllers", initial]
            configs["controller.quorum.voters"] = ""
            configs["controller.quorum.bootstrap.servers"] = ",".join(
                f"{n.host}:{n.controller_port}" for n in self.nodes
            )
        for name, level in self._features.items():
            format_args += ["--feature", f"{name}={level}"]
        try:
            for n in self.nodes:
                n.write_config(quorum, configs, security)
                n.format(self.cluster_id, format_args)
            for n in self.nodes:
                n.start()
            deadline = time.monotonic() + self._start_timeout
            for n in self.nodes:
                n.wait_listening(deadline)
            self._control = _ControlThread(",".join(n.internal_address for n in self.nodes))
            self._control.start()
            self._wait_brokers(len(self.nodes), deadline)
        except BaseException:
            self.close()
            raise

    def _security(self, workdir: Path) -> _Security:
        keystore = None
        if self._tls is not None:
            # Kafka's PEM keystore: the (unencrypted PKCS#8) key and the chain in one file.
            cert, key = self._tls
            keystore = workdir / "keystore.pem"
            keystore.write_text(key.read_text() + cert.read_text())
        if self._sasl_users is not None:
            protocol = "SASL_SSL" if keystore is not None else "SASL_PLAINTEXT"
        else:
            protocol = "SSL" if keystore is not None else "PLAINTEXT"
        return _Security(protocol, keystore, self._sasl_users or {}, self._sasl_mechanisms)

    def close(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None
        # SIGTERM to every node at once: stopping them one by one makes each later node
        # wait for a quorum that is already gone.
        for n in self.nodes:
            n.terminate()
        for n in self.nodes:
            n.stop(timeout=15)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.close)

    # -- addresses -------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of the running brokers."""
        return ",".join(self.bootstrap_servers)

    @property
    def bootstrap_servers(self) -> list[str]:
        return [n.address for n in self.nodes if n.running]

    def node(self, node_id: int) -> ApacheNode:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise ApacheKafkaError(f"no broker {node_id} (the nodes are 1..{len(self.nodes)})")

    # -- control ---------------------------------------------------------------------
    def _run(self, fn: Callable[[Admin], Awaitable[T]], timeout: float = 60.0) -> T:
        if self._control is None:
            raise ApacheKafkaError("the cluster is not running")
        return self._control.run(fn, timeout)

    def _wait_brokers(self, count: int, deadline: float) -> None:
        async def probe(admin: Admin) -> int:
            while True:
                try:
                    desc = await admin.describe_cluster(timeout_ms=5000)
                    if len(desc.brokers) >= count and all(
                        len(view.brokers) >= count for view in await self._each_broker_view(admin)
                    ):
                        return len(desc.brokers)
                except KafkaError:
                    pass
                if time.monotonic() > deadline:
                    tails = "\n".join(f"-- node {n.node_id}:\n{n.log_tail(10)}" for n in self.nodes)
                    raise ApacheKafkaError(f"Kafka did not register {count} broker(s) in time\n{tails}")
                await asyncio.sleep(0.1)

        while True:
            try:
                self._run(probe, timeout=max(1.0, deadline - time.monotonic() + 10))
                return
            except KafkaError:
                # The control client could not connect yet: a broker that is still starting
                # (on a busy machine) may take longer than a request timeout to answer.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    async def _each_broker_view(self, admin: Admin, topics: Sequence[str] = ()) -> list[MetadataResponse]:
        """Every running broker's own metadata, asked of that broker directly.

        Each broker learns of new brokers and topics from the metadata log at its own pace,
        so one broker's answer says nothing of the others': a client bootstrapped from a
        slower one sees fewer brokers, or no such topic. (Kafka's own tests wait the same
        way: until the metadata has reached every broker.) The connections are one-off,
        made from the addresses: the control client may not know every node id yet."""
        from aiokafka_lite.net.connection import BrokerConnection
        from aiokafka_lite.wire.messages import MetadataRequest, MetadataResponse

        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False,
        )
        views: list[MetadataResponse] = []
        for node in self.nodes:
            if not node.running:
                continue
            host, _, port = node.internal_address.rpartition(":")
            conn = BrokerConnection(node.node_id, host, int(port), admin.client.config)
            try:
                await conn.connect()
                answer = await conn.send(request, conn.version_for(MetadataRequest.API_KEY))
            finally:
                conn.close()
            if not isinstance(answer, MetadataResponse):
                raise ApacheKafkaError(f"node {node.node_id} answered Metadata with {answer!r}")
            views.append(answer)
        return views

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        """Creates a topic and waits until every partition has a leader that serves it."""
        from aiokafka_lite.admin.types import NewTopic

        async def create(admin: Admin) -> None:
            topic = NewTopic(name, partitions, replication_factor, dict(configs or {}))
            (await admin.create_topics([topic])).raise_errors()
            await self._wait_topic_everywhere(admin, name, partitions)

        self._run(create)

    async def _wait_topic_everywhere(
        self, admin: Admin, name: str, partitions: int, within_s: float = 30.0
    ) -> None:
        """Waits until every running broker's own metadata has a leader for each partition
        (``partitions`` of them, or any number when negative: the broker's default). A
        CreateTopics answer means the controller has the topic, not yet every broker."""
        deadline = time.monotonic() + within_s
        while True:
            try:
                views = await self._each_broker_view(admin, [name])
            except KafkaError:
                views = []
            if views and all(_serves(view, name, partitions) for view in views):
                return
            if time.monotonic() > deadline:
                raise ApacheKafkaError(f"topic {name!r} did not reach every broker's metadata in {within_s}s")
            await asyncio.sleep(0.05)

    def delete_topic(self, name: str) -> None:
        async def delete(admin: Admin) -> None:
            (await admin.delete_topics([name])).raise_errors()

        self._run(delete)

    def high_watermark(self, topic: str, partition: int) -> int:
        from aiokafka_lite.admin.types import OffsetSpec
        from aiokafka_lite.core.structs import TopicPartition

        async def hw(admin: Admin) -> int:
            tp = TopicPartition(topic, partition)
            res = (await admin.list_offsets({tp: OffsetSpec.LATEST})).raise_errors()
            return res[tp].offset

        return self._run(hw)

    def reset(self) -> None:
        """Deletes every topic and consumer group a test left behind (not the internal ones)."""

        async def clean(admin: Admin) -> None:
            topics = [t for t in await admin.list_topics() if not t.startswith("__")]
            if topics:
                await admin.delete_topics(topics)
            groups = [g.group_id for g in (await admin.list_groups()).groups]
            if groups:
                await admin.delete_groups(groups)
            # Deletion is asynchronous in KRaft: wait until the names are free again (on
            # a busy machine this takes longer than the 5 s once allowed here, and the
            # next test's create_topics then met TOPIC_ALREADY_EXISTS).
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                left = [t for t in await admin.list_topics() if t in topics]
                if not left:
                    return
                await asyncio.sleep(0.05)

        self._run(clean)

    # -- broker lifecycle (sync) ------------------------------------------------------
    def stop_node(self, node_id: int) -> None:
        """Controlled shutdown of one node; its partitions move to the others."""
        self.node(node_id).stop()

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node: a crash, leadership moves after the session times out."""
        self.node(node_id).kill()

    def start_node(self, node_id: int, timeout: float = 120.0) -> None:
        """Starts a stopped node again, on its ports and with its data, and waits until
        it has registered with the controller."""
        node = self.node(node_id)
        node.start()
        deadline = time.monotonic() + timeout
        node.wait_listening(deadline)
        self._wait_brokers(sum(1 for n in self.nodes if n.running), deadline)

    # -- broker lifecycle (async, EmbeddedCluster's names) ----------------------------
    async def stop_broker(self, node_id: int) -> None:
        await asyncio.to_thread(self.stop_node, node_id)

    async def kill_broker(self, node_id: int) -> None:
        await asyncio.to_thread(self.kill_node, node_id)

    async def start_broker(self, node_id: int) -> None:
        await asyncio.to_thread(self.start_node, node_id)

    async def restart_broker(self, node_id: int) -> None:
        await self.stop_broker(node_id)
        await self.start_broker(node_id)

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("_"):
            raise AttributeError(name)
        raise EmbeddedOnlyError(
            f"ApacheCluster has no {name!r}: that part of EmbeddedCluster's control API (fault "
            "injection, request recording, internal state) exists only in the embedded broker; "
            "mark the test @pytest.mark.kafka_embedded"
        )

    def __repr__(self) -> str:
        return f"ApacheCluster(version={self.version!r}, bootstrap={self.bootstrap!r})"


class ThreadedApache:
    """``ThreadedCluster``'s surface (``bootstrap``, ``call``, ``run``, ``close``) over an
    ``ApacheCluster``, whose control API is synchronous and thread-safe already, for
    tests with blocking clients written against the embedded ``ThreadedCluster``."""

    def __init__(self, cluster: ApacheCluster) -> None:
        self.cluster = cluster

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def call(self, fn: Callable[[ApacheCluster], T], timeout: float = 30.0) -> T:
        return fn(self.cluster)

    def run(self, fn: Callable[[ApacheCluster], Awaitable[T]], timeout: float = 60.0) -> T:
        async def main() -> T:
            return await asyncio.wait_for(fn(self.cluster), timeout)

        return asyncio.run(main())

    def close(self, timeout: float = 30.0) -> None:
        self.cluster.close()


def _serves(view: MetadataResponse, name: str, partitions: int) -> bool:
    topic = next((t for t in view.topics if t.name == name), None)
    return (
        topic is not None
        and topic.error_code == 0
        and bool(topic.partitions)
        and (partitions < 0 or len(topic.partitions) >= partitions)
        and all(p.leader_id >= 0 for p in topic.partitions)
    )


class _ControlThread:
    """An ``Admin`` client on a private event loop, driven synchronously from any thread."""

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="apache-kafka-control", daemon=True
        )
        self._admin: Admin | None = None

    def start(self) -> None:
        self._thread.start()

    def run(self, fn: Callable[[Admin], Awaitable[T]], timeout: float) -> T:
        if threading.current_thread() is self._thread:
            raise ApacheKafkaError("the control API cannot be called from its own thread")

        async def call() -> T:
            if self._admin is None:
                from aiokafka_lite.admin.client import Admin

                admin = Admin(self._bootstrap, request_timeout_ms=15_000)
                try:
                    await admin.start()
                except BaseException:
                    await admin.close()  # the next call starts a fresh one
                    raise
                self._admin = admin
            return await asyncio.wait_for(fn(self._admin), timeout)

        fut: Future[T] = asyncio.run_coroutine_threadsafe(call(), self._loop)
        return fut.result(timeout + 5)

    def close(self) -> None:
        async def shutdown() -> None:
            if self._admin is not None:
                await self._admin.close()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()


def _iter_pinned() -> Iterator[str]:
    yield from dict.fromkeys(KAFKA_VERSIONS.values())


def main(argv: list[str] | None = None) -> int:
    """``python -m aiokafka_lite.testing.apache [--fetch] [--brokers N] [--version V]``:
    fetches the pinned versions (``--fetch``), or runs a cluster until interrupted."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m aiokafka_lite.testing.apache")
    ap.add_argument("--fetch", action="store_true", help="only download the pinned Kafka versions")
    ap.add_argument("--version", default=None, help="Kafka version or alias (latest, 4.0)")
    ap.add_argument("--brokers", type=int, default=1)
    args = ap.parse_args(argv)
    if args.fetch:
        versions = [resolve_version(args.version)] if args.version else list(_iter_pinned())
        for v in versions:
            print(f"Apache Kafka {v}: {kafka_classpath(v)}", flush=True)
        return 0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with ApacheCluster(args.brokers, version=args.version) as cluster:
        print(f"Apache Kafka {cluster.version} listening on {cluster.bootstrap}", flush=True)
        try:
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
