"""Consumer, fetch sessions and the shared subscription state."""

from aiokafka_lite.fetch.subscription import OffsetAndMetadata, SubscriptionState

__all__ = ["OffsetAndMetadata", "SubscriptionState"]
