"""aiokafka's public API on aiokafka_lite's native clients (see docs/guide/coming-from-aiokafka.md).

``aiokafka_lite.compat.install()`` makes ``import aiokafka`` load this package.
"""

from aiokafka_lite.compat.aiokafka.abc import ConsumerRebalanceListener
from aiokafka_lite.compat.aiokafka.consumer import AIOKafkaConsumer
from aiokafka_lite.compat.aiokafka.errors import ConsumerStoppedError, IllegalOperation
from aiokafka_lite.compat.aiokafka.producer import AIOKafkaProducer
from aiokafka_lite.compat.aiokafka.structs import (
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)

__version__ = "0.14.0"

__all__ = [
    "AIOKafkaConsumer",
    "AIOKafkaProducer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerStoppedError",
    "IllegalOperation",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "RecordMetadata",
    "TopicPartition",
]
