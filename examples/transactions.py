"""Consume-transform-produce, exactly once.

    python examples/transactions.py                       # embedded broker, in this process
    python examples/transactions.py --bootstrap HOST:PORT # any Kafka cluster

An "invoicer" reads orders, writes one invoice per order, and commits how far it read
*in the same transaction* as the invoices it wrote (``TransactSession``). Either both happen or neither: after
a failure the orders of the failed transaction are read again and invoiced again, and
the invoices of the failed attempt are never seen by ``read_committed`` consumers. So
every order yields exactly one visible invoice.

To show it, the invoicer fails once on purpose in the middle of a transaction.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import uuid

from aiokafka_lite import Admin, Consumer, NewTopic, Producer, TopicPartition
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.processing.transact import TransactSession

ORDERS = 120
PARTITIONS = 3


class Crash(Exception):
    """The failure we simulate half-way through one transaction."""


def invoice_for(value: bytes) -> bytes:
    order = json.loads(value)
    return json.dumps({"order": order["id"], "amount": round(order["qty"] * 9.99, 2)}).encode()


async def invoicer(bootstrap: str, orders: str, invoices: str, group: str) -> None:
    # A TransactSession is a group consumer (read_committed, no auto-commit) and a
    # transactional producer in lockstep: poll() begins a transaction, commit() commits
    # the records produced *and* the input offsets. The transactional id names this
    # instance: a restarted instance with the same id fences the old one and aborts its
    # open transaction.
    session = TransactSession(
        bootstrap,
        group_id=group,
        topics=orders,
        transactional_id=f"{group}-0",
        consumer_options={"auto_offset_reset": "earliest"},
    )
    crashed = False
    done = 0
    async with session:
        while done < ORDERS:
            batch = await session.poll(timeout_ms=1000, max_records=25)
            if not batch:
                continue
            try:
                for records in batch.values():
                    for record in records:
                        await session.producer.enqueue(invoices, invoice_for(record.value), key=record.key)
                if not crashed and done > ORDERS // 2:
                    crashed = True
                    await session.producer.flush()  # this attempt's invoices are in the log now...
                    raise Crash("the invoicer fell over before committing")  # ...but never visible
            except Crash as exc:
                await session.abort()  # the batch's orders will be polled again
                print(f"aborted a transaction: {exc}")
                continue
            if await session.commit():
                done += sum(len(records) for records in batch.values())
            # False: a rebalance took partitions mid-transaction; it was aborted and its
            # input will be consumed again (by us or by the partitions' new owner).
        print(f"invoiced {done} orders in transactions")


async def read_all(bootstrap: str, topic: str, isolation_level: str) -> list[dict[str, float]]:
    """Every record of ``topic`` as a ``read_committed`` or ``read_uncommitted`` consumer sees it."""
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    async with Consumer(bootstrap, isolation_level=isolation_level) as consumer:
        consumer.assign(tps)
        await consumer.seek_to_beginning()
        end = await consumer.end_offsets(tps)
        out = []
        while [tp for tp in tps if await consumer.position(tp) < end[tp]]:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                out += [json.loads(r.value) for r in records]
        return out


async def main(bootstrap: str | None) -> None:
    external = bootstrap is not None
    async with contextlib.AsyncExitStack() as stack:
        if bootstrap is None:  # no cluster given: run an embedded broker in this process
            bootstrap = (await stack.enter_async_context(EmbeddedCluster())).bootstrap
        run = uuid.uuid4().hex[:6]
        orders, invoices, group = f"orders-{run}", f"invoices-{run}", f"invoicer-{run}"
        admin = await stack.enter_async_context(Admin(bootstrap))
        topics = [NewTopic(orders, partitions=PARTITIONS), NewTopic(invoices, partitions=PARTITIONS)]
        (await admin.create_topics(topics)).raise_errors()

        async with Producer(bootstrap) as producer:
            await producer.send_batch(
                orders,
                [json.dumps({"id": i, "qty": i % 5 + 1}).encode() for i in range(ORDERS)],
                keys=[b"customer-%d" % (i % 7) for i in range(ORDERS)],
            )
        print(f"produced {ORDERS} orders")

        await invoicer(bootstrap, orders, invoices, group)

        committed = await read_all(bootstrap, invoices, "read_committed")
        everything = await read_all(bootstrap, invoices, "read_uncommitted")
        ids = sorted(int(i["order"]) for i in committed)
        print(
            f"read_committed consumers see {len(committed)} invoices, one per order: {ids == list(range(ORDERS))}"
        )
        print(f"read_uncommitted consumers also see the aborted attempt: {len(everything)} invoices")

        tps = [TopicPartition(orders, p) for p in range(PARTITIONS)]
        offsets = await admin.list_group_offsets(group, tps)
        ends = await admin.list_offsets(dict.fromkeys(tps, "latest"))
        print(
            f"the group's committed offsets reach the end of {orders}: {all(offsets[tp].offset == ends[tp].offset for tp in tps)}"
        )
        if external:  # leave a real cluster as we found it
            await admin.delete_groups([group])
            await admin.delete_topics([orders, invoices])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("KAFKA_BOOTSTRAP") or None,
        help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP, else an embedded broker)",
    )
    asyncio.run(main(parser.parse_args().bootstrap))
