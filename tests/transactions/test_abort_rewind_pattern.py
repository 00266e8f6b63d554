"""The consume-transform-produce loop of docs/guide/producer.md with aborts: after
``abort`` the loop rewinds each partition to the first record of the aborted batch, so
every order is processed, exactly once in the committed output, also when the group has
not committed anything yet (where ``seek_to_committed()`` has nowhere to go: the guide's
former advice lost the aborted orders). Embedded broker, and Apache Kafka with
``--kafka=apache``."""

from __future__ import annotations

import asyncio
import uuid

from _support.reading import read_topic
from txn_testlib import stable_group_offsets, values

from aiokafka_lite import Admin, Consumer, Producer
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.structs import TopicPartition

ORDERS = [f"order-{i}".encode() for i in range(6)]


class InvoiceFailed(Exception):
    pass


async def test_every_order_of_an_aborted_batch_is_processed_again(kafka_cluster: EmbeddedCluster) -> None:
    suffix = uuid.uuid4().hex[:8]
    orders, invoices, group = f"orders-{suffix}", f"invoices-{suffix}", f"invoicer-{suffix}"
    kafka_cluster.create_topic(orders, 2)
    kafka_cluster.create_topic(invoices, 1)
    async with Producer(kafka_cluster.bootstrap) as source:
        for i, order in enumerate(ORDERS):
            await source.send(orders, order, key=order, partition=i % 2)

    # The first attempt at these fails: among them the first batch on each partition,
    # before the group has committed anything.
    fail_once = {b"order-0", b"order-1", b"order-4"}
    attempts: dict[bytes, int] = {}

    def invoice_for(order: bytes) -> bytes:
        attempts[order] = attempts.get(order, 0) + 1
        if order in fail_once and attempts[order] == 1:
            raise InvoiceFailed(order)
        return b"invoice for " + order

    processed: list[bytes] = []
    producer = Producer(kafka_cluster.bootstrap, transactional_id=f"invoicer-{suffix}")
    consumer = Consumer(
        kafka_cluster.bootstrap,
        topics=orders,
        group_id=group,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
    )
    aborts = 0
    async with producer, consumer, asyncio.timeout(120):
        while len(processed) < len(ORDERS):
            batch = await consumer.getmany(timeout_ms=1000)
            if not batch:
                continue
            # The pattern as the guide gives it.
            try:
                async with producer.transaction():
                    for records in batch.values():
                        for record in records:
                            await producer.enqueue(invoices, invoice_for(record.value), key=record.key)
                    offsets = {tp: records[-1].offset + 1 for tp, records in batch.items()}
                    await producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            except InvoiceFailed:
                aborts += 1
                for tp, records in batch.items():
                    consumer.seek(tp, records[0].offset)
            else:
                processed.extend(r.value for records in batch.values() for r in records)

    assert aborts == len(fail_once)  # each failure aborted one transaction
    assert sorted(processed) == ORDERS
    written = await read_topic(kafka_cluster.bootstrap, invoices, 1, "read_committed")
    assert values(written) == sorted(b"invoice for " + order for order in ORDERS)
    async with Admin(kafka_cluster.bootstrap) as admin:
        committed = await stable_group_offsets(
            admin, group, present=[TopicPartition(orders, 0), TopicPartition(orders, 1)]
        )
    assert committed == {TopicPartition(orders, 0): 3, TopicPartition(orders, 1): 3}
