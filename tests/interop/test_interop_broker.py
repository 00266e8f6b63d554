"""Third-party clients against the embedded broker: produce, fetch, metadata, kcat.

confluent-kafka (librdkafka), kafka-python and kcat, against embedded clusters of 1
and 3 brokers: a 6-partition topic is created through each client's admin API, 10,000
keyed records are produced by an idempotent producer (lz4 and zstd), and read back by
manually assigned consumers of every client. Every record is accounted for by key,
value, partition and offset. (Consumer groups and transactions: test_interop_groups /
the transaction tests.) With --kafka=apache the same runs against Apache Kafka, which
checks that these expectations are the real broker's.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest
from interop_testlib import apache_three_nodes, interop_cluster, wait_until_every_broker_serves

from aiokafka_lite.testing.threaded import ThreadedCluster

pytestmark = pytest.mark.interop
_ = (apache_three_nodes, interop_cluster)  # fixtures

N = 10_000
PARTITIONS = 6
DEADLINE_S = 60.0

Placed = dict[str, tuple[str, int, int]]  # key -> (value, partition, offset)


@pytest.fixture(params=[1, 3], ids=["1-broker", "3-brokers"])
def cluster(request: pytest.FixtureRequest, interop_cluster) -> Iterator[ThreadedCluster]:  # type: ignore[no-untyped-def]
    yield interop_cluster(brokers=request.param)


def records(prefix: str) -> list[tuple[str, str]]:
    return [(f"{prefix}-key-{i}", f"{prefix}-value-{i}-" + "x" * (i % 50)) for i in range(N)]


def kcat() -> str:
    """kcat's path. It is a required test tool (scripts/test.sh installs it): missing, the test fails."""
    path = shutil.which("kcat")
    if path is None:
        pytest.fail(
            "kcat is not installed, and the kcat interop cross-checks need it: "
            "apt-get install kcat (Debian/Ubuntu; scripts/test.sh does this), or brew install kcat",
            pytrace=False,
        )
    return path


# -- producers -------------------------------------------------------------------------
def confluent_create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the futures
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, -1)]).values():
        f.result(20)
    wait_until_every_broker_serves(bootstrap, topic, PARTITIONS)


def confluent_produce(bootstrap: str, topic: str, recs: list[tuple[str, str]], codec: str) -> Placed:
    from confluent_kafka import Producer

    placed: Placed = {}
    errors: list[object] = []

    def report(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            placed[msg.key().decode()] = (msg.value().decode(), msg.partition(), msg.offset())  # type: ignore[attr-defined]

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "compression.type": codec,
            "linger.ms": 5,
            "batch.size": 16384,
        }
    )
    for k, v in recs:
        while True:
            try:
                p.produce(topic, key=k.encode(), value=v.encode(), on_delivery=report)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(DEADLINE_S) == 0
    assert errors == []
    return placed


def kafka_python_create_topic(bootstrap: str, topic: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()
    wait_until_every_broker_serves(bootstrap, topic, PARTITIONS)


def kafka_python_produce(bootstrap: str, topic: str, recs: list[tuple[str, str]], codec: str) -> Placed:
    from kafka import KafkaProducer

    p = KafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=True, compression_type=codec, linger_ms=5, acks="all"
    )
    try:
        futures = [(k, v, p.send(topic, key=k.encode(), value=v.encode())) for k, v in recs]
        p.flush(DEADLINE_S)
        placed: Placed = {}
        for k, v, f in futures:
            md = f.get(DEADLINE_S)
            placed[k] = (v, md.partition, md.offset)
        return placed
    finally:
        p.close()


def kcat_produce(bootstrap: str, topic: str, recs: list[tuple[str, str]], codec: str) -> None:
    data = "".join(f"{k}\t{v}\n" for k, v in recs)
    r = subprocess.run(
        [
            kcat(),
            "-b",
            bootstrap,
            "-P",
            "-t",
            topic,
            "-K",
            "\t",
            "-z",
            codec,
            "-X",
            "enable.idempotence=true",
        ],
        input=data,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )
    assert r.returncode == 0, r.stderr


# -- consumers -------------------------------------------------------------------------
def confluent_consume(bootstrap: str, topic: str, n: int) -> Placed:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: Placed = {}
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < n and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.5):
                assert m.error() is None, m.error()
                key = m.key().decode()
                assert key not in got, f"duplicate {key}"
                got[key] = (m.value().decode(), m.partition(), m.offset())
    finally:
        c.close()
    return got


def kafka_python_consume(bootstrap: str, topic: str, n: int) -> Placed:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    got: Placed = {}
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < n and time.monotonic() < deadline:
            for batch in c.poll(timeout_ms=500).values():
                for m in batch:
                    key = m.key.decode()
                    assert key not in got, f"duplicate {key}"
                    got[key] = (m.value.decode(), m.partition, m.offset)
    finally:
        c.close()
    return got


def kcat_consume(bootstrap: str, topic: str) -> Placed:
    r = subprocess.run(
        [kcat(), "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k\t%s\t%p\t%o\n"],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )
    assert r.returncode == 0, r.stderr
    got: Placed = {}
    for line in r.stdout.splitlines():
        k, v, p, o = line.split("\t")
        assert k not in got, f"duplicate {k}"
        got[k] = (v, int(p), int(o))
    return got


def check(placed: Placed, got: Placed, recs: list[tuple[str, str]]) -> None:
    assert {k: v for k, (v, _, _) in got.items()} == dict(recs)
    if placed:
        assert got == placed  # same partition and offset as the delivery reports said
    # Offsets per partition are dense from 0 (nothing lost, nothing duplicated).
    by_part: dict[int, list[int]] = {}
    for _, p, o in got.values():
        by_part.setdefault(p, []).append(o)
    for offs in by_part.values():
        assert sorted(offs) == list(range(len(offs)))


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_confluent_produce_and_consume(cluster: ThreadedCluster, codec: str) -> None:
    bs = cluster.bootstrap
    confluent_create_topic(bs, "cf")
    recs = records("cf")
    placed = confluent_produce(bs, "cf", recs, codec)
    check(placed, confluent_consume(bs, "cf", N), recs)
    check(placed, kafka_python_consume(bs, "cf", N), recs)
    check(placed, kcat_consume(bs, "cf"), recs)


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_kafka_python_produce_and_consume(cluster: ThreadedCluster, codec: str) -> None:
    bs = cluster.bootstrap
    kafka_python_create_topic(bs, "kp")
    recs = records("kp")
    placed = kafka_python_produce(bs, "kp", recs, codec)
    check(placed, kafka_python_consume(bs, "kp", N), recs)
    check(placed, confluent_consume(bs, "kp", N), recs)


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_kcat_produce_and_consume(cluster: ThreadedCluster, codec: str) -> None:
    bs = cluster.bootstrap
    confluent_create_topic(bs, "kc")
    recs = records("kc")
    kcat_produce(bs, "kc", recs, codec)
    got = kcat_consume(bs, "kc")
    check({}, got, recs)
    check(got, confluent_consume(bs, "kc", N), recs)


def test_kcat_lists_the_cluster(cluster: ThreadedCluster) -> None:
    bs = cluster.bootstrap
    confluent_create_topic(bs, "listed")
    n = len(bs.split(","))
    r = subprocess.run([kcat(), "-b", bs, "-L"], capture_output=True, text=True, timeout=DEADLINE_S)
    assert r.returncode == 0, r.stderr
    assert f" {n} brokers:" in r.stdout
    for i in range(1, n + 1):
        assert f"broker {i} at 127.0.0.1:" in r.stdout
    assert 'topic "listed" with 6 partitions:' in r.stdout
    r = subprocess.run([kcat(), "-b", bs, "-L", "-J"], capture_output=True, text=True, timeout=DEADLINE_S)
    assert r.returncode == 0, r.stderr
    import json

    md = json.loads(r.stdout)
    (topic,) = [t for t in md["topics"] if t["topic"] == "listed"]
    leaders = sorted(p["leader"] for p in topic["partitions"])
    assert leaders == sorted([(i % n) + 1 for i in range(PARTITIONS)])  # spread over the brokers


@pytest.mark.kafka_embedded  # moves leaders on request
def test_leader_move_is_followed_by_clients(cluster: ThreadedCluster) -> None:
    """After a leadership move (and a stopped broker on 3 brokers) librdkafka keeps producing."""
    bs = cluster.bootstrap
    confluent_create_topic(bs, "moving")
    recs = records("mv")
    first = confluent_produce(bs, "moving", recs[: N // 2], "lz4")
    for p in range(PARTITIONS):
        cluster.call(lambda c, p=p: c.move_leader("moving", p))
    if len(bs.split(",")) == 3:
        cluster.run(lambda c: c.stop_broker(2))
    second = confluent_produce(bs, "moving", recs[N // 2 :], "lz4")
    live = cluster.bootstrap
    check({**first, **second}, confluent_consume(live, "moving", N), recs)
