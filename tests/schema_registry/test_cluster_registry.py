"""``EmbeddedCluster(schema_registry=True)`` and the ``schema_registry_url`` fixture."""

from __future__ import annotations

import json

import httpx
import pytest

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.core.errors import ConfigError, IllegalStateError
from aiokafka_lite.integrations.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    MessageField,
    Schema,
    SchemaRegistryClient,
    SerializationContext,
)

SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Reading",
        "fields": [{"name": "sensor", "type": "string"}, {"name": "c", "type": "double"}],
    }
)


async def test_cluster_serves_a_registry_for_its_lifetime() -> None:
    async with EmbeddedCluster(schema_registry=True) as cluster:
        url = cluster.schema_registry_url
        async with SchemaRegistryClient(url) as client:
            schema_id = await client.register_schema("readings-value", Schema(SCHEMA, "AVRO"))
            ser = AvroSerializer(client, SCHEMA)
            await ser.prepare("readings")
            ctx = SerializationContext("readings", MessageField.VALUE)
            async with Producer(cluster.bootstrap) as producer:
                await producer.send("readings", ser.serialize({"sensor": "a", "c": 21.5}, ctx))
            async with Consumer(
                cluster.bootstrap, topics="readings", group_id="g", auto_offset_reset="earliest"
            ) as consumer:
                record = await consumer.getone()
            assert record.value[1:5] == schema_id.to_bytes(4, "big")
            de = AvroDeserializer(client)
            assert await de.deserialize_async(record.value, ctx) == {"sensor": "a", "c": 21.5}
    # Closed with the cluster: nothing listens on the registry's port any more.
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"{url}/subjects", timeout=5)
    with pytest.raises(IllegalStateError):
        _ = cluster.schema_registry_url


async def test_cluster_without_registry_says_so() -> None:
    async with EmbeddedCluster() as cluster:
        with pytest.raises(ConfigError, match="schema_registry=True"):
            _ = cluster.schema_registry_url


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_fixture_gives_a_working_registry(schema_registry_url: str) -> None:
    # A blocking client works too: the fixture's registry runs on its own loop.
    r = httpx.post(
        f"{schema_registry_url}/subjects/t-value/versions",
        json={"schema": SCHEMA},
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    assert httpx.get(f"{schema_registry_url}/subjects", timeout=10).json() == ["t-value"]


@pytest.mark.anyio
async def test_fixture_with_kafka(schema_registry_url: str, kafka_bootstrap: str, anyio_backend: str) -> None:
    """Runs on the embedded broker and with --kafka=apache (the registry beside the real Kafka),
    on asyncio and trio."""
    topic = f"fixture-{anyio_backend}"
    async with SchemaRegistryClient(schema_registry_url) as client:
        ser = AvroSerializer(client, SCHEMA)
        await ser.prepare(topic)
        ctx = SerializationContext(topic, MessageField.VALUE)
        async with Producer(kafka_bootstrap) as producer:
            await producer.send(topic, ser.serialize({"sensor": "b", "c": -3.0}, ctx))
        async with Consumer(
            kafka_bootstrap, topics=topic, group_id=f"g-{topic}", auto_offset_reset="earliest"
        ) as consumer:
            record = await consumer.getone()
        assert await AvroDeserializer(client).deserialize_async(record.value, ctx) == {
            "sensor": "b",
            "c": -3.0,
        }
