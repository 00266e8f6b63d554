"""Share groups (KIP-932): many consumers on the same partitions, each record acquired by
one of them and acknowledged on its own (accept, release or reject)."""

from __future__ import annotations

from typing import Any

from aiokafka_lite.consume.share.acks import AckResult, AcquisitionLockTimeoutError
from aiokafka_lite.consume.share.record import AcknowledgeType, ShareRecord
from aiokafka_lite.consume.share.share_config import ShareConsumerConfig
from aiokafka_lite.consume.share.share_consumer import ShareConsumer

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


def __getattr__(name: str) -> Any:
    # ShareWorkers lives in processing/ (a pool over a share consumer); ``aiokafka_lite.share``
    # stays its public home. Loaded on use: processing imports this package.
    if name in ("ShareWorkers", "ShareWorkerStats"):
        import importlib

        return getattr(importlib.import_module("aiokafka_lite.processing.share_workers"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
