"""A transactional producer that leaves a transaction open and waits to be killed.

``python _hanging_producer.py BOOTSTRAP TOPIC TRANSACTIONAL_ID`` commits one record
(``before``), then begins a transaction with a 10-minute timeout, sends ``open-1`` and
``open-2`` to partition 0, flushes, prints ``ready`` and sleeps until it is SIGKILLed:
the transaction stays open on the partition (the coordinator aborts it only when its
timeout passes), which is how a producer that died mid-transaction leaves it.
"""

from __future__ import annotations

import asyncio
import sys

from aiokafka_lite import Producer

TRANSACTION_TIMEOUT_MS = 600_000


async def main(bootstrap: str, topic: str, transactional_id: str) -> None:
    producer = Producer(
        bootstrap, transactional_id=transactional_id, transaction_timeout_ms=TRANSACTION_TIMEOUT_MS
    )
    await producer.start()
    async with producer.transaction():
        await producer.send(topic, b"before", partition=0)
    await producer.begin_transaction()
    await producer.send(topic, b"open-1", partition=0)
    await producer.send(topic, b"open-2", partition=0)
    await producer.flush()
    print("ready", flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
