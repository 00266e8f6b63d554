"""Streams groups (KIP-1071) on Apache Kafka 4.4: a real group made by Kafka Streams.

``java/StreamsGroupApp.java`` (a Kafka Streams application with ``group.protocol=streams``
that counts records per value: selectKey + groupByKey().count(), so two subtopologies
joined by a repartition topic, and an in-memory store with a changelog topic) is
compiled with javac against Kafka's jars and ``org.apache.kafka:kafka-streams`` (fetched
with Maven on first use, cached beside the Kafka jars) and run as a subprocess. Our
``describe_streams_groups`` is cross-checked against Kafka's own ``kafka-streams-groups``
tool (``org.apache.kafka.tools.streams.StreamsGroupCommand``) for the state, members and
topology; once the application stopped (group empty), offsets are listed, altered and
deleted and the group deleted with ours, each cross-checked with the tool's
``--describe --offsets`` and ``--list``. One one-broker cluster (``streams.version=1``)."""

from __future__ import annotations

import asyncio
import fcntl
import subprocess
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from _support.settle import settled

from aiokafka_lite import Producer
from aiokafka_lite.admin import Admin, NewTopic, StreamsGroupDescription
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.testing.apache import (
    ApacheCluster,
    cache_root,
    java_executable,
    kafka_classpath,
    kafka_tools_classpath,
    maven_executable,
    resolve_version,
)

JAVA_SOURCE = Path(__file__).parent / "java" / "StreamsGroupApp.java"
APP = "sg-app"
INPUT, OUTPUT = "sg-input", "sg-output"
TOOL = "org.apache.kafka.tools.streams.StreamsGroupCommand"


def _version(config: pytest.Config) -> str:
    v = config.getoption("--kafka-version", None)
    return resolve_version(str(v) if v else None)


def _streams_jar(version: str) -> Path:
    """``kafka-streams-<version>.jar`` from Maven Central, cached beside Kafka's jars."""
    folder = cache_root() / f"kafka-streams-{version}"
    jar = folder / f"kafka-streams-{version}.jar"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not jar.exists():
            subprocess.run(
                [
                    maven_executable(),
                    "-B",
                    "-q",
                    "dependency:copy",
                    f"-Dartifact=org.apache.kafka:kafka-streams:{version}",
                    f"-DoutputDirectory={folder}",
                ],
                check=True,
                capture_output=True,
                cwd=folder,
                timeout=900,
            )
    return jar


@pytest.fixture(scope="module")
def app_classpath(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> str:
    version = _version(pytestconfig)
    classes = tmp_path_factory.mktemp("streams-app")
    cp = f"{kafka_classpath(version)}/*:{_streams_jar(version)}"
    javac = Path(java_executable()).with_name("javac")
    subprocess.run(
        [str(javac), "-Xlint:-removal", "-d", str(classes), "-cp", cp, str(JAVA_SOURCE)],
        check=True,
        capture_output=True,
    )
    return f"{cp}:{classes}"


@pytest.fixture(scope="module")
def cluster(pytestconfig: pytest.Config) -> Iterator[ApacheCluster]:
    with ApacheCluster(brokers=1, version=_version(pytestconfig), features={"streams.version": 1}) as c:
        yield c


@pytest.fixture
async def admin(cluster: ApacheCluster) -> AsyncIterator[Admin]:
    async with Admin(cluster.bootstrap) as a:
        yield a


def _tool(cluster: ApacheCluster, version: str, *args: str) -> str:
    proc = subprocess.run(
        [
            java_executable(),
            "-cp",
            kafka_tools_classpath(version),
            TOOL,
            "--bootstrap-server",
            cluster.bootstrap,
            *list(args),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _rows(text: str, group: str) -> list[list[str]]:
    """The rows of the tool's table for ``group`` (its output also has the admin
    client's logged config, whose lines never start with the group id)."""
    return [line.split() for line in text.splitlines() if line.split()[:1] == [group]]


def _tool_offsets(cluster: ApacheCluster, version: str) -> dict[TopicPartition, int]:
    """The committed input-topic offsets as the tool sees them. ``--describe --offsets``
    prints nothing for a group without members (Kafka 4.4), so this reads them from a
    dry run of ``--reset-offsets --to-current`` (which needs the group empty)."""
    out = _tool(
        cluster, version, "--reset-offsets", "--to-current", "--dry-run", "--all-input-topics", "--group", APP
    )
    return {TopicPartition(r[1], int(r[2])): int(r[3]) for r in _rows(out, APP) if r[3].isdigit()}


async def _our_offsets(admin: Admin) -> dict[TopicPartition, int]:
    return {tp: o.offset for tp, o in (await admin.list_streams_group_offsets(APP)).items() if o.offset >= 0}


def _inputs(offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    return {tp: o for tp, o in offsets.items() if tp.topic == INPUT}


class _App:
    """The Kafka Streams application as a subprocess; stops when its stdin closes."""

    def __init__(self, classpath: str, bootstrap: str, state_dir: Path) -> None:
        self.proc = subprocess.Popen(
            [
                java_executable(),
                f"-Djava.io.tmpdir={state_dir}",
                "-cp",
                classpath,
                "StreamsGroupApp",
                bootstrap,
                APP,
                INPUT,
                OUTPUT,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.running = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            if line.strip() == "RUNNING":
                self.running.set()

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


async def test_streams_group_made_by_kafka_streams(
    pytestconfig: pytest.Config, cluster: ApacheCluster, admin: Admin, app_classpath: str, tmp_path: Path
) -> None:
    version = _version(pytestconfig)
    (await admin.create_topics([NewTopic(INPUT, 2, 1), NewTopic(OUTPUT, 1, 1)])).raise_errors()
    async with Producer(cluster.bootstrap) as producer:
        for i in range(20):
            await producer.send(INPUT, value=f"v{i % 3}".encode(), key=f"k{i}".encode(), partition=i % 2)

    app = _App(app_classpath, cluster.bootstrap, tmp_path)
    try:
        ok = await asyncio.to_thread(app.running.wait, 120)
        assert ok, "the Streams app never reached RUNNING:\n" + "\n".join(app.lines[-40:])

        def stable(d: StreamsGroupDescription) -> bool:
            return (
                d.error is None
                and d.state == "Stable"
                and bool(d.members)
                and all(m.assignment.active_tasks for m in d.members)
            )

        async def describe() -> StreamsGroupDescription:
            return (await admin.describe_streams_groups([APP]))[APP]

        desc = await settled(describe, stable, within_s=90)
        # Our view of the topology and members.
        by_id = {s.subtopology_id: s for s in desc.subtopologies}
        assert set(by_id) == {"0", "1"}, desc.subtopologies
        repartition = f"{APP}-counts-repartition"
        changelog = f"{APP}-counts-changelog"
        assert by_id["0"].source_topics == (INPUT,)
        assert by_id["0"].repartition_sink_topics == (repartition,)
        assert set(by_id["1"].repartition_source_topics) == {repartition}
        assert set(by_id["1"].state_changelog_topics) == {changelog}
        (member,) = desc.members
        assert member.process_id and member.client_id.startswith(f"{APP}-client")
        tasks = {(t.subtopology_id, p) for t in member.assignment.active_tasks for p in t.partitions}
        assert tasks == {("0", 0), ("0", 1), ("1", 0), ("1", 1)}, member.assignment
        assert desc.group_epoch >= 1 and desc.target_assignment_epoch >= 1 and desc.topology_epoch >= 0

        # Kafka's tool sees the same group.
        state_out = await asyncio.to_thread(_tool, cluster, version, "--describe", "--state", "--group", APP)
        ((_, _coordinator, _node, _assignor, state, n_members),) = _rows(state_out, APP)
        assert (state, int(n_members)) == (desc.state, len(desc.members))
        members_out = await asyncio.to_thread(
            _tool, cluster, version, "--describe", "--members", "--verbose", "--group", APP
        )
        ((row),) = _rows(members_out, APP)
        # GROUP TARGET-ASSIGNMENT-EPOCH TOPOLOGY-EPOCH MEMBER MEMBER-PROTOCOL MEMBER-EPOCH
        # PROCESS CLIENT-ID ASSIGNMENTS ("ACTIVE: 0:[0,1]; 1:[0,1]; TARGET-ACTIVE: ...")
        assert int(row[1]) == desc.target_assignment_epoch and int(row[2]) == desc.topology_epoch
        assert (row[3], int(row[5]), row[6], row[7]) == (
            member.member_id,
            member.member_epoch,
            member.process_id,
            member.client_id,
        )
        assignments = " ".join(row[8:])
        active = assignments.split("ACTIVE:")[1].split("TARGET-")[0]
        ours_active = "".join(
            f"{t.subtopology_id}:[{','.join(map(str, t.partitions))}];"
            for t in member.assignment.active_tasks
        )
        assert active.replace(" ", "") == ours_active, (assignments, member.assignment)
        listed = await asyncio.to_thread(_tool, cluster, version, "--list")
        assert APP in listed.split()
        ours = {g.group_id for g in (await admin.list_streams_groups()).groups}
        assert APP in ours

        # While the application runs, the group is not empty: the coordinator refuses to delete it.
        busy = await admin.delete_streams_groups([APP])
        assert isinstance(busy[APP].error, E.NonEmptyGroupError), busy[APP].error
    finally:
        await asyncio.to_thread(app.stop)

    empty = await settled(
        lambda: admin.describe_streams_groups([APP]), lambda r: r[APP].state == "Empty", within_s=90
    )
    assert empty[APP].members == []

    # Offsets: ours against the tool's (its --reset-offsets dry run, see _tool_offsets).
    offsets = await settled(
        lambda: admin.list_streams_group_offsets(APP),
        lambda r: r.get(TopicPartition(INPUT, 0)) is not None and r[TopicPartition(INPUT, 0)].offset == 10,
        within_s=60,
    )
    assert offsets[TopicPartition(INPUT, 1)].offset == 10
    repartition = f"{APP}-counts-repartition"
    ours = await _our_offsets(admin)
    assert {tp.topic for tp in ours} == {INPUT, repartition}, ours
    assert _inputs(ours) == await asyncio.to_thread(_tool_offsets, cluster, version)

    altered = await admin.alter_streams_group_offsets(APP, {TopicPartition(INPUT, 0): 3})
    altered.raise_errors()
    ours = await _our_offsets(admin)
    assert ours[TopicPartition(INPUT, 0)] == 3
    assert _inputs(ours) == await asyncio.to_thread(_tool_offsets, cluster, version)

    deleted = await admin.delete_streams_group_offsets(APP, [TopicPartition(INPUT, 1)])
    deleted.raise_errors()
    ours = await _our_offsets(admin)
    assert TopicPartition(INPUT, 1) not in ours and TopicPartition(INPUT, 0) in ours
    assert _inputs(ours) == await asyncio.to_thread(_tool_offsets, cluster, version)

    gone = await admin.delete_streams_groups([APP])
    gone.raise_errors()
    listed = await asyncio.to_thread(_tool, cluster, version, "--list")
    assert APP not in listed.split()
    after = (await admin.describe_streams_groups([APP]))[APP]
    assert isinstance(after.error, E.GroupIdNotFoundError), after.error
