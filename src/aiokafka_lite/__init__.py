"""aiokafka_lite: an asyncio-native Apache Kafka client.

The public names below load on first use (PEP 562), so ``from aiokafka_lite import
Producer`` does not pay for the consumer, admin or broker modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:
    from aiokafka_lite.admin import Admin, NewTopic
    from aiokafka_lite.fetch import Consumer, Record
    from aiokafka_lite.net import Client
    from aiokafka_lite.produce import Producer, RecordMetadata
    from aiokafka_lite.structs import TopicPartition

_EXPORTS: dict[str, str] = {
    "Admin": "aiokafka_lite.admin",
    "NewTopic": "aiokafka_lite.admin",
    "Consumer": "aiokafka_lite.fetch",
    "Record": "aiokafka_lite.fetch",
    "Client": "aiokafka_lite.net",
    "Producer": "aiokafka_lite.produce",
    "RecordMetadata": "aiokafka_lite.produce",
    "TopicPartition": "aiokafka_lite.structs",
}

__all__ = [
    "Admin",
    "Client",
    "Consumer",
    "NewTopic",
    "Producer",
    "Record",
    "RecordMetadata",
    "TopicPartition",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
