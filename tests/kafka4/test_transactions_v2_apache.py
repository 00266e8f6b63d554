"""Transactions V2 (KIP-890 part 2) as written to Apache Kafka's log.

Consecutive transactions of one ``transactional_id`` on a cluster that finalizes
``transaction.version=2`` (the default of new Kafka 4.4 and 4.0 clusters): Kafka's own
``DumpLogSegments`` (what ``kafka-dump-log.sh`` runs) shows the producer epoch of the data
batches rising by one per transaction, and each transaction's marker written with the
epoch the EndTxn bumped to. On a 4.4 cluster formatted at ``transaction.version=1`` the
producer speaks V1: the same epoch for every transaction, AddPartitionsToTxn before the
data, EndTxn v4. The requests the producer wrote come from the client's request hooks.

One 1-node cluster per case (module-scoped); ``DumpLogSegments`` lives in the core jar up
to 4.0 and in ``kafka-tools`` since (fetched once by Maven into the launcher's cache).
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from aiokafka_lite import Consumer, Producer, TopicPartition
from aiokafka_lite.testing.apache import ApacheCluster, _cache_root, _java, _mvn, kafka_classpath

TOPIC = "txn-v2-log"
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
PRODUCE = 0
#: commit, commit, abort, commit: four transaction ends.
OUTCOMES = (True, True, False, True)


def _dump_classpath(version: str) -> tuple[str, str]:
    """(classpath, main class) of DumpLogSegments for a Kafka release."""
    if version.startswith(("3.", "4.0")):
        return f"{kafka_classpath(version)}/*", "kafka.tools.DumpLogSegments"
    folder = _cache_root() / f"kafka-tools-{version}"
    jar = folder / f"kafka-tools-{version}.jar"
    if not jar.exists():
        folder.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [
                _mvn(),
                "-B",
                "-q",
                "dependency:copy",
                f"-Dartifact=org.apache.kafka:kafka-tools:{version}",
                f"-DoutputDirectory={folder}",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=folder,
        )
        assert proc.returncode == 0 and jar.exists(), proc.stdout + proc.stderr
    return f"{kafka_classpath(version)}/*:{folder}/*", "org.apache.kafka.tools.DumpLogSegments"


_BATCH = re.compile(r"producerEpoch: (-?\d+).*?isTransactional: (\w+) isControl: (\w+)")


def dump_batches(cluster: ApacheCluster, partition: int) -> list[tuple[int, bool]]:
    """(producer epoch, is control batch) of every transactional batch in the
    partition's log, in log order, as DumpLogSegments prints them."""
    node = cluster.nodes[0]
    segments = sorted((node.data_dir / f"{TOPIC}-{partition}").glob("*.log"))
    assert segments, f"no log segment for {TOPIC}-{partition} in {node.data_dir}"
    classpath, main = _dump_classpath(cluster.version)
    cmd = [_java(), "-Xmx256m", "-cp", classpath, main, "--files", ",".join(map(str, segments))]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    out: list[tuple[int, bool]] = []
    for line in proc.stdout.splitlines():
        m = _BATCH.search(line)
        if m and m.group(2) == "true":
            out.append((int(m.group(1)), m.group(3) == "true"))
    return out


class _Requests:
    """(API key, version) of every request the producer's client wrote."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int]] = []

    def on_request_written(
        self, node_id: int, api_key: int, api_version: int, bytes_written: int, error: BaseException | None
    ) -> None:
        if error is None:
            self.sent.append((api_key, api_version))

    def keys(self) -> set[int]:
        return {k for k, _ in self.sent}

    def versions(self, api_key: int) -> set[int]:
        return {v for k, v in self.sent if k == api_key}


async def run_transactions(bootstrap: str, tid: str) -> tuple[int, int, _Requests]:
    """Four transactions (commit, commit, abort, commit) writing to both partitions;
    returns the producer epoch after init and at the end, and the requests written."""
    requests = _Requests()
    async with Producer(bootstrap, transactional_id=tid, linger_ms=1) as p:
        first = p.metrics()["producer_epoch"]
        p.client.add_hooks(requests)
        for i, commit in enumerate(OUTCOMES):
            await p.begin_transaction()
            await p.send_batch(TOPIC, [b"t%d-p0" % i], partition=0)
            await p.send_batch(TOPIC, [b"t%d-p1" % i], partition=1)
            if commit:
                await p.commit_transaction()
            else:
                await p.abort_transaction()
        last = p.metrics()["producer_epoch"]
    return first, last, requests


def _cluster(pytestconfig: pytest.Config, version: str | None, **kwargs: object) -> Iterator[ApacheCluster]:
    with ApacheCluster(1, version=version, **kwargs) as c:  # type: ignore[arg-type]
        c.create_topic(TOPIC, 2)
        yield c


@pytest.fixture(scope="module", params=["4.4.0", "4.0"])
def tv2_cluster(request: pytest.FixtureRequest, pytestconfig: pytest.Config) -> Iterator[ApacheCluster]:
    yield from _cluster(pytestconfig, request.param)


@pytest.fixture(scope="module")
def tv1_cluster(pytestconfig: pytest.Config) -> Iterator[ApacheCluster]:
    yield from _cluster(pytestconfig, "4.4.0", features={"transaction.version": 1})


def _data_and_markers(batches: list[tuple[int, bool]]) -> tuple[list[int], list[int]]:
    data = [e for e, control in batches if not control]
    markers = [e for e, control in batches if control]
    return data, markers


async def test_epoch_rises_by_one_per_transaction(tv2_cluster: ApacheCluster) -> None:
    first, last, requests = await run_transactions(tv2_cluster.bootstrap, "tv2-epochs")
    assert last == first + len(OUTCOMES)
    # V2: partitions and the transaction's end need no AddPartitionsToTxn; EndTxn v5.
    assert ADD_PARTITIONS_TO_TXN not in requests.keys()
    assert requests.versions(END_TXN) == {5}
    assert min(requests.versions(PRODUCE)) >= 12
    for partition in (0, 1):
        batches = await asyncio.to_thread(dump_batches, tv2_cluster, partition)
        data, markers = _data_and_markers(batches)
        # One data batch and one marker per transaction, alternating in the log.
        assert [c for _, c in batches] == [False, True] * len(OUTCOMES), batches
        assert data == [first + i for i in range(len(OUTCOMES))], batches
        # Each marker carries the epoch its EndTxn v5 bumped to.
        assert markers == [e + 1 for e in data], batches


async def test_v1_keeps_the_epoch(tv1_cluster: ApacheCluster) -> None:
    first, last, requests = await run_transactions(tv1_cluster.bootstrap, "tv1-epochs")
    assert last == first
    assert ADD_PARTITIONS_TO_TXN in requests.keys()
    assert max(requests.versions(END_TXN)) <= 4
    for partition in (0, 1):
        batches = await asyncio.to_thread(dump_batches, tv1_cluster, partition)
        assert [c for _, c in batches] == [False, True] * len(OUTCOMES), batches
        assert {e for e, _ in batches} == {first}, batches


_KILLED_INSTANCE = """
import asyncio, sys
from aiokafka_lite import Producer

async def main(bootstrap, tid, topic):
    async with Producer(bootstrap, transactional_id=tid, linger_ms=1) as p:
        await p.begin_transaction()
        await p.send_batch(topic, [b"r%d" % i for i in range(10)], partition=0)
        print("written", flush=True)
        await asyncio.sleep(3600)

asyncio.run(main(*sys.argv[1:]))
"""


async def read_partition(bootstrap: str, topic: str, isolation: str) -> list[bytes | None]:
    """Every record of partition 0 visible at ``isolation`` (up to its end offset)."""
    tp = TopicPartition(topic, 0)
    async with Consumer(bootstrap, isolation_level=isolation, auto_offset_reset="earliest") as c:
        c.assign([tp])
        end = (await c.end_offsets([tp]))[tp]
        out: list[bytes | None] = []
        async with asyncio.timeout(60):
            while await c.position(tp) < end:
                batch = await c.getmany(timeout_ms=1000)
                out += [r.value for rs in batch.values() for r in rs]
    return out


async def test_sigkilled_instance_leaves_exactly_once(tv2_cluster: ApacheCluster) -> None:
    await _sigkilled_instance_leaves_exactly_once(tv2_cluster, "tv2")


async def test_sigkilled_instance_leaves_exactly_once_v1(tv1_cluster: ApacheCluster) -> None:
    await _sigkilled_instance_leaves_exactly_once(tv1_cluster, "tv1")


async def _sigkilled_instance_leaves_exactly_once(cluster: ApacheCluster, level: str) -> None:
    """A process with a transactional producer is SIGKILLed with its records written and
    the transaction open; a new instance with the same transactional_id fences it (its
    InitProducerId aborts the open transaction), writes the same records again and commits:
    read_committed sees each once, in both protocols."""
    topic = f"txn-kill-{level}-{cluster.version}"
    cluster.create_topic(topic, 1)
    tid = f"killed-{level}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _KILLED_INSTANCE,
        cluster.bootstrap,
        tid,
        topic,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(120):
            line = await proc.stdout.readline()
        assert line.strip() == b"written"
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    records = [b"r%d" % i for i in range(10)]
    async with Producer(cluster.bootstrap, transactional_id=tid, linger_ms=1) as p:
        async with p.transaction():
            await p.send_batch(topic, records, partition=0)
    assert await read_partition(cluster.bootstrap, topic, "read_committed") == records
    assert await read_partition(cluster.bootstrap, topic, "read_uncommitted") == records + records
