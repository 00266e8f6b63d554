"""aiokafka's ``abc`` module: the rebalance listener and token provider base classes.

Our consumer calls ``on_partitions_revoked``/``on_partitions_assigned`` (sync or async)
on any listener object, and our SASL/OAUTHBEARER code calls ``token()`` on the token
provider, so these are plain base classes with aiokafka's method names.
"""

from __future__ import annotations

import abc
from typing import Any

from aiokafka_lite.core.structs import TopicPartition

__all__ = ["AbstractTokenProvider", "ConsumerRebalanceListener"]


class ConsumerRebalanceListener(abc.ABC):  # noqa: B024 - aiokafka's base is abstract too
    """Subclass and pass to ``AIOKafkaConsumer.subscribe(..., listener=...)``."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Any:  # noqa: B027
        """Called before partitions are given up (commit here)."""

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Any:  # noqa: B027
        """Called after a rebalance with the partitions assigned to this member."""


class AbstractTokenProvider(abc.ABC):
    """OAUTHBEARER token source: ``async def token(self) -> str``."""

    def __init__(self, **config: Any) -> None:
        self.config = config

    @abc.abstractmethod
    async def token(self) -> str:
        """The bearer token (an unsecured JWT or an opaque token)."""

    def extensions(self) -> dict[str, str]:
        """SASL extensions sent with the token (KIP-342)."""
        return {}
