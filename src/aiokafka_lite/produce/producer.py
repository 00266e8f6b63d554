"""The asyncio producer: the public API over the accumulator and the sender task.

Appending a record is synchronous Python on the fast path (topic known, room in the
partition's open batch or buffer memory free): no task, no future, no await that
suspends. ``send`` then waits on the batch; ``enqueue`` returns a ``RecordFuture``
(a ``(batch, index)`` handle). Only an unknown topic or a full buffer takes the slow
path, which waits up to ``max_block_ms``. ``send_batch``/``enqueue_batch`` append
keyless records straight into the batch builder, one C call per record.

Semantics follow the Java producer; the deliberate differences:

* Until a partition's first batch under a producer id/epoch is acknowledged, it is the
  only one in flight for that partition (see ``sequencing``): a broker without state
  for the producer accepts any first sequence, which could otherwise leave a silent gap.
* The uniform sticky partitioner is credited with the bytes of each *closed* batch of
  its current partition (full, or drained by linger), not record by record; with mixed
  keyed and keyless traffic on that partition, keyed bytes count too.
* ``metadata.max.idle.ms`` is not implemented (topics stay in the metadata the
  client refreshes for as long as the producer lives).
* A batch is compressed when it is full (or when drained), not while appending; the
  compression ratio estimate sizes later batches so they stay near ``batch_size`` on the
  wire. ``buffer_memory`` counts each open batch's (uncompressed) size limit.
* Serializers that see their context (``serialize(data, ctx)``: topic, key or value, the headers
  as a list they may append to; see ``core/serialization``) run on the async side of ``send``,
  ``enqueue`` and ``enqueue_batch``/``send_batch`` (record by record), before the synchronous
  append: when one needs I/O (a schema registry lookup not cached yet) its ``serialize_async`` is
  awaited there, so the event loop never blocks. Plain ``Callable[[Any], bytes]`` serializers
  keep their path unchanged; which kind a serializer is is decided once, in ``__init__``.
* Python ``asyncio`` has one thread: a tight loop of ``enqueue`` without awaits that
  suspend does not let the sender run until buffer memory runs out (then it does).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final

from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.core import tracing_hook as _otel
from aiokafka_lite.core.client_metrics import track
from aiokafka_lite.core.health import Health, build_health
from aiokafka_lite.core.serialization import (
    ContextCall,
    MessageField,
    SerializationContext,
    context_serializer,
    plain_call,
)
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client, ClientConfig
from aiokafka_lite.net.telemetry import TelemetryReporter, start_reporter
from aiokafka_lite.produce.accumulator import (
    BATCH_OVERHEAD,
    RECORD_OVERHEAD,
    RUN_END,
    BufferPool,
    Bytes,
    Headers,
    PartitionQueue,
    RecordAccumulator,
)
from aiokafka_lite.produce.batch import (
    BatchResult,
    DeliveryFailedError,
    ProducerBatch,
    RecordFuture,
    RecordMetadata,
    SendWakeup,
    distinct_batches,
    has_failures,
    new_handle,
    record_failures,
)
from aiokafka_lite.produce.partitioner import group_by_key_partition, key_partition
from aiokafka_lite.produce.producer_config import ProducerConfig
from aiokafka_lite.produce.sender import Sender, _now_ms
from aiokafka_lite.produce.sequencing import IdempotenceManager
from aiokafka_lite.produce.topics import TopicRegistry, TopicState
from aiokafka_lite.produce.transaction import (
    GroupMetadataLike,
    TransactionContext,
    TransactionManager,
    Transactions,
    TxnState,
    check_config,
)

__all__ = ["Producer"]

log = logging.getLogger("aiokafka_lite.producer")


_SHARED_OPTIONS: Final = frozenset(
    {
        "request_timeout_ms",
        "retry_backoff_ms",
        "retry_backoff_max_ms",
        "max_in_flight_requests_per_connection",
    }
)
_BYTES_TYPES: Final = (bytes, bytearray, memoryview)


_time = time.time
_new_handle = new_handle
#: A producer loop that never suspends yields to the sender after this many full batches.
_YIELD_EVERY_FULL_BATCHES: Final = 8


def _bulk_timestamp(timestamp_ms: int | None) -> int:
    """The timestamp of a bulk append's records: ``timestamp_ms`` checked, or now."""
    if timestamp_ms is None:
        return int(_time() * 1000)
    if type(timestamp_ms) is not int or timestamp_ms < 0:
        raise E.InvalidTimestampError(f"timestamp_ms must be a non-negative int, got {timestamp_ms!r}")
    return timestamp_ms


class Producer:
    """Asyncio Kafka producer.

    ::

        async with Producer("127.0.0.1:9092", acks="all", linger_ms=5, compression="lz4") as p:
            md = await p.send("events", b"value", key=b"k", headers=[("h", b"v")])
            fut = await p.enqueue("events", b"value")   # waits only for buffer space
            await p.flush()

    Options are :class:`ProducerConfig` fields plus, when the producer creates its own
    client, :class:`~aiokafka_lite.net.ClientConfig` fields. Pass ``client=`` to share a
    started or unstarted ``Client`` (the producer then does not close it).
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        client: Client | None = None,
        config: ProducerConfig | None = None,
        **options: Any,
    ) -> None:
        producer_names = set(ProducerConfig.option_names())
        client_names = set(ClientConfig.option_names())
        p_opts = {k: v for k, v in options.items() if k in producer_names}
        c_opts = {
            k: v
            for k, v in options.items()
            if k in client_names and (k not in producer_names or k in _SHARED_OPTIONS)
        }
        unknown = [k for k in options if k not in producer_names and k not in client_names]
        if unknown:
            ProducerConfig.from_options(**{k: options[k] for k in unknown})  # raises with suggestions
        self.config = (
            config.replace(**p_opts) if config is not None else ProducerConfig.from_options(**p_opts)
        )
        if client is not None:
            extra = [k for k in c_opts if k not in _SHARED_OPTIONS]
            if extra:
                raise E.ConfigError(
                    f"client options {extra} cannot be used with client=; configure the Client"
                )
            self._client = client
            self._own_client = False
        else:
            if bootstrap_servers is None:
                raise E.ConfigError("bootstrap_servers is required unless client= is given")
            for name in _SHARED_OPTIONS:
                c_opts.setdefault(name, getattr(self.config, name))
            self._client = Client(bootstrap_servers, **c_opts)
            self._own_client = True
        self._client_bootstrap = bootstrap_servers or ""
        cfg = self.config
        check_config(cfg)
        self._idempotent = cfg.idempotent or cfg.transactional_id is not None
        self._pool = BufferPool(cfg.buffer_memory)
        self._acc = RecordAccumulator(
            batch_size=cfg.batch_size,
            linger_ms=cfg.linger_ms,
            delivery_timeout_ms=cfg.delivery_timeout_ms,
            compression=cfg.codec,
            compression_level=cfg.compression_level,
            max_request_size=cfg.max_request_size,
            pool=self._pool,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
            transactional=cfg.transactional_id is not None,
        )
        self._topics = TopicRegistry(
            self._acc,
            partitioner=cfg.partitioner if isinstance(cfg.partitioner, str) else "custom",
            sticky_bytes=cfg.batch_size,
        )
        self._idem: IdempotenceManager | None
        if cfg.transactional_id is not None:  # transactions: see transaction.py
            self._idem = TransactionManager(cfg.transactional_id, cfg.transaction_timeout_ms)
        else:
            self._idem = IdempotenceManager() if self._idempotent else None
        if self._idem is not None:
            self._acc.on_batch_created = self._idem.on_batch_created
        self._sender = self._new_sender()
        self._custom_partitioner = None if isinstance(cfg.partitioner, str) else cfg.partitioner
        self._keyed = cfg.partitioner == "default" and not cfg.partitioner_ignore_keys
        self._key_serializer: Any = cfg.key_serializer
        self._value_serializer: Any = cfg.value_serializer
        key_ctx = context_serializer(cfg.key_serializer)
        value_ctx = context_serializer(cfg.value_serializer)
        #: A serializer sees its context: keys and values (plain serializers too) are serialized
        #: by _serialize_in_context before the append, which then only checks bytes.
        self._contextual = key_ctx is not None or value_ctx is not None
        self._key_ctx: ContextCall | None = None
        self._value_ctx: ContextCall | None = None
        if self._contextual:
            self._key_ctx = key_ctx or plain_call(cfg.key_serializer)
            self._value_ctx = value_ctx or plain_call(cfg.value_serializer)
            self._key_serializer = self._value_serializer = None
        self._max_record = min(cfg.max_request_size, cfg.buffer_memory)
        #: Largest record-size bound the fast path accepts without the detailed check.
        self._max_plain = self._max_record - BATCH_OVERHEAD
        #: No serializers: bytes keys/values go straight to the batch builder.
        self._plain = cfg.key_serializer is None and cfg.value_serializer is None
        self._linger_zero = cfg.linger_ms == 0
        self._full_since_yield = 0
        self._started = False
        self._closed = False
        #: Closed, or the sender hit a fatal error: new records are refused.
        self._refused = False
        self._txn: Transactions | None = None
        if isinstance(self._idem, TransactionManager):
            self._txn = Transactions(
                lambda: self._client,
                self._idem,
                cfg,
                wake_sender=lambda: self._sender.wake(),
                flush=self.flush,
                on_state_change=self._update_refused,
            )
            self._refused = True  # records are accepted inside a transaction only
        #: Topic states by name (the registry's dict, aliased for the fast path).
        self._states = self._topics.topics
        self._close_task: asyncio.Task[None] | None = None
        self._start_task: asyncio.Task[None] | None = None
        #: Tracing of this producer's own tracer_provider (else aiokafka_lite.integrations.otel's global one).
        self._tracing = _otel.client_tracing(cfg.tracer_provider)
        track(self)

    def _new_sender(self) -> Sender:
        sender = Sender(
            self._client,
            self.config,
            self._acc,
            self._topics,
            self._idem,
            transactional_id=self.config.transactional_id,
        )
        sender.on_fatal = self._on_fatal
        if isinstance(self._idem, TransactionManager):
            sender.on_batch_failed = self._idem.on_batch_failed
        return sender

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect (own client) and start the sender. Idempotent; concurrent calls share
        one start. On failure an own client is closed again and the error raised."""
        if self._closed:
            raise E.ProducerClosedError("producer is closed")
        if self._started:
            return
        if _backend.structured():
            await self._start_structured()
            return
        if self._start_task is None:
            self._start_task = asyncio.get_running_loop().create_task(self._start())
        try:
            await asyncio.shield(self._start_task)
        except BaseException:
            if self._start_task.done():
                self._start_task = None  # a failed start may be retried
            raise

    async def _start(self) -> None:
        if not self._own_client and self._client.closed:
            raise E.ClosedError("the shared client is closed")
        try:
            await self._client.start()
        except BaseException:
            if self._own_client:
                await self._client.close()
                self._client = Client(self._client_bootstrap, config=self._client.config)
                self._sender = self._new_sender()
            raise
        self._sender.start()
        self._started = True
        if self.config.enable_metrics_push:  # KIP-714: the producer's lifetime owns the push task
            self._telemetry = start_reporter(self._client, "producer", self.metrics)
        if self._txn is not None:
            # InitProducerId: fences older instances with our transactional id (aborting
            # their open transaction). A producer that cannot initialize is closed.
            try:
                await self._txn.init()
            except BaseException:
                await self.close(flush=False)
                raise

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Leaving the block because of an error (or cancellation) still flushes, bounded
        # by delivery_timeout_ms; use abort() for an immediate stop.
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def client(self) -> Client:
        return self._client

    async def flush(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 - Java-style API
        """Send everything buffered now and wait until each of those records is delivered
        or failed (delivery errors go to the records' own results, not here).

        ``timeout`` in seconds; ``KafkaTimeoutError`` when it passes first.
        """
        self._check_started()
        batches = list(self._acc.incomplete)
        if not batches:
            return
        acc = self._acc
        acc.flushing += 1
        self._sender.wake()
        try:
            async with _backend.timeout(timeout):
                for batch in batches:
                    if not batch.is_done:
                        await batch.waiter()
        except TimeoutError:
            pending = sum(1 for b in batches if not b.is_done)
            raise E.KafkaTimeoutError(
                f"flush timed out after {timeout} s with {pending} batch(es) pending"
            ) from None
        finally:
            acc.flushing -= 1

    async def wait_all(
        self,
        futures: Iterable[RecordFuture],
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - like flush()
    ) -> None:
        """Wait until every record behind ``futures`` (from ``enqueue``) is delivered or
        failed; raise :class:`DeliveryFailedError` (an ``ExceptionGroup``) naming the
        records that failed, their topic, partition and error.

        The bulk form of ``asyncio.gather(*futures)``: it waits per batch, not per
        record, and builds no ``RecordMetadata`` (``future.result()`` has it afterwards).
        It does not hurry sending (records still linger up to ``linger_ms``; ``flush()``
        sends at once). Cancelling one of the handles does not matter here: the records
        are waited for. ``timeout`` in seconds: ``KafkaTimeoutError`` if it passes first.
        """
        handles = futures if isinstance(futures, list | tuple) else list(futures)
        batches = distinct_batches(handles)
        if not all(b.is_done for b in batches):
            try:
                async with _backend.timeout(timeout):
                    for batch in batches:
                        if not batch.is_done:
                            await batch.waiter()
            except TimeoutError:
                left = sum(1 for b in batches if not b.is_done)
                raise E.KafkaTimeoutError(
                    f"wait_all timed out after {timeout} s with {left} batch(es) of records pending"
                ) from None
        if has_failures(batches):  # only then look at the records one by one
            failures = record_failures(handles)
            if failures:  # (a split batch may have failed in a part holding none of them)
                raise DeliveryFailedError.from_failures(failures, len(handles))

    async def close(self, timeout: float | None = None, *, flush: bool = True) -> None:  # noqa: ASYNC109
        """Stop accepting records, deliver what is buffered (``flush=True``, within
        ``timeout`` seconds; without one, delivery_timeout_ms bounds it since every record
        expires by then), fail whatever is left with ``ProducerClosedError``, stop the
        sender and close the client if the producer created it. Idempotent."""
        if _backend.structured():
            await self._close_structured(timeout, flush)
            return
        if self._close_task is None:
            self._close_task = asyncio.get_running_loop().create_task(self._close(timeout, flush))
        await asyncio.shield(self._close_task)

    # trio: no task outside a task group, so start and close run in the caller (the one
    # that opened ``async with``); concurrent calls wait for the first one.
    _lifecycle_lock: Any = None
    _closed_event: Any = None

    async def _start_structured(self) -> None:
        if self._lifecycle_lock is None:
            self._lifecycle_lock = _backend.lock()
        async with self._lifecycle_lock:
            if self._started:
                return
            if self._closed:
                raise E.ProducerClosedError("producer is closed")
            await self._start()

    async def _close_structured(self, timeout: float | None, flush: bool) -> None:  # noqa: ASYNC109
        if self._closed_event is not None:
            await self._closed_event.wait()
            return
        self._closed_event = _backend.event()
        try:
            await self._close(timeout, flush)
        finally:
            self._closed_event.set()

    async def abort(self) -> None:
        """Close without flushing: buffered and in-flight records fail with ``ProducerClosedError``."""
        await self.close(flush=False)

    def _on_fatal(self, _exc: BaseException) -> None:
        self._refused = True

    def _update_refused(self) -> None:
        """Transactions: records are accepted only inside a transaction (the fast paths
        check this one flag)."""
        txn = self._txn
        self._refused = (
            self._closed
            or self._sender.fatal_error is not None
            or (txn is not None and not txn.manager.accepts_records)
        )

    async def _close(self, timeout: float | None, flush: bool) -> None:  # noqa: ASYNC109
        # The terminating metrics push gets what is left of close's timeout, never more.
        deadline = None if timeout is None else time.monotonic() + timeout
        self._closed = True
        self._refused = True
        self._pool.close()  # writers blocked on memory fail now
        start = self._start_task
        if start is not None and not self._started:
            # A start still connecting is cut short; its outcome (an error, or the
            # cancellation) is retrieved here so that asyncio never reports it as lost.
            start.cancel()
            await asyncio.gather(start, return_exceptions=True)
        acc = self._acc
        try:
            if flush and self._started and self._txn is not None:
                await self._txn.abort_open(timeout)  # as in Java: an open transaction is aborted
            if flush and self._started and acc.incomplete:
                acc.closing = True
                self._sender.wake()
                try:
                    async with _backend.timeout(timeout):
                        while acc.incomplete:
                            batch = next(iter(acc.incomplete))
                            await batch.waiter()
                except TimeoutError:
                    log.warning(
                        "producer close: %d batch(es) not delivered within %s s", len(acc.incomplete), timeout
                    )
            if acc.incomplete:
                self._sender.fail_all(
                    E.ProducerClosedError("producer closed before the record was delivered")
                )
        finally:
            if self._txn is not None:
                await self._txn.close()
            if self._started:
                await self._sender.stop()
            if self._telemetry is not None:  # the terminating push, before the client closes
                await self._telemetry.stop(deadline)
            if self._own_client:
                await self._client.close()

    _telemetry: TelemetryReporter | None = None

    def _check_started(self) -> None:
        if not self._started:
            raise E.IllegalStateError(
                "producer is not started (use 'async with Producer(...)' or await start())"
            )

    # -- producing ---------------------------------------------------------------------------

    async def _serialize_in_context(
        self, topic: str, key: Any, value: Any, headers: Headers | None
    ) -> tuple[Any, Any, Headers | None]:
        """Key and value through serializers that see the topic, the field and the headers (a
        list they may append to); a serializer that needs I/O first is awaited on its async path."""
        if self._refused:
            raise self._refusal()
        hdrs = list(headers) if headers else []
        kc = self._key_ctx
        if kc is not None and key is not None:
            key = await _call_in_context(kc, key, SerializationContext(topic, MessageField.KEY, hdrs))
        vc = self._value_ctx
        if vc is not None and value is not None:
            value = await _call_in_context(vc, value, SerializationContext(topic, MessageField.VALUE, hdrs))
        return key, value, hdrs or None

    def _serialize(self, key: Any, value: Any) -> tuple[Bytes | None, Bytes | None]:
        ks = self._key_serializer
        if ks is not None and key is not None:
            key = ks(key)
        vs = self._value_serializer
        if vs is not None and value is not None:
            value = vs(value)
        return self._checked(key, value)

    def _checked(self, key: Any, value: Any) -> tuple[Bytes | None, Bytes | None]:
        """``key`` and ``value`` after serialization: bytes-like or None, else a TypeError."""
        if key is not None and not isinstance(key, _BYTES_TYPES):
            raise TypeError(
                f"key must be bytes, bytearray, memoryview or None, not {type(key).__name__} "
                "(or configure key_serializer)"
            )
        if value is not None and not isinstance(value, _BYTES_TYPES):
            raise TypeError(
                f"value must be bytes, bytearray, memoryview or None, not {type(value).__name__} "
                "(or configure value_serializer)"
            )
        return key, value

    def _record_size(self, key: Bytes | None, value: Bytes | None, headers: Headers | None) -> int:
        size = RECORD_OVERHEAD
        if key is not None:
            size += key.nbytes if type(key) is memoryview else len(key)
        if value is not None:
            size += value.nbytes if type(value) is memoryview else len(value)
        if headers:
            for hkey, hval in headers:
                if not isinstance(hkey, str | bytes):
                    raise TypeError(f"header key must be str, not {type(hkey).__name__}")
                if hval is not None and not isinstance(hval, _BYTES_TYPES):
                    raise TypeError(f"header value must be bytes-like or None, not {type(hval).__name__}")
                size += 10 + len(hkey) * (4 if isinstance(hkey, str) else 1)
                if hval is not None:
                    size += len(hval)
        if size + BATCH_OVERHEAD > self._max_record:
            limit = (
                "max_request_size"
                if size + BATCH_OVERHEAD > self.config.max_request_size
                else "buffer_memory"
            )
            raise E.ProducerRecordTooLargeError(
                f"the record is {size + BATCH_OVERHEAD} bytes when serialized, larger than "
                f"{limit}={getattr(self.config, limit)}"
            )
        return size

    def _partition(self, state: TopicState, key: Bytes | None) -> int:
        count = state.partition_count
        if self._keyed and key is not None:
            return key_partition(key, count)
        sticky = state.sticky
        if sticky is not None:
            return sticky.current
        rr = state.round_robin
        if rr is not None:
            return rr.partition(count, state.available)
        custom = self._custom_partitioner
        assert custom is not None
        p = custom(state.name, bytes(key) if key is not None else None, count)
        if type(p) is not int or not 0 <= p < count:
            raise E.UnknownTopicOrPartitionError(
                f"partitioner returned {p!r} for topic {state.name!r} with {count} partitions"
            )
        return p

    def _refusal(self) -> BaseException:
        """Why new records are refused (closed producer, or a fatal error)."""
        if self._closed:
            return E.ProducerClosedError("producer is closed")
        if self._txn is not None and not self._txn.manager.accepts_records:
            return self._txn.manager.refusal()
        fatal = self._sender.fatal_error
        assert fatal is not None
        return fatal

    def _prepare(
        self,
        key: Any,
        value: Any,
        headers: Headers | None,
        timestamp_ms: int | None,
        serialized: bool = False,
    ) -> tuple[Bytes | None, Bytes | None, int, int]:
        """Serialize (unless the bulk paths did already: ``serialized``) and validate one
        record: ``(key, value, size bound, timestamp)``."""
        if self._refused:
            raise self._refusal()
        if serialized:
            key, value = self._checked(key, value)
        elif self._key_serializer is not None or self._value_serializer is not None:
            key, value = self._serialize(key, value)
        elif not ((value is None or type(value) is bytes) and (key is None or type(key) is bytes)):
            key, value = self._serialize(key, value)
        size = self._record_size(key, value, headers)
        if timestamp_ms is None:
            return key, value, size, int(_time() * 1000)
        if type(timestamp_ms) is not int or timestamp_ms < 0:
            raise E.InvalidTimestampError(f"timestamp_ms must be a non-negative int, got {timestamp_ms!r}")
        return key, value, size, timestamp_ms

    def _append(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Headers | None,
        kick: bool = True,
    ) -> tuple[ProducerBatch | None, Any]:
        """The per-record fast path, all synchronous: ``(batch, index)`` when the record
        was appended, ``(None, prepared)`` when the caller must take the slow path (topic
        metadata or buffer memory to wait for)."""
        if (
            self._plain
            and not headers
            and (value is None or type(value) is bytes)
            and (key is None or type(key) is bytes)
        ):
            if self._refused:
                raise self._refusal()
            size = (
                RECORD_OVERHEAD
                + (len(value) if value is not None else 0)
                + (len(key) if key is not None else 0)
            )
            if size > self._max_plain:
                self._record_size(key, value, None)  # raises with the details
            if timestamp_ms is None:
                ts = int(_time() * 1000)
            elif type(timestamp_ms) is not int or timestamp_ms < 0:
                raise E.InvalidTimestampError(
                    f"timestamp_ms must be a non-negative int, got {timestamp_ms!r}"
                )
            else:
                ts = timestamp_ms
        else:
            key, value, size, ts = self._prepare(key, value, headers, timestamp_ms)
        state = self._states.get(topic)
        if state is not None:
            count = state.partition_count
            if partition is None:
                if key is not None and self._keyed:
                    p = key_partition(key, count)
                else:
                    sticky = state.sticky
                    p = sticky.current if sticky is not None else self._partition(state, key)
            elif 0 <= partition < count:
                p = partition
            else:
                return None, (key, value, size, ts)
            q = state.queues[p]
            # The queue's per-record append directly (RecordAccumulator.append without
            # the Python call in between: 7% of send from many tasks).
            add = q.add
            if add is not None and (index := add(ts, key, value, headers or ())) >= 0:
                return q.open, index
            done = self._append_new(state, q, partition, key, value, headers, ts, size, 0, kick)
            if done is not None:
                return done
        return None, (key, value, size, ts)

    def _append_new(
        self,
        state: TopicState,
        q: PartitionQueue,
        partition: int | None,
        key: Bytes | None,
        value: Bytes | None,
        headers: Headers | None,
        ts: int,
        size: int,
        reserved: int,
        kick: bool = True,
    ) -> tuple[ProducerBatch, int] | None:
        """Append a record that needs a new batch (``q``'s open one is full or absent).
        None when buffer memory is short; ``reserved`` is memory the caller already holds
        (used here, or given back). ``kick``: with linger 0, send the batch right away
        (not for bulk appends, which would otherwise send one record per batch)."""
        acc = self._acc
        if acc.close_open(q):  # may move the sticky partition on (KIP-794)
            self._sender.wake()
            self._full_since_yield += 1
            sticky = state.sticky
            if partition is None and sticky is not None and (key is None or not self._keyed):
                p = sticky.current
                if p != q.tp.partition:
                    q = state.queues[p]
                    done = acc.try_append(q, ts, key, value, headers, reserved)
                    if done is not None:
                        return done
        done = acc.append_new(q, ts, key, value, headers, size, reserved, _now_ms())
        if done is None:
            return None
        if kick and self._linger_zero:
            self._sender.kick()  # sendable now: drain it from this task, no task switch
        else:
            self._sender.wake()  # starts the linger clock
        return done

    async def _state_for(self, topic: str, partition: int | None, deadline: float) -> TopicState:
        """The topic's state, waiting for its metadata (and for ``partition`` to exist)."""
        if not self._started:
            self._check_started()
        state = self._topics.topics.get(topic)
        if (
            state is None
            or state.partition_count == 0
            or (partition is not None and partition >= state.partition_count)
        ):
            state = await self._wait_for_topic(topic, partition, deadline)
        if partition is not None and partition < 0:
            raise E.UnknownTopicOrPartitionError(f"invalid partition {partition} for topic {topic!r}")
        return state

    async def _append_slow(
        self,
        topic: str,
        partition: int | None,
        headers: Headers | None,
        prepared: tuple[Bytes | None, Bytes | None, int, int],
    ) -> tuple[ProducerBatch, int]:
        """Wait (up to max_block_ms overall) for topic metadata and buffer memory."""
        key, value, size, ts = prepared
        loop = _backend.loop()
        deadline = loop.time() + self.config.max_block_ms / 1000
        state = await self._state_for(topic, partition, deadline)
        reserved = 0
        while True:
            if self._refused:
                if reserved:
                    self._pool.release(reserved)
                raise self._refusal()
            p = partition if partition is not None else self._partition(state, key)
            q = state.queues[p]
            done = self._acc.try_append(q, ts, key, value, headers, reserved)
            if done is not None:
                return done
            result = self._append_new(state, q, partition, key, value, headers, ts, size, reserved)
            if result is not None:
                return result
            remaining = (deadline - loop.time()) * 1000
            reserved = await self._acc.reserve(topic, size, max(remaining, 0.0))

    async def _wait_for_topic(self, topic: str, partition: int | None, deadline: float) -> TopicState:
        loop = _backend.loop()
        while True:
            remaining = (deadline - loop.time()) * 1000
            info = await self._client.wait_for_topic(topic, max(remaining, 0.0))
            state = self._topics.add(info)
            if partition is None or partition < state.partition_count:
                return state
            if loop.time() >= deadline:
                raise E.UnknownTopicOrPartitionError(
                    f"partition {partition} of topic {topic!r} (with {state.partition_count} partitions) "
                    f"not present in metadata after {self.config.max_block_ms:g} ms"
                )
            await _backend.sleep(min(self.config.retry_backoff_ms / 1000, max(deadline - loop.time(), 0)))
            try:
                await self._client.refresh_metadata([topic])
            except E.KafkaError as exc:
                if not exc.retriable:
                    raise

    async def enqueue(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers | None = None,
    ) -> RecordFuture:
        """Buffer one record; returns once it is buffered (waiting for buffer space or
        metadata up to ``max_block_ms``). Await the returned ``RecordFuture`` for its
        :class:`RecordMetadata`."""
        if _otel.enabled and (tracing := _otel.of(self)) is not None:
            return await tracing.enqueue(
                self._enqueue_general, self, topic, value, key, partition, timestamp_ms, headers
            )
        # Inlined fast path for the common case (bytes value, optional bytes key, default
        # partitioning, no headers, room in the open batch); anything else falls through
        # to the general path, which redoes these side-effect-free steps.
        if (
            partition is None
            and timestamp_ms is None
            and type(value) is bytes
            and (key is None or type(key) is bytes)
            and self._plain
            and not headers
        ):
            if self._refused:
                raise self._refusal()
            state = self._states.get(topic)
            if state is not None and (key is None or not self._keyed):
                sticky = state.sticky
                q = state.queues[sticky.current] if sticky is not None else None
            elif state is not None:
                q = state.queues[key_partition(key, state.partition_count)]  # type: ignore[arg-type]
            else:
                q = None
            if (
                q is not None
                and RECORD_OVERHEAD + len(value) + (len(key) if key is not None else 0) <= self._max_plain
            ):
                # The queue's own per-record append (one C call: record, timestamp,
                # index), as RecordAccumulator.append makes it, without that method's
                # Python call in between.
                add = q.add
                if add is not None and (index := add(int(_time() * 1000), key, value, ())) >= 0:
                    # RecordFuture.of(batch, index) without the classmethod call (4-10% of
                    # enqueue+wait_all, bench/trees.py); the handle is untracked (_handles)
                    return _new_handle(RecordFuture, q.open, index)
        return await self._enqueue_general(topic, value, key, partition, timestamp_ms, headers)

    async def _enqueue_general(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Headers | None,
    ) -> RecordFuture:
        """``enqueue`` past its inlined fast path (and the traced sends' untraced part)."""
        if self._contextual:
            key, value, headers = await self._serialize_in_context(topic, key, value, headers)
        batch, index = self._append(topic, value, key, partition, timestamp_ms, headers)
        if batch is None:
            batch, index = await self._append_slow(topic, partition, headers, index)
        elif self._full_since_yield >= _YIELD_EVERY_FULL_BATCHES:
            # Batches keep filling up: let the sender put them on the wire now rather than
            # when buffer memory runs out (a caller looping over enqueue never suspends).
            # Not after every batch: requests carrying several batches are cheaper.
            self._full_since_yield = 0
            await _backend.sleep(0)
        return _new_handle(RecordFuture, batch, index)

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers | None = None,
    ) -> RecordMetadata:
        """Produce one record and wait for its acknowledgement (per ``acks``)."""
        if _otel.enabled and (tracing := _otel.of(self)) is not None:
            return await tracing.send(
                self._enqueue_general, self, topic, value, key, partition, timestamp_ms, headers
            )
        if self._contextual:
            key, value, headers = await self._serialize_in_context(topic, key, value, headers)
        batch, index = self._append(topic, value, key, partition, timestamp_ms, headers)
        if batch is None:
            batch, index = await self._append_slow(topic, partition, headers, index)
        if not batch.is_done:
            await SendWakeup(batch)  # woken with the batch's other senders, in one loop callback
        return batch.metadata(index)

    async def enqueue_batch(
        self,
        topic: str,
        values: Iterable[Any],
        *,
        keys: Iterable[Any] | None = None,
        headers: Iterable[Headers | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> BatchResult:
        """Buffer many records of one topic with one call: ``values[i]`` with ``keys[i]``
        and ``headers[i]`` when given. Returns once all are buffered; ``await`` the
        :class:`BatchResult` for their metadata (a ``Sequence[RecordMetadata]``).

        Keyless records without headers take a bulk path that appends straight into
        the partition's batch builder. Records are appended in order; if one is
        rejected (type, size) the ones before it stay buffered and the error is raised.
        """
        if self._refused:
            raise self._refusal()
        if _otel.enabled and (tracing := _otel.of(self)) is not None:  # a span per record
            result = BatchResult()
            for fut in await tracing.enqueue_batch(
                self._enqueue_general, self, topic, values, keys, headers, partition, timestamp_ms
            ):
                result.add(fut)
            return result
        result = BatchResult()
        if self._contextual:  # record by record: each serializer call gets its record's context
            await self._enqueue_each(topic, values, keys, headers, partition, timestamp_ms, result)
            return result
        vs = self._value_serializer
        if vs is not None:
            values = (vs(v) if v is not None else None for v in values)
        if keys is not None and headers is None and partition is None and self._keyed:
            ks = self._key_serializer
            keys = [ks(k) if k is not None else None for k in keys] if ks is not None else list(keys)
            values = values if type(values) is list else list(values)
            if len(keys) == len(values) and all(type(k) is bytes for k in keys):
                await self._enqueue_keyed(topic, values, keys, timestamp_ms, result)
                return result
        if (
            keys is not None
            or headers is not None
            or (partition is None and self._custom_partitioner is not None)
        ):
            await self._enqueue_each(topic, values, keys, headers, partition, timestamp_ms, result)
            return result
        loop = _backend.loop()
        state = self._topics.topics.get(topic)
        if (
            state is None
            or not self._started
            or (partition is not None and not 0 <= partition < state.partition_count)
        ):
            state = await self._state_for(topic, partition, loop.time() + self.config.max_block_ms / 1000)
        if partition is None and state.sticky is None:  # round robin: record by record
            await self._enqueue_each(topic, values, None, None, None, timestamp_ms, result)
            return result
        ts = _bulk_timestamp(timestamp_ms)
        add_run = result._add_run
        append_run = self._acc.append_run
        it = iter(values)
        sticky = state.sticky
        queues = state.queues
        while True:
            q = queues[partition if partition is not None else sticky.current]  # type: ignore[union-attr]
            carry = append_run(q, ts, None, None, it, add_run, self._checked)
            if carry is RUN_END:
                self._sender.wake()
                return result
            # The open batch is full (or there is none): the carried record starts a new
            # one (maybe on another partition, KIP-794), through the per-record path below.
            if self._refused:
                raise self._refusal()
            if timestamp_ms is None:
                ts = int(_time() * 1000)
            key_value_size_ts = self._prepare(None, carry, None, ts, serialized=True)
            batch, index = self._append_new(
                state, q, partition, None, key_value_size_ts[1], None, ts, key_value_size_ts[2], 0, kick=False
            ) or (None, None)
            if batch is None:
                batch, index = await self._append_slow(topic, partition, None, key_value_size_ts)
                state = self._topics.topics.get(topic) or state
                sticky, queues = state.sticky, state.queues
            add_run(batch, index, 1)  # type: ignore[arg-type]

    async def _enqueue_keyed(
        self,
        topic: str,
        values: list[Any],
        keys: list[bytes],
        timestamp_ms: int | None,
        result: BatchResult,
    ) -> None:
        """Keyed records under the default partitioner, appended partition by partition:
        each partition's records go into its batch in one run (input order within a
        partition, the only order Kafka keeps) instead of hopping between partitions
        record by record. ``result`` still answers in input order."""
        loop = _backend.loop()
        state = self._topics.topics.get(topic)
        if state is None or not self._started:
            state = await self._state_for(topic, None, loop.time() + self.config.max_block_ms / 1000)
        ts = _bulk_timestamp(timestamp_ms)
        order, ends = group_by_key_partition(keys, state.partition_count)
        add_run = result._add_run
        append_run = self._acc.append_run
        start = 0
        try:
            for p, end in enumerate(ends):
                if end == start:
                    continue
                indexes = iter(order[start:end])
                start = end
                q = state.queues[p]
                while True:
                    carry = append_run(q, ts, keys, values, indexes, add_run, self._checked)
                    if carry is RUN_END:
                        break
                    # The open batch is full (or there is none): the carried record starts
                    # a new one, waiting for buffer memory if it must.
                    if self._refused:
                        raise self._refusal()
                    if timestamp_ms is None:
                        ts = int(_time() * 1000)
                    prepared = self._prepare(keys[carry], values[carry], None, ts, serialized=True)
                    added = self._append_new(
                        state, q, p, prepared[0], prepared[1], None, ts, prepared[2], 0, kick=False
                    )
                    if added is None:
                        added = await self._append_slow(topic, p, None, prepared)
                        state = self._topics.topics.get(topic) or state
                        q = state.queues[p]
                    add_run(added[0], added[1], 1)
        finally:
            self._sender.wake()  # what was appended stays buffered, as on the other paths
        result._grouped(order)

    async def _enqueue_each(
        self,
        topic: str,
        values: Iterable[Any],
        keys: Iterable[Any] | None,
        headers: Iterable[Headers | None] | None,
        partition: int | None,
        timestamp_ms: int | None,
        result: BatchResult,
    ) -> None:
        key_iter = iter(keys) if keys is not None else None
        hdr_iter = iter(headers) if headers is not None else None
        add_run = result._add_run
        append = self._append
        contextual = self._contextual
        for value in values:
            key = next(key_iter, None) if key_iter is not None else None
            hdrs = next(hdr_iter, None) if hdr_iter is not None else None
            if contextual:
                key, value, hdrs = await self._serialize_in_context(topic, key, value, hdrs)
            batch, index = append(topic, value, key, partition, timestamp_ms, hdrs, False)
            if batch is None:
                batch, index = await self._append_slow(topic, partition, hdrs, index)
            add_run(batch, index, 1)
        self._sender.wake()

    async def send_batch(
        self,
        topic: str,
        values: Iterable[Any],
        *,
        keys: Iterable[Any] | None = None,
        headers: Iterable[Headers | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> BatchResult:
        """Produce many records of one topic and wait for all acknowledgements.

        Returns the :class:`BatchResult` (``Sequence[RecordMetadata]``, in input order).
        If any record failed, raises the first delivery error; use
        ``enqueue_batch`` + ``await result.wait()`` + ``result.errors()`` to inspect
        partial failures instead.
        """
        result = await self.enqueue_batch(
            topic, values, keys=keys, headers=headers, partition=partition, timestamp_ms=timestamp_ms
        )
        await result.wait()
        errors = result.errors()
        if errors:
            raise errors[0]
        return result

    # -- transactions (the logic lives in transaction.py) ----------------------------------

    def _transactions(self) -> Transactions:
        if self._txn is None:
            raise E.IllegalStateError("not a transactional producer (set transactional_id)")
        if self._closed:
            raise E.ProducerClosedError("producer is closed")
        self._check_started()
        return self._txn

    @property
    def transactional_id(self) -> str | None:
        return self.config.transactional_id

    @property
    def transaction_state(self) -> TxnState:
        """Where the transactional producer is: READY, IN_TRANSACTION, ABORTABLE_ERROR
        (call ``abort_transaction()``), FATAL_ERROR (close the producer)..."""
        if self._txn is None:
            raise E.IllegalStateError("not a transactional producer (set transactional_id)")
        return self._txn.state

    async def begin_transaction(self) -> None:
        """Start a transaction: records sent from now on are committed or aborted together."""
        self._transactions().begin()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, Any],
        group_metadata: GroupMetadataLike | str,
        *,
        timeout_ms: float | None = None,
    ) -> None:
        """Commit consumer offsets (next offset to read per partition; ints or
        ``OffsetAndMetadata``) as part of the transaction. ``group_metadata`` is
        ``consumer.group_metadata()``: its generation and member id make the commit fail
        (``CommitFailedError``, abortable) if the group moved on (KIP-447). Waits up to
        ``timeout_ms`` (default ``max_block_ms``)."""
        await self._transactions().send_offsets(offsets, group_metadata, timeout_ms)

    async def commit_transaction(self, *, timeout_ms: float | None = None) -> None:
        """Deliver every record of the transaction (flush), then commit it. An error that
        needs an abort leaves the state ABORTABLE_ERROR; a fatal one FATAL_ERROR. On
        ``KafkaTimeoutError`` (after ``timeout_ms``, default ``max_block_ms``) the commit
        goes on: call it again to wait for it."""
        await self._transactions().commit(timeout_ms)

    async def abort_transaction(self, *, timeout_ms: float | None = None) -> None:
        """Abort the transaction: records not sent yet fail with ``TransactionAbortedError``,
        those written stay invisible to read_committed consumers, its offsets are dropped."""
        await self._transactions().abort(timeout_ms)

    def transaction(self) -> TransactionContext:
        """``async with producer.transaction():`` begins a transaction, commits it when the
        block ends normally and aborts it when the block raises (the error propagates)."""
        self._transactions()
        return TransactionContext(self)

    # -- introspection -----------------------------------------------------------------------

    async def partitions_for(self, topic: str) -> list[int]:
        """Partition ids of ``topic`` (waits for its metadata up to max_block_ms)."""
        self._check_started()
        info = await self._client.wait_for_topic(topic, self.config.max_block_ms)
        return sorted(info.partitions)

    def metrics(self) -> dict[str, Any]:
        """Counters of this producer; ``client`` holds the client's (per broker) metrics.

        Records and bytes sent count what the broker acknowledged (with acks=0: what was
        written); bytes are batch bytes on the wire, after compression."""
        sender = self._sender
        idem = self._idem
        return {
            "buffer_total_bytes": self._pool.total,
            "buffer_available_bytes": self._pool.available,
            "batches_incomplete": len(self._acc.incomplete),
            "batches_in_flight": len(self._acc.in_flight),
            "requests_in_flight": sender.in_flight_requests,
            "requests_sent": sender.requests_sent,
            "batches_retried": sender.batches_retried,
            "batches_split": sender.batches_split,
            "producer_id": idem.producer.producer_id if idem else -1,
            "producer_epoch": idem.producer.epoch if idem else -1,
            "epoch_bumps": idem.epoch_bumps if idem else 0,
            "records_sent": sum(c[0] for c in sender.sent_by_topic.values()),
            "bytes_sent": sum(c[1] for c in sender.sent_by_topic.values()),
            "batches_sent": sum(c[2] for c in sender.sent_by_topic.values()),
            "records_failed": sum(sender.failed_by_topic.values()),
            "records_retried": sender.records_retried,
            "sent_by_topic": {
                t: {"records": c[0], "bytes": c[1], "batches": c[2]}
                for t, c in sorted(sender.sent_by_topic.items())
            },
            "failed_by_topic": {
                t: {kind: n for (t2, kind), n in sorted(sender.failed_by_topic.items()) if t2 == t}
                for t in sorted({t for t, _ in sender.failed_by_topic})
            },
            "batch_size_bytes": sender.batch_bytes.snapshot(),
            "batch_size_records": sender.batch_records.snapshot(),
            "client": self._client.metrics(),
        }

    def health(self) -> Health:
        """Readiness summary (rules in ``aiokafka_lite.core.health``): started, a broker
        reachable, no fatal error (a fenced or failed transactional producer is not ready)."""
        fatal = self._sender.fatal_error
        if fatal is None and isinstance(self._idem, TransactionManager):
            if self._idem.state is TxnState.FATAL_ERROR:
                fatal = self._idem.last_error or E.KafkaError("transaction state FATAL_ERROR")
        return build_health(
            "producer",
            self._client.metrics(),
            self._client.config.client_id,
            started=self._started,
            closed=self._closed,
            fatal=fatal,
        )

    def __repr__(self) -> str:
        state = "closed" if self._closed else "started" if self._started else "new"
        return f"<Producer {state} acks={self.config.acks} idempotent={self._idempotent}>"


_ = TopicPartition  # re-exported type used in annotations by callers


async def _call_in_context(call: ContextCall, data: Any, ctx: SerializationContext) -> Any:
    """``call.sync(data, ctx)``; when it needs I/O first, its awaitable path (the event loop keeps
    running while a registry answers)."""
    try:
        return call.sync(data, ctx)
    except E.SerializerNotReadyError:
        if call.resolve is None:
            raise
    return await call.resolve(data, ctx)
