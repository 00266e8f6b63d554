"""Consumer groups of third-party clients against the embedded broker.

confluent-kafka (librdkafka) and kafka-python consumers share a group on a 6-partition
topic of an embedded cluster (1 and 3 brokers; Apache Kafka with --kafka=apache, which
checks that these expectations are the real broker's). Two consumers start; once both
own partitions, half of 10,000 keyed records are consumed; a third consumer joins (a
rebalance) and the second half is produced only once it owns partitions, so it
provably takes part. Every record is accounted for by key, value and position, and
the committed offsets read back (admin API and ``committed()``) equal the end offsets.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pytest
from interop_testlib import apache_three_nodes, interop_cluster

from aiokafka_lite.testing.threaded import ThreadedCluster

pytestmark = pytest.mark.interop
_ = (apache_three_nodes, interop_cluster)  # fixtures

TOPIC = "orders"
PARTITIONS = 6
N = 10_000
GROUP = "interop-group"
DEADLINE_S = 60.0
SESSION = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500}

Rec = tuple[str, str, int, int]  # key, value, partition, offset


class GroupConsumer(Protocol):
    def poll(self) -> list[Rec]: ...
    def commit(self) -> None: ...
    def assignment(self) -> set[int]: ...
    def close(self) -> None: ...


# -- client adapters ----------------------------------------------------------------------
class ConfluentConsumer:
    def __init__(self, bootstrap: str, name: str, strategy: str) -> None:
        from confluent_kafka import Consumer

        self.c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "client.id": name,
                "partition.assignment.strategy": strategy,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": SESSION["session_timeout_ms"],
                "heartbeat.interval.ms": SESSION["heartbeat_interval_ms"],
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.c.subscribe([TOPIC], on_revoke=self._on_revoke)

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        # Commit what was processed of the partitions going away.
        positions = [p for p in consumer.position(partitions) if p.offset >= 0]
        if positions:
            try:
                consumer.commit(offsets=positions, asynchronous=False)
            except Exception:
                pass  # e.g. the generation is already gone: the records come again

    def poll(self) -> list[Rec]:
        out = []
        for m in self.c.consume(num_messages=50, timeout=0.05):
            if m.error():
                raise AssertionError(f"consumer error: {m.error()}")
            out.append((m.key().decode(), m.value().decode(), m.partition(), m.offset()))
        return out

    def commit(self) -> None:
        from confluent_kafka import KafkaException

        try:
            self.c.commit(asynchronous=False)
        except KafkaException:
            pass  # nothing consumed yet, or a rebalance is under way

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.c.assignment()}

    def close(self) -> None:
        self.c.close()


class KafkaPythonConsumer:
    def __init__(self, bootstrap: str, name: str, strategy: str) -> None:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        assignor = {
            "range": RangePartitionAssignor,
            "roundrobin": RoundRobinPartitionAssignor,
            "cooperative-sticky": CooperativeStickyAssignor,
        }[strategy]
        self.c = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=GROUP,
            client_id=name,
            partition_assignment_strategy=[assignor],
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION["session_timeout_ms"],
            heartbeat_interval_ms=SESSION["heartbeat_interval_ms"],
        )
        # (kafka-python 3 runs rebalance listeners on its IO thread, where a blocking
        # commit is not allowed; every batch is committed right after it is processed.)
        self.c.subscribe([TOPIC])
        # Learn the topic's partitions before the first poll joins: kafka-python 3.0
        # otherwise joins without them, assigns nothing as leader and rejoins when
        # the metadata arrives, and it loses that rejoin if a poll() times out while
        # the SyncGroup is in flight (need_rejoin() turns False before the join task
        # is collected: no assignment, no heartbeats, the session expires).
        self.c.partitions_for_topic(TOPIC)

    def poll(self) -> list[Rec]:
        batches = self.c.poll(timeout_ms=200, max_records=50)
        return [
            (r.key.decode(), r.value.decode(), tp.partition, r.offset)
            for tp, recs in batches.items()
            for r in recs
        ]

    def commit(self) -> None:
        from kafka.errors import KafkaError

        try:
            self.c.commit()
        except (KafkaError, AssertionError):
            pass  # rebalance in progress: the records come again

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.c.assignment()}

    def close(self) -> None:
        self.c.close(autocommit=False)


@dataclass
class Worker:
    """One consumer on its own thread (kafka-python joins inside poll(), so it cannot share one)."""

    make: Callable[[], GroupConsumer]
    name: str
    sink: Callable[[str, list[Rec]], None]
    stop: threading.Event = field(default_factory=threading.Event)
    assigned: set[int] = field(default_factory=set)
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            c = self.make()
        except BaseException as e:
            self.error = e
            return
        try:
            while not self.stop.is_set():
                recs = c.poll()
                if recs:
                    self.sink(self.name, recs)
                    c.commit()
                self.assigned = c.assignment()
            c.commit()
        except BaseException as e:
            self.error = e
        finally:
            c.close()

    def join(self) -> None:
        self.stop.set()
        assert self.thread is not None
        self.thread.join(30)
        assert not self.thread.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


# -- producing -----------------------------------------------------------------------------
def produce_confluent(bootstrap: str, start: int, end: int, placed: dict[str, tuple[int, int]]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})

    def report(err: Any, msg: Any) -> None:
        assert err is None, err
        placed[msg.key().decode()] = (msg.partition(), msg.offset())

    for i in range(start, end):
        p.produce(TOPIC, key=f"k{i}", value=f"v{i}", on_delivery=report)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def produce_kafka_python(bootstrap: str, start: int, end: int, placed: dict[str, tuple[int, int]]) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    futures = [
        (f"k{i}", p.send(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode())) for i in range(start, end)
    ]
    p.flush(30)
    for key, fut in futures:
        md = fut.get(30)
        placed[key] = (md.partition, md.offset)
    p.close()


# -- the scenario --------------------------------------------------------------------------------
def wait_for(cond: Callable[[], bool], what: str, deadline: float, workers: list[Worker]) -> None:
    while not cond():
        for w in workers:
            if w.error is not None:
                raise AssertionError(f"{w.name} failed while waiting for {what}") from w.error
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def run_group_scenario(
    tc: ThreadedCluster,
    make: Callable[[str], GroupConsumer],
    produce: Callable[[str, int, int, dict[str, tuple[int, int]]], None],
) -> dict[str, Any]:
    bootstrap = tc.bootstrap
    deadline = time.monotonic() + DEADLINE_S
    placed: dict[str, tuple[int, int]] = {}
    consumed: list[tuple[str, Rec]] = []
    lock = threading.Lock()

    def sink(name: str, recs: list[Rec]) -> None:
        with lock:
            consumed.extend((name, r) for r in recs)

    def unique() -> int:
        with lock:
            return len({r[0] for _, r in consumed})

    half = N // 2
    produce(bootstrap, 0, half, placed)
    workers = [Worker(lambda n=n: make(n), n, sink) for n in ("c1", "c2")]
    for w in workers:
        w.start()
    try:
        wait_for(
            lambda: all(w.assigned for w in workers[:2]),
            "two consumers to share the partitions",
            deadline,
            workers,
        )
        wait_for(lambda: unique() >= half // 2, "the first records", deadline, workers)
        third = Worker(lambda: make("c3"), "c3", sink)
        workers.append(third)
        third.start()
        wait_for(lambda: bool(third.assigned), "the third consumer's assignment", deadline, workers)
        wait_for(
            lambda: (
                sum(len(w.assigned) for w in workers) == PARTITIONS
                and not (workers[0].assigned & workers[1].assigned)
            ),
            "a settled three-way assignment",
            deadline,
            workers,
        )
        produce(bootstrap, half, N, placed)
        wait_for(lambda: unique() == N, f"all {N} records", deadline, workers)
    finally:
        for w in workers:
            w.stop.set()
        for w in workers:
            w.join()

    # Every record accounted for: value and position match what the producer was told.
    seen: dict[str, Rec] = {}
    by_consumer: dict[str, int] = {}
    for name, rec in consumed:
        key, value, partition, offset = rec
        assert value == "v" + key[1:], rec
        assert (partition, offset) == placed[key], rec
        seen[key] = rec
        by_consumer[name] = by_consumer.get(name, 0) + 1
    assert set(seen) == {f"k{i}" for i in range(N)}
    assert by_consumer.get("c3", 0) > 0, by_consumer  # the late joiner consumed part of the second half
    end_offsets = {p: tc.call(lambda c, p=p: c.high_watermark(TOPIC, p)) for p in range(PARTITIONS)}
    assert sum(end_offsets.values()) == N
    return {"end_offsets": end_offsets, "by_consumer": by_consumer, "duplicates": len(consumed) - N}


def group_generation(tc: ThreadedCluster) -> int:
    """The group's generation, from the embedded broker's state (no Kafka API reports it)."""
    return int(tc.call(lambda c: c.state.services["groups"].groups[GROUP].generation_id))  # type: ignore[attr-defined]


# -- tests ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("brokers", [1, 3])
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_confluent_consumer_group(interop_cluster: Any, kafka_mode: str, brokers: int, strategy: str) -> None:
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    tc = interop_cluster(brokers=brokers, topics={TOPIC: PARTITIONS})
    result = run_group_scenario(tc, lambda n: ConfluentConsumer(tc.bootstrap, n, strategy), produce_confluent)
    if kafka_mode == "embedded":
        assert group_generation(tc) >= 3  # c1 alone or with c2, both, then all three
    end = result["end_offsets"]

    admin = AdminClient({"bootstrap.servers": tc.bootstrap})
    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[GROUP]
    listed = {tp.partition: tp.offset for tp in fut.result(30).topic_partitions if tp.topic == TOPIC}
    assert listed == end

    reader = Consumer({"bootstrap.servers": tc.bootstrap, "group.id": GROUP})
    try:
        committed = reader.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
        assert {tp.partition: tp.offset for tp in committed} == end
    finally:
        reader.close()

    groups = admin.list_consumer_groups().result(30)
    assert GROUP in {g.group_id for g in groups.valid}
    desc = admin.describe_consumer_groups([GROUP])[GROUP].result(30)
    assert desc.members == []  # everyone left


@pytest.mark.parametrize("brokers", [1, 3])
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_kafka_python_consumer_group(interop_cluster: Any, brokers: int, strategy: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka import TopicPartition as KTP

    tc = interop_cluster(brokers=brokers, topics={TOPIC: PARTITIONS})
    result = run_group_scenario(
        tc, lambda n: KafkaPythonConsumer(tc.bootstrap, n, strategy), produce_kafka_python
    )
    end = result["end_offsets"]

    admin = KafkaAdminClient(bootstrap_servers=tc.bootstrap)
    try:
        listed = admin.list_group_offsets(GROUP)[GROUP]
        assert {tp.partition: om.offset for tp, om in listed.items() if tp.topic == TOPIC} == end
        assert GROUP in {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()

    reader = KafkaConsumer(bootstrap_servers=tc.bootstrap, group_id=GROUP, enable_auto_commit=False)
    try:
        assert {p: reader.committed(KTP(TOPIC, p)) for p in range(PARTITIONS)} == end
    finally:
        reader.close()
