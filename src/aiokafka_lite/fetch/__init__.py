"""Consuming: ``Consumer``, fetch sessions, and the subscription state shared with groups."""

from aiokafka_lite.fetch.config import ConsumerConfig
from aiokafka_lite.fetch.consumer import Consumer
from aiokafka_lite.fetch.offsets import OffsetAndTimestamp
from aiokafka_lite.fetch.record import Record, TimestampType
from aiokafka_lite.fetch.subscription import OffsetAndMetadata, SubscriptionState

__all__ = [
    "Consumer",
    "ConsumerConfig",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "Record",
    "SubscriptionState",
    "TimestampType",
]
