"""The producer: ``Producer`` (async API), its configuration and its sans-I/O parts.

Layout: ``partitioner`` (murmur2, uniform sticky, round robin), ``accumulator``
(per-partition batches, ready/drain/expiry, buffer memory), ``sequencing``
(idempotence: producer id/epoch, sequence numbers, KIP-360 recovery), ``batch``
(batches and per-record result handles), ``sender`` (background task turning batches
into produce requests) and ``producer`` (the public class).
"""

from aiokafka_lite.produce.batch import (
    BatchResult,
    DeliveryFailedError,
    RecordFailure,
    RecordFuture,
    RecordMetadata,
)
from aiokafka_lite.produce.partitioner import key_partition, murmur2
from aiokafka_lite.produce.producer import Producer
from aiokafka_lite.produce.producer_config import ProducerConfig

__all__ = [
    "BatchResult",
    "DeliveryFailedError",
    "Producer",
    "ProducerConfig",
    "RecordFailure",
    "RecordFuture",
    "RecordMetadata",
    "key_partition",
    "murmur2",
]
