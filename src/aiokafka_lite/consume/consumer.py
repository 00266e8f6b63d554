"""``Consumer``: the user-facing consumer (manual assignment, topic/pattern subscriptions, groups).

::

    async with Consumer("127.0.0.1:9092", topics=["events"], group_id="g",
                        auto_offset_reset="earliest") as consumer:
        async for record in consumer:
            ...
        batch = await consumer.getmany(timeout_ms=1000, max_records=500)

Data flow: the :class:`~aiokafka_lite.consume.fetch.fetcher.Fetcher` fills a byte-capped buffer
in the background; the consumer decodes one batch at a time from it (a *chunk*) and
hands records out of that list. ``async for`` therefore costs a list index per record
while a chunk lasts (the partition's position follows the index: the consumer is the
:class:`~aiokafka_lite.consume.subscription.PositionCursor` of that partition's state until
the chunk ends); everything else (group polling, errors, waiting, choosing the next
partition round-robin) happens once per chunk.

Group membership is delegated to ``aiokafka_lite.consume.groups.GroupCoordinator`` (or
``ConsumerGroupCoordinator`` for ``group_protocol="consumer"``), built when ``group_id``
is set; the coordinator assigns/revokes partitions through the shared
:class:`~aiokafka_lite.consume.subscription.SubscriptionState`, which owns the positions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import Any

from aiokafka_lite.consume.consumer_config import ConsumerConfig
from aiokafka_lite.consume.fairness import TurnPacer
from aiokafka_lite.consume.fetch.decode import CompletedFetch
from aiokafka_lite.consume.fetch.fetcher import Fetcher
from aiokafka_lite.consume.fetch.offset_lookup import EARLIEST, LATEST, OffsetAndTimestamp, list_offsets
from aiokafka_lite.consume.groups.consumer_coordinator import ConsumerGroupCoordinator
from aiokafka_lite.consume.groups.coordinator import GroupCoordinator
from aiokafka_lite.consume.record import Record
from aiokafka_lite.consume.subscription import (
    OffsetAndMetadata,
    PartitionState,
    SubscriptionState,
    SubscriptionType,
)
from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.core import tracing_hook as _otel
from aiokafka_lite.core.client_metrics import track
from aiokafka_lite.core.health import Health, build_health
from aiokafka_lite.core.serialization import ContextCall, context_deserializer, plain_call
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client, ClientConfig, ClusterMetadata
from aiokafka_lite.net.metadata import fatal_topic_error
from aiokafka_lite.net.telemetry import TelemetryReporter, start_reporter

__all__ = ["Consumer"]

log = logging.getLogger(__name__)

_EMPTY: list[Record] = []
_UNKNOWN_TOPIC_OR_PARTITION = 3


class _PositionsAwaitable:
    """Returned by ``seek_to_*``: the reset is lazy, awaiting it resolves the positions now."""

    __slots__ = ("_consumer", "_tps")

    def __init__(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        self._consumer = consumer
        self._tps = tps

    def __await__(self) -> Generator[Any, None, None]:
        return self._wait().__await__()

    async def _wait(self) -> None:
        if self._consumer._fetcher is None:
            return
        for tp in self._tps:
            if self._consumer._sub.is_assigned(tp):
                await self._consumer.position(tp)


class Consumer:
    """An asyncio Kafka consumer.

    ``bootstrap_servers`` (or ``client=``, a shared started-or-not ``Client``) says where
    Kafka is. ``topics``/``pattern`` subscribe at construction (with ``group_id`` the
    group assigns partitions; without, every partition of the topics is consumed).
    Other keyword options are :class:`ConsumerConfig` fields, or ``ClientConfig`` fields
    when the consumer creates its own client. Use ``async with`` or ``start()``/``close()``.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        topics: str | Iterable[str] | None = None,
        pattern: str | re.Pattern[str] | None = None,
        exclude: str | re.Pattern[str] | None = None,
        listener: object | None = None,
        client: Client | None = None,
        config: ConsumerConfig | None = None,
        **options: Any,
    ) -> None:
        consumer_names = set(ConsumerConfig.option_names())
        client_names = set(ClientConfig.option_names())
        consumer_opts = {k: v for k, v in options.items() if k in consumer_names or k not in client_names}
        client_opts = {k: v for k, v in options.items() if k in client_names and k not in consumer_names}
        self.config = ConsumerConfig.from_options(config, **consumer_opts)
        if client is not None:
            if client_opts:
                raise E.ConfigError(
                    f"client options {sorted(client_opts)} cannot be used with client=; configure that client"
                )
            self._client = client
            self._own_client = False
        else:
            if bootstrap_servers is None:
                raise E.ConfigError("Consumer needs bootstrap_servers or client=")
            self._client = Client(bootstrap_servers, **client_opts)
            self._own_client = True
        self._sub = SubscriptionState()
        if topics is not None or pattern is not None:
            self._sub.subscribe(
                topics=[topics] if isinstance(topics, str) else topics,
                pattern=pattern,
                exclude=exclude,
                listener=listener,
            )
        self._coordinator: GroupCoordinator | None = None
        self._fetcher: Fetcher | None = None
        self._pattern_task: asyncio.Task[None] | None = None
        self._started = False
        # ``close()`` has begun: no more records are handed out and no new work starts.
        # Until it has finished (``_closed``), the group still owns partitions and its
        # revoke callbacks run; they may commit and look up positions and committed
        # offsets, as the Java client allows in onPartitionsRevoked during close().
        self._closing = False
        self._closed = False
        self._close_task: asyncio.Task[None] | None = None
        #: Tracing of this consumer's own tracer_provider (else aiokafka_lite.integrations.otel's global one).
        self._tracing = _otel.client_tracing(self.config.tracer_provider)
        self._kd: Any = self.config.key_deserializer
        self._vd: Any = self.config.value_deserializer
        # Deserializers that see the topic, field and headers (decided once): _kd/_vd become
        # ContextCall objects (a plain one beside a context one is wrapped), decoded in context.
        kc = context_deserializer(self._kd)
        vc = context_deserializer(self._vd)
        self._contextual = kc is not None or vc is not None
        if self._contextual:
            self._kd = kc or plain_call(self._kd)
            self._vd = vc or plain_call(self._vd)
        #: A record's deserializer needs I/O first: (call, data, ctx, tp, offset), awaited by the
        #: async paths before they decode on (nothing of that record was handed out).
        self._unresolved: tuple[ContextCall, Any, Any, TopicPartition, int] | None = None
        # The chunk being handed out by __anext__. ``_stop`` is where the fast path stops:
        # the end of the chunk, or the next fairness check point before it.
        self._recs: list[Record] = _EMPTY
        self._idx = 0
        self._stop = 0
        # Turns for the event loop's other tasks while buffered records are served.
        self._pacer = TurnPacer()
        self._cur_cf: CompletedFetch | None = None
        self._cur_st: PartitionState | None = None
        self._states = self._sub.states()
        self._missing_topics: set[str] = set()  # reported missing (warned once each)
        #: Records handed to the application per topic (the current chunk not included).
        self._delivered_by_topic: dict[str, int] = {}
        track(self)

    def __repr__(self) -> str:
        state = (
            "closed"
            if self._closed
            else "closing"
            if self._closing
            else "started"
            if self._started
            else "new"
        )
        return f"<Consumer {state} group={self.config.group_id!r} assignment={len(self._states)}>"

    # ------------------------------------------------------------------ lifecycle
    @property
    def client(self) -> Client:
        return self._client

    @property
    def subscription_state(self) -> SubscriptionState:
        """The shared state object (for the group coordinator and advanced use)."""
        return self._sub

    @property
    def fetcher(self) -> Fetcher | None:
        return self._fetcher

    @property
    def coordinator(self) -> GroupCoordinator | None:
        return self._coordinator

    async def start(self) -> None:
        """Connect, join the group if any, and start fetching in the background."""
        if self._closing:
            raise E.ClosedError("consumer is closed")
        if self._started:
            return
        try:
            await self._client.start()
        except BaseException:
            if self._own_client:
                await self._client.close()
            raise
        cfg = self.config
        if cfg.group_id is not None:
            coordinator_type = (
                ConsumerGroupCoordinator if cfg.group_protocol == "consumer" else GroupCoordinator
            )
            self._coordinator = coordinator_type(self._client, self._sub, cfg)
        coordinator = self._coordinator
        self._fetcher = Fetcher(
            self._client,
            self._sub,
            cfg,
            committed_lookup=coordinator.fetch_committed if coordinator is not None else None,
            on_metadata=self._on_metadata,
        )
        if coordinator is not None:  # a fatal group error wakes a waiting getmany, which raises it
            coordinator.on_failure = self._fetcher.data_ready.set
        self._sub.add_listener(self)
        self._started = True
        if cfg.enable_metrics_push:  # KIP-714: the consumer's lifetime owns the push task
            group = (("group_id", cfg.group_id),) if cfg.group_id is not None else ()
            self._telemetry = start_reporter(self._client, "consumer", self.metrics, group)
        try:
            await self._refresh_subscription_metadata()
            self._fetcher.start()
            if coordinator is not None:
                await coordinator.start()
            self._start_pattern_refresh()
        except BaseException:
            await self.close()
            raise

    _closed_structured: Any = None  # trio: set once the first close() is done

    async def close(self) -> None:
        """Leave the group (committing first with auto-commit), stop fetching, close our client.

        Idempotent; an ``async for`` running in another task ends cleanly.
        """
        if _otel.enabled:
            _otel.end_iteration(self)  # the last record's process span
        if _backend.structured():
            # trio: no task outside a task group; the first close runs in its caller, which
            # must be the task that started the client (its nursery lives there): refuse
            # any other before anything is closed, so the consumer stays usable.
            done = self._closed_structured
            if done is None:
                owner = self._client._owner
                if self._own_client and owner is not None:
                    owner.check_host()
                done = self._closed_structured = _backend.event()
                try:
                    await self._close()
                finally:
                    done.set()
            else:
                await done.wait()
            return
        if self._close_task is None:
            self._close_task = _backend.spawn(None, self._close(), "aiokafka_lite.consumer.close")
        await _backend.shield(self._close_task)

    async def _close(self) -> None:
        # The group's leave and the terminating metrics push share one budget,
        # default_api_timeout_ms, so close never waits longer than that for the network.
        deadline = time.monotonic() + self.config.default_api_timeout_ms / 1000
        self._closing = True
        self._drop_chunk()
        if self._fetcher is not None:
            self._fetcher.data_ready.set()
        if self._pattern_task is not None:
            self._pattern_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, _backend.FutureCancelledError):
                await self._pattern_task
        try:
            if self._coordinator is not None:
                try:
                    await self._coordinator.close(timeout_ms=self.config.default_api_timeout_ms)
                except E.KafkaError as exc:
                    log.warning("group coordinator did not close cleanly: %s", exc)
        finally:
            self._closed = True
            if self._fetcher is not None:
                await self._fetcher.close()
            self._sub.remove_listener(self)
            if self._telemetry is not None:  # the terminating push, before the client closes
                await self._telemetry.stop(deadline)
            if self._own_client:
                await self._client.close()

    _telemetry: TelemetryReporter | None = None

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        """True once ``close()`` has begun (no more records are returned)."""
        return self._closing

    def _require_started(self) -> Fetcher:
        """The fetcher, for calls that stay valid while closing (commits, positions and
        lookups from a revoke callback); ``ClosedError`` once the close has finished."""
        if self._closed:
            raise E.ClosedError("consumer is closed")
        if self._fetcher is None:
            raise E.IllegalStateError("consumer not started: use 'async with Consumer(...)' or await start()")
        return self._fetcher

    # ------------------------------------------------------------------ subscription
    def subscribe(
        self,
        topics: str | Iterable[str] | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
        exclude: str | re.Pattern[str] | None = None,
        listener: object | None = None,
    ) -> None:
        """Subscribe to topics or a regex ``pattern`` (full match; ``exclude`` removes matches).

        Pattern subscriptions pick up new matching topics at each metadata refresh
        (``metadata_max_age_ms``). Replaces any previous subscription.
        """
        self._sub.subscribe(
            topics=[topics] if isinstance(topics, str) else topics,
            pattern=pattern,
            exclude=exclude,
            listener=listener,
        )
        if self._started and not self._closing:
            self._track_subscription()
            self._client.request_metadata_refresh()
            self._start_pattern_refresh()
            if self._fetcher is not None:
                self._on_metadata(self._client.cluster)

    def unsubscribe(self) -> None:
        self._sub.unsubscribe()

    def subscription(self) -> set[str]:
        """Topics currently subscribed (for patterns: those matching now)."""
        return set(self._sub.subscribed_topics)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Manual assignment (no group management); positions of kept partitions are kept."""
        tps = list(partitions)
        self._sub.assign_manually(tps)
        self._client.track_topics({tp.topic for tp in self._sub.assignment()})
        if self._started:
            self._client.request_metadata_refresh()

    def assignment(self) -> set[TopicPartition]:
        return self._sub.assignment()

    def _track_subscription(self) -> None:
        if self._sub.subscription_type is SubscriptionType.TOPICS:
            self._client.track_topics(self._sub.subscribed_topics)

    async def _refresh_subscription_metadata(self) -> None:
        sub = self._sub
        if sub.subscription_type is SubscriptionType.PATTERN:
            await self._client.refresh_metadata(all_topics=True)
        elif sub.subscription_type is SubscriptionType.TOPICS:
            self._track_subscription()
            await self._client.refresh_metadata(sub.subscribed_topics)
        elif sub.is_manual:
            topics = {tp.topic for tp in sub.assignment()}
            self._client.track_topics(topics)
            await self._client.refresh_metadata(topics)
        self._on_metadata(self._client.cluster)

    def _start_pattern_refresh(self) -> None:
        if self._sub.subscription_type is not SubscriptionType.PATTERN:
            return
        if self._pattern_task is None or self._pattern_task.done():
            # None on trio once the client's task group is gone: nothing left to refresh for.
            self._pattern_task = _backend.spawn(
                self._client._owner, self._pattern_refresh(), "aiokafka_lite.consumer.pattern-refresh"
            )

    async def _pattern_refresh(self) -> None:
        """Pattern subscriptions need the full topic list, which routine refreshes do not fetch."""
        interval = self._client.config.metadata_max_age_ms / 1000
        while self._sub.subscription_type is SubscriptionType.PATTERN:
            await _backend.sleep(interval)
            try:
                await self._client.refresh_metadata(all_topics=True)
            except E.KafkaError as exc:
                log.debug("pattern subscription metadata refresh failed: %s", exc)
                continue
            self._on_metadata(self._client.cluster)

    def _on_metadata(self, cluster: ClusterMetadata) -> None:
        """New metadata: update pattern matches; without a group, assign every partition;
        report topics that do not exist, wake a waiting poll for topics it must fail on."""
        sub = self._sub
        if cluster.topic_errors:
            self._check_topic_errors(cluster)
        elif self._missing_topics:
            self._missing_topics = set()
        if sub.subscription_type is SubscriptionType.PATTERN:
            names = [
                name
                for name, info in cluster.topics.items()
                if not (self.config.exclude_internal_topics and info.is_internal)
            ]
            if sub.update_pattern_matches(names):
                self._client.track_topics(sub.subscribed_topics)
        if sub.is_subscribed and self.config.group_id is None:
            tps = {TopicPartition(t, p) for t in sub.subscribed_topics for p in cluster.partitions_for(t)}
            if tps != set(self._states):
                sub.set_assignment(tps)

    def _topics_in_use(self) -> Iterable[str]:
        """Topics named by the subscription or the manual assignment (a pattern only
        matches topics that exist)."""
        sub = self._sub
        if sub.subscription_type is SubscriptionType.TOPICS:
            return sub.subscribed_topics
        if sub.is_manual:
            return {tp.topic for tp in self._states}
        return ()

    def _check_topic_errors(self, cluster: ClusterMetadata) -> None:
        errors = cluster.topic_errors
        topics = self._topics_in_use()
        missing = {t for t in topics if errors.get(t) == _UNKNOWN_TOPIC_OR_PARTITION}
        new = missing - self._missing_topics
        if new:
            # As the Java client: keep waiting (the topic may be created), but say so.
            log.warning(
                "subscribed topic(s) %s do not exist (UNKNOWN_TOPIC_OR_PARTITION); waiting until they "
                "do (created by an admin, or by the brokers if auto.create.topics.enable is on)",
                ", ".join(repr(t) for t in sorted(new)),
            )
        self._missing_topics = missing
        if self._fetcher is not None and fatal_topic_error(errors, topics) is not None:
            self._fetcher.data_ready.set()  # a waiting getmany/async for raises it now

    def _raise_topic_errors(self) -> None:
        """Raise, as the Java consumer's poll does, when the last metadata says a topic in
        use has an invalid name or may not be accessed: waiting cannot fix either."""
        errors = self._client.cluster.topic_errors
        if errors:
            err = fatal_topic_error(errors, self._topics_in_use())
            if err is not None:
                raise err

    # ------------------------------------------------------------------ subscription listener
    def on_partitions_removed(self, tps: set[TopicPartition]) -> None:
        if self._cur_cf is not None and self._cur_cf.tp in tps:
            self._drop_chunk()

    def on_position_changed(self, tp: TopicPartition) -> None:
        if self._cur_cf is not None and self._cur_cf.tp == tp:
            self._drop_chunk()

    def on_state_changed(self) -> None:
        cf = self._cur_cf
        if cf is not None:
            st = self._states.get(cf.tp)
            if st is None or st.paused:
                self._park_chunk()

    def _count_delivered(self, out: dict[TopicPartition, list[Record]]) -> None:
        by_topic = self._delivered_by_topic
        for tp, recs in out.items():
            by_topic[tp.topic] = by_topic.get(tp.topic, 0) + len(recs)

    def cursor_position(self) -> int | None:
        """The position of the current chunk's partition (the consumer is the
        :class:`~aiokafka_lite.consume.subscription.PositionCursor` its state follows):
        the offset after the last record handed out of it."""
        i = self._idx
        return self._recs[i - 1][2] + 1 if i else None

    def _drop_chunk(self) -> None:
        st = self._cur_st
        if st is not None:
            st.settle()  # before the chunk is forgotten: the position it reached stays
        # Records handed out one by one are counted per chunk, here (not per record).
        cf = self._cur_cf
        if cf is not None and self._idx:
            by_topic = self._delivered_by_topic
            by_topic[cf.tp.topic] = by_topic.get(cf.tp.topic, 0) + self._idx
        self._pacer.chunk_finished(self._idx)
        self._recs = _EMPTY
        self._idx = 0
        self._stop = 0
        self._cur_cf = None
        self._cur_st = None

    def _park_chunk(self) -> None:
        """Give the unconsumed rest of the current chunk back to its completed fetch."""
        cf = self._cur_cf
        if cf is not None and self._idx < len(self._recs):
            cf.give_back(self._recs[self._idx :])
        self._drop_chunk()

    # ------------------------------------------------------------------ positions
    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Next record returned for ``partition`` will be at ``offset``."""
        self._sub.seek(partition, offset)

    def _targets(self, partitions: tuple[TopicPartition, ...]) -> list[TopicPartition]:
        tps = list(partitions) if partitions else sorted(self._sub.assignment())
        for tp in tps:
            self._sub.state(tp)  # raises for unassigned partitions
        return tps

    def seek_to_beginning(self, *partitions: TopicPartition) -> _PositionsAwaitable:
        """Move to the earliest offset (all assigned partitions when none given).

        Lazy like the Java client; ``await`` the result to resolve the positions now.
        """
        tps = self._targets(partitions)
        for tp in tps:
            self._sub.request_reset(tp, "earliest")
        return _PositionsAwaitable(self, tps)

    def seek_to_end(self, *partitions: TopicPartition) -> _PositionsAwaitable:
        """Move to the end (high watermark, or last stable offset with read_committed)."""
        tps = self._targets(partitions)
        for tp in tps:
            self._sub.request_reset(tp, "latest")
        return _PositionsAwaitable(self, tps)

    async def seek_to_committed(self, *partitions: TopicPartition) -> dict[TopicPartition, int | None]:
        """Move to the committed offsets (group only); partitions without one are left alone."""
        committed = await self._committed(self._targets(partitions))
        out: dict[TopicPartition, int | None] = {}
        for tp, om in committed.items():
            if om is not None and om.offset >= 0:
                self._sub.seek(tp, om.offset, om.leader_epoch)
                out[tp] = om.offset
            else:
                out[tp] = None
        return out

    async def position(self, partition: TopicPartition, timeout_ms: float | None = None) -> int:
        """Offset of the next record to be returned, resolving it first if unknown."""
        fetcher = self._require_started()
        timeout = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        return await fetcher.wait_for_position(partition, timeout)

    def highwater(self, partition: TopicPartition) -> int | None:
        """High watermark from the last fetch response, or None before one arrived."""
        hw = self._sub.state(partition).high_watermark
        return hw if hw >= 0 else None

    def last_stable_offset(self, partition: TopicPartition) -> int | None:
        lso = self._sub.state(partition).last_stable_offset
        return lso if lso >= 0 else None

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning and fetching records for these partitions (buffered data is kept)."""
        self._sub.pause(*partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._sub.resume(*partitions)

    def paused(self) -> set[TopicPartition]:
        return self._sub.paused()

    # ------------------------------------------------------------------ offsets lookups
    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        return await self._list(partitions, EARLIEST, timeout_ms)

    async def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """End offsets: high watermark (read_uncommitted) or last stable offset (read_committed)."""
        return await self._list(partitions, LATEST, timeout_ms)

    async def _list(
        self, partitions: Iterable[TopicPartition], ts: int, timeout_ms: float | None
    ) -> dict[TopicPartition, int]:
        res = await self._lookup({tp: ts for tp in partitions}, timeout_ms)
        return {tp: (r.offset if r is not None else -1) for tp, r in res.items()}

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Earliest offset whose timestamp is >= the given one (ms), or None when there is none."""
        for tp, ts in timestamps.items():
            if not isinstance(ts, int) or isinstance(ts, bool):
                raise TypeError(f"timestamp for {tp} must be an int (ms), not {type(ts).__name__}")
            if ts < 0:
                raise ValueError(f"timestamp for {tp} must be >= 0, got {ts}")
        return await self._lookup(dict(timestamps), timeout_ms)

    async def _lookup(
        self, timestamps: dict[TopicPartition, int], timeout_ms: float | None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        self._require_started()
        for tp in timestamps:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"expected TopicPartition, got {tp!r}")
        if not timestamps:
            return {}
        timeout = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        return await list_offsets(
            self._client,
            timestamps,
            isolation_level=1 if self.config.read_committed else 0,
            timeout_ms=timeout,
        )

    # ------------------------------------------------------------------ metadata
    async def topics(self) -> set[str]:
        """Every topic in the cluster."""
        self._require_started()
        cluster = await self._client.refresh_metadata(all_topics=True)
        return set(cluster.topics)

    async def partitions_for_topic(self, topic: str) -> set[int]:
        self._require_started()
        info = await self._client.wait_for_topic(topic, self.config.default_api_timeout_ms)
        return set(info.partitions)

    # ------------------------------------------------------------------ groups
    def _require_group(self) -> GroupCoordinator:
        self._require_started()
        if self._coordinator is None:
            raise E.IllegalStateError("committed offsets need a group_id")
        return self._coordinator

    async def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None) -> None:
        """Commit ``offsets`` (next offset to read per partition), or every consumed position.

        Raises ``CommitFailedError`` when the group has moved on, and also, without asking
        the broker, while this member's JoinGroup/SyncGroup is in flight (as the Java
        client): retry once the rebalance completes (the next poll drives it)."""
        coordinator = self._require_group()
        if offsets is None:
            await coordinator.commit(None)
            return
        converted: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if isinstance(om, OffsetAndMetadata):
                converted[tp] = om
            elif isinstance(om, int) and not isinstance(om, bool):
                converted[tp] = OffsetAndMetadata(om)
            else:
                raise TypeError(
                    f"offset for {tp} must be an int or OffsetAndMetadata, not {type(om).__name__}"
                )
        await coordinator.commit(converted)

    async def committed(self, partition: TopicPartition) -> int | None:
        """The group's committed offset for ``partition`` (None when nothing is committed)."""
        om = (await self._committed([partition])).get(partition)
        return om.offset if om is not None and om.offset >= 0 else None

    async def _committed(self, tps: list[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return await self._require_group().fetch_committed(tps)

    def group_metadata(self) -> Any:
        """Group id, generation, member id (for transactional offset commits, KIP-447)."""
        return self._require_group().group_metadata()

    # ------------------------------------------------------------------ consuming
    def _raise_position_errors(self, fetcher: Fetcher) -> None:
        errors = fetcher.position_errors
        if errors:
            for tp, err in errors.items():
                if tp in self._states:
                    raise err

    def _next_chunk(
        self, only: set[TopicPartition] | None = None
    ) -> tuple[CompletedFetch, PartitionState, list[Record]] | None:
        """Decode the next non-empty chunk, serving partitions round-robin."""
        fetcher = self._fetcher
        assert fetcher is not None
        buffer = fetcher.buffer
        states = self._states

        def consumable(tp: TopicPartition) -> bool:
            st = states.get(tp)
            return st is not None and not st.paused and (only is None or tp in only)

        while True:
            cf = buffer.next_ready(consumable)
            if cf is None:
                return None
            tp = cf.tp
            st = states[tp]
            pos = st.position
            if pos is None or pos < cf.fetch_offset or pos > cf.next_fetch_offset:
                buffer.done(cf)  # stale: the position moved elsewhere
                fetcher.consumed()
                continue
            try:
                recs = cf.next_records(pos, self._kd, self._vd, self._contextual)
            except E.KafkaError:
                fetcher.halted.add(tp)
                raise
            if recs:
                return cf, st, recs
            if cf.unresolved is not None:  # the record at the position needs I/O: see _resolve
                call, data, ctx, offset = cf.unresolved
                cf.unresolved = None
                self._unresolved = (call, data, ctx, tp, offset)
                return None
            # Exhausted: move past trailing control/aborted/compacted offsets.
            if cf.next_fetch_offset > pos:
                epoch = cf.last_epoch
                st.advance(cf.next_fetch_offset, st.position_epoch if epoch is None else epoch)
            if cf.error is not None:
                fetcher.halted.add(tp)
                raise cf.error  # the completed fetch stays: raised again until a seek
            buffer.done(cf)
            fetcher.consumed()

    async def _resolve(self) -> None:
        """Await the deserializer's async path for the record at a position (a schema not cached
        yet): nothing of it was handed out, so a cancellation or failure here leaves the position
        at that record. A failure is raised as RecordDeserializationError; the next call retries."""
        pending = self._unresolved
        assert pending is not None
        self._unresolved = None
        call, data, ctx, tp, offset = pending
        try:
            await call.resolve(data, ctx)
        except Exception as exc:
            raise E.RecordDeserializationError(
                f"{tp.topic}-{tp.partition}: cannot deserialize the record at offset {offset}: {exc!r}. "
                "The position stays at this record; the next call tries again",
                tp.topic,
                tp.partition,
                offset,
            ) from exc

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> Record:
        i = self._idx
        if i < self._stop and not _otel.enabled:
            rec = self._recs[i]
            self._idx = i + 1
            return rec
        if _otel.enabled and (tracing := _otel.of(self)) is not None:
            return await tracing.next_record(self, self._next_record)
        return await self._next_record()

    async def _next_record(self) -> Record:
        """``__anext__`` without tracing."""
        i = self._idx
        if i < self._stop:
            rec = self._recs[i]
            self._idx = i + 1
            return rec
        if i < len(self._recs):
            # A fairness check point inside the chunk. Yield *before* handing the record
            # out: a step cancelled at the yield has taken nothing.
            if self._pacer.due(i):
                await self._pacer.take_turn()
                return await self._next_record()  # a seek/revoke/close may have run meanwhile
            self._stop = min(len(self._recs), i + self._pacer.every)
            rec = self._recs[i]
            self._idx = i + 1
            return rec
        return await self._next_slow()

    async def _next_slow(self) -> Record:
        fetcher = self._require_started_for_iteration()
        self._drop_chunk()
        ready = fetcher.data_ready
        coordinator = self._coordinator
        while True:
            if self._closing:
                raise StopAsyncIteration
            self._raise_position_errors(fetcher)
            self._raise_topic_errors()
            if coordinator is not None:
                try:
                    await coordinator.poll()
                except E.ClosedError:
                    if self._closing:
                        raise StopAsyncIteration from None
                    raise
                if self._closing:
                    raise StopAsyncIteration
            if self._pacer.due(0):  # a new chunk is a check point too
                await self._pacer.take_turn()
                continue
            ready.clear()
            chunk = self._next_chunk()
            if chunk is None and self._unresolved is not None:
                await self._resolve()
                continue
            if chunk is not None:
                cf, st, recs = chunk
                self._cur_cf = cf
                self._cur_st = st
                self._recs = recs
                self._idx = 1
                self._stop = min(len(recs), 1 + self._pacer.every)
                # The position follows the records handed out (cursor_position) until
                # the chunk is dropped: no write per record.
                st.follow(self, recs[0].leader_epoch)
                return recs[0]
            await ready.wait()
            self._pacer.rested()

    def _require_started_for_iteration(self) -> Fetcher:
        if self._closing:
            raise StopAsyncIteration
        return self._require_started()

    async def getone(self) -> Record:
        """The next record (waits for one)."""
        if self._closing:
            raise E.ClosedError("consumer is closed")
        try:
            return await self.__anext__()
        except StopAsyncIteration:
            raise E.ClosedError("consumer is closed") from None

    async def getmany(
        self,
        *partitions: TopicPartition,
        timeout_ms: float = 0,
        max_records: int | None = None,
    ) -> dict[TopicPartition, list[Record]]:
        """Records by partition: whatever is buffered now, else waits up to ``timeout_ms``.

        Returns at most ``max_records`` (default ``max_poll_records``) records, from the
        given ``partitions`` only if any are given; ``{}`` on timeout.
        """
        if _otel.enabled and (tracing := _otel.of(self)) is not None:
            return await tracing.poll(self, lambda: self._getmany(partitions, timeout_ms, max_records))
        return await self._getmany(partitions, timeout_ms, max_records)

    async def _getmany(
        self, partitions: tuple[TopicPartition, ...], timeout_ms: float, max_records: int | None
    ) -> dict[TopicPartition, list[Record]]:
        fetcher = self._require_started()
        limit = self.config.max_poll_records if max_records is None else max_records
        if limit < 1:
            raise ValueError("max_records must be >= 1")
        only = set(partitions) if partitions else None
        self._park_chunk()
        loop = _backend.loop()
        deadline = loop.time() + timeout_ms / 1000
        ready = fetcher.data_ready
        coordinator = self._coordinator
        while True:
            if self._closing:
                raise E.ClosedError("consumer is closed")
            self._raise_position_errors(fetcher)
            self._raise_topic_errors()
            if coordinator is not None:
                await coordinator.poll()
            if self._pacer.overdue():
                # A loop over getmany whose body never awaits still lets other tasks
                # run; before taking records, so a call cancelled here has taken none.
                await self._pacer.take_turn()
                continue
            ready.clear()
            out: dict[TopicPartition, list[Record]] = {}
            n = 0
            try:
                while n < limit:
                    chunk = self._next_chunk(only)
                    if chunk is None:
                        break
                    cf, st, recs = chunk
                    room = limit - n
                    if len(recs) > room:
                        cf.give_back(recs[room:])
                        recs = recs[:room]
                    st.advance(recs[-1][2] + 1, recs[0].leader_epoch)
                    got = out.get(cf.tp)
                    if got is None:
                        out[cf.tp] = recs
                    else:
                        got.extend(recs)
                    n += len(recs)
            except E.KafkaError:
                if out:
                    self._count_delivered(out)
                    return out  # the error surfaces on the next call
                raise
            if out:
                self._unresolved = None  # decoded (and resolved) again on the next call
                self._count_delivered(out)
                return out
            if self._unresolved is not None:
                await self._resolve()
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                # Nothing buffered: let the fetcher (and everyone else) run, or a loop of
                # getmany(timeout_ms=0) calls would keep the buffer from ever filling.
                await self._pacer.take_turn()
                return {}
            with contextlib.suppress(TimeoutError):
                async with _backend.timeout(remaining):
                    await ready.wait()
            self._pacer.rested()

    # ------------------------------------------------------------------ misc
    def delivered_by_topic(self) -> dict[str, int]:
        """Records handed to the application so far, per topic."""
        out = dict(self._delivered_by_topic)
        cf = self._cur_cf
        if cf is not None and self._idx:
            out[cf.tp.topic] = out.get(cf.tp.topic, 0) + self._idx
        return out

    def partition_lag(self) -> dict[TopicPartition, int]:
        """Per assigned partition with a known position and end: records not consumed yet,
        up to the high watermark (read_committed: the last stable offset), as Java's
        ``records-lag``."""
        committed = self.config.read_committed
        out: dict[TopicPartition, int] = {}
        for tp, st in self._states.items():
            end = st.last_stable_offset if committed else st.high_watermark
            if st.position is not None and end >= 0:
                out[tp] = max(end - st.position, 0)
        return out

    def metrics(self) -> dict[str, Any]:
        """Buffer, session, delivery, lag and group counters plus the client's metrics.

        ``records_consumed`` counts records handed to the application; ``bytes_fetched``
        counts record-batch bytes received from brokers (also those later dropped by a seek).
        ``partitions`` lists each assigned partition's position, end and lag (None until
        known); ``group`` is None without a group_id."""
        fetcher = self._fetcher
        delivered = self.delivered_by_topic()
        lag = self.partition_lag()
        committed = self.config.read_committed
        partitions = []
        for tp, st in sorted(self._states.items()):
            end = st.last_stable_offset if committed else st.high_watermark
            partitions.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "position": st.position,
                    "end_offset": end if end >= 0 else None,
                    "lag": lag.get(tp),
                }
            )
        fetched = dict(sorted(fetcher.bytes_by_topic.items())) if fetcher is not None else {}
        out: dict[str, Any] = {
            "client": self._client.metrics(),
            "records_consumed": sum(delivered.values()),
            "consumed_by_topic": dict(sorted(delivered.items())),
            "bytes_fetched": sum(fetched.values()),
            "fetched_bytes_by_topic": fetched,
            "assigned_partitions": len(self._states),
            "partitions": partitions,
            "records_lag_max": max(lag.values(), default=None),
            "group": self._group_metrics(),
        }
        if fetcher is not None:
            out["buffered_bytes"] = fetcher.buffer.buffered_bytes
            out["fetch_sessions"] = {
                node: {
                    "session_id": s.session_id,
                    "epoch": s.epoch,
                    "full_requests": s.full_requests,
                    "incremental_requests": s.incremental_requests,
                    "resets": s.resets,
                }
                for node, s in fetcher.sessions.items()
            }
        return out

    def health(self) -> Health:
        """Readiness summary (rules in ``aiokafka_lite.core.health``): started, a broker
        reachable, no fatal group error, and when a group manages the subscription a
        stable member. ``lag`` is the total over the assigned partitions whose lag is known."""
        coordinator = self._coordinator
        membership = coordinator.membership if coordinator is not None else None
        group_id = self.config.group_id
        group_state: str | None = None
        if group_id is not None:
            group_state = membership.state.value if membership is not None else "unjoined"
        lag = self.partition_lag()
        return build_health(
            "consumer",
            self._client.metrics(),
            self._client.config.client_id,
            started=self._started,
            closed=self._closing,
            fatal=membership.fatal if membership is not None else None,
            group_id=group_id,
            group_state=group_state,
            group_managed=self._sub.is_subscribed,
            assigned=frozenset(self._states),
            lag=sum(lag.values()) if lag else None,
        )

    def _group_metrics(self) -> dict[str, Any] | None:
        coordinator = self._coordinator
        if coordinator is None:
            return None
        m = coordinator.membership
        out: dict[str, Any] = {
            "group_id": coordinator.group_id,
            "protocol": self.config.group_protocol,
            "state": m.state.value,
            # the classic protocol's generation; the consumer protocol's member epoch
            "generation": getattr(m, "generation", getattr(m, "epoch", -1)),
            "member_id": m.member_id,
            "coordinator": m.coordinator,
        }
        if hasattr(m, "rebalances"):  # both protocols' memberships count them
            last = m.last_rebalance_ms
            out["rebalances"] = m.rebalances
            out["rebalancing"] = m.rebalance_started is not None
            out["rebalance_seconds_total"] = m.rebalance_ms_total / 1000
            out["last_rebalance_seconds"] = None if last is None else last / 1000
        return out
