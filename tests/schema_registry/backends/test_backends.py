"""The client and the serializers' async paths on both async backends (asyncio and trio, through
anyio); the registry runs on its own loop in a thread."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import anyio
import pytest

from aiokafka_lite.integrations.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    EmbeddedSchemaRegistry,
    IncompatibleSchemaError,
    RegistryUnavailableError,
    Schema,
    SchemaRegistryClient,
    SerializationContext,
)

pytestmark = pytest.mark.anyio

POINT = json.dumps({"type": "record", "name": "P", "fields": [{"name": "x", "type": "int"}]})


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def registry() -> Iterator[EmbeddedSchemaRegistry]:
    with EmbeddedSchemaRegistry.in_thread() as reg:
        yield reg


async def test_client_and_serde(anyio_backend: str, registry: EmbeddedSchemaRegistry) -> None:
    async with SchemaRegistryClient(registry.url) as client:
        serializer = AvroSerializer(client, POINT)
        data = await serializer.serialize_async({"x": 41}, SerializationContext("p"))
        assert data is not None
        assert serializer({"x": 42}) is not None  # prepared: the sync path
        assert await AvroDeserializer(client).deserialize_async(data) == {"x": 41}
        assert await client.get_subjects() == ["p-value"]
        with pytest.raises(IncompatibleSchemaError):
            await client.register_schema(
                "p-value",
                Schema(json.dumps({"type": "record", "name": "P", "fields": [{"name": "y", "type": "int"}]})),
            )


async def test_timeout_under_a_silent_registry(anyio_backend: str) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # connections complete in the backlog and are never answered
    try:
        async with SchemaRegistryClient(
            f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.5, max_retries=5
        ) as client:
            with anyio.fail_after(10):  # the client's own bound is what this test is about
                with pytest.raises(RegistryUnavailableError, match="timed out"):
                    await client.get_subjects()
    finally:
        listener.close()
