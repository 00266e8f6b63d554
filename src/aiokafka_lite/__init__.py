"""aiokafka_lite: an asyncio-native Apache Kafka client.

The public names below load on first use (PEP 562), so ``from aiokafka_lite import
Producer`` does not pay for the consumer, admin or broker modules, and ``import
aiokafka_lite`` alone loads none of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:
    from aiokafka_lite.admin import Admin, NewTopic
    from aiokafka_lite.broker import EmbeddedCluster
    from aiokafka_lite.fetch import Consumer, Record
    from aiokafka_lite.groups import OrderedWorkers
    from aiokafka_lite.mirror import Mirror
    from aiokafka_lite.net import Client
    from aiokafka_lite.produce import Producer, RecordMetadata
    from aiokafka_lite.share import AcknowledgeType, ShareConsumer, ShareWorkers
    from aiokafka_lite.structs import TopicPartition
    from aiokafka_lite.transact import TransactSession

_EXPORTS: dict[str, str] = {
    "Admin": "aiokafka_lite.admin",
    "NewTopic": "aiokafka_lite.admin",
    "EmbeddedCluster": "aiokafka_lite.broker",
    "Consumer": "aiokafka_lite.fetch",
    "Record": "aiokafka_lite.fetch",
    "OrderedWorkers": "aiokafka_lite.groups",
    "Mirror": "aiokafka_lite.mirror",
    "Client": "aiokafka_lite.net",
    "Producer": "aiokafka_lite.produce",
    "RecordMetadata": "aiokafka_lite.produce",
    "AcknowledgeType": "aiokafka_lite.share",
    "ShareConsumer": "aiokafka_lite.share",
    "ShareWorkers": "aiokafka_lite.share",
    "TopicPartition": "aiokafka_lite.structs",
    "TransactSession": "aiokafka_lite.transact",
}

__all__ = [
    "AcknowledgeType",
    "Admin",
    "Client",
    "Consumer",
    "EmbeddedCluster",
    "Mirror",
    "NewTopic",
    "OrderedWorkers",
    "Producer",
    "Record",
    "RecordMetadata",
    "ShareConsumer",
    "ShareWorkers",
    "TopicPartition",
    "TransactSession",
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
