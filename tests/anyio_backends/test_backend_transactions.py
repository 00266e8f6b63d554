"""A transactional Producer on asyncio and on trio: committed records are read by a
read_committed consumer, aborted and open ones are not."""

from __future__ import annotations

import uuid

import anyio
import pytest

from aiokafka_lite import Admin, Consumer, NewTopic, Producer
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.testing.threaded import ThreadedCluster
from anyio_backends.conftest import FAST, UnretrievedErrors, client_tasks_running

pytestmark = pytest.mark.anyio


async def _read(bootstrap: str, topic: str, isolation: str, expect: int) -> list[bytes]:
    got: list[bytes] = []
    async with Consumer(bootstrap, auto_offset_reset="earliest", isolation_level=isolation, **FAST) as c:
        c.assign([TP(topic, p) for p in range(2)])
        with anyio.move_on_after(5):  # then nothing more is coming
            while len(got) < expect + 1:
                batch = await c.getmany(timeout_ms=300)
                got += [r.value for recs in batch.values() for r in recs]
                if not batch and len(got) >= expect:
                    break
    return sorted(got)


async def test_commit_abort_and_open(anyio_backend: str, threaded_cluster: ThreadedCluster) -> None:
    bootstrap = threaded_cluster.bootstrap
    topic = f"txn-{anyio_backend}"
    async with Admin(bootstrap, **FAST) as admin:
        (await admin.create_topics([NewTopic(topic, partitions=2, replication_factor=1)])).raise_errors()
    unretrieved = UnretrievedErrors()
    async with Producer(bootstrap, transactional_id=f"tx-{uuid.uuid4().hex[:8]}", linger_ms=1, **FAST) as p:
        async with p.transaction():
            await p.send_batch(topic, [b"c1-%d" % i for i in range(20)])
        await p.begin_transaction()
        await p.send_batch(topic, [b"ab-%d" % i for i in range(10)])
        await p.abort_transaction()
        async with p.transaction():
            for i in range(5):
                await p.send(topic, b"c2-%d" % i)
        await p.begin_transaction()
        await p.send_batch(topic, [b"open-%d" % i for i in range(3)])
        # closing aborts the open transaction
    committed = sorted([b"c1-%d" % i for i in range(20)] + [b"c2-%d" % i for i in range(5)])
    assert await _read(bootstrap, topic, "read_committed", 25) == committed
    everything = await _read(bootstrap, topic, "read_uncommitted", 38)
    assert len(everything) == 38 and set(committed) <= set(everything)
    assert client_tasks_running() == []
    assert unretrieved.check() == []
