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
from typing import Any

from aiokafka_lite.compat.aiokafka import errors as Errors
from aiokafka_lite.compat.aiokafka.partitioner import DefaultPartitioner
from aiokafka_lite.compat.aiokafka.structs import OffsetAndMetadata as CompatOffsetAndMetadata
from aiokafka_lite.compat.aiokafka.structs import RecordMetadata
from aiokafka_lite.consume.subscription import OffsetAndMetadata
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce import Producer
from aiokafka_lite.produce.batch import RecordMetadata as NativeMetadata

__all__ = ["AIOKafkaProducer", "BatchBuilder"]

#: "Not given" for ``acks`` (FastStream imports it to forward the default).
_missing = object()

#: Records the batch builder counts per record besides key and value (v2 record framing).
_RECORD_OVERHEAD = 22
_BATCH_OVERHEAD = 61


def _metadata(md: NativeMetadata) -> RecordMetadata:
    tp = TopicPartition(md.topic, md.partition)
    return RecordMetadata(md.topic, md.partition, tp, md.offset, md.timestamp_ms, 0, None)


def _to_bytes(data: Any) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(
        f"key and value must be bytes (or set key_serializer/value_serializer), not {type(data).__name__}"
    )


class BatchBuilder:
    """Records for one ``send_batch`` call (aiokafka's ``create_batch()``)."""

    def __init__(self, max_size: int) -> None:
        self._max_size = max_size
        self._size = _BATCH_OVERHEAD
        self._closed = False
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list[Any] = []
        self.timestamps: list[int | None] = []

    def append(
        self,
        *,
        timestamp: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]] = (),
    ) -> Any:
        """Add a record; ``None`` when the batch is full (then send it and start another).
        A first record that is too big on its own is still accepted (as aiokafka)."""
        if self._closed:
            return None
        key_b, value_b = _to_bytes(key), _to_bytes(value)
        size = _RECORD_OVERHEAD + len(key_b or b"") + len(value_b or b"")
        size += sum(len(k) + len(v or b"") + 4 for k, v in headers)
        if self.values and self._size + size > self._max_size:
            return None
        self._size += size
        self.keys.append(key_b)
        self.values.append(value_b)
        self.headers.append(list(headers) or None)
        self.timestamps.append(timestamp)
        return _BatchRecordMetadata(size, timestamp or -1, None)

    def close(self) -> None:
        self._closed = True

    def size(self) -> int:
        return self._size

    def record_count(self) -> int:
        return len(self.values)


class _BatchRecordMetadata:
    __slots__ = ("crc", "size", "timestamp")

    def __init__(self, size: int, timestamp: int, crc: int | None) -> None:
        self.size = size
        self.timestamp = timestamp
        self.crc = crc


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
        if sasl_mechanism == "GSSAPI":
            raise Errors.ConfigError("sasl_mechanism GSSAPI (Kerberos) is not supported by aiokafka_lite")
        if client_id is None:
            AIOKafkaProducer._PRODUCER_CLIENT_ID_SEQUENCE += 1
            client_id = f"aiokafka-producer-{AIOKafkaProducer._PRODUCER_CLIENT_ID_SEQUENCE}"
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._max_batch_size = max_batch_size
        self._closed = False
        self._started = False
        self._batch_tasks: set[asyncio.Task[None]] = set()
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
        """Buffer the record (waiting for space or metadata); returns a future of its
        :class:`RecordMetadata`."""
        self._check_open()
        key_b, value_b = self._serialize(key, value)
        fut = await self._producer.enqueue(
            topic,
            value_b,
            key_b,
            partition=partition,
            timestamp_ms=timestamp_ms,
            headers=list(headers) if headers else None,
        )
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
        self._check_open()
        key_b, value_b = self._serialize(key, value)
        md = await self._producer.send(
            topic,
            value_b,
            key_b,
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
        metadata of the batch's first record (aiokafka's batch metadata)."""
        self._check_open()
        batch.close()
        headers = batch.headers if any(h is not None for h in batch.headers) else None
        timestamps = {t for t in batch.timestamps}
        timestamp = timestamps.pop() if len(timestamps) == 1 else None
        result = await self._producer.enqueue_batch(
            topic,
            batch.values,
            keys=batch.keys,
            headers=headers,
            partition=partition,
            timestamp_ms=timestamp,
        )
        done: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()

        async def wait() -> None:
            try:
                await result.wait()
                errors = result.errors()
                if errors:
                    raise errors[0]
                if not done.cancelled():
                    done.set_result(_metadata(result[0]))
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
