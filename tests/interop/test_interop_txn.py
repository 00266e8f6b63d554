"""Transactions of confluent-kafka (librdkafka) against the embedded broker (and Apache
Kafka with --kafka=apache, which checks that these expectations are the real broker's).

Aborted records are invisible to read_committed consumers and visible to
read_uncommitted ones; committed records are visible to both. A second producer with
the same transactional.id fences the first; a transaction that outlives its timeout
is aborted by the coordinator; offsets sent to a transaction commit with it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from interop_testlib import apache_three_nodes, interop_cluster

from aiokafka_lite.core import errors as E
from aiokafka_lite.net import Client, CoordinatorType
from aiokafka_lite.wire.messages import DescribeTransactionsRequest, DescribeTransactionsResponse

pytestmark = pytest.mark.interop
_ = (apache_three_nodes, interop_cluster)  # fixtures

TOPIC = "txn-topic"
PARTITIONS = 3


def producer(bootstrap: str, txn_id: str, **extra: Any) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 2, **extra})


def read_all(
    bootstrap: str, isolation: str, topic: str = TOPIC, partitions: int = PARTITIONS
) -> list[tuple[str, str, int, int]]:
    """Every record visible at ``isolation``, up to the end (LSO for read_committed)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: list[tuple[str, str, int, int]] = []
        eof: set[int] = set()
        deadline = time.monotonic() + 30
        while len(eof) < partitions:
            assert time.monotonic() < deadline, f"{isolation} reader did not reach the end"
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                eof.add(m.partition())
                continue
            eof.discard(m.partition())
            out.append((m.key().decode(), m.value().decode(), m.partition(), m.offset()))
        return out
    finally:
        c.close()


def values(records: list[tuple[str, str, int, int]]) -> list[str]:
    return sorted(v for _, v, _, _ in records)


def txn_id(name: str) -> str:
    """A transactional id of this test run (clusters may be shared by the session)."""
    return f"{name}-{uuid.uuid4().hex[:6]}"


def describe_transaction(
    bootstrap: str, transactional_id: str
) -> DescribeTransactionsResponse.TransactionState:
    """The coordinator's view of a transaction (DescribeTransactions, KIP-664), asked the
    same way of either broker."""

    async def ask() -> DescribeTransactionsResponse.TransactionState:
        async with Client(bootstrap) as client:
            node = await client.find_coordinator(transactional_id, CoordinatorType.TRANSACTION)
            resp = await client.send(
                DescribeTransactionsRequest(transactional_ids=[transactional_id]), node_id=node
            )
            assert isinstance(resp, DescribeTransactionsResponse)
            (state,) = resp.transaction_states
            E.raise_for_code(state.error_code)
            return state

    return asyncio.run(ask())


@pytest.mark.parametrize("brokers", [1, 3])
def test_aborted_records_invisible_to_read_committed(interop_cluster: Any, brokers: int) -> None:
    tc = interop_cluster(brokers=brokers, topics={TOPIC: PARTITIONS})
    bs = tc.bootstrap
    p = producer(bs, txn_id("tx-visibility"))
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(200):
        p.produce(TOPIC, key=f"a{i}", value=f"aborted-{i}")
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(300):
        p.produce(TOPIC, key=f"c{i}", value=f"committed-{i}")
    p.commit_transaction(30)
    # A transaction still open at read time: its records sit above the LSO.
    p.begin_transaction()
    for i in range(50):
        p.produce(TOPIC, key=f"o{i}", value=f"open-{i}")
    p.flush(30)

    committed = [f"committed-{i}" for i in range(300)]
    aborted = [f"aborted-{i}" for i in range(200)]
    still_open = [f"open-{i}" for i in range(50)]
    rc = read_all(bs, "read_committed")
    assert values(rc) == sorted(committed)
    ru = read_all(bs, "read_uncommitted")
    assert values(ru) == sorted(committed + aborted + still_open)
    # Same records, same positions: control markers occupy offsets but are never delivered.
    by_key = {k: (part, off) for k, _, part, off in ru}
    assert all(by_key[k] == (part, off) for k, _, part, off in rc)
    end = sum(tc.call(lambda c, p=p: c.high_watermark(TOPIC, p)) for p in range(PARTITIONS))
    assert end > len(ru)  # markers (one per partition per finished transaction)

    p.commit_transaction(30)
    assert values(read_all(bs, "read_committed")) == sorted(committed + still_open)


def test_second_producer_fences_the_first(interop_cluster: Any) -> None:
    from confluent_kafka import KafkaException

    tc = interop_cluster(brokers=3, topics={TOPIC: PARTITIONS})
    bs = tc.bootstrap
    tid = txn_id("tx-fence")
    zombie = producer(bs, tid)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for i in range(50):
        zombie.produce(TOPIC, key=f"z{i}", value=f"zombie-{i}")
    zombie.flush(30)

    fresh = producer(bs, tid)
    fresh.init_transactions(30)  # aborts the zombie's transaction, bumps the epoch
    fresh.begin_transaction()
    for i in range(50):
        fresh.produce(TOPIC, key=f"f{i}", value=f"fresh-{i}")
    fresh.commit_transaction(30)

    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(30)
    err = info.value.args[0]
    assert err.fatal() or err.txn_requires_abort(), err
    assert "fenc" in str(err).lower() or "epoch" in str(err).lower(), err

    assert values(read_all(bs, "read_committed")) == sorted(f"fresh-{i}" for i in range(50))
    assert len(read_all(bs, "read_uncommitted")) == 100
    state = describe_transaction(bs, tid)
    assert state.transaction_state == "CompleteCommit" and state.producer_epoch >= 2


def test_transaction_timeout_aborts(interop_cluster: Any) -> None:
    from confluent_kafka import KafkaException

    tc = interop_cluster(brokers=1, topics={TOPIC: PARTITIONS})
    bs = tc.bootstrap
    tid = txn_id("tx-timeout")
    p = producer(bs, tid, **{"transaction.timeout.ms": 1000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(20):
        p.produce(TOPIC, key=f"t{i}", value=f"late-{i}")
    p.flush(30)
    # Kafka looks for timed-out transactions every 10 s
    # (transaction.abort.timed.out.transaction.cleanup.interval.ms).
    deadline = time.monotonic() + 30
    while describe_transaction(bs, tid).transaction_state != "CompleteAbort":
        assert time.monotonic() < deadline, "the coordinator never aborted the transaction"
        time.sleep(0.1)
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
    assert read_all(bs, "read_committed") == []
    assert len(read_all(bs, "read_uncommitted")) == 20
    # The id is usable again by a new producer.
    q = producer(bs, tid)
    q.init_transactions(30)
    q.begin_transaction()
    q.produce(TOPIC, key="n", value="new")
    q.commit_transaction(30)
    assert values(read_all(bs, "read_committed")) == ["new"]


def test_send_offsets_to_transaction(interop_cluster: Any) -> None:
    """Consume-transform-produce: the group's offsets commit or abort with the output."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    tc = interop_cluster(brokers=3, topics={"in": 2, TOPIC: PARTITIONS})
    bs = tc.bootstrap
    plain = Producer({"bootstrap.servers": bs})
    for i in range(100):
        plain.produce("in", key=f"k{i}", value=f"v{i}")
    assert plain.flush(30) == 0

    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "etl",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    p = producer(bs, txn_id("tx-etl"))
    p.init_transactions(30)
    try:
        c.subscribe(["in"])

        def run_batch(commit: bool) -> int:
            p.begin_transaction()
            seen = 0
            deadline = time.monotonic() + 30
            while seen < 100:
                assert time.monotonic() < deadline, "input not consumed"
                for m in c.consume(num_messages=100, timeout=0.2):
                    assert not m.error(), m.error()
                    p.produce(TOPIC, key=m.key(), value=m.value().upper())
                    seen += 1
            positions = c.position(c.assignment())
            p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 30)
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
                # Rewind to what the group has committed, as an EOS app does after an abort.
                for tp in c.committed(c.assignment(), timeout=30):
                    c.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
            return seen

        assert run_batch(commit=False) == 100
        committed = c.committed([TopicPartition("in", 0), TopicPartition("in", 1)], timeout=30)
        assert all(tp.offset < 0 for tp in committed), committed  # nothing committed by the abort
        assert run_batch(commit=True) == 100
        committed = c.committed([TopicPartition("in", 0), TopicPartition("in", 1)], timeout=30)
        ends = {p_: tc.call(lambda cl, p_=p_: cl.high_watermark("in", p_)) for p_ in (0, 1)}
        assert {tp.partition: tp.offset for tp in committed} == ends
    finally:
        c.close()
    out = read_all(bs, "read_committed")
    assert values(out) == sorted(f"V{i}" for i in range(100))
