"""``AIOKafkaConsumer``: aiokafka's consumer API mapped onto :class:`aiokafka_lite.Consumer`.

Options keep aiokafka's names and defaults (``session_timeout_ms=10000``,
``request_timeout_ms=40000``, ``auto_offset_reset='latest'``, round-robin assignment,
the classic group protocol); records come back as aiokafka's ``ConsumerRecord``.
A pattern subscription matches from the start of the topic name (``re.match``, as
aiokafka), where the native API matches the whole name.

The async contract is the native consumer's: a record is consumed (its position moves,
and a later ``commit()`` covers it) only once it has been returned to the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka_lite.compat.aiokafka import errors as Errors
from aiokafka_lite.compat.aiokafka.abc import ConsumerRebalanceListener
from aiokafka_lite.compat.aiokafka.structs import (
    ConsumerRecord,
    OffsetAndTimestamp,
    _NativeConsumerRecord,
    _new_record,
    record_from_native,
    records_from_native,
)
from aiokafka_lite.consume import Consumer
from aiokafka_lite.consume.subscription import OffsetAndMetadata
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition

__all__ = ["AIOKafkaConsumer"]

#: ``max_poll_records=None``: no limit, as aiokafka (the native default is 500).
_NO_LIMIT = 2**31 - 1


def _strategy(strategies: Iterable[Any]) -> list[Any]:
    names: list[Any] = []
    for assignor in strategies:
        name = getattr(assignor, "name", None)
        if isinstance(assignor, str):
            names.append(assignor)
        elif name in ("range", "roundrobin", "sticky", "cooperative-sticky"):
            names.append(name)
        else:
            raise Errors.ConfigError(
                f"partition assignor {assignor!r} is not supported by aiokafka_lite's compat layer: "
                "use RangePartitionAssignor, RoundRobinPartitionAssignor or StickyPartitionAssignor"
            )
    return names


class _CoordinatorView:
    """What FastStream reads of aiokafka's group coordinator (``member_id``)."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer

    @property
    def member_id(self) -> str:
        coordinator = self._consumer.coordinator
        if coordinator is None:
            return ""
        return str(coordinator.group_metadata().member_id)


class _SubscriptionView:
    """What FastStream reads of aiokafka's subscription state (``topics``)."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer

    @property
    def topics(self) -> set[str]:
        return self._consumer.subscription()

    @property
    def subscription(self) -> Any:
        return self if self._consumer.subscription() else None


class AIOKafkaConsumer:
    """aiokafka's consumer on the native :class:`aiokafka_lite.Consumer`."""

    def __init__(
        self,
        *topics: str,
        loop: Any = None,
        bootstrap_servers: str | list[str] = "localhost",
        client_id: str = "aiokafka-lite",
        group_id: str | None = None,
        group_instance_id: str | None = None,
        key_deserializer: Any = None,
        value_deserializer: Any = None,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 52428800,
        fetch_min_bytes: int = 1,
        max_partition_fetch_bytes: int = 1048576,
        request_timeout_ms: int = 40000,
        retry_backoff_ms: int = 100,
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        check_crcs: bool = True,
        metadata_max_age_ms: int = 300000,
        partition_assignment_strategy: Iterable[Any] = ("roundrobin",),
        max_poll_interval_ms: int = 300000,
        rebalance_timeout_ms: int | None = None,
        session_timeout_ms: int = 10000,
        heartbeat_interval_ms: int = 3000,
        consumer_timeout_ms: int = 200,
        max_poll_records: int | None = None,
        ssl_context: Any = None,
        security_protocol: str = "PLAINTEXT",
        api_version: Any = None,
        exclude_internal_topics: bool = True,
        connections_max_idle_ms: int = 540000,
        isolation_level: str = "read_uncommitted",
        sasl_mechanism: str = "PLAIN",
        sasl_plain_password: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_kerberos_service_name: str = "kafka",
        sasl_kerberos_domain_name: str | None = None,
        sasl_oauth_token_provider: Any = None,
        client_rack: str | None = None,
    ) -> None:
        if max_poll_records is not None and (not isinstance(max_poll_records, int) or max_poll_records < 1):
            raise ValueError("`max_poll_records` should be positive Integer")
        if group_id is None:
            enable_auto_commit = False  # aiokafka: no group, no commits
        options: dict[str, Any] = {
            "client_id": client_id,
            "group_id": group_id,
            "group_instance_id": group_instance_id,
            "key_deserializer": key_deserializer,
            "value_deserializer": value_deserializer,
            "fetch_max_wait_ms": fetch_max_wait_ms,
            "fetch_max_bytes": fetch_max_bytes,
            "fetch_min_bytes": fetch_min_bytes,
            "max_partition_fetch_bytes": max_partition_fetch_bytes,
            "request_timeout_ms": request_timeout_ms,
            "retry_backoff_ms": retry_backoff_ms,
            "auto_offset_reset": auto_offset_reset,
            "enable_auto_commit": enable_auto_commit,
            "auto_commit_interval_ms": auto_commit_interval_ms,
            "check_crcs": check_crcs,
            "metadata_max_age_ms": metadata_max_age_ms,
            "partition_assignment_strategy": _strategy(partition_assignment_strategy),
            "max_poll_interval_ms": max_poll_interval_ms,
            "rebalance_timeout_ms": rebalance_timeout_ms,
            "session_timeout_ms": session_timeout_ms,
            "heartbeat_interval_ms": heartbeat_interval_ms,
            "ssl_context": ssl_context,
            "security_protocol": security_protocol,
            "exclude_internal_topics": exclude_internal_topics,
            "connections_max_idle_ms": connections_max_idle_ms,
            "isolation_level": isolation_level,
            "sasl_mechanism": sasl_mechanism,
            "sasl_plain_username": sasl_plain_username,
            "sasl_plain_password": sasl_plain_password,
            "sasl_oauth_token_provider": sasl_oauth_token_provider,
            # GSSAPI: the ticket cache (kinit), as aiokafka; the native options add a keytab
            "sasl_kerberos_service_name": sasl_kerberos_service_name,
            "sasl_kerberos_domain_name": sasl_kerberos_domain_name,
            "client_rack": client_rack or "",
        }
        #: aiokafka's name (Faust reads it); None: getmany() returns all that is buffered.
        self._max_poll_records = max_poll_records
        options["max_poll_records"] = _NO_LIMIT if max_poll_records is None else max_poll_records
        if isinstance(bootstrap_servers, str):
            bootstrap_servers = bootstrap_servers.split(",")
        self._consumer = Consumer(bootstrap_servers, **options)
        self._group_id = group_id
        self._coordinator = _CoordinatorView(self._consumer)
        self._subscription = _SubscriptionView(self._consumer)
        self._closed = False
        self._start_wait_ms = request_timeout_ms
        if topics:
            self.subscribe(topics=topics)

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect and, for a group subscription, wait until this member has joined and
        the positions of its partitions are known (as aiokafka's ``start()`` waits for
        the assignment): a record produced after ``start()`` returns is consumed even
        with ``auto_offset_reset='latest'``. The wait is bounded by ``request_timeout_ms``
        (aiokafka waits without a bound)."""
        await self._consumer.start()
        if not self._consumer.subscription():
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._start_wait_ms / 1000
        # The native consumer has no "joined"/"assigned" event: watch the generation it
        # reports (group) or the assignment it derives from metadata (no group).
        while True:
            coordinator = self._consumer.coordinator
            if coordinator is not None:
                ready = coordinator.group_metadata().generation_id >= 0
            else:
                ready = bool(self._consumer.assignment())
            if ready or loop.time() >= deadline:
                break
            await asyncio.sleep(0.01)
        for tp in self._consumer.assignment():
            remaining = max(0.0, deadline - loop.time()) * 1000
            with contextlib.suppress(E.KafkaError):
                await self._consumer.position(tp, timeout_ms=remaining)

    async def stop(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._consumer.close()

    async def __aenter__(self) -> AIOKafkaConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- subscription ----------------------------------------------------------------------
    def subscribe(
        self,
        topics: Iterable[str] = (),
        pattern: str | re.Pattern[str] | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Subscribe to ``topics`` or to the topics ``pattern`` matches (from the start of
        the name, as ``re.match``); ``listener`` is called around rebalances."""
        topic_list = [topics] if isinstance(topics, str) else list(topics)
        if not (topic_list or pattern) or (topic_list and pattern):
            raise Errors.IllegalStateError("You must choose topic or pattern, but not both")
        if listener is not None and not isinstance(listener, ConsumerRebalanceListener):
            raise TypeError("listener should be an instance of ConsumerRebalanceListener")
        if pattern is not None:
            flags = pattern.flags if isinstance(pattern, re.Pattern) else 0
            source = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
            self._consumer.subscribe(pattern=re.compile(f"(?:{source}).*", flags), listener=listener)
        else:
            self._consumer.subscribe(topic_list, listener=listener)

    def unsubscribe(self) -> None:
        self._consumer.unsubscribe()

    def subscription(self) -> frozenset[str]:
        return frozenset(self._consumer.subscription())

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._consumer.assign(partitions)

    def assignment(self) -> set[TopicPartition]:
        return self._consumer.assignment()

    async def topics(self) -> set[str]:
        return await self._consumer.topics()

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """Partition ids of ``topic`` from the cached metadata (None when unknown)."""
        try:
            parts = self._consumer.client.cluster.partitions_for(topic)
        except (KeyError, E.KafkaError):
            return None
        return set(parts) if parts else None

    # -- consuming -------------------------------------------------------------------------
    async def getone(self, *partitions: TopicPartition) -> ConsumerRecord[Any, Any]:
        """The next record (of ``partitions`` when given); waits for one."""
        try:
            if not partitions:
                return record_from_native(await self._consumer.getone())
            while True:
                batch = await self._consumer.getmany(*partitions, timeout_ms=60000, max_records=1)
                for records in batch.values():
                    return record_from_native(records[0])
        except E.ClosedError:
            raise Errors.ConsumerStoppedError() from None

    async def getmany(
        self,
        *partitions: TopicPartition,
        timeout_ms: int = 0,
        max_records: int | None = None,
    ) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        try:
            batch = await self._consumer.getmany(*partitions, timeout_ms=timeout_ms, max_records=max_records)
        except E.ClosedError:
            raise Errors.ConsumerStoppedError() from None
        return {tp: records_from_native(records) for tp, records in batch.items()}

    def __aiter__(self) -> AIOKafkaConsumer:
        if self._closed:
            raise Errors.ConsumerStoppedError()
        return self

    async def __anext__(self) -> ConsumerRecord[Any, Any]:
        try:
            return _new_record(_NativeConsumerRecord, await self._consumer.__anext__())
        except (E.ClosedError, StopAsyncIteration):
            raise StopAsyncIteration from None

    # -- positions -------------------------------------------------------------------------
    def seek(self, partition: TopicPartition, offset: int) -> None:
        if not isinstance(offset, int) or offset < 0:
            raise ValueError("Offset must be a positive integer")
        self._consumer.seek(partition, offset)

    async def seek_to_beginning(self, *partitions: TopicPartition) -> bool:
        await self._consumer.seek_to_beginning(*partitions)
        return True

    async def seek_to_end(self, *partitions: TopicPartition) -> bool:
        await self._consumer.seek_to_end(*partitions)
        return True

    async def seek_to_committed(self, *partitions: TopicPartition) -> dict[TopicPartition, int | None]:
        return await self._consumer.seek_to_committed(*partitions)

    async def position(self, partition: TopicPartition) -> int:
        return await self._consumer.position(partition)

    def highwater(self, partition: TopicPartition) -> int | None:
        return self._consumer.highwater(partition)

    def last_stable_offset(self, partition: TopicPartition) -> int | None:
        return self._consumer.last_stable_offset(partition)

    def pause(self, *partitions: TopicPartition) -> None:
        self._consumer.pause(*partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._consumer.resume(*partitions)

    def paused(self) -> set[TopicPartition]:
        return self._consumer.paused()

    async def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._consumer.beginning_offsets(partitions)

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._consumer.end_offsets(partitions)

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        found = await self._consumer.offsets_for_times(timestamps)
        return {
            tp: None if ot is None else OffsetAndTimestamp(ot.offset, ot.timestamp)
            for tp, ot in found.items()
        }

    # -- commits ---------------------------------------------------------------------------
    async def commit(self, offsets: Mapping[TopicPartition, Any] | None = None) -> None:
        """Commit ``offsets`` (int, ``(offset, metadata)`` or ``OffsetAndMetadata`` per
        partition), or the positions of every record returned so far."""
        if self._group_id is None:
            raise Errors.IllegalOperation("Requires group_id")
        native: dict[TopicPartition, OffsetAndMetadata] | None = None
        if offsets is not None:
            native = {}
            for tp, om in offsets.items():
                if isinstance(om, int) and not isinstance(om, bool):
                    native[tp] = OffsetAndMetadata(om)
                elif isinstance(om, tuple) and len(om) == 2:
                    native[tp] = OffsetAndMetadata(om[0], om[1] or "")
                elif isinstance(om, OffsetAndMetadata):
                    native[tp] = om
                else:
                    raise ValueError(f"Illegal offset value for {tp}: {om!r}")
        await self._consumer.commit(native)

    async def committed(self, partition: TopicPartition) -> int | None:
        if self._group_id is None:
            raise Errors.IllegalOperation("Requires group_id")
        return await self._consumer.committed(partition)
