"""Serializers that record the context the clients hand them, and a registry client whose answers
wait for a gate (a registry that answers slowly, under the test's control)."""

from __future__ import annotations

from typing import Any

import anyio

from aiokafka_lite.core.serialization import SerializationContext
from aiokafka_lite.integrations.schema_registry import SchemaRegistryClient


class TaggingSerializer:
    """``serialize(data, ctx)``: notes (topic, field, headers so far) and appends a header naming
    the field and topic, so the consumer side can check the headers were writable."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, list[tuple[str, Any]]]] = []

    def serialize(self, data: Any, ctx: SerializationContext) -> bytes:
        assert ctx.headers is not None
        self.seen.append((ctx.topic, str(ctx.field), list(ctx.headers)))
        ctx.headers.append((f"by-{ctx.field}-serializer", ctx.topic.encode()))  # type: ignore[attr-defined]
        if isinstance(data, bytes | bytearray):
            return bytes(data)
        return (data if isinstance(data, str) else repr(data)).encode()


class ContextReader:
    """``deserialize(data, ctx)``: returns (topic, field, headers as a dict, the text)."""

    def deserialize(self, data: bytes | None, ctx: SerializationContext) -> Any:
        headers = ctx.headers
        assert isinstance(headers, tuple)  # consuming: the record's headers, read-only
        return (ctx.topic, str(ctx.field), dict(headers), None if data is None else data.decode())


class GatedClient(SchemaRegistryClient):
    """A registry client whose registrations and schema fetches wait until ``gate`` is set;
    ``asked`` is set when one starts waiting. ``calls`` counts them."""

    def __init__(self, url: str, asked: anyio.Event, gate: anyio.Event) -> None:
        super().__init__(url)
        self.asked = asked
        self.gate = gate
        self.calls = 0

    async def _gated(self) -> None:
        self.calls += 1
        self.asked.set()
        await self.gate.wait()

    async def register_schema_full_response(self, *args: Any, **kwargs: Any) -> Any:
        await self._gated()
        return await super().register_schema_full_response(*args, **kwargs)

    async def get_schema(self, *args: Any, **kwargs: Any) -> Any:
        await self._gated()
        return await super().get_schema(*args, **kwargs)

    async def get_schema_by_guid(self, *args: Any, **kwargs: Any) -> Any:
        await self._gated()
        return await super().get_schema_by_guid(*args, **kwargs)
