"""Processing on top of consumers: worker pools (``OrderedWorkers`` over a consumer group,
``ShareWorkers`` over a share group), what they do when a handler fails, and exactly-once
consume-transform-produce (``TransactSession``)."""

from aiokafka_lite.processing.ordered_workers import OrderedWorkers, WorkerFailedError
from aiokafka_lite.processing.share_workers import ShareWorkers, ShareWorkerStats
from aiokafka_lite.processing.transact import TransactSession

__all__ = [
    "OrderedWorkers",
    "ShareWorkerStats",
    "ShareWorkers",
    "TransactSession",
    "WorkerFailedError",
]
