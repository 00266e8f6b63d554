"""Serializers that see their context, on asyncio and on trio: the producer's send, enqueue and
send_batch hand the topic, the field and appendable headers; the consumer's getone, getmany and
async for hand the record's headers; a schema not cached yet is fetched while the loop keeps
running (the registry answers only once another task has run)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from schema_registry.context_lib import ContextReader, GatedClient, TaggingSerializer

from aiokafka_lite import Admin, Consumer, NewTopic, Producer
from aiokafka_lite.integrations.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    EmbeddedSchemaRegistry,
)
from aiokafka_lite.testing.threaded import ThreadedCluster
from anyio_backends.conftest import FAST

pytestmark = pytest.mark.anyio

POINT = json.dumps({"type": "record", "name": "Point", "fields": [{"name": "x", "type": "int"}]})


@pytest.fixture
def registry() -> Iterator[EmbeddedSchemaRegistry]:
    with EmbeddedSchemaRegistry.in_thread() as reg:
        yield reg


async def _topic(bootstrap: str, name: str) -> None:
    async with Admin(bootstrap, **FAST) as admin:
        (await admin.create_topics([NewTopic(name, partitions=1, replication_factor=1)])).raise_errors()


async def test_context_reaches_both_sides(anyio_backend: str, threaded_cluster: ThreadedCluster) -> None:
    bootstrap = threaded_cluster.bootstrap
    topic = f"ctx-{anyio_backend}"
    await _topic(bootstrap, topic)
    keys, values = TaggingSerializer(), TaggingSerializer()
    async with Producer(bootstrap, key_serializer=keys, value_serializer=values, **FAST) as producer:
        await producer.send(topic, "v0", key="k0", headers=[("n", b"0")])
        await (await producer.enqueue(topic, "v1", key="k1", headers=[("n", b"1")]))
        await producer.send_batch(
            topic, ["v2", "v3"], keys=["k2", "k3"], headers=[[("n", b"2")], [("n", b"3")]]
        )
    assert [(t, f) for t, f, _ in values.seen] == [(topic, "value")] * 4
    assert values.seen[0][2] == [("n", b"0"), ("by-key-serializer", topic.encode())]

    reader = ContextReader()
    async with Consumer(
        bootstrap,
        topics=topic,
        group_id=f"g-{anyio_backend}",
        auto_offset_reset="earliest",
        key_deserializer=reader,
        value_deserializer=reader,
        **FAST,
    ) as consumer:
        with anyio.fail_after(60):
            got = [await consumer.getone()]
            while len(got) < 3:
                for recs in (await consumer.getmany(timeout_ms=1000, max_records=3 - len(got))).values():
                    got += recs
            async for record in consumer:
                got.append(record)
                break
    for i, record in enumerate(got):
        headers = {
            "n": str(i).encode(),
            "by-key-serializer": topic.encode(),
            "by-value-serializer": topic.encode(),
        }
        assert record.key == (topic, "key", headers, f"k{i}")
        assert record.value == (topic, "value", headers, f"v{i}")


async def test_uncached_schema_waits_without_blocking_the_loop(
    anyio_backend: str, threaded_cluster: ThreadedCluster, registry: EmbeddedSchemaRegistry
) -> None:
    bootstrap = threaded_cluster.bootstrap
    topic = f"gated-{anyio_backend}"
    await _topic(bootstrap, topic)

    async def open_when_asked(asked: anyio.Event, gate: anyio.Event) -> None:
        await asked.wait()  # a client call waits on the registry, and this task runs meanwhile
        gate.set()

    asked, gate = anyio.Event(), anyio.Event()
    async with GatedClient(registry.url, asked, gate) as client:
        async with Producer(bootstrap, value_serializer=AvroSerializer(client, POINT), **FAST) as producer:
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(open_when_asked, asked, gate)
                    await (await producer.enqueue(topic, {"x": 1}))
                await producer.send(topic, {"x": 2})
        assert client.calls == 1  # the second record took the cached, synchronous path

    asked, gate = anyio.Event(), anyio.Event()
    got: list[Any] = []
    async with GatedClient(registry.url, asked, gate) as client:
        async with Consumer(
            bootstrap,
            topics=topic,
            group_id=f"g-gated-{anyio_backend}",
            auto_offset_reset="earliest",
            value_deserializer=AvroDeserializer(client),
            **FAST,
        ) as consumer:
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(open_when_asked, asked, gate)
                    async for record in consumer:
                        got.append(record.value)
                        if len(got) == 2:
                            break
        assert client.calls == 1
    assert got == [{"x": 1}, {"x": 2}]
