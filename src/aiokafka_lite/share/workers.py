"""``ShareWorkers``: N concurrent handlers fed by a share consumer, a job queue on Kafka.

::

    async def handle(record):
        await send_email(record.value)

    async with ShareConsumer(bootstrap, group_id="mail", topics=["mail"],
                             acknowledgement_mode="explicit") as consumer, Producer(bootstrap) as producer:
        workers = ShareWorkers(consumer, handle, concurrency=16, max_attempts=5,
                               dead_letter_topic="mail.dlt", producer=producer)
        await workers.run()      # until workers.stop()

Unlike ``OrderedWorkers`` there is no per-partition order: a share group hands each
record to one member under a lock and takes its fate record by record, so any worker
takes any record.

* a handler that returns accepts its record (ACCEPT);
* a handler that raises releases it (RELEASE: the broker delivers it again, to any
  member, with ``delivery_count`` + 1), until the record has been delivered
  ``max_attempts`` times: then it is rejected (REJECT: never delivered again), after
  being copied to ``dead_letter_topic`` when one is given, with the error and its
  origin in headers (``dlt.error``, ``dlt.error.type``, ``dlt.topic``,
  ``dlt.partition``, ``dlt.offset``, ``dlt.delivery.count``). A failing copy releases
  the record instead, so nothing is rejected without its dead letter;
* at most ``max_in_flight`` records are held (polled, not yet acknowledged): the
  bound of the backpressure and of the records whose locks run while they wait.

The broker's own limit (``share.delivery.count.limit``, 5 by default) still applies:
with ``max_attempts`` above it the broker archives the record first, without a dead
letter. The consumer must use ``acknowledgement_mode="explicit"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aiokafka_lite.errors import ConfigError, KafkaError
from aiokafka_lite.otel import _active as _otel

from .consumer import ShareConsumer
from .record import AcknowledgeType, ShareRecord

__all__ = ["ShareWorkerStats", "ShareWorkers"]

log = logging.getLogger(__name__)

Handler = Callable[[ShareRecord], Awaitable[Any]]


class _Producer(Protocol):
    async def send(self, topic: str, value: Any = None, key: Any = None, *, headers: Any = None) -> Any: ...


@dataclass
class ShareWorkerStats:
    accepted: int = 0
    released: int = 0
    rejected: int = 0
    dead_lettered: int = 0


class ShareWorkers:
    """Runs ``handler`` on a share consumer's records with ``concurrency`` workers."""

    def __init__(
        self,
        consumer: ShareConsumer,
        handler: Handler,
        *,
        concurrency: int = 8,
        max_in_flight: int | None = None,
        max_attempts: int | None = None,
        dead_letter_topic: str | None = None,
        producer: _Producer | None = None,
        poll_timeout_ms: float = 500,
    ) -> None:
        if not consumer.config.explicit:
            raise ConfigError(
                "ShareWorkers needs a consumer with acknowledgement_mode='explicit' "
                "(each record is acknowledged when its handler finishes)"
            )
        if concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1, got {concurrency}")
        in_flight = 2 * concurrency if max_in_flight is None else max_in_flight
        if in_flight < concurrency:
            raise ConfigError(f"max_in_flight ({in_flight}) must be >= concurrency ({concurrency})")
        if max_attempts is not None and max_attempts < 1:
            raise ConfigError(f"max_attempts must be >= 1, got {max_attempts}")
        if (dead_letter_topic is None) != (producer is None):
            raise ConfigError(
                "dead_letter_topic and producer go together: the producer writes the dead letters"
            )
        self.consumer = consumer
        self.handler = handler
        self.concurrency = concurrency
        self.max_in_flight = in_flight
        self.max_attempts = max_attempts
        self.dead_letter_topic = dead_letter_topic
        self.producer = producer
        self.poll_timeout_ms = poll_timeout_ms
        self.stats = ShareWorkerStats()
        self._queue: asyncio.Queue[ShareRecord] = asyncio.Queue()
        self._held = 0  # polled and not acknowledged yet
        self._room = asyncio.Event()
        self._stopping = False

    @property
    def in_flight(self) -> int:
        return self._held

    def stop(self) -> None:
        """Stop polling; ``run`` returns once the records held are finished."""
        self._stopping = True
        self._room.set()

    async def run(self) -> None:
        """Poll and process until ``stop()``; in-flight records finish before it returns."""
        workers = [
            asyncio.create_task(self._worker(), name=f"share-worker-{i}") for i in range(self.concurrency)
        ]
        try:
            await self._feed()
            await self._queue.join()
        finally:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _feed(self) -> None:
        while not self._stopping:
            free = self.max_in_flight - self._held
            if free <= 0:
                self._room.clear()
                await self._room.wait()
                continue
            records = await self.consumer._poll(free, self.poll_timeout_ms, check_acknowledged=False)
            self._held += len(records)
            for record in records:
                self._queue.put_nowait(record)

    async def _worker(self) -> None:
        while True:
            record = await self._queue.get()
            try:
                await self._process(record)
            finally:
                self._held -= 1
                self._room.set()
                self._queue.task_done()

    async def _process(self, record: ShareRecord) -> None:
        try:
            if _otel.enabled:  # the handler runs in the record's process span (its trace)
                await _otel.in_process_span(self.consumer, record, lambda: self.handler(record))
            else:
                await self.handler(record)
        except asyncio.CancelledError:
            self._ack(record, AcknowledgeType.RELEASE)
            raise
        except Exception as exc:
            if self.max_attempts is not None and record.delivery_count >= self.max_attempts:
                if await self._dead_letter(record, exc):
                    self._ack(record, AcknowledgeType.REJECT)
                    return
            else:
                log.info(
                    "handler failed on %s-%d@%d (delivery %d), released: %r",
                    record.topic,
                    record.partition,
                    record.offset,
                    record.delivery_count,
                    exc,
                )
            self._ack(record, AcknowledgeType.RELEASE)
            return
        self._ack(record, AcknowledgeType.ACCEPT)

    async def _dead_letter(self, record: ShareRecord, exc: Exception) -> bool:
        """Copy a record that used up its attempts; False when the copy failed."""
        if self.producer is None or self.dead_letter_topic is None:
            log.warning(
                "rejecting %s-%d@%d after %d deliveries: %r",
                record.topic,
                record.partition,
                record.offset,
                record.delivery_count,
                exc,
            )
            return True
        headers = [
            *record.headers,
            ("dlt.error", str(exc).encode()),
            ("dlt.error.type", type(exc).__qualname__.encode()),
            ("dlt.topic", record.topic.encode()),
            ("dlt.partition", str(record.partition).encode()),
            ("dlt.offset", str(record.offset).encode()),
            ("dlt.delivery.count", str(record.delivery_count).encode()),
        ]
        try:
            await self.producer.send(self.dead_letter_topic, record.value, record.key, headers=headers)
        except KafkaError as send_exc:
            log.error(
                "dead letter for %s-%d@%d failed, released: %s",
                record.topic,
                record.partition,
                record.offset,
                send_exc,
            )
            return False
        self.stats.dead_lettered += 1
        return True

    def _ack(self, record: ShareRecord, kind: AcknowledgeType) -> None:
        with contextlib.suppress(KafkaError):  # closed consumer: the lock expires instead
            self.consumer.acknowledge(record, kind)
            if kind == AcknowledgeType.ACCEPT:
                self.stats.accepted += 1
            elif kind == AcknowledgeType.RELEASE:
                self.stats.released += 1
            else:
                self.stats.rejected += 1
