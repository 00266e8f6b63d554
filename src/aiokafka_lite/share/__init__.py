"""Share groups (KIP-932): many consumers on the same partitions, each record acquired by
one of them and acknowledged on its own (accept, release or reject)."""

from __future__ import annotations

from .acks import AckResult, AcquisitionLockTimeoutError
from .config import ShareConsumerConfig
from .consumer import ShareConsumer
from .record import AcknowledgeType, ShareRecord
from .workers import ShareWorkers, ShareWorkerStats

__all__ = [
    "AckResult",
    "AcknowledgeType",
    "AcquisitionLockTimeoutError",
    "ShareConsumer",
    "ShareConsumerConfig",
    "ShareRecord",
    "ShareWorkerStats",
    "ShareWorkers",
]
