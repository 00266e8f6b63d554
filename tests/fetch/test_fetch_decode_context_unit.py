"""CompletedFetch with context deserializers, sans-I/O: each call gets the topic, the field and
the record's headers; one that needs I/O (SerializerNotReadyError) stops the chunk before its
record, names the call to await in ``unresolved``, and the batch decodes again from there once
it is resolved; a plain deserializer beside a context one keeps its one-argument call."""

from __future__ import annotations

from typing import Any

from aiokafka_lite.consume.fetch.decode import parse_partition
from aiokafka_lite.core.errors import RecordDeserializationError, SerializerNotReadyError
from aiokafka_lite.core.serialization import (
    SerializationContext,
    context_deserializer,
    plain_call,
)
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.records import encode_batch

TP = TopicPartition("t", 0)


def batch(base: int, n: int) -> bytes:
    recs = [
        (1000 + base + i, f"k{base + i}".encode(), f"v{base + i}".encode(), [("n", str(base + i).encode())])
        for i in range(n)
    ]
    return encode_batch(recs, base_offset=base)


class NeedsSchema:
    """Refuses values it has not "fetched" (SerializerNotReadyError) until deserialize_async ran."""

    def __init__(self, known: set[bytes]) -> None:
        self.known = known
        self.resolved: list[tuple[bytes, str, str, Any]] = []

    def deserialize(self, data: bytes, ctx: SerializationContext) -> Any:
        if data not in self.known:
            raise SerializerNotReadyError(f"{data!r} not fetched")
        return (ctx.topic, str(ctx.field), ctx.headers, data.decode())

    async def deserialize_async(self, data: bytes, ctx: SerializationContext) -> Any:
        self.resolved.append((data, ctx.topic, str(ctx.field), ctx.headers))
        self.known.add(data)
        return self.deserialize(data, ctx)


def test_context_reaches_the_deserializer_and_a_plain_one_keeps_its_call() -> None:
    cf = parse_partition(TP, 0, batch(0, 3))
    vd = context_deserializer(NeedsSchema({b"v0", b"v1", b"v2"}))
    kd = plain_call(bytes.decode)
    recs = cf.next_records(0, kd, vd, True)
    assert [r.key for r in recs] == ["k0", "k1", "k2"]
    assert [r.value for r in recs] == [("t", "value", (("n", str(i).encode()),), f"v{i}") for i in range(3)]
    assert cf.unresolved is None


def test_a_record_that_needs_io_stops_the_chunk_and_decodes_again_once_resolved() -> None:
    import asyncio

    deserializer = NeedsSchema({b"v0", b"v1"})
    vd = context_deserializer(deserializer)
    assert vd is not None
    cf = parse_partition(TP, 0, batch(0, 4))
    first = cf.next_records(0, None, vd, True)
    assert [r.offset for r in first] == [0, 1]  # the records before it are handed out
    assert cf.unresolved is not None and cf.error is None
    call, data, ctx, offset = cf.unresolved
    assert (data, offset, ctx.topic, str(ctx.field)) == (b"v2", 2, "t", "value")
    assert cf.next_records(2, None, vd, True) == []  # still unresolved: nothing past it
    cf.unresolved = None
    asyncio.run(call.resolve(data, ctx))
    deserializer.known.add(b"v3")
    rest = cf.next_records(2, None, vd, True)
    assert [r.offset for r in rest] == [2, 3]
    assert deserializer.resolved == [(b"v2", "t", "value", (("n", b"2"),))]


def test_a_failing_context_deserializer_is_a_positional_error() -> None:
    class Broken:
        def deserialize(self, data: bytes, ctx: SerializationContext) -> Any:
            if data == b"v1":
                raise ValueError("bad")
            return data

    cf = parse_partition(TP, 0, batch(0, 3))
    recs = cf.next_records(0, None, context_deserializer(Broken()), True)
    assert [r.offset for r in recs] == [0]
    assert isinstance(cf.error, RecordDeserializationError) and cf.error.offset == 1
    assert cf.unresolved is None


def test_without_an_async_path_not_ready_is_an_error() -> None:
    class SyncOnly:
        def deserialize(self, data: bytes, ctx: SerializationContext) -> Any:
            raise SerializerNotReadyError("needs I/O")

    cf = parse_partition(TP, 0, batch(0, 2))
    assert cf.next_records(0, None, context_deserializer(SyncOnly()), True) == []
    assert isinstance(cf.error, RecordDeserializationError) and cf.error.offset == 0
