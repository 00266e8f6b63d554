"""Consuming records: the ``Consumer``, the subscription state below fetch and groups,
and the fetch, group and share-group machinery (``fetch``, ``groups``, ``share``)."""

from aiokafka_lite.consume.consumer import Consumer
from aiokafka_lite.consume.consumer_config import ConsumerConfig
from aiokafka_lite.consume.fetch.offset_lookup import OffsetAndTimestamp
from aiokafka_lite.consume.record import Record, TimestampType
from aiokafka_lite.consume.subscription import OffsetAndMetadata, SubscriptionState

__all__ = [
    "Consumer",
    "ConsumerConfig",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "Record",
    "SubscriptionState",
    "TimestampType",
]
