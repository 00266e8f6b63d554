"""Schema-registry serializer cost per record, cached schema: aiokafka_lite vs confluent-kafka.

Both sides talk to one EmbeddedSchemaRegistry (in a thread); the schema is resolved before timing
(ours: ``await serializer.prepare(topic)``; theirs: one warm-up call), so the timed loop is the pure
per-record cost: Avro (fastavro, both sides), JSON Schema (jsonschema validation, both sides),
Protobuf. Serialize and deserialize, best of several interleaved runs, microseconds per record.

Run: .venv/bin/python bench/schema_registry_serde.py [--records N] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata
import os
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
sys.path.insert(0, os.path.join(HERE, ".."))

from confluent_kafka.schema_registry import SchemaRegistryClient as TheirClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer as TAD  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer as TAS  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as TJD  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONSerializer as TJS  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as TPD  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as TPS  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

from aiokafka_lite.schema_registry import (  # noqa: E402
    AvroDeserializer,
    AvroSerializer,
    EmbeddedSchemaRegistry,
    JSONDeserializer,
    JSONSerializer,
    ProtobufDeserializer,
    ProtobufSerializer,
    SchemaRegistryClient,
)
from tests.schema_registry.protos import Order, sample_order  # noqa: E402
from tests.schema_registry.test_referee_confluent import USER_AVRO, USER_JSON, avro_user, json_user  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
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
            f"confluent-kafka {importlib.metadata.version('confluent-kafka')}, {args.records} records, best of {args.repeat}"
        )
        print(f"{'format':<10}{'op':<13}{'ours µs':>10}{'theirs µs':>11}{'theirs/ours':>13}")
        for kind, make in makers.items():
            records = [make(i) for i in range(args.records)]
            ctx = SerializationContext(f"bench-{kind}", MessageField.VALUE)
            our_ser, our_de = ours[kind]
            their_ser, their_de = theirs[kind]
            their_ser(records[0], ctx)  # warm their cache (registers / looks up once)
            payloads = [our_ser(r) for r in records]
            assert payloads == [their_ser(r, ctx) for r in records], kind
            their_de(payloads[0], ctx)
            results = {}
            for _ in range(2):  # interleave: ours, theirs, ours, theirs
                results["ours-ser"] = best_us_per_record(our_ser, records, args.repeat)
                results["theirs-ser"] = best_us_per_record(
                    lambda r, s=their_ser, c=ctx: s(r, c), records, args.repeat
                )
                results["ours-de"] = best_us_per_record(our_de, payloads, args.repeat)
                results["theirs-de"] = best_us_per_record(
                    lambda p, d=their_de, c=ctx: d(p, c), payloads, args.repeat
                )
            for op in ("ser", "de"):
                o, t = results[f"ours-{op}"], results[f"theirs-{op}"]
                name = "serialize" if op == "ser" else "deserialize"
                print(f"{kind:<10}{name:<13}{o:>10.2f}{t:>11.2f}{t / o:>12.1f}x")


if __name__ == "__main__":
    main()
