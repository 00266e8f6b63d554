"""Kafka's own share consumer as the referee: the console share consumer of
org.apache.kafka:kafka-tools (Java) and our ShareConsumer consume the same share group
at the same time, on the embedded broker and on Apache Kafka 4.4, and between them every
record is consumed exactly once (in the absence of failures).

The referee is fetched with Maven from tests/share/referee/pom.xml (kafka-tools 4.3.1,
the newest release published, with its kafka-clients) into the cache next to the Kafka
jars, and runs on the class path of Kafka 4.4.0's jars for the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import re
import shutil
import subprocess
import tempfile
import uuid
from collections import Counter
from pathlib import Path

import pytest

from aiokafka_lite import Producer
from aiokafka_lite.admin import Admin
from aiokafka_lite.admin.types import ConfigResource
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume.share import ShareConsumer, ShareRecord
from aiokafka_lite.testing.apache import ApacheCluster, kafka_classpath

Broker = EmbeddedCluster | ApacheCluster

REFEREE_VERSION = "4.3.1"
POM = Path(__file__).parent / "referee" / "pom.xml"
MAIN_CLASS = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"
LINE = re.compile(r"^Partition:(\d+)\tOffset:(\d+)\tDelivery:(\d+)\t(.*)$")


def _tool(name: str, why: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not on PATH, and {why} (scripts/test.sh installs it)", pytrace=False)
    return found


@pytest.fixture(scope="session")
def referee_classpath() -> tuple[str, str]:
    """(java, class path) of Kafka's console share consumer, fetched on first use."""
    java = _tool("java", "the referee is Kafka's Java console share consumer")
    kafka_lib = kafka_classpath("4.4.0")
    target = kafka_lib.parents[2] / "share-referee" / REFEREE_VERSION
    done = target / ".complete"
    if not done.exists():
        mvn = _tool("mvn", f"it fetches org.apache.kafka:kafka-tools:{REFEREE_VERSION}")
        target.mkdir(parents=True, exist_ok=True)
        with open(target / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():
                with tempfile.TemporaryDirectory(dir=target) as tmp:
                    cmd = [mvn, "-B", "-q", "-f", str(POM), "dependency:copy", f"-Dreferee.dir={tmp}/jars"]
                    proc = subprocess.run(
                        cmd, capture_output=True, text=True, cwd=tmp, timeout=600, check=False
                    )
                    jars = sorted((Path(tmp) / "jars").glob("*.jar"))
                    assert proc.returncode == 0 and len(jars) == 2, (
                        f"Maven could not fetch kafka-tools {REFEREE_VERSION}: {' '.join(cmd)}\n"
                        + (proc.stdout + proc.stderr)[-2000:]
                    )
                    for jar in jars:
                        shutil.copy2(jar, target / jar.name)
                done.write_text(REFEREE_VERSION + "\n")
    # The referee's own jars first: 4.3's tools use client classes 4.4 moved.
    return java, f"{target}/*:{kafka_lib}/*"


@pytest.fixture
def share_broker(kafka_cluster: Broker) -> Broker:
    """``kafka_cluster``: the embedded broker, or under --kafka=apache Apache Kafka (scripts/test.sh
    runs this module in its Apache 4.4 pass)."""
    return kafka_cluster


async def test_java_console_share_consumer_and_ours_consume_each_record_once(
    share_broker: Broker, referee_classpath: tuple[str, str]
) -> None:
    java, classpath = referee_classpath
    suffix = uuid.uuid4().hex[:10]
    topic, group = f"share-ref-{suffix}", f"share-ref-{suffix}"
    share_broker.create_topic(topic, partitions=2)
    async with Admin(share_broker.bootstrap) as admin:
        changes = {ConfigResource.group(group): {"share.auto.offset.reset": "earliest"}}
        (await admin.incremental_alter_configs(changes)).raise_errors()

    theirs: list[tuple[int, int, int, str]] = []  # (partition, offset, delivery count, value)
    ours: list[ShareRecord] = []
    produced: list[str] = []
    stderr_tail: list[str] = []
    referee = await asyncio.create_subprocess_exec(
        java,
        "-cp",
        classpath,
        MAIN_CLASS,
        "--bootstrap-server",
        share_broker.bootstrap,
        "--topic",
        topic,
        "--group",
        group,
        "--timeout-ms",
        "10000",  # exits after 10 s without records, acknowledging what it consumed
        "--formatter-property",
        "print.partition=true",
        "--formatter-property",
        "print.offset=true",
        "--formatter-property",
        "print.delivery=true",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )

    async def read_referee() -> None:
        assert referee.stdout is not None
        async for raw in referee.stdout:
            m = LINE.match(raw.decode().rstrip("\n"))
            if m:
                theirs.append((int(m[1]), int(m[2]), int(m[3]), m[4]))

    async def read_stderr() -> None:
        assert referee.stderr is not None
        async for raw in referee.stderr:
            stderr_tail[:] = [*stderr_tail[-40:], raw.decode().rstrip()]

    readers = [asyncio.create_task(read_referee()), asyncio.create_task(read_stderr())]
    consumer = ShareConsumer(
        share_broker.bootstrap,
        group_id=group,
        topics=[topic],
        max_poll_records=10,
        share_acquire_mode="record_limit",
    )
    loop = asyncio.get_running_loop()
    try:
        async with consumer, Producer(share_broker.bootstrap, linger_ms=0) as producer:
            # Keep producing small batches until both implementations have had records.
            deadline = loop.time() + 90
            while not (theirs and ours):
                assert loop.time() < deadline and referee.returncode is None, (
                    f"both should get records: ours {len(ours)}, theirs {len(theirs)}\n"
                    + "\n".join(stderr_tail)
                )
                batch = [f"rec-{len(produced) + i}" for i in range(10)]
                await producer.send_batch(topic, [v.encode() for v in batch])
                produced += batch
                ours += await consumer.poll(timeout_ms=50)
            # Then consume until every record was seen by one side or the other.
            deadline = loop.time() + 60
            while len(ours) + len(theirs) < len(produced) and loop.time() < deadline:
                ours += await consumer.poll(timeout_ms=200)
        # Closed: our last poll's records accepted. The referee goes idle, then exits.
        assert await asyncio.wait_for(referee.wait(), 60) == 0, "\n".join(stderr_tail)
        await asyncio.gather(*readers)
    finally:
        if referee.returncode is None:
            referee.kill()
            await referee.wait()
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)

    seen = Counter([(r.partition, r.offset) for r in ours] + [(p, o) for p, o, _, _ in theirs])
    assert max(seen.values()) == 1, [k for k, n in seen.items() if n > 1]
    values = sorted([r.value.decode() for r in ours] + [v for _, _, _, v in theirs])
    assert values == sorted(produced)
    assert {r.delivery_count for r in ours} == {1} and {d for _, _, d, _ in theirs} == {1}
    # Everything was accepted by one implementation or the other: nothing comes back.
    async with ShareConsumer(share_broker.bootstrap, group_id=group, topics=[topic]) as late:
        leftover: list[ShareRecord] = []
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                while not leftover:
                    leftover += await late.poll(timeout_ms=500)
        assert leftover == []
