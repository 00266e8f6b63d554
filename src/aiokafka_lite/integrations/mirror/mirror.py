"""``Mirror``: copies topics from a source cluster to a target cluster.

::

    async with Mirror("src:9092", "dst:9092", include=r"orders\\..*", rename="{topic}.mirror") as m:
        await m.run()          # until m.stop(), a signal handler calling it, or cancellation

How it works:

* A group ``Consumer`` on the source (``group_id``, cooperative-sticky) subscribes to the
  ``include`` regex minus ``exclude``; topics created later join the subscription at the
  next metadata refresh (``refresh_interval_ms``). Several instances with one
  ``group_id`` share the partitions, and a scale-out only moves the partitions that move.
* When a partition is assigned, its target topic is created if missing (see
  ``topics.py``). Records keep key, value, headers and timestamp; with equal partition
  counts the partition too (see ``naming.target_partition``).
* The target producer is idempotent (``acks=all``), so each partition's records land
  once each, in order.
* at-least-once (default): a source offset is committed (to the source group) only
  after the target acknowledged every record before it.
* exactly-once: the target producer is transactional (``transactional_id`` =
  ``"<group_id>-<instance_id>"``). Each transaction carries the records and the source
  positions, written as offsets of the consumer group ``group_id`` *on the target
  cluster* (``TxnOffsetCommit``, the way Kafka's own exactly-once pipelines commit input
  positions), keyed ``TopicPartition(target_topic, source_partition)`` with the source
  topic as commit metadata. When a partition is assigned, its position is read back
  from the target (``OffsetFetch`` with ``require_stable``: it waits while a transaction
  holding that position is still open), so output and position always agree.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import re
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka_lite.admin import Admin
from aiokafka_lite.consume import Consumer, Record
from aiokafka_lite.consume.consumer_config import ConsumerConfig
from aiokafka_lite.consume.subscription import OffsetAndMetadata
from aiokafka_lite.core import concurrency
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.integrations.mirror.naming import (
    MirrorConfigError,
    TopicFilter,
    TopicRenamer,
    check_topic_name,
    target_partition,
)
from aiokafka_lite.integrations.mirror.stats import MirrorStats, PartitionStats, RateMeter
from aiokafka_lite.integrations.mirror.topics import TargetTopic, ensure_target_topic
from aiokafka_lite.net import ClientConfig
from aiokafka_lite.produce import Producer
from aiokafka_lite.produce.batch import RecordFuture
from aiokafka_lite.produce.producer_config import ProducerConfig
from aiokafka_lite.produce.transaction import TxnState

__all__ = ["Mirror", "MirrorError"]

log = logging.getLogger("aiokafka_lite.integrations.mirror")

# Options the mirror sets itself: overriding them would break its delivery guarantees.
_FORCED_CONSUMER = frozenset(
    {"group_id", "enable_auto_commit", "isolation_level", "partition_assignment_strategy"}
)
_FORCED_PRODUCER = frozenset({"transactional_id", "enable_idempotence", "acks", "partitioner"})
_POLL_MS = 200
_UNSTABLE_RETRY_S = 0.2


class MirrorError(E.KafkaError):
    """The mirror stopped because records could not be copied (the target refused or
    never acknowledged them); nothing after the last acknowledged record was committed."""


@dataclass
class _Partition:
    """What the mirror knows about one assigned source partition."""

    source: TopicPartition
    target: TargetTopic
    source_partitions: int
    #: Chunks handed to the producer, not yet acknowledged (at-least-once):
    #: ``(next source offset, records, bytes, future of the chunk's last record)``.
    pending: collections.deque[tuple[int, int, int, RecordFuture]] = field(default_factory=collections.deque)
    #: Next source offset handed to the producer.
    read: int | None = None
    #: Next source offset durable on the target (acknowledged / committed in a transaction).
    durable: int | None = None
    #: Next source offset committed to the position store (source group / target group).
    committed: int | None = None
    #: exactly-once: next offset after the open transaction, where it started, its counts.
    txn_next: int | None = None
    txn_first: int | None = None
    txn_records: int = 0
    txn_bytes: int = 0
    records: int = 0
    bytes: int = 0
    rate: RateMeter = field(default_factory=RateMeter)

    @property
    def position_key(self) -> TopicPartition:
        """Where exactly-once mode stores this partition's position on the target."""
        return TopicPartition(self.target.name, self.source.partition)


class _Listener:
    """Rebalance callbacks of the source consumer (run inside its poll, in step with the loop)."""

    def __init__(self, mirror: Mirror) -> None:
        self._mirror = mirror

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        async with self._mirror._lock:
            await self._mirror._on_assigned(assigned)

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        async with self._mirror._lock:
            await self._mirror._on_revoked(revoked)

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        async with self._mirror._lock:
            await self._mirror._on_lost(lost)


def _split_options(
    what: str, options: Mapping[str, Any] | None, *classes: type[Any], forced: frozenset[str]
) -> dict[str, Any]:
    out = dict(options or {})
    known: set[str] = set()
    for cls in classes:
        known.update(cls.option_names())
    unknown = sorted(set(out) - known)
    if unknown:
        raise MirrorConfigError(f"{what}: unknown option(s) {unknown}")
    clash = sorted(set(out) & forced)
    if clash:
        raise MirrorConfigError(
            f"{what}: {clash} are set by the mirror itself (they carry its delivery guarantees)"
        )
    return out


def _check_bootstrap(what: str, value: str | Sequence[str]) -> None:
    items = [value] if isinstance(value, str) else list(value)
    if not items or not all(isinstance(i, str) and i.strip() for i in items):
        raise MirrorConfigError(f"{what}: expected HOST:PORT[,HOST:PORT...], got {value!r}")
    for item in ",".join(items).split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise MirrorConfigError(f"{what}: {item.strip()!r} is not HOST:PORT")


class Mirror:
    """Copies the topics matching ``include`` (and not ``exclude``) from ``source`` to
    ``target`` (bootstrap servers of each cluster).

    Options: ``rename`` (a template with ``{topic}``, e.g. ``"{topic}.mirror"``) or
    ``prefix``; ``group_id`` (the source consumer group the instances share, and in
    exactly-once mode the target group holding positions); ``exactly_once``;
    ``instance_id`` (exactly-once: stable per instance across restarts, different per
    instance; default the host name); ``commit_interval_ms`` (how often positions are
    committed / transactions committed); ``auto_offset_reset`` (where a partition
    without a position starts: ``"earliest"`` copies the whole topic);
    ``refresh_interval_ms`` (how soon new topics are seen); ``copy_configs``;
    ``replication_factor`` of created topics (-1: the target's default);
    ``transaction_timeout_ms``; ``source_options`` (client/consumer options, e.g.
    security), ``target_options`` (client/producer options).
    """

    def __init__(
        self,
        source: str | Sequence[str],
        target: str | Sequence[str],
        *,
        include: str | re.Pattern[str],
        exclude: str | re.Pattern[str] | None = None,
        rename: str | None = None,
        prefix: str | None = None,
        group_id: str = "aiokafka-lite-mirror",
        exactly_once: bool = False,
        instance_id: str | None = None,
        commit_interval_ms: int = 1000,
        auto_offset_reset: str = "earliest",
        refresh_interval_ms: int = 30_000,
        copy_configs: bool = True,
        replication_factor: int = -1,
        transaction_timeout_ms: int = 60_000,
        source_options: Mapping[str, Any] | None = None,
        target_options: Mapping[str, Any] | None = None,
    ) -> None:
        _check_bootstrap("source", source)
        _check_bootstrap("target", target)
        self.filter = TopicFilter.of(include, exclude)
        self.renamer = TopicRenamer.of(rename, prefix)
        if not isinstance(group_id, str) or not group_id:
            raise MirrorConfigError("group_id: must be a non-empty string")
        for name, value, low in (
            ("commit_interval_ms", commit_interval_ms, 1),
            ("refresh_interval_ms", refresh_interval_ms, 1),
            ("transaction_timeout_ms", transaction_timeout_ms, 1),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise MirrorConfigError(f"{name}: must be an int >= {low}, got {value!r}")
        if not isinstance(replication_factor, int) or replication_factor == 0 or replication_factor < -1:
            raise MirrorConfigError(
                f"replication_factor: must be -1 (the target's default) or >= 1, got {replication_factor!r}"
            )
        if auto_offset_reset not in ("earliest", "latest"):
            raise MirrorConfigError(f"auto_offset_reset: 'earliest' or 'latest', got {auto_offset_reset!r}")
        if instance_id is None:
            instance_id = re.sub(r"[^a-zA-Z0-9._-]", "_", socket.gethostname()) or "mirror"
        elif not isinstance(instance_id, str) or not instance_id:
            raise MirrorConfigError("instance_id: must be a non-empty string")
        self.source = source
        self.target = target
        self.group_id = group_id
        self.exactly_once = bool(exactly_once)
        self.instance_id = instance_id
        self.transactional_id = f"{group_id}-{instance_id}" if self.exactly_once else None
        self.commit_interval_ms = commit_interval_ms
        self.copy_configs = copy_configs
        self.replication_factor = replication_factor
        src = _split_options(
            "source_options", source_options, ClientConfig, ConsumerConfig, forced=_FORCED_CONSUMER
        )
        dst = _split_options(
            "target_options", target_options, ClientConfig, ProducerConfig, forced=_FORCED_PRODUCER
        )
        client_names = set(ClientConfig.option_names())
        self._source_client_opts = {k: v for k, v in src.items() if k in client_names}
        self._target_client_opts = {k: v for k, v in dst.items() if k in client_names}
        consumer_opts: dict[str, Any] = {
            "auto_offset_reset": auto_offset_reset,
            "metadata_max_age_ms": refresh_interval_ms,
            **src,
        }
        producer_opts: dict[str, Any] = {"linger_ms": 5, "batch_size": 131072, **dst}
        if self.exactly_once:
            producer_opts["transaction_timeout_ms"] = transaction_timeout_ms
        self._consumer_opts = consumer_opts
        self._producer_opts = producer_opts
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._source_admin: Admin | None = None
        self._target_admin: Admin | None = None
        self._parts: dict[TopicPartition, _Partition] = {}
        self._targets: dict[str, TargetTopic] = {}
        self._stop = asyncio.Event()
        # The group coordinator runs rebalance callbacks in its own task (a poll waits for
        # them, but the copy loop may be between polls): one lock keeps copying,
        # committing and the callbacks from interleaving.
        self._lock = asyncio.Lock()
        self._running = False
        #: Stopping was cancelled: close without delivering or committing more.
        self._abandoned = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._started = False
        self._closed = False
        self._txn_open = False
        self._stats = MirrorStats()
        self._rate = RateMeter()
        self._byte_rate = RateMeter()

    def __repr__(self) -> str:
        mode = "exactly-once" if self.exactly_once else "at-least-once"
        return f"<Mirror {mode} group={self.group_id!r} partitions={len(self._parts)}>"

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Connect to both clusters and join the source group (partitions come with the
        first poll of ``run()``)."""
        if self._closed:
            raise E.ClosedError("mirror is closed")
        if self._started:
            return
        if concurrency.structured():  # its tasks are free asyncio tasks, not in a task group
            raise E.IllegalStateError(
                "Mirror runs on asyncio only (not on trio): start it under asyncio.run() or "
                "anyio.run(..., backend='asyncio')"
            )
        self._started = True
        try:
            self._source_admin = Admin(self.source, **self._source_client_opts)
            self._target_admin = Admin(self.target, **self._target_client_opts)
            await self._source_admin.start()
            await self._target_admin.start()
            self._producer = Producer(
                self.target,
                enable_idempotence=True,
                acks="all",
                transactional_id=self.transactional_id,
                **self._producer_opts,
            )
            # Fences an earlier incarnation of this instance (exactly-once) and aborts its
            # open transaction before any position is read back.
            await self._producer.start()
            self._consumer = Consumer(
                self.source,
                pattern=self.filter.include,
                exclude=self.filter.exclude,
                listener=_Listener(self),
                group_id=self.group_id,
                enable_auto_commit=False,
                isolation_level="read_committed",
                partition_assignment_strategy=("cooperative-sticky",),
                **self._consumer_opts,
            )
            await self._consumer.start()
        except BaseException:
            await self.close()
            raise

    async def __aenter__(self) -> Mirror:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def stop(self) -> None:
        """Ask ``run()`` to finish: it flushes, commits the last positions and returns.
        Safe to call from a signal handler (``loop.add_signal_handler``). A stop ends the
        run in progress (or the next one); a later ``run()`` copies on from where it was."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    async def close(self) -> None:
        """Stop, commit what the target acknowledged, leave the group, close every client."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        await self._idle.wait()  # a run() in another task finishes (flush, commit) first
        try:
            if (
                self._consumer is not None
                and self._producer is not None
                and not self._producer.closed
                and not self._abandoned
            ):
                with contextlib.suppress(E.KafkaError):
                    await self._finish()
        finally:
            if self._consumer is not None:
                await self._consumer.close()  # revokes: the callback commits once more
            if self._producer is not None:
                await self._producer.close(flush=not self._abandoned)
            for admin in (self._source_admin, self._target_admin):
                if admin is not None:
                    await admin.close()

    # ------------------------------------------------------------------ the copy loop
    async def run(self) -> None:
        """Copy until ``stop()`` (or cancellation); then flush and commit, and return.

        Raises ``MirrorError`` when records could not be delivered (nothing after them
        is committed) and the group/transaction errors that cannot be retried. However
        it ends, the records it had fetched but not handed to the target producer are
        fetched again by the next ``run()`` (or, from the committed positions, by the
        partition's next owner): none is skipped."""
        if not self._started:
            raise E.IllegalStateError("mirror not started: use 'async with Mirror(...)' or await start()")
        if self._closed:
            raise E.ClosedError("mirror is closed")
        if self._running:
            raise E.IllegalStateError("run() is already running")
        consumer, loop = self._consumer, asyncio.get_running_loop()
        assert consumer is not None
        self._running = True
        self._idle.clear()
        next_commit = loop.time() + self.commit_interval_ms / 1000
        #: Records taken from the consumer and not yet all handed to the producer.
        batch: dict[TopicPartition, list[Record]] = {}
        try:
            while not self._stop.is_set():
                batch = await consumer.getmany(timeout_ms=_POLL_MS)
                async with self._lock:
                    for tp, records in batch.items():
                        await self._copy(tp, records)
                    batch = {}
                    if loop.time() >= next_commit:
                        await self._commit()
                        next_commit = loop.time() + self.commit_interval_ms / 1000
            await self._finish()
        except asyncio.CancelledError:
            if self._stop.is_set():
                # Cancelled while already stopping (a second Ctrl-C): give up waiting. What
                # was not committed is copied again by the next run (nothing is lost).
                self._abandoned = True
                raise
            # Cancelled as the way to stop (Ctrl-C under asyncio.run): still deliver and
            # commit what was read, then let the cancellation through.
            self._stop.set()
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            # Shielded from anyio's cancel scopes (move_on_after, fail_after), which cancel
            # every later await: a commit cut short would leave an exactly-once
            # transaction holding its positions open until it times out. A second
            # Task.cancel() still gives up; the delivery timeout bounds the wait.
            producer = self._producer
            limit_s = producer.config.delivery_timeout_ms / 1000 if producer is not None else 0
            try:
                with concurrency.shielded(limit_s):
                    with contextlib.suppress(E.KafkaError):
                        await self._finish()
            except asyncio.CancelledError:
                self._abandoned = True
                raise
            raise
        finally:
            self._rewind_uncopied(batch)
            if not self._closed:
                self._stop.clear()  # a stop() ends one run: a later run() copies on
            self._running = False
            self._idle.set()

    def _rewind_uncopied(self, batch: dict[TopicPartition, list[Record]]) -> None:
        """run() left mid-batch (an error, a cancellation): move the consumer back to the
        first record of each partition not handed to the producer, so a later run() on
        this mirror copies it instead of skipping it (and committing past it)."""
        consumer = self._consumer
        if consumer is None or not batch:
            return
        assigned = consumer.assignment()
        for tp, records in batch.items():
            part = self._parts.get(tp)
            if not records or part is None or tp not in assigned:
                continue
            first = records[0].offset
            resume_at = first if part.read is None or part.read < first else part.read
            if resume_at <= records[-1].offset:
                consumer.seek(tp, resume_at)

    async def _finish(self) -> None:
        """Deliver everything handed to the producer and commit its positions."""
        producer = self._producer
        assert producer is not None
        async with self._lock:
            if not self.exactly_once:
                await producer.flush()
            await self._commit()

    async def _copy(self, tp: TopicPartition, records: list[Record]) -> None:
        part = self._parts.get(tp)
        if part is None or not records:
            return  # revoked meanwhile
        producer = self._producer
        assert producer is not None
        if self.exactly_once and not self._txn_open:
            await producer.begin_transaction()
            self._txn_open = True
        topic, count, src_count = part.target.name, part.target.partitions, part.source_partitions
        n = nbytes = 0
        fut: RecordFuture | None = None
        next_offset = records[0].offset
        enqueue = producer.enqueue
        try:
            for r in records:
                key, value = r.key, r.value
                fut = await enqueue(
                    topic,
                    value,
                    key,
                    partition=target_partition(key, tp.partition, src_count, count),
                    timestamp_ms=r.timestamp_ms if r.timestamp_ms >= 0 else None,
                    headers=r.headers,
                )
                n += 1
                nbytes += (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
                next_offset = r.offset + 1
        finally:
            if n:
                part.read = next_offset
                if self.exactly_once:
                    if part.txn_first is None:
                        part.txn_first = records[0].offset
                    part.txn_next = next_offset
                    part.txn_records += n
                    part.txn_bytes += nbytes
                else:
                    assert fut is not None
                    part.pending.append((next_offset, n, nbytes, fut))

    # ------------------------------------------------------------------ commits
    async def _commit(self) -> None:
        if self.exactly_once:
            await self._commit_transaction()
        else:
            await self._commit_acknowledged()

    def _credit(self, part: _Partition, records: int, nbytes: int) -> None:
        now = time.monotonic()
        part.records += records
        part.bytes += nbytes
        part.rate.add(now, records)
        self._stats.records += records
        self._stats.bytes += nbytes
        self._rate.add(now, records)
        self._byte_rate.add(now, nbytes)

    def _collect_acknowledged(self, parts: Sequence[_Partition]) -> None:
        """Move each partition's durable position past its acknowledged chunks (in order:
        the idempotent producer acknowledges a partition's records in order)."""
        for part in parts:
            pending = part.pending
            while pending and pending[0][3].done():
                next_offset, n, nbytes, fut = pending.popleft()
                exc = fut.exception()
                if exc is not None:
                    pending.clear()
                    raise MirrorError(
                        f"copying {part.source.topic}[{part.source.partition}] to {part.target.name!r} failed "
                        f"before offset {next_offset}: {exc}; positions after the last acknowledged record "
                        "are not committed"
                    ) from exc
                part.durable = next_offset
                self._credit(part, n, nbytes)

    async def _commit_acknowledged(self, only: set[TopicPartition] | None = None) -> None:
        consumer = self._consumer
        assert consumer is not None
        parts = [p for tp, p in self._parts.items() if only is None or tp in only]
        self._collect_acknowledged(parts)
        offsets = {
            p.source: OffsetAndMetadata(p.durable)
            for p in parts
            if p.durable is not None and p.durable != p.committed
        }
        if not offsets:
            return
        try:
            await consumer.commit(offsets)
        except E.CommitFailedError as exc:
            # A rebalance is under way: the revoke callback commits what leaves, the
            # rest is committed next time.
            log.info("mirror: commit deferred (%s)", exc)
            return
        self._stats.commits += 1
        for tp, om in offsets.items():
            self._parts[tp].committed = om.offset

    async def _commit_transaction(self) -> None:
        producer, consumer = self._producer, self._consumer
        assert producer is not None and consumer is not None
        if not self._txn_open:
            return
        parts = [p for p in self._parts.values() if p.txn_next is not None]
        positions = {
            p.position_key: OffsetAndMetadata(p.txn_next, metadata=p.source.topic)  # type: ignore[arg-type]
            for p in parts
        }
        try:
            if positions:
                await producer.send_offsets_to_transaction(positions, self.group_id)
            await producer.commit_transaction()
        except E.KafkaError as exc:
            if producer.transaction_state is TxnState.ABORTABLE_ERROR:
                log.warning("mirror: transaction failed (%s); aborting and copying its records again", exc)
                await self._abort_transaction()
                return
            raise
        self._txn_open = False
        self._stats.transactions += 1
        source_offsets: dict[TopicPartition, int | OffsetAndMetadata] = {}
        for p in parts:
            p.durable = p.committed = p.txn_next
            self._credit(p, p.txn_records, p.txn_bytes)
            source_offsets[p.source] = OffsetAndMetadata(p.committed)  # type: ignore[arg-type]
            p.txn_next = p.txn_first = None
            p.txn_records = p.txn_bytes = 0
        if source_offsets:
            # For lag tools watching the source group only; positions are read from the target.
            try:
                await consumer.commit(source_offsets)
            except E.KafkaError as exc:
                log.debug("mirror: informational commit to the source group failed: %s", exc)

    async def _abort_transaction(self) -> None:
        """Abort the open transaction and move the partitions back to its start."""
        producer, consumer = self._producer, self._consumer
        assert producer is not None and consumer is not None
        if self._txn_open:
            self._txn_open = False
            await producer.abort_transaction()
        for p in self._parts.values():
            if p.txn_first is not None:
                consumer.seek(p.source, p.txn_first)
                p.read = p.txn_first
            p.txn_next = p.txn_first = None
            p.txn_records = p.txn_bytes = 0

    # ------------------------------------------------------------------ rebalances
    async def _target_for(self, topic: str) -> TargetTopic:
        target = self._targets.get(topic)
        if target is not None:
            return target
        consumer, sa, ta = self._consumer, self._source_admin, self._target_admin
        assert consumer is not None and sa is not None and ta is not None
        partitions = len(consumer.client.cluster.partitions_for(topic))
        if partitions == 0:
            partitions = len(await consumer.partitions_for_topic(topic))
        name = self.renamer(topic)
        check_topic_name(name, f"target name of topic {topic!r}")
        target = await ensure_target_topic(
            sa,
            ta,
            topic,
            name,
            partitions,
            replication_factor=self.replication_factor,
            copy_configs=self.copy_configs,
        )
        if target.created:
            self._stats.topics_created += 1
        self._targets[topic] = target
        return target

    async def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        consumer = self._consumer
        assert consumer is not None
        added: list[_Partition] = []
        for tp in sorted(assigned):
            target = await self._target_for(tp.topic)
            source_partitions = len(consumer.client.cluster.partitions_for(tp.topic)) or target.partitions
            part = _Partition(tp, target, source_partitions)
            self._parts[tp] = part
            added.append(part)
        if self.exactly_once and added:
            await self._load_positions(added)
        if added:
            log.info(
                "mirror: copying %s", ", ".join(f"{p.source.topic}[{p.source.partition}]" for p in added)
            )

    async def _load_positions(self, parts: list[_Partition]) -> None:
        """Exactly-once: start each partition where the target's committed position says."""
        ta, consumer = self._target_admin, self._consumer
        assert ta is not None and consumer is not None
        keys = {p.position_key: p for p in parts}
        loop = asyncio.get_running_loop()
        # An open transaction holding one of these positions (a crashed instance's) is
        # aborted by the target's coordinator after its timeout; wait that long.
        deadline = loop.time() + self._producer_opts.get("transaction_timeout_ms", 60_000) / 1000 + 30
        while True:
            try:
                found = await ta.list_group_offsets(self.group_id, list(keys), require_stable=True)
            except E.UnstableOffsetCommitError:
                found = None
            if found is not None and not any(
                isinstance(o.error, E.UnstableOffsetCommitError) for o in found.values()
            ):
                break
            if loop.time() > deadline:
                raise E.KafkaTimeoutError(
                    f"positions of mirror group {self.group_id!r} on the target stayed unstable (an open "
                    "transaction holds them) past the transaction timeout"
                )
            await asyncio.sleep(_UNSTABLE_RETRY_S)
        for key, part in keys.items():
            got = found.get(key)
            if got is None or got.error is not None or got.offset < 0:
                continue  # never copied: auto_offset_reset decides
            part.read = part.durable = part.committed = got.offset
            consumer.seek(part.source, got.offset)

    async def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        """Before partitions move to another instance: make what was read durable, commit."""
        producer = self._producer
        assert producer is not None
        mine = revoked & set(self._parts)
        try:
            if mine and not self._abandoned:
                if self.exactly_once:
                    await self._commit_transaction()
                else:
                    await producer.flush()
                    await self._commit_acknowledged(mine)
        finally:
            for tp in mine:
                del self._parts[tp]
            self._forget_unused_targets()

    async def _on_lost(self, lost: set[TopicPartition]) -> None:
        """Ownership already gone: commit nothing for these (another instance may have them)."""
        mine = lost & set(self._parts)
        if self.exactly_once and self._txn_open and any(self._parts[tp].txn_next is not None for tp in mine):
            for tp in mine:
                self._parts[tp].txn_first = None  # not ours to seek back
            await self._abort_transaction()
        for tp in mine:
            del self._parts[tp]
        self._forget_unused_targets()

    def _forget_unused_targets(self) -> None:
        used = {tp.topic for tp in self._parts}
        for topic in [t for t in self._targets if t not in used]:
            del self._targets[topic]

    # ------------------------------------------------------------------ progress
    def stats(self) -> MirrorStats:
        """A snapshot: per source partition its target, durable position, high watermark,
        lag, records copied and records/s; totals; transaction and commit counts."""
        now = time.monotonic()
        consumer = self._consumer
        out = MirrorStats(
            records=self._stats.records,
            bytes=self._stats.bytes,
            records_per_s=self._rate.rate(now),
            bytes_per_s=self._byte_rate.rate(now),
            transactions=self._stats.transactions,
            commits=self._stats.commits,
            topics_created=self._stats.topics_created,
        )
        for tp, p in self._parts.items():
            hw = consumer.highwater(tp) if consumer is not None and tp in consumer.assignment() else None
            same = p.source_partitions == p.target.partitions
            out.partitions[tp] = PartitionStats(
                source=tp,
                target=TopicPartition(p.target.name, tp.partition if same else -1),
                position=p.durable,
                read=p.read,
                high_watermark=hw,
                records=p.records,
                bytes=p.bytes,
                records_per_s=p.rate.rate(now),
            )
        return out

    def metrics(self) -> dict[str, object]:
        """``stats()`` as plain data (JSON-ready)."""
        return self.stats().as_dict()
