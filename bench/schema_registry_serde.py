"""Schema-registry serializer cost per record, cached schema: aiokafka_lite vs confluent-kafka.

Both sides talk to one EmbeddedSchemaRegistry (in a thread); the schema is resolved before timing
(ours: ``await serializer.prepare(topic)``; theirs: one warm-up call), so the timed loop is the pure
per-record cost: Avro (fastavro, both sides), JSON Schema (jsonschema validation, both sides),
Protobuf. Serialize and deserialize, best of several interleaved runs, microseconds per record; the
last column is the format library alone (fastavro; jsonschema + json; protobuf), the floor.

"in client" is the path a Producer/Consumer takes with the serializer as its value_serializer /
value_deserializer (issue #27, the serializer sees its context): the bound ``serialize(obj, ctx)``
with a fresh ``SerializationContext`` (topic, field, headers list) per record, as the clients build
it; "theirs in client" is confluent-kafka's serializer used directly as our client's serializer,
through the adapter (``core/serialization``: their ``SerializationContext`` built per record).

Run: .venv/bin/python bench/schema_registry_serde.py [--records N] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata
import io
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import fastavro  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient as TheirClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer as TAD  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer as TAS  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as TJD  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONSerializer as TJS  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as TPD  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as TPS  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402
from jsonschema.validators import validator_for  # noqa: E402
from schema_registry.protos import Order, sample_order  # noqa: E402
from schema_registry.test_referee_confluent import USER_AVRO, USER_JSON, avro_user, json_user  # noqa: E402

from aiokafka_lite.core.serialization import MessageField as OurField  # noqa: E402
from aiokafka_lite.core.serialization import SerializationContext as OurContext  # noqa: E402
from aiokafka_lite.core.serialization import context_deserializer, context_serializer  # noqa: E402
from aiokafka_lite.integrations.schema_registry import (  # noqa: E402
    AvroDeserializer,
    AvroSerializer,
    EmbeddedSchemaRegistry,
    JSONDeserializer,
    JSONSerializer,
    ProtobufDeserializer,
    ProtobufSerializer,
    SchemaRegistryClient,
)


def best_us_per_record(fn: Callable[[Any], Any], items: list[Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, time.perf_counter() - start)
    return best / len(items) * 1e6


async def prepare_ours(url: str, topic_prefix: str) -> dict[str, tuple[Any, Any]]:
    client = SchemaRegistryClient(url)
    ours = {
        "avro": (AvroSerializer(client, USER_AVRO), AvroDeserializer(client)),
        "json": (JSONSerializer(USER_JSON, client), JSONDeserializer(USER_JSON)),
        "protobuf": (ProtobufSerializer(Order, client), ProtobufDeserializer(Order)),
    }
    for kind, (serializer, deserializer) in ours.items():
        await serializer.prepare(f"{topic_prefix}-{kind}")
        sample = {"avro": avro_user(1), "json": json_user(1), "protobuf": sample_order(1)}[kind]
        if hasattr(deserializer, "prefetch"):
            await deserializer.prefetch(serializer(sample))
    await client.aclose()
    return ours


def library_alone(kind: str) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """The format library by itself (no framing, no registry client): the floor both sides pay."""
    if kind == "avro":
        parsed = fastavro.parse_schema(json.loads(USER_AVRO))

        def avro_write(record: Any) -> bytes:
            out = io.BytesIO()
            fastavro.schemaless_writer(out, parsed, record)
            return out.getvalue()

        return avro_write, lambda data: fastavro.schemaless_reader(io.BytesIO(data[5:]), parsed, None)
    if kind == "json":
        validator = validator_for(json.loads(USER_JSON))(json.loads(USER_JSON))

        def json_write(value: Any) -> bytes:
            validator.validate(value)
            return json.dumps(value, separators=(",", ":")).encode()

        def json_read(data: bytes) -> Any:
            value = json.loads(data[5:])
            validator.validate(value)
            return value

        return json_write, json_read
    return (lambda message: message.SerializeToString()), (lambda data: Order.FromString(data[7:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds (more on a busy machine)")
    args = parser.parse_args()
    makers = {"avro": avro_user, "json": json_user, "protobuf": sample_order}
    with EmbeddedSchemaRegistry.in_thread() as registry:
        ours = asyncio.run(prepare_ours(registry.url, "bench"))
        their_client = TheirClient({"url": registry.url})
        theirs = {
            "avro": (TAS(their_client, USER_AVRO), TAD(their_client)),
            "json": (TJS(USER_JSON, their_client), TJD(USER_JSON)),
            "protobuf": (
                TPS(Order, their_client, {"use.deprecated.format": False}),
                TPD(Order, {"use.deprecated.format": False}),
            ),
        }
        print(
            f"confluent-kafka {importlib.metadata.version('confluent-kafka')}, {args.records} records, "
            f"best of {args.repeat} x {args.rounds} interleaved rounds"
        )
        print(
            f"{'format':<10}{'op':<13}{'ours µs':>10}{'theirs µs':>11}{'theirs/ours':>13}{'library µs':>12}"
            f"{'ours in client':>16}{'theirs in client':>18}"
        )
        for kind, make in makers.items():
            records = [make(i) for i in range(args.records)]
            ctx = SerializationContext(f"bench-{kind}", MessageField.VALUE)
            our_ser, our_de = ours[kind]
            their_ser, their_de = theirs[kind]
            their_ser(records[0], ctx)  # warm their cache (registers / looks up once)
            payloads = [our_ser(r) for r in records]
            assert payloads == [their_ser(r, ctx) for r in records], kind
            their_de(payloads[0], ctx)
            floor_ser, floor_de = library_alone(kind)
            topic = f"bench-{kind}"
            our_ser_ctx = context_serializer(our_ser)
            our_de_ctx = context_deserializer(our_de)
            their_ser_ctx = context_serializer(their_ser)
            their_de_ctx = context_deserializer(their_de)
            assert our_ser_ctx and our_de_ctx and their_ser_ctx and their_de_ctx
            value = OurField.VALUE
            # The adapter runs each topic's first call in a worker thread; then it is synchronous.
            asyncio.run(their_ser_ctx.resolve(records[0], OurContext(topic, value, [])))
            asyncio.run(their_de_ctx.resolve(payloads[0], OurContext(topic, value, ())))
            s_ours, d_ours = our_ser_ctx.sync, our_de_ctx.sync
            s_theirs, d_theirs = their_ser_ctx.sync, their_de_ctx.sync
            contenders = {
                "ours-ser": (our_ser, records),
                "theirs-ser": (lambda r, s=their_ser, c=ctx: s(r, c), records),
                "floor-ser": (floor_ser, records),
                "ours-de": (our_de, payloads),
                "theirs-de": (lambda p, d=their_de, c=ctx: d(p, c), payloads),
                "floor-de": (floor_de, payloads),
                "client-ours-ser": (
                    lambda r, f=s_ours, t=topic: f(r, OurContext(t, OurField.VALUE, [])),
                    records,
                ),
                "client-theirs-ser": (
                    lambda r, f=s_theirs, t=topic: f(r, OurContext(t, OurField.VALUE, [])),
                    records,
                ),
                "client-ours-de": (
                    lambda p, f=d_ours, t=topic: f(p, OurContext(t, OurField.VALUE, ())),
                    payloads,
                ),
                "client-theirs-de": (
                    lambda p, f=d_theirs, t=topic: f(p, OurContext(t, OurField.VALUE, ())),
                    payloads,
                ),
            }
            results = dict.fromkeys(contenders, float("inf"))
            for _ in range(args.rounds):  # interleaved rounds; the best of each
                for name, (fn, items) in contenders.items():
                    results[name] = min(results[name], best_us_per_record(fn, items, args.repeat))
            for op in ("ser", "de"):
                o, t, f = results[f"ours-{op}"], results[f"theirs-{op}"], results[f"floor-{op}"]
                name = "serialize" if op == "ser" else "deserialize"
                co, ct = results[f"client-ours-{op}"], results[f"client-theirs-{op}"]
                print(
                    f"{kind:<10}{name:<13}{o:>10.2f}{t:>11.2f}{t / o:>12.1f}x{f:>12.2f}{co:>16.2f}{ct:>18.2f}"
                )


if __name__ == "__main__":
    main()
