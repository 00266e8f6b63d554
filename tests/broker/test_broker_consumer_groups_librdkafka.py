"""The embedded consumer-group coordinator (KIP-848) with librdkafka's implementation of
the protocol (``group.protocol=consumer``): an independent client reconciles against it.
The coordinator's state is read in the broker's thread."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from aiokafka_lite.broker import EmbeddedCluster

TOPIC, GROUP, PARTITIONS, RECORDS = "rk-orders", "rk-group", 6, 300


def _group_view(cluster: EmbeddedCluster) -> dict[str, Any]:
    coordinator = cluster.state.services["groups"]
    group = coordinator.consumer_groups.get(GROUP)  # type: ignore[attr-defined]
    if group is None:
        return {}
    return {
        "state": group.state().value,
        "members": {
            m.member_id: (m.state.value, sorted(p for ps in m.assigned.values() for p in ps))
            for m in group.members.values()
        },
    }


def _eventually(cond: Callable[[], bool], what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


class RdKafkaMember(threading.Thread):
    def __init__(
        self, bootstrap: str, name: str, seen: dict[tuple[int, int], list[str]], regex: bool
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap = bootstrap
        self.seen = seen
        self.regex = regex
        self.stop = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": GROUP,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe(["^rk-ord.*"] if self.regex else [TOPIC])
        try:
            while not self.stop.is_set():
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    self.errors.append(str(msg.error()))
                    continue
                self.seen[(msg.partition(), msg.offset())].append(self.name)
        finally:
            consumer.close()


def _stable_with(view: dict[str, Any], members: int) -> bool:
    if view.get("state") != "Stable" or len(view["members"]) != members:
        return False
    owned = [p for _, ps in view["members"].values() for p in ps]
    return sorted(owned) == list(range(PARTITIONS)) and all(ps for _, ps in view["members"].values())


@pytest.mark.kafka_embedded
def test_librdkafka_members_join_reconcile_and_leave(kafka_threaded_cluster_factory: Any) -> None:
    tc = kafka_threaded_cluster_factory(brokers=3, topics={TOPIC: PARTITIONS})
    producer = Producer({"bootstrap.servers": tc.bootstrap})
    for i in range(RECORDS):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    seen: dict[tuple[int, int], list[str]] = defaultdict(list)
    members = [RdKafkaMember(tc.bootstrap, f"rk-{i}", seen, regex=i == 2) for i in range(3)]
    try:
        for m in members:
            m.start()
        _eventually(lambda: _stable_with(tc.call(_group_view), 3), "three members, every partition once")
        members[1].stop.set()
        members[1].join(30)
        _eventually(lambda: _stable_with(tc.call(_group_view), 2), "two members after one left")
        _eventually(lambda: len(seen) == RECORDS, "every record")
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(30)
    assert sorted(seen) == sorted((i % PARTITIONS, i // PARTITIONS) for i in range(RECORDS))
    assert not [e for m in members for e in m.errors]
