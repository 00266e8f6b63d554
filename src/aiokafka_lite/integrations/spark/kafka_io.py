"""The Kafka side of the Spark data source: planning on the driver, reading and writing in tasks.

No Spark here (testable without it). Spark calls are synchronous, so every entry point
runs its own event loop (``asyncio.run`` / ``asyncio.Runner``) around our async client
and closes everything before it returns: nothing is left running in a Spark worker.

* :func:`plan_batch` resolves a batch query's offset ranges (metadata + ListOffsets).
* :func:`latest_offsets` / :func:`earliest_offsets` / :func:`initial_offsets` serve the
  streaming reader.
* :func:`read_range` yields exactly the records of one :class:`OffsetRange`, chunk by
  chunk, with a consumer on manual assignment (no group).
* :func:`write_chunks` (columns) and :func:`write_rows` (rows) produce with one
  idempotent producer and flush.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import threading
import time
from collections import deque
from collections.abc import Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiokafka_lite.consume import Consumer, Record
from aiokafka_lite.consume.fetch.offset_lookup import list_offsets
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.integrations.spark.datasource_options import (
    KafkaSettings,
    SinkOptions,
    SourceOptions,
    Subscription,
)
from aiokafka_lite.integrations.spark.offset_ranges import (
    EARLIEST,
    LATEST,
    OffsetRange,
    OffsetSpec,
    plan_ranges,
    split_ranges,
)
from aiokafka_lite.net import Client
from aiokafka_lite.produce import BatchResult, Producer

__all__ = [
    "SCHEMA_DDL",
    "WriteResult",
    "earliest_offsets",
    "initial_offsets",
    "latest_offsets",
    "merge_results",
    "plan_batch",
    "read_range",
    "write_chunks",
    "write_rows",
]

log = logging.getLogger("aiokafka_lite.integrations.spark")

#: The schema of Spark's built-in Kafka source (with its optional headers column always present).
SCHEMA_DDL = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, "
    "timestampType INT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
)

# getmany() slice: short, so position changes without records (transaction markers,
# compacted tails) are noticed at once; the no-progress limit is pollTimeoutMs.
_POLL_SLICE_MS = 200
# Fetch size per request for a task's single partition, scaled to its range.
_MIN_FETCH = 64 * 1024
_MAX_FETCH = 8 * 1024 * 1024

# Rows per enqueue_batch call when writing rows one by one.
_WRITE_RUN = 4096

T = TypeVar("T")


# --------------------------------------------------------------------------------------
# Driver side


def _driver_client(kafka: KafkaSettings) -> Client:
    kwargs = kafka.client_kwargs()
    # Reading must not create topics as a side effect of looking them up.
    kwargs.setdefault("allow_auto_topic_creation", False)
    return Client(kafka.bootstrap, **kwargs)


async def _partitions(
    client: Client, sub: Subscription, timeout_ms: float, *, must_exist: bool
) -> list[TopicPartition]:
    """Partitions currently matching the subscription, sorted.

    ``must_exist`` (batch): a named topic or assigned partition that does not exist is
    an ``UnknownTopicOrPartitionError``; streaming skips it until it appears.
    """
    try:
        async with asyncio.timeout(timeout_ms / 1000):
            if sub.pattern is not None:
                cluster = await client.refresh_metadata(all_topics=True)
                names = [t for t, info in cluster.topics.items() if not info.is_internal and sub.matches(t)]
            else:
                names = sorted({tp.topic for tp in sub.partitions} if sub.partitions else set(sub.topics))
                cluster = await client.refresh_metadata(names)
    except TimeoutError as exc:
        if isinstance(exc, E.KafkaError):
            raise
        raise E.KafkaTimeoutError(f"no cluster metadata within {timeout_ms:.0f} ms") from None
    out: list[TopicPartition] = []
    for name in sorted(names):
        info = cluster.topics.get(name)
        code = cluster.topic_errors.get(name, 0)
        if code and code != E.UnknownTopicOrPartitionError.code:
            raise E.error_for(code, f"topic {name!r}")
        if info is None or not info.partitions:
            if must_exist:
                raise E.UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            continue
        if sub.partitions:
            for tp in sub.partitions:
                if tp.topic != name:
                    continue
                if tp.partition in info.partitions:
                    out.append(tp)
                elif must_exist:
                    raise E.UnknownTopicOrPartitionError(
                        f"assign: topic {name!r} has no partition {tp.partition} "
                        f"(it has {len(info.partitions)})"
                    )
        else:
            out.extend(TopicPartition(name, p) for p in sorted(info.partitions))
    return out


async def _resolve(
    client: Client,
    spec: OffsetSpec,
    tps: Iterable[TopicPartition],
    *,
    isolation_level: int,
    timeout_ms: float,
    what: str,
) -> dict[TopicPartition, int]:
    """Concrete offsets for ``tps`` per ``spec``: ListOffsets for sentinels and timestamps."""
    fixed: dict[TopicPartition, int] = {}
    queries: dict[TopicPartition, int] = {}
    by_time: set[TopicPartition] = set()
    for tp in tps:
        is_ts, value = spec.query(tp)
        if is_ts:
            by_time.add(tp)
            queries[tp] = value
        elif value in (EARLIEST, LATEST):
            queries[tp] = value
        else:
            fixed[tp] = value
    found = await list_offsets(client, queries, isolation_level=isolation_level, timeout_ms=timeout_ms)
    missing: list[TopicPartition] = []
    for tp in queries:
        hit = found.get(tp)
        if hit is not None:
            fixed[tp] = hit.offset
        elif tp in by_time:
            missing.append(tp)
        else:
            raise E.KafkaError(f"ListOffsets returned no offset for {tp.topic}-{tp.partition}")
    if missing:
        if spec.timestamp_fallback != "latest":
            names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing[:5])
            raise E.OffsetOutOfRangeError(
                f"{what}: no record at or after the requested timestamp in {names} "
                f"(set {what}OffsetsByTimestampStrategy=latest to start from the end instead)"
            )
        ends = await list_offsets(
            client, dict.fromkeys(missing, LATEST), isolation_level=isolation_level, timeout_ms=timeout_ms
        )
        for tp in missing:
            end = ends.get(tp)
            fixed[tp] = end.offset if end is not None else 0
    return fixed


def _check_named(spec: OffsetSpec, tps: list[TopicPartition], what: str) -> None:
    unknown = spec.named_partitions() - set(tps)
    if unknown:
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(unknown)[:5])
        raise E.ConfigError(f"{what} names partitions outside the subscription: {names}")


async def _plan_batch(opts: SourceOptions) -> list[OffsetRange]:
    assert opts.ending is not None
    iso = 1 if opts.read_committed else 0
    async with _driver_client(opts.kafka) as client:
        tps = await _partitions(client, opts.subscription, opts.timeout_ms, must_exist=True)
        _check_named(opts.starting, tps, "startingOffsets")
        _check_named(opts.ending, tps, "endingOffsets")
        start = await _resolve(
            client, opts.starting, tps, isolation_level=iso, timeout_ms=opts.timeout_ms, what="starting"
        )
        end = await _resolve(
            client, opts.ending, tps, isolation_level=iso, timeout_ms=opts.timeout_ms, what="ending"
        )
    ranges = plan_ranges(start, end)
    return split_ranges(
        ranges, max_records=opts.max_records_per_partition, min_partitions=opts.min_partitions
    )


def plan_batch(opts: SourceOptions) -> list[OffsetRange]:
    """Offset ranges of a batch query (split per maxRecordsPerPartition/minPartitions)."""
    return asyncio.run(_plan_batch(opts))


async def _initial(opts: SourceOptions) -> dict[TopicPartition, int]:
    iso = 1 if opts.read_committed else 0
    async with _driver_client(opts.kafka) as client:
        tps = await _partitions(client, opts.subscription, opts.timeout_ms, must_exist=False)
        _check_named(opts.starting, tps, "startingOffsets")
        return await _resolve(
            client, opts.starting, tps, isolation_level=iso, timeout_ms=opts.timeout_ms, what="starting"
        )


def initial_offsets(opts: SourceOptions) -> dict[TopicPartition, int]:
    """Streaming: where a new query starts, for every partition matching now."""
    return asyncio.run(_initial(opts))


async def _edge(
    opts: SourceOptions, which: int, only: Iterable[TopicPartition] | None
) -> dict[TopicPartition, int]:
    iso = 1 if opts.read_committed else 0
    async with _driver_client(opts.kafka) as client:
        if only is None:
            tps = await _partitions(client, opts.subscription, opts.timeout_ms, must_exist=False)
        else:
            tps = list(only)
        if not tps:
            return {}
        found = await list_offsets(
            client, dict.fromkeys(tps, which), isolation_level=iso, timeout_ms=opts.timeout_ms
        )
    return {tp: hit.offset for tp, hit in found.items() if hit is not None}


def latest_offsets(opts: SourceOptions) -> dict[TopicPartition, int]:
    """Streaming: end offsets (high watermark, or LSO with read_committed) of every matching partition."""
    return asyncio.run(_edge(opts, LATEST, None))


def earliest_offsets(opts: SourceOptions, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """Streaming: log start offsets of ``tps`` (for partitions that appeared after the query started)."""
    return asyncio.run(_edge(opts, EARLIEST, list(tps)))


# --------------------------------------------------------------------------------------
# Task side: reading


def _consumer(opts: SourceOptions, r: OffsetRange) -> Consumer:
    kwargs: dict[str, Any] = {**opts.kafka.client_kwargs(), **opts.consumer}
    kwargs["auto_offset_reset"] = "none" if opts.fail_on_data_loss else "earliest"
    kwargs.setdefault("allow_auto_topic_creation", False)
    kwargs.setdefault("max_poll_records", 10000)
    # A session saves nothing for one partition, and closing one waits behind the
    # pending long-poll fetch (up to fetch_max_wait_ms) on the same connection.
    kwargs.setdefault("enable_fetch_sessions", False)
    # One partition per consumer: big fetches, but not much past the range's end (the
    # fetcher prefetches up to max_buffered_bytes beyond what the task needs).
    if "max_partition_fetch_bytes" not in kwargs:
        kwargs["max_partition_fetch_bytes"] = min(_MAX_FETCH, max(_MIN_FETCH, r.size * 1024))
    kwargs.setdefault("max_buffered_bytes", max(4 * kwargs["max_partition_fetch_bytes"], 1 << 20))
    return Consumer(opts.kafka.bootstrap, **kwargs)


class _LoopThread:
    """An event loop in a helper thread, owned by one task and joined when it ends.

    Spark pulls rows between our calls; with the loop in its own thread the consumer
    keeps fetching meanwhile (network waits overlap with Arrow conversion and the
    transfer to the JVM) instead of stalling whenever the generator is suspended.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name="aiokafka-lite-spark-io", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        """Cancel whatever is left, stop the loop, join the thread, close the loop."""

        async def shutdown() -> None:
            me = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not me]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.loop.shutdown_asyncgens()

        try:
            self.run(shutdown(), timeout=30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)
            if not self._thread.is_alive():
                self.loop.close()


async def _step(consumer: Consumer, r: OffsetRange, pos: int) -> tuple[list[Record] | None, int]:
    """One getmany slice: (records inside the range or None, new position)."""
    tp = r.tp
    try:
        got = await consumer.getmany(tp, timeout_ms=_POLL_SLICE_MS)
    except E.OffsetOutOfRangeError as exc:
        raise E.OffsetOutOfRangeError(
            f"{tp.topic}-{tp.partition}: offsets {pos}..{r.end - 1} are no longer available "
            f"({exc.message}); records were deleted or the topic was recreated. "
            "Set failOnDataLoss=false to skip missing records."
        ) from exc
    recs = got.get(tp)
    new_pos = await consumer.position(tp)
    if recs:
        if recs[0].offset < r.start:
            recs = [rec for rec in recs if rec.offset >= r.start]
        if recs and recs[-1].offset >= r.end:
            recs = recs[: bisect.bisect_left(recs, r.end, key=lambda rec: rec.offset)]
    return recs or None, new_pos


def read_range(opts: SourceOptions, r: OffsetRange) -> Iterator[list[Record]]:
    """Yield the records of ``r`` (offsets ``start <= o < end``) in offset order, in chunks.

    A consumer with manual assignment (no group) starts at ``r.start`` and stops at
    ``r.end``; running it again yields the same records. It runs on an event loop in a
    helper thread owned by this generator; the consumer is closed, the loop stopped and
    the thread joined when the generator finishes or is closed (Spark stopping early).
    Errors: ``OffsetOutOfRangeError`` when records of the range were deleted (with
    ``failOnDataLoss=false`` the consumer skips to the earliest offset instead),
    ``KafkaTimeoutError`` when no progress is made for ``pollTimeoutMs``.
    """
    if r.end <= r.start:
        return
    tp = r.tp
    io = _LoopThread()
    try:
        consumer = _consumer(opts, r)
        consumer.assign([tp])
        consumer.seek(tp, r.start)
        try:
            limit_s = opts.poll_timeout_ms / 1000
            io.run(consumer.start(), timeout=opts.timeout_ms / 1000 + limit_s)
            pos = r.start
            deadline = time.monotonic() + limit_s
            while pos < r.end:
                recs, new_pos = io.run(_step(consumer, r, pos), timeout=limit_s + 30)
                if recs:
                    yield recs
                now = time.monotonic()
                if new_pos != pos or recs:
                    deadline = now + limit_s
                elif now >= deadline:
                    raise E.KafkaTimeoutError(
                        f"{tp.topic}-{tp.partition}: no progress at offset {pos} for "
                        f"{opts.poll_timeout_ms} ms while reading up to {r.end} (kafkaConsumer.pollTimeoutMs)"
                    )
                pos = new_pos
        finally:
            io.run(consumer.close(), timeout=60)
    finally:
        io.close()


# --------------------------------------------------------------------------------------
# Task side: writing


@dataclass
class WriteResult:
    """What one write task delivered: records per (topic, partition)."""

    counts: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def records(self) -> int:
        return sum(self.counts.values())

    def merge(self, other: WriteResult) -> None:
        for key, n in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + n


#: One row to produce: (topic, value, key, partition, headers).
OutRow = tuple[str, bytes | None, bytes | None, int | None, list[tuple[str, bytes | None]] | None]

#: Many records of one topic (and one partition, or None for the partitioner), as
#: columns: (topic, partition, values, keys or None, headers or None).
OutChunk = tuple[
    str,
    int | None,
    list[bytes | None],
    list[bytes | None] | None,
    list[list[tuple[str, bytes | None]] | None] | None,
]


def chunks_of(rows: Iterable[OutRow]) -> Iterator[OutChunk]:
    """Rows as chunks: runs of consecutive rows with the same topic and partition, at
    most ``_WRITE_RUN`` long."""
    run_key: tuple[str, int | None] | None = None
    values: list[bytes | None] = []
    keys: list[bytes | None] = []
    headers: list[list[tuple[str, bytes | None]] | None] = []
    for topic, value, key, partition, hdrs in rows:
        if (topic, partition) != run_key or len(values) >= _WRITE_RUN:
            if values and run_key is not None:
                yield run_key[0], run_key[1], values, keys, headers if any(headers) else None
                values, keys, headers = [], [], []
            run_key = (topic, partition)
        values.append(value)
        keys.append(key)
        headers.append(hdrs)
    if values and run_key is not None:
        yield run_key[0], run_key[1], values, keys, headers if any(headers) else None


class _Writer:
    """Feeds chunks to one producer (``enqueue_batch`` each) and accounts for delivered
    chunks as they complete, so memory stays bounded by what is in flight, not by the
    task's size."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.result = WriteResult()
        self.error: BaseException | None = None
        self._pending: deque[BatchResult] = deque()

    async def write(self, chunks: Iterator[OutChunk]) -> None:
        for chunk in chunks:
            await self._enqueue(chunk)
            if self.error is not None:
                return

    async def _enqueue(self, chunk: OutChunk) -> None:
        topic, partition, values, keys, headers = chunk
        res = await self.producer.enqueue_batch(
            topic, values, keys=keys, headers=headers, partition=partition
        )
        self._pending.append(res)
        await asyncio.sleep(0)  # let the sender run while Spark feeds rows
        self.drain(final=False)

    def drain(self, *, final: bool) -> None:
        """Account for completed runs (all of them when ``final``, after a flush)."""
        pending = self._pending
        counts = self.result.counts
        while pending and (final or pending[0].done()):
            res = pending.popleft()
            errors = res.errors()
            if errors:
                if self.error is None:
                    self.error = errors[0]
                continue
            # Not by iterating the result: that builds a RecordMetadata per record (a
            # fifth of a task's time at 100 B records).
            for tp, n in res.counts_by_partition().items():
                key = (tp.topic, tp.partition)
                counts[key] = counts.get(key, 0) + n


async def _write(sink: SinkOptions, chunks: Iterator[OutChunk]) -> WriteResult:
    kwargs: dict[str, Any] = {**sink.kafka.client_kwargs(), **sink.producer}
    producer = Producer(sink.kafka.bootstrap, **kwargs)
    await producer.start()
    writer = _Writer(producer)
    try:
        await writer.write(chunks)
        if writer.error is None:
            await producer.flush()
            writer.drain(final=True)
    except BaseException:
        await producer.abort()
        raise
    if writer.error is not None:
        await producer.abort()
        raise writer.error
    await producer.close()
    return writer.result


def write_chunks(sink: SinkOptions, chunks: Iterable[OutChunk]) -> WriteResult:
    """Produce ``chunks`` with one idempotent producer; returns once all are acknowledged.

    Raises the first delivery error (the rest of the task's records are not sent): a
    Spark task failure then carries the Kafka error.
    """
    return asyncio.run(_write(sink, iter(chunks)))


def write_rows(sink: SinkOptions, rows: Iterable[OutRow]) -> WriteResult:
    """:func:`write_chunks` for rows one by one."""
    return write_chunks(sink, chunks_of(rows))


def merge_results(results: Iterable[WriteResult | None]) -> WriteResult:
    total = WriteResult()
    for r in results:
        if r is not None:
            total.merge(r)
    return total
