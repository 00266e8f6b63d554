from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from aiokafka_lite.integrations.schema_registry import EmbeddedSchemaRegistry, SchemaRegistryClient


@pytest.fixture
async def registry() -> AsyncIterator[EmbeddedSchemaRegistry]:
    async with EmbeddedSchemaRegistry() as reg:
        yield reg


@pytest.fixture
async def client(registry: EmbeddedSchemaRegistry) -> AsyncIterator[SchemaRegistryClient]:
    async with SchemaRegistryClient(registry.url) as c:
        yield c


@pytest.fixture
def threaded_registry() -> Iterator[EmbeddedSchemaRegistry]:
    """A registry on its own loop in a thread, for blocking clients (confluent-kafka's)."""
    with EmbeddedSchemaRegistry.in_thread() as reg:
        yield reg
