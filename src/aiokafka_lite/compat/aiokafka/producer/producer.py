"""``AIOKafkaProducer``: aiokafka's producer API mapped onto :class:`aiokafka_lite.Producer`.

Thin: options are renamed (``max_batch_size`` -> ``batch_size``, ``compression_type`` ->
``compression``), aiokafka's defaults are applied (``linger_ms=0``, ``acks=1`` unless
idempotence or a transactional id asks for ``all``, idempotence off, ``request_timeout_ms
=40000``), keys and values are serialized here (so ``create_batch`` records and
``send`` records reach the native producer as bytes, on its fast path), and results are
turned into aiokafka's :class:`~aiokafka_lite.compat.aiokafka.structs.RecordMetadata`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, NamedTuple

from aiokafka_lite.compat.aiokafka import errors as Errors
from aiokafka_lite.compat.aiokafka.partitioner import DefaultPartitioner
from aiokafka_lite.compat.aiokafka.structs import OffsetAndMetadata as CompatOffsetAndMetadata
from aiokafka_lite.compat.aiokafka.structs import RecordMetadata
from aiokafka_lite.consume.subscription import OffsetAndMetadata
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce import Producer
from aiokafka_lite.produce.batch import BatchResult, RecordFuture
from aiokafka_lite.produce.batch import RecordMetadata as NativeMetadata

__all__ = ["AIOKafkaProducer", "BatchBuilder", "BatchRecordMetadata"]

#: "Not given" for ``acks`` (FastStream imports it to forward the default).
_missing = object()

#: Records the batch builder counts per record besides key and value (v2 record framing).
_RECORD_OVERHEAD = 22
_BATCH_OVERHEAD = 61


_new_tuple = tuple.__new__


def _metadata(md: NativeMetadata, log_append_time: bool = False) -> RecordMetadata:
    topic, partition, offset, timestamp = md
    tp = _new_tuple(TopicPartition, (topic, partition))
    # aiokafka's timestamp_type: 0 create time, 1 the broker's LogAppendTime
    return _new_tuple(RecordMetadata, (topic, partition, tp, offset, timestamp, int(log_append_time), None))


class _RecordFuture(RecordFuture):
    """The native producer's per-record handle (a view of the record in its batch),
    relabelled so that ``result()`` gives aiokafka's :class:`RecordMetadata`."""

    __slots__ = ()

    def result(self) -> RecordMetadata:  # type: ignore[override]
        batch = self._batch
        if batch.is_done and batch.error is None and batch.children is None and not self._cancelled:
            # Delivered (gather reads every record's): built from the batch at once, as
            # the native handle's result() does, with the batch's own TopicPartition.
            index = self._index
            base = batch.base_offset
            lat = batch.log_append_time
            tp = batch.tp
            return _new_tuple(
                RecordMetadata,
                (
                    tp.topic,
                    tp.partition,
                    tp,
                    base + index if base >= 0 else -1,
                    lat if lat >= 0 else batch.timestamps[index],
                    1 if lat >= 0 else 0,
                    None,
                ),
            )
        return _metadata(RecordFuture.result(self), batch.log_append_time >= 0)


def _resolve_one(result: asyncio.Future[RecordMetadata], handle: Any) -> None:
    if result.done():
        return
    exc = handle.exception()
    if exc is None:
        result.set_result(handle.result())
    else:
        result.set_exception(exc)


def _to_bytes(data: Any) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(
        f"key and value must be bytes (or set key_serializer/value_serializer), not {type(data).__name__}"
    )


class BatchRecordMetadata(NamedTuple):
    """What ``BatchBuilder.append`` returns (aiokafka's ``DefaultRecordMetadata``): the
    record's index in the batch, its size in bytes and its timestamp (-1: none given)."""

    offset: int
    size: int
    timestamp: int

    @property
    def crc(self) -> None:
        return None


class BatchBuilder:
    """Records for one ``send_batch`` call (aiokafka's ``create_batch()``).

    Values are kept in a list, and keys, headers and timestamps only once a record has
    one (most batches have none): ``send_batch`` hands the lists to the native
    producer's ``enqueue_batch`` as they are."""

    def __init__(self, max_size: int) -> None:
        self._max_size = max_size
        self._size = _BATCH_OVERHEAD
        self._closed = False
        self.values: list[bytes | None] = []
        #: None while every key is None (then filled in with the Nones before it).
        self.keys: list[bytes | None] | None = None
        self.headers: list[list[tuple[str, bytes]] | None] | None = None
        #: The records' timestamp while they all have the same one.
        self.timestamp: int | None = None
        #: Every record's timestamp, once they differ.
        self.timestamps: list[int | None] | None = None

    def append(
        self,
        *,
        timestamp: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]] = (),
    ) -> BatchRecordMetadata | None:
        """Add a record; ``None`` when the batch is full (then send it and start another).
        A first record that is too big on its own is still accepted (as aiokafka)."""
        if self._closed:
            return None
        values = self.values
        if key is None and not headers and type(value) is bytes:  # the common record
            size = _RECORD_OVERHEAD + len(value)
        else:
            key, value = _to_bytes(key), _to_bytes(value)
            size = (
                _RECORD_OVERHEAD
                + (len(key) if key is not None else 0)
                + (len(value) if value is not None else 0)
            )
            if headers:
                size += sum(len(k) + len(v or b"") + 4 for k, v in headers)
        if self._size + size > self._max_size and values:
            return None
        count = len(values)
        if key is not None or self.keys is not None:
            if self.keys is None:
                self.keys = [None] * count
            self.keys.append(key)
        if headers or self.headers is not None:
            if self.headers is None:
                self.headers = [None] * count
            self.headers.append(list(headers) if headers else None)
        if self.timestamps is not None:
            self.timestamps.append(timestamp)
        elif timestamp != self.timestamp:
            if count == 0:
                self.timestamp = timestamp
            else:
                self.timestamps = [self.timestamp] * count
                self.timestamps.append(timestamp)
        self._size += size
        values.append(value)
        return _new_tuple(BatchRecordMetadata, (count, size, -1 if timestamp is None else timestamp))

    def close(self) -> None:
        self._closed = True

    def size(self) -> int:
        return self._size

    def record_count(self) -> int:
        return len(self.values)


def _partitioner(partitioner: Any) -> Any:
    if partitioner is None or isinstance(partitioner, DefaultPartitioner):
        return "default"
    if not callable(partitioner):
        raise Errors.ConfigError("partitioner must be callable (key, all_partitions, available)")
    custom: Callable[[bytes | None, list[int], list[int]], int] = partitioner

    def native(_topic: str, key: bytes | None, count: int) -> int:
        parts = list(range(count))
        return custom(key, parts, parts)

    return native


class AIOKafkaProducer:
    """aiokafka's producer on the native :class:`aiokafka_lite.Producer`."""

    _PRODUCER_CLIENT_ID_SEQUENCE = 0

    def __init__(
        self,
        *,
        loop: Any = None,
        bootstrap_servers: str | list[str] = "localhost",
        client_id: str | None = None,
        metadata_max_age_ms: int = 300000,
        request_timeout_ms: int = 40000,
        api_version: Any = None,
        acks: Any = _missing,
        key_serializer: Callable[[Any], bytes] | None = None,
        value_serializer: Callable[[Any], bytes] | None = None,
        compression_type: str | None = None,
        max_batch_size: int = 16384,
        partitioner: Any = None,
        max_request_size: int = 1048576,
        linger_ms: int = 0,
        retry_backoff_ms: int = 100,
        security_protocol: str = "PLAINTEXT",
        ssl_context: Any = None,
        connections_max_idle_ms: int = 540000,
        enable_idempotence: bool = False,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
        sasl_mechanism: str = "PLAIN",
        sasl_plain_password: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_kerberos_service_name: str = "kafka",
        sasl_kerberos_domain_name: str | None = None,
        sasl_oauth_token_provider: Any = None,
    ) -> None:
        if transactional_id is not None:
            enable_idempotence = True
        if acks is _missing:
            acks = "all" if enable_idempotence else 1
        elif enable_idempotence and acks not in ("all", -1):
            raise Errors.ConfigError('enable_idempotence (or transactional_id) needs acks="all"')
        if client_id is None:
            AIOKafkaProducer._PRODUCER_CLIENT_ID_SEQUENCE += 1
            client_id = f"aiokafka-producer-{AIOKafkaProducer._PRODUCER_CLIENT_ID_SEQUENCE}"
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        #: No serializers: bytes keys and values go to the native producer as they are.
        self._plain = key_serializer is None and value_serializer is None
        self._max_batch_size = max_batch_size
        self._closed = False
        self._started = False
        self._batch_tasks: set[asyncio.Task[None]] = set()
        #: Native batch -> [future, handle, future, handle, ...] of its records sent by send()
        self._pending: dict[object, list[Any]] = {}
        options: dict[str, Any] = {
            "client_id": client_id,
            "metadata_max_age_ms": metadata_max_age_ms,
            "request_timeout_ms": request_timeout_ms,
            "acks": acks,
            "compression": compression_type or "none",
            "batch_size": max_batch_size,
            "partitioner": _partitioner(partitioner),
            "max_request_size": max_request_size,
            "linger_ms": linger_ms,
            "retry_backoff_ms": retry_backoff_ms,
            "security_protocol": security_protocol,
            "ssl_context": ssl_context,
            "connections_max_idle_ms": connections_max_idle_ms,
            "enable_idempotence": enable_idempotence,
            "transactional_id": transactional_id,
            "transaction_timeout_ms": transaction_timeout_ms,
            "sasl_mechanism": sasl_mechanism,
            "sasl_plain_username": sasl_plain_username,
            "sasl_plain_password": sasl_plain_password,
            "sasl_oauth_token_provider": sasl_oauth_token_provider,
            # GSSAPI: the ticket cache (kinit), as aiokafka; the native options add a keytab
            "sasl_kerberos_service_name": sasl_kerberos_service_name,
            "sasl_kerberos_domain_name": sasl_kerberos_domain_name,
        }
        # delivery_timeout_ms must cover linger + request timeout (Java's rule; aiokafka has none)
        options["delivery_timeout_ms"] = max(120000, linger_ms + request_timeout_ms)
        self._producer = Producer(bootstrap_servers, **options)

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        await self._producer.start()
        self._started = True

    async def stop(self) -> None:
        """Flush what is buffered and close (idempotent)."""
        if self._closed:
            return
        self._closed = True
        await self._producer.close()

    async def __aenter__(self) -> AIOKafkaProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def flush(self) -> None:
        await self._producer.flush()

    async def partitions_for(self, topic: str) -> set[int]:
        return set(await self._producer.partitions_for(topic))

    @property
    def client(self) -> Any:
        return self._producer.client

    # -- sending ---------------------------------------------------------------------------
    def _serialize(self, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
        if self._key_serializer is not None:
            key = self._key_serializer(key)
        if self._value_serializer is not None:
            value = self._value_serializer(value)
        return _to_bytes(key), _to_bytes(value)

    def _check_open(self) -> None:
        if self._closed:
            raise Errors.ProducerClosed("producer is stopped")

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Iterable[tuple[str, bytes]] | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Buffer the record (waiting for space or metadata); returns an
        ``asyncio.Future`` of its :class:`RecordMetadata`."""
        if self._closed:
            raise Errors.ProducerClosed("producer is stopped")
        if self._plain and type(value) is bytes and (key is None or type(key) is bytes):
            pass  # already what the native producer takes: its fast path
        else:
            key, value = self._serialize(key, value)
        fut = await self._producer.enqueue(
            topic,
            value,
            key,
            partition=partition,
            timestamp_ms=timestamp_ms,
            headers=list(headers) if headers else None,
        )
        if type(fut) is not RecordFuture:
            return self._wrap(fut)
        # aiokafka's send() gives an asyncio.Future (FastStream checks it). One per record,
        # resolved with the others of its batch by one callback on the batch (not one
        # callback per record on the native handle).
        fut.__class__ = _RecordFuture  # same layout: a relabelled handle, not a copy
        result: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        batch = fut._batch
        group = self._pending.get(batch)
        if group is None:
            group = self._pending[batch] = []
            fut.add_done_callback(partial(self._resolve_batch, batch))
        group += (result, fut)
        return result

    def _resolve_batch(self, batch: object, _first: object) -> None:
        """The batch of these records is complete: resolve their futures."""
        group = self._pending.pop(batch)
        native: Any = batch
        if native.is_done and native.error is None and native.children is None:  # delivered whole
            for i in range(0, len(group), 2):
                result = group[i]
                if not result.done():
                    result.set_result(group[i + 1].result())
            return
        for i in range(0, len(group), 2):
            result = group[i]
            if result.done():
                continue  # cancelled by its caller (the record is sent all the same)
            handle = group[i + 1]
            if not handle.done():  # a part of a split batch still in flight
                handle.add_done_callback(partial(_resolve_one, result))
                continue
            exc = handle.exception()
            if exc is None:
                result.set_result(handle.result())
            else:
                result.set_exception(exc)

    @staticmethod
    def _wrap(fut: Any) -> asyncio.Future[RecordMetadata]:
        """An ``asyncio.Future`` of aiokafka's metadata for any other awaitable handle
        (a traced send's)."""
        result: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()

        def resolve(done: Any) -> None:
            if result.cancelled():
                return
            exc = done.exception()
            if exc is not None:
                result.set_exception(exc)
            else:
                result.set_result(_metadata(done.result()))

        fut.add_done_callback(resolve)
        return result

    async def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Iterable[tuple[str, bytes]] | None = None,
    ) -> RecordMetadata:
        if self._closed:
            raise Errors.ProducerClosed("producer is stopped")
        if not (self._plain and type(value) is bytes and (key is None or type(key) is bytes)):
            key, value = self._serialize(key, value)
        md = await self._producer.send(
            topic,
            value,
            key,
            partition=partition,
            timestamp_ms=timestamp_ms,
            headers=list(headers) if headers else None,
        )
        return _metadata(md)

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(self._max_batch_size)

    async def send_batch(
        self, batch: BatchBuilder, topic: str, *, partition: int
    ) -> asyncio.Future[RecordMetadata]:
        """Send the records of ``batch`` to ``topic``/``partition``; returns a future of the
        metadata of the batch's first record (aiokafka's batch metadata), set once every
        record of the batch is acknowledged."""
        if self._closed:
            raise Errors.ProducerClosed("producer is stopped")
        batch.close()
        if batch.timestamps is None:
            result: Any = await self._producer.enqueue_batch(
                topic,
                batch.values,
                keys=batch.keys,
                headers=batch.headers,
                partition=partition,
                timestamp_ms=batch.timestamp,
            )
        else:  # one timestamp per record: the native batch call takes one for all
            keys = batch.keys or [None] * len(batch.values)
            headers = batch.headers or [None] * len(batch.values)
            futures = [
                await self._producer.enqueue(topic, v, k, partition=partition, timestamp_ms=t, headers=h)
                for v, k, h, t in zip(batch.values, keys, headers, batch.timestamps, strict=True)
            ]
            result = asyncio.gather(*futures)
        done: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()

        async def wait() -> None:
            try:
                records = await result
                if isinstance(records, BatchResult):
                    errors = records.errors()
                    if errors:
                        raise errors[0]
                if not done.cancelled():
                    done.set_result(_metadata(records[0]))
            except Exception as exc:
                if not done.cancelled():
                    done.set_exception(exc)

        task = asyncio.get_running_loop().create_task(wait())
        self._batch_tasks.add(task)
        task.add_done_callback(self._batch_tasks.discard)
        return done

    # -- transactions ----------------------------------------------------------------------
    async def begin_transaction(self) -> None:
        await self._producer.begin_transaction()

    async def commit_transaction(self) -> None:
        await self._producer.commit_transaction()

    async def abort_transaction(self) -> None:
        await self._producer.abort_transaction()

    def transaction(self) -> Any:
        return self._producer.transaction()

    async def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, Any], group_id: str) -> None:
        native: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if isinstance(om, CompatOffsetAndMetadata) or isinstance(om, tuple):
                native[tp] = OffsetAndMetadata(om[0], om[1] or "")
            elif isinstance(om, OffsetAndMetadata):
                native[tp] = om
            elif isinstance(om, int) and not isinstance(om, bool):
                native[tp] = OffsetAndMetadata(om)
            else:
                raise ValueError(f"offset for {tp} must be an int or OffsetAndMetadata, not {om!r}")
        await self._producer.send_offsets_to_transaction(native, group_id)
