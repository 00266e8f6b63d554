"""``Admin``: topic, config, group, offset and record administration.

Routing follows the Java admin client: topic creation/deletion and partition changes go
to the controller (any broker in KRaft clusters, which forwards), broker configs to
that broker, group operations to each group's coordinator, offset and record
operations to each partition's leader, split per broker and merged. Retriable errors
are retried (refreshing metadata or rediscovering coordinators as the error asks)
until the call's ``timeout_ms`` (default ``default_timeout_ms``, 60 s as in Java's
``default.api.timeout.ms``); what still fails is reported per item.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal, TypeVar

from aiokafka_lite.admin.consumer_groups import ConsumerGroupsAdmin
from aiokafka_lite.admin.share_groups import ShareGroupsAdmin
from aiokafka_lite.admin.types import (
    AlterConfigOp,
    AlterConfigOpType,
    ClusterDescription,
    ConfigDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    CreateTopicResult,
    DeleteRecordsResult,
    GroupDescription,
    GroupListing,
    GroupOffset,
    ListGroupsResult,
    ListOffsetsResult,
    MemberDescription,
    NewTopic,
    OffsetSpec,
    PartitionDescription,
    Result,
    Results,
    TopicDescription,
    TopicListing,
)
from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.client_metrics import track
from aiokafka_lite.core.health import Health, build_health
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net.client import Client
from aiokafka_lite.net.client_config import ClientConfig
from aiokafka_lite.net.metadata import BrokerInfo, CoordinatorType
from aiokafka_lite.net.retry import Retry
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    ConsumerProtocolAssignment,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from aiokafka_lite.wire.primitives import ZERO_UUID

__all__ = ["Admin"]

log = logging.getLogger("aiokafka_lite.admin")

K = TypeVar("K")
R = TypeVar("R")

_UNKNOWN_TOPIC: Final = 3
_NOT_CONTROLLER: Final = 41
Outcome = Any  # a result object or a KafkaError

_OFFSET_SPECS: Final = {
    "earliest": OffsetSpec.EARLIEST,
    "latest": OffsetSpec.LATEST,
    "max_timestamp": OffsetSpec.MAX_TIMESTAMP,
}


def _err(code: int, message: str | None = None) -> E.KafkaError | None:
    return E.error_for(code, message or None) if code else None


class Admin(ShareGroupsAdmin, ConsumerGroupsAdmin):
    """Cluster administration over a (shared or owned) ``Client``.

    ``async with Admin("127.0.0.1:9092") as admin: ...``, or ``Admin(client=shared)``
    to reuse a Producer's/Consumer's client (then closing the Admin leaves it open).
    Share-group methods come from ``ShareGroupsAdmin`` (admin/share_groups.py).
    Consumer-group methods of both protocols (``describe_consumer_groups``,
    ``list_consumer_groups``) come from ``ConsumerGroupsAdmin`` (admin/consumer_groups.py).
    Extra keyword options are ``ClientConfig`` options for an owned client; an owned
    client never auto-creates topics through metadata requests.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        client: Client | None = None,
        config: ClientConfig | None = None,
        default_timeout_ms: float = 60_000,
        **options: Any,
    ) -> None:
        if default_timeout_ms <= 0:
            raise E.ConfigError("default_timeout_ms must be > 0")
        self.default_timeout_ms = default_timeout_ms
        if client is not None:
            if bootstrap_servers is not None or config is not None or options:
                raise E.ConfigError("pass either client= or bootstrap servers/options, not both")
            self._client = client
            self._owns_client = False
        else:
            if bootstrap_servers is None:
                raise E.ConfigError("Admin needs bootstrap_servers or client=")
            if config is None:
                options.setdefault("allow_auto_topic_creation", False)
            self._client = Client(bootstrap_servers, config=config, **options)
            self._owns_client = True
        self._started = False
        self._closed = False
        track(self)

    @property
    def client(self) -> Client:
        return self._client

    @property
    def closed(self) -> bool:
        return self._closed or self._client.closed

    async def start(self) -> None:
        await self._client.start()
        self._started = True

    async def close(self) -> None:
        self._closed = True
        if self._owns_client:
            await self._client.close()

    def metrics(self) -> dict[str, Any]:
        """The client's metrics (per broker counters, retries, errors)."""
        return {"client": self._client.metrics()}

    def health(self) -> Health:
        """Readiness summary (rules in ``aiokafka_lite.core.health``): started and a broker reachable."""
        return build_health(
            "admin",
            self._client.metrics(),
            self._client.config.client_id,
            started=self._started,
            closed=self.closed,
        )

    async def __aenter__(self) -> Admin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ plumbing

    def _deadline(self, timeout_ms: float | None) -> float:
        return _backend.loop().time() + (self.default_timeout_ms if timeout_ms is None else timeout_ms) / 1000

    def _remaining_ms(self, deadline: float) -> float:
        return max((deadline - _backend.loop().time()) * 1000, 1.0)

    def _retry(self, deadline: float) -> Retry:
        """The retry schedule of one admin call: the client's backoff until the call's deadline."""
        return Retry(self._client.retry_backoff, clock=_backend.loop().time, deadline=deadline)

    def _target(self, node: int | Literal["controller", "any"]) -> int:
        cluster = self._client.cluster
        if node == "controller":
            if cluster.controller_id in cluster.brokers:
                return cluster.controller_id
            return self._client.least_loaded_node()
        if node == "any":
            return self._client.least_loaded_node()
        return node

    async def _call(
        self,
        make: Callable[[int], Request],
        node: int | Literal["controller", "any"],
        deadline: float,
    ) -> Response:
        """One request (built for the negotiated version), retried on connection-level
        failures until ``deadline``."""
        retry = self._retry(deadline)
        client = self._client
        while True:
            target = self._target(node)
            try:
                timeout = min(client.config.request_timeout_ms, self._remaining_ms(deadline))
                conn = await client.connection(target, timeout_ms=timeout)
                version = conn.version_for(make(-1).API_KEY)  # building a request is pure: probe its key
                request = make(version)
                resp = await client.send(request, node_id=target, version=version, timeout_ms=timeout)
                assert resp is not None
                return resp
            except E.KafkaError as exc:
                delay = retry.next_delay() if exc.retriable else None
                if delay is None:
                    raise
                log.debug("admin request to node %s failed, retrying: %s", target, exc)
                await _backend.sleep(delay)
                if node == "controller" or isinstance(exc, E.KafkaConnectionError):
                    await self._refresh((), deadline)

    async def _refresh(
        self, topics: Iterable[str], deadline: float | None, *, all_topics: bool = False
    ) -> None:
        """Refresh metadata, waiting at most until ``deadline`` (the public call's)."""
        timeout_ms = None if deadline is None else self._remaining_ms(deadline)
        try:
            await self._client.refresh_metadata(
                list(topics), all_topics=all_topics, track=False, timeout_ms=timeout_ms
            )
        except E.KafkaError as exc:
            if not exc.retriable:
                raise

    async def _per_item(
        self,
        items: Sequence[K],
        attempt: Callable[[list[K]], Awaitable[dict[K, Outcome]]],
        deadline: float,
        *,
        retry_if: Callable[[E.KafkaError], bool] | None = None,
        on_retry: Callable[[K, E.KafkaError], None] | None = None,
        refresh_topics: Callable[[list[K]], Iterable[str]] | None = None,
    ) -> dict[K, Outcome]:
        """Run ``attempt`` on the items still pending until each has a final outcome.

        Items whose error satisfies ``retry_if`` are retried with backoff (after a
        metadata refresh if the error says metadata is stale) until ``deadline``.
        """
        if retry_if is None:
            retry_if = _default_retry
        retry = self._retry(deadline)
        results: dict[K, Outcome] = {}
        pending = list(dict.fromkeys(items))
        while pending:
            try:
                out = await attempt(pending)
            except E.KafkaError as exc:
                out = dict.fromkeys(pending, exc)
            again: list[K] = []
            stale = False
            delay = retry.next_delay()
            time_left = delay is not None
            for item in pending:
                outcome = out.get(item)
                if outcome is None:
                    outcome = E.UnknownServerError(f"no result for {item} in the response")
                if isinstance(outcome, E.KafkaError) and time_left and retry_if(outcome):
                    again.append(item)
                    stale |= bool(getattr(outcome, "invalidates_metadata", False))
                    if on_retry is not None:
                        on_retry(item, outcome)
                else:
                    results[item] = outcome
            pending = again
            if pending:
                assert delay is not None  # items are retried only with time left
                await _backend.sleep(delay)
                if stale:
                    await self._refresh(
                        refresh_topics(pending) if refresh_topics is not None else (), deadline
                    )
        return results

    @staticmethod
    def _results(
        items: Iterable[K], outcomes: dict[K, Outcome], on_error: Callable[[K, E.KafkaError], Any]
    ) -> Results[K, Any]:
        out: Results[K, Any] = Results()
        for item in items:
            o = outcomes[item]
            out[item] = on_error(item, o) if isinstance(o, E.KafkaError) else o
        return out

    # ------------------------------------------------------------------ topics

    async def create_topics(
        self,
        topics: Sequence[NewTopic],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[str, CreateTopicResult]:
        """Create topics; existing ones fail per item with ``TopicAlreadyExistsError``."""
        by_name: dict[str, NewTopic] = {}
        for t in topics:
            if not isinstance(t, NewTopic):
                raise E.ConfigError(f"create_topics takes NewTopic objects, got {type(t).__name__}")
            if t.name in by_name:
                raise E.ConfigError(f"topic {t.name!r} listed twice")
            by_name[t.name] = t
        deadline = self._deadline(timeout_ms)

        async def attempt(names: list[str]) -> dict[str, Outcome]:
            def make(version: int) -> Request:
                return CreateTopicsRequest(
                    topics=[_creatable(by_name[n]) for n in names],
                    timeout_ms=int(self._remaining_ms(deadline)),
                    validate_only=validate_only,
                )

            resp = await self._call(make, "controller", deadline)
            assert isinstance(resp, CreateTopicsResponse)
            out: dict[str, Outcome] = {}
            for r in resp.topics:
                err = _err(r.error_code, r.error_message)
                if err is not None:
                    out[r.name] = err
                    continue
                out[r.name] = CreateTopicResult(
                    name=r.name,
                    topic_id=None if r.topic_id == ZERO_UUID else r.topic_id,
                    partitions=r.num_partitions,
                    replication_factor=r.replication_factor,
                    configs={c.name: c.value for c in r.configs or []},
                )
            return out

        outcomes = await self._per_item(list(by_name), attempt, deadline, retry_if=_controller_retry)
        return self._results(by_name, outcomes, lambda n, e: CreateTopicResult(name=n, error=e))

    async def delete_topics(
        self, names: Iterable[str], *, timeout_ms: float | None = None
    ) -> Results[str, Result]:
        items = list(dict.fromkeys(names))
        deadline = self._deadline(timeout_ms)

        async def attempt(batch: list[str]) -> dict[str, Outcome]:
            def make(version: int) -> Request:
                if version >= 6:
                    return DeleteTopicsRequest(
                        topics=[DeleteTopicsRequest.DeleteTopicState(name=n) for n in batch],
                        timeout_ms=int(self._remaining_ms(deadline)),
                    )
                return DeleteTopicsRequest(topic_names=batch, timeout_ms=int(self._remaining_ms(deadline)))

            resp = await self._call(make, "controller", deadline)
            assert isinstance(resp, DeleteTopicsResponse)
            return {str(r.name): _err(r.error_code, r.error_message) or Result() for r in resp.responses}

        outcomes = await self._per_item(items, attempt, deadline, retry_if=_controller_retry)
        return self._results(items, outcomes, lambda n, e: Result(e))

    async def create_partitions(
        self, new_totals: Mapping[str, int], *, validate_only: bool = False, timeout_ms: float | None = None
    ) -> Results[str, Result]:
        """Grow topics to ``new_totals[topic]`` partitions in total."""
        deadline = self._deadline(timeout_ms)

        async def attempt(batch: list[str]) -> dict[str, Outcome]:
            def make(version: int) -> Request:
                return CreatePartitionsRequest(
                    topics=[
                        CreatePartitionsRequest.CreatePartitionsTopic(
                            name=n, count=new_totals[n], assignments=None
                        )
                        for n in batch
                    ],
                    timeout_ms=int(self._remaining_ms(deadline)),
                    validate_only=validate_only,
                )

            resp = await self._call(make, "controller", deadline)
            assert isinstance(resp, CreatePartitionsResponse)
            return {r.name: _err(r.error_code, r.error_message) or Result() for r in resp.results}

        outcomes = await self._per_item(list(new_totals), attempt, deadline, retry_if=_controller_retry)
        return self._results(new_totals, outcomes, lambda n, e: Result(e))

    async def _metadata(self, topics: list[str] | None, deadline: float) -> MetadataResponse:
        def make(version: int) -> Request:
            req_topics = (
                None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
            )
            return MetadataRequest(topics=req_topics, allow_auto_topic_creation=False)

        resp = await self._call(make, "any", deadline)
        assert isinstance(resp, MetadataResponse)
        return resp

    async def list_topics(
        self, *, include_internal: bool = False, timeout_ms: float | None = None
    ) -> dict[str, TopicListing]:
        resp = await self._metadata(None, self._deadline(timeout_ms))
        out: dict[str, TopicListing] = {}
        for t in resp.topics:
            if t.name is None or (t.is_internal and not include_internal):
                continue
            out[t.name] = TopicListing(t.name, None if t.topic_id == ZERO_UUID else t.topic_id, t.is_internal)
        return dict(sorted(out.items()))

    async def describe_topics(
        self, names: Iterable[str], *, timeout_ms: float | None = None
    ) -> Results[str, TopicDescription]:
        """Partitions, leaders and replicas per topic; unknown topics fail per item."""
        items = list(dict.fromkeys(names))
        deadline = self._deadline(timeout_ms)

        async def attempt(batch: list[str]) -> dict[str, Outcome]:
            resp = await self._metadata(batch, deadline)
            out: dict[str, Outcome] = {}
            for t in resp.topics:
                if t.name is None:
                    continue
                if t.error_code:
                    out[t.name] = E.error_for(t.error_code, f"topic {t.name!r}")
                    continue
                out[t.name] = TopicDescription(
                    name=t.name,
                    topic_id=None if t.topic_id == ZERO_UUID else t.topic_id,
                    is_internal=t.is_internal,
                    partitions=[
                        PartitionDescription(
                            p.partition_index,
                            p.leader_id,
                            p.leader_epoch,
                            tuple(p.replica_nodes),
                            tuple(p.isr_nodes),
                            tuple(p.offline_replicas),
                        )
                        for p in sorted(t.partitions, key=lambda p: p.partition_index)
                    ],
                )
            return out

        # Only a topic that exists but has no leader yet is worth waiting for.
        outcomes = await self._per_item(
            items, attempt, deadline, retry_if=lambda e: isinstance(e, E.LeaderNotAvailableError)
        )
        return self._results(items, outcomes, lambda n, e: TopicDescription(name=n, error=e))

    async def describe_cluster(self, *, timeout_ms: float | None = None) -> ClusterDescription:
        deadline = self._deadline(timeout_ms)
        target = self._client.least_loaded_node()
        try:
            version = await self._client.negotiated_version(
                target, DescribeClusterRequest.API_KEY, timeout_ms=self._remaining_ms(deadline)
            )
        except E.UnsupportedVersionError:
            version = -1
        if version >= 0:
            resp = await self._call(lambda v: DescribeClusterRequest(), "any", deadline)
            assert isinstance(resp, DescribeClusterResponse)
            if resp.error_code:
                raise E.error_for(resp.error_code, resp.error_message)
            brokers = [BrokerInfo(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers]
            return ClusterDescription(
                sorted(brokers, key=lambda b: b.node_id), resp.controller_id, resp.cluster_id
            )
        md = await self._metadata([], deadline)
        brokers = [BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in md.brokers]
        return ClusterDescription(sorted(brokers, key=lambda b: b.node_id), md.controller_id, md.cluster_id)

    # ------------------------------------------------------------------ configs

    @staticmethod
    def _config_node(resource: ConfigResource) -> int | Literal["any"]:
        if resource.type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER) and resource.name:
            try:
                return int(resource.name)
            except ValueError:
                raise E.ConfigError(
                    f"broker config resource name must be a node id, got {resource.name!r}"
                ) from None
        return "any"

    async def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[ConfigResource, ConfigDescription]:
        items = list(dict.fromkeys(resources))
        deadline = self._deadline(timeout_ms)

        async def one_node(
            node: int | Literal["any"], batch: list[ConfigResource]
        ) -> dict[ConfigResource, Outcome]:
            def make(version: int) -> Request:
                return DescribeConfigsRequest(
                    resources=[
                        DescribeConfigsRequest.DescribeConfigsResource(
                            resource_type=int(r.type), resource_name=r.name, configuration_keys=None
                        )
                        for r in batch
                    ],
                    include_synonyms=include_synonyms and version >= 1,
                    include_documentation=include_documentation and version >= 3,
                )

            resp = await self._call(make, node, deadline)
            assert isinstance(resp, DescribeConfigsResponse)
            out: dict[ConfigResource, Outcome] = {}
            for r in resp.results:
                key = ConfigResource(ConfigResourceType(r.resource_type), r.resource_name)
                err = _err(r.error_code, r.error_message)
                if err is not None:
                    out[key] = err
                    continue
                entries = {
                    c.name: ConfigEntry(
                        name=c.name,
                        value=c.value,
                        source=_source(c.config_source),
                        read_only=c.read_only,
                        is_default=c.config_source == ConfigSource.DEFAULT_CONFIG,
                        is_sensitive=c.is_sensitive,
                        synonyms=tuple((s.name, s.value, s.source) for s in c.synonyms),
                        type=c.config_type,
                        documentation=c.documentation or None,
                    )
                    for c in r.configs
                }
                out[key] = ConfigDescription(key, entries)
            return out

        async def attempt(batch: list[ConfigResource]) -> dict[ConfigResource, Outcome]:
            return await self._split(batch, self._config_node, one_node)

        outcomes = await self._per_item(items, attempt, deadline)
        return self._results(items, outcomes, lambda r, e: ConfigDescription(r, error=e))

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp] | Mapping[str, str | None]],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[ConfigResource, Result]:
        """Apply config operations; a ``{name: value}`` mapping means SET (DELETE for None)."""
        ops: dict[ConfigResource, list[AlterConfigOp]] = {}
        for resource, change in changes.items():
            if isinstance(change, Mapping):
                ops[resource] = [
                    AlterConfigOp(k, v, AlterConfigOpType.DELETE if v is None else AlterConfigOpType.SET)
                    for k, v in change.items()
                ]
            else:
                ops[resource] = list(change)
        deadline = self._deadline(timeout_ms)

        async def one_node(
            node: int | Literal["any"], batch: list[ConfigResource]
        ) -> dict[ConfigResource, Outcome]:
            def make(version: int) -> Request:
                return IncrementalAlterConfigsRequest(
                    resources=[
                        IncrementalAlterConfigsRequest.AlterConfigsResource(
                            resource_type=int(r.type),
                            resource_name=r.name,
                            configs=[
                                IncrementalAlterConfigsRequest.AlterableConfig(
                                    name=op.name, config_operation=int(op.op), value=op.value
                                )
                                for op in ops[r]
                            ],
                        )
                        for r in batch
                    ],
                    validate_only=validate_only,
                )

            resp = await self._call(make, node, deadline)
            assert isinstance(resp, IncrementalAlterConfigsResponse)
            return {
                ConfigResource(ConfigResourceType(r.resource_type), r.resource_name): _err(
                    r.error_code, r.error_message
                )
                or Result()
                for r in resp.responses
            }

        async def attempt(batch: list[ConfigResource]) -> dict[ConfigResource, Outcome]:
            return await self._split(batch, self._config_node, one_node)

        outcomes = await self._per_item(list(ops), attempt, deadline)
        return self._results(ops, outcomes, lambda r, e: Result(e))

    async def _split(
        self,
        items: list[K],
        route: Callable[[K], Any],
        send: Callable[[Any, list[K]], Awaitable[dict[K, Outcome]]],
    ) -> dict[K, Outcome]:
        """Group items by destination, send the groups concurrently, merge the outcomes."""
        groups: dict[Any, list[K]] = {}
        out: dict[K, Outcome] = {}
        for item in items:
            try:
                groups.setdefault(route(item), []).append(item)
            except E.KafkaError as exc:
                out[item] = exc
        keys = list(groups)
        replies = await _backend.gather(*(send(k, groups[k]) for k in keys), return_exceptions=True)
        for k, reply in zip(keys, replies, strict=True):
            if isinstance(reply, E.KafkaError):
                out.update(dict.fromkeys(groups[k], reply))
            elif isinstance(reply, BaseException):
                raise reply
            else:
                out.update(reply)
        return out

    # ------------------------------------------------------------------ groups

    async def list_groups(
        self,
        *,
        states: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        timeout_ms: float | None = None,
    ) -> ListGroupsResult:
        """Groups known to every broker (each is the coordinator of some); filters are
        applied by the broker when it supports them, else here."""
        deadline = self._deadline(timeout_ms)
        states_f = sorted(set(states)) if states else []
        types_f = sorted(set(types)) if types else []
        await self._refresh((), deadline)
        nodes = sorted(self._client.cluster.brokers)

        async def attempt(batch: list[int]) -> dict[int, Outcome]:
            async def one(node: int) -> list[GroupListing] | E.KafkaError:
                def make(version: int) -> Request:
                    return ListGroupsRequest(
                        states_filter=states_f if version >= 4 else [],
                        types_filter=types_f if version >= 5 else [],
                    )

                try:
                    resp = await self._call(make, node, deadline)
                except E.KafkaError as exc:
                    return exc
                assert isinstance(resp, ListGroupsResponse)
                if resp.error_code:
                    return E.error_for(resp.error_code, f"ListGroups on broker {node}")
                return [
                    GroupListing(g.group_id, g.protocol_type, g.group_state, g.group_type, node)
                    for g in resp.groups
                ]

            replies = await _backend.gather(*(one(n) for n in batch))
            return {
                n: r if isinstance(r, E.KafkaError) else _Listing(r)
                for n, r in zip(batch, replies, strict=True)
            }

        outcomes = await self._per_item(nodes, attempt, deadline)
        groups: list[GroupListing] = []
        errors: dict[int, E.KafkaError] = {}
        for node, o in outcomes.items():
            if isinstance(o, E.KafkaError):
                errors[node] = o
            else:
                groups.extend(
                    g
                    for g in o.groups
                    if (not states_f or g.state in states_f or not g.state)
                    and (not types_f or g.type in types_f or not g.type)
                )
        return ListGroupsResult(sorted(groups, key=lambda g: g.group_id), errors)

    async def _coordinators(self, group_ids: list[str], deadline: float) -> dict[str, int | E.KafkaError]:
        async def one(g: str) -> int | E.KafkaError:
            try:
                return await self._client.find_coordinator(
                    g, CoordinatorType.GROUP, timeout_ms=self._remaining_ms(deadline)
                )
            except E.KafkaError as exc:
                return exc

        found = await _backend.gather(*(one(g) for g in group_ids))
        return dict(zip(group_ids, found, strict=True))

    async def _by_coordinator(
        self,
        group_ids: list[str],
        send: Callable[[int, list[str]], Awaitable[dict[str, Outcome]]],
        deadline: float,
    ) -> dict[str, Outcome]:
        async def attempt(batch: list[str]) -> dict[str, Outcome]:
            coords = await self._coordinators(batch, deadline)
            out: dict[str, Outcome] = {g: c for g, c in coords.items() if isinstance(c, E.KafkaError)}
            live = [g for g in batch if g not in out]
            out.update(await self._split(live, lambda g: coords[g], send))
            return out

        def forget(group: str, err: E.KafkaError) -> None:
            if getattr(err, "coordinator_error", False) or isinstance(err, E.KafkaConnectionError):
                self._client.invalidate_coordinator(group)

        return await self._per_item(group_ids, attempt, deadline, on_retry=forget)

    async def describe_groups(
        self,
        group_ids: Iterable[str],
        *,
        include_authorized_operations: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[str, GroupDescription]:
        items = list(dict.fromkeys(group_ids))
        deadline = self._deadline(timeout_ms)

        async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
            def make(version: int) -> Request:
                return DescribeGroupsRequest(
                    groups=batch, include_authorized_operations=include_authorized_operations and version >= 3
                )

            resp = await self._call(make, node, deadline)
            assert isinstance(resp, DescribeGroupsResponse)
            out: dict[str, Outcome] = {}
            for g in resp.groups:
                err = _err(g.error_code, g.error_message)
                if err is not None:
                    out[g.group_id] = err
                    continue
                out[g.group_id] = GroupDescription(
                    group_id=g.group_id,
                    state=g.group_state,
                    protocol_type=g.protocol_type,
                    protocol=g.protocol_data,
                    members=[_member(m, g.protocol_type) for m in g.members],
                    coordinator=node,
                    authorized_operations=None
                    if g.authorized_operations == -(2**31)
                    else g.authorized_operations,
                )
            return out

        outcomes = await self._by_coordinator(items, send, deadline)
        return self._results(items, outcomes, lambda g, e: GroupDescription(group_id=g, error=e))

    async def delete_groups(
        self, group_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> Results[str, Result]:
        """Delete empty groups (and their committed offsets); busy groups fail per item."""
        items = list(dict.fromkeys(group_ids))
        deadline = self._deadline(timeout_ms)

        async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
            resp = await self._call(lambda v: DeleteGroupsRequest(groups_names=batch), node, deadline)
            assert isinstance(resp, DeleteGroupsResponse)
            return {r.group_id: _err(r.error_code) or Result() for r in resp.results}

        outcomes = await self._by_coordinator(items, send, deadline)
        return self._results(items, outcomes, lambda g, e: Result(e))

    async def list_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[TopicPartition, GroupOffset]:
        """Committed offsets of a group (all its partitions when ``partitions`` is None).

        Group-level failures (authorization, unknown coordinator after retries) raise.
        """
        deadline = self._deadline(timeout_ms)
        wanted = None if partitions is None else sorted(set(partitions))
        if wanted is not None and wanted and await self._needs_ids(OffsetFetchRequest.API_KEY, 10, deadline):
            await self._refresh({tp.topic for tp in wanted}, deadline)

        async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
            def make(version: int) -> Request:
                return _offset_fetch_request(group_id, wanted, require_stable, version, self._client)

            resp = await self._call(make, node, deadline)
            assert isinstance(resp, OffsetFetchResponse)
            try:
                return {group_id: await self._parse_offset_fetch(resp, group_id, deadline)}
            except E.KafkaError as exc:
                return {group_id: exc}

        outcomes = await self._by_coordinator([group_id], send, deadline)
        outcome = outcomes[group_id]
        if isinstance(outcome, E.KafkaError):
            raise outcome
        assert isinstance(outcome, Results)
        return outcome

    async def _needs_ids(self, api_key: int, min_version: int, deadline: float) -> bool:
        try:
            version = await self._client.negotiated_version(
                None, api_key, timeout_ms=self._remaining_ms(deadline)
            )
            return version >= min_version
        except E.KafkaError:
            return False

    async def _topic_names(self, ids: Iterable[Any], deadline: float) -> dict[Any, str]:
        ids = {i for i in ids if i != ZERO_UUID}
        cluster = self._client.cluster
        if any(cluster.topic_name(i) is None for i in ids):
            await self._refresh((), deadline, all_topics=True)
            cluster = self._client.cluster
        return {i: name for i in ids if (name := cluster.topic_name(i)) is not None}

    async def _parse_offset_fetch(
        self, resp: OffsetFetchResponse, group_id: str, deadline: float
    ) -> Results[TopicPartition, GroupOffset]:
        out: Results[TopicPartition, GroupOffset] = Results()
        if resp.groups:
            group = next((g for g in resp.groups if g.group_id == group_id), None)
            if group is None:
                raise E.UnknownServerError(f"OffsetFetch response has no entry for group {group_id!r}")
            if group.error_code:
                raise E.error_for(group.error_code, f"group {group_id!r}")
            names = await self._topic_names((t.topic_id for t in group.topics if not t.name), deadline)
            for t in group.topics:
                name = t.name or names.get(t.topic_id, str(t.topic_id))
                for p in t.partitions:
                    out[TopicPartition(name, p.partition_index)] = GroupOffset(
                        p.committed_offset, p.committed_leader_epoch, p.metadata, _err(p.error_code)
                    )
            return out
        if resp.error_code:
            raise E.error_for(resp.error_code, f"group {group_id!r}")
        for old in resp.topics:
            for q in old.partitions:
                out[TopicPartition(old.name, q.partition_index)] = GroupOffset(
                    q.committed_offset, q.committed_leader_epoch, q.metadata, _err(q.error_code)
                )
        return out

    async def alter_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int | GroupOffset],
        *,
        timeout_ms: float | None = None,
    ) -> Results[TopicPartition, Result]:
        """Commit offsets for a group that has no active members (e.g. to rewind it)."""
        deadline = self._deadline(timeout_ms)
        norm = {tp: o if isinstance(o, GroupOffset) else GroupOffset(int(o)) for tp, o in offsets.items()}
        if await self._needs_ids(OffsetCommitRequest.API_KEY, 10, deadline):
            await self._refresh({tp.topic for tp in norm}, deadline)

        async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
            cluster = self._client.cluster
            by_topic: dict[str, list[tuple[int, GroupOffset]]] = {}
            for tp, o in sorted(norm.items()):
                by_topic.setdefault(tp.topic, []).append((tp.partition, o))

            def make(version: int) -> Request:
                return OffsetCommitRequest(
                    group_id=group_id,
                    topics=[
                        OffsetCommitRequest.OffsetCommitRequestTopic(
                            name=topic,
                            topic_id=(cluster.topic_id(topic) or ZERO_UUID) if version >= 10 else ZERO_UUID,
                            partitions=[
                                OffsetCommitRequest.OffsetCommitRequestPartition(
                                    partition_index=p,
                                    committed_offset=o.offset,
                                    committed_leader_epoch=o.leader_epoch,
                                    committed_metadata=o.metadata,
                                )
                                for p, o in parts
                            ],
                        )
                        for topic, parts in by_topic.items()
                    ],
                )

            resp = await self._call(make, node, deadline)
            assert isinstance(resp, OffsetCommitResponse)
            names = await self._topic_names((t.topic_id for t in resp.topics if not t.name), deadline)
            res: Results[TopicPartition, Result] = Results()
            group_error: E.KafkaError | None = None
            for t in resp.topics:
                name = t.name or names.get(t.topic_id, str(t.topic_id))
                for p in t.partitions:
                    err = _err(p.error_code)
                    if err is not None and getattr(err, "coordinator_error", False):
                        group_error = err
                    res[TopicPartition(name, p.partition_index)] = Result(err)
            if group_error is not None:
                return {group_id: group_error}
            return {group_id: res}

        outcomes = await self._by_coordinator([group_id], send, deadline)
        outcome = outcomes[group_id]
        if isinstance(outcome, E.KafkaError):
            return self._results(norm, dict.fromkeys(norm, outcome), lambda tp, e: Result(e))
        assert isinstance(outcome, Results)
        return outcome

    # ------------------------------------------------------------------ offsets & records (by leader)

    async def _by_leader(
        self,
        tps: list[TopicPartition],
        send: Callable[[int, list[TopicPartition]], Awaitable[dict[TopicPartition, Outcome]]],
        deadline: float,
    ) -> dict[TopicPartition, Outcome]:
        topics = {tp.topic for tp in tps}
        await self._refresh(topics, deadline)

        def route(tp: TopicPartition) -> int:
            cluster = self._client.cluster
            info = cluster.topics.get(tp.topic)
            if info is None:
                code = cluster.topic_errors.get(tp.topic, _UNKNOWN_TOPIC)
                raise E.error_for(code, f"topic {tp.topic!r}")
            part = info.partitions.get(tp.partition)
            if part is None:
                raise E.UnknownTopicOrPartitionError(f"{tp.topic} has no partition {tp.partition}")
            if part.leader < 0:
                raise E.LeaderNotAvailableError(f"no leader for {tp.topic}-{tp.partition}")
            return part.leader

        async def attempt(batch: list[TopicPartition]) -> dict[TopicPartition, Outcome]:
            return await self._split(batch, route, send)

        def retry_if(err: E.KafkaError) -> bool:
            # A topic that does not exist at all is final; a moving leader is not.
            if isinstance(err, E.UnknownTopicOrPartitionError):
                return False
            return err.retriable

        return await self._per_item(
            tps, attempt, deadline, retry_if=retry_if, refresh_topics=lambda items: {tp.topic for tp in items}
        )

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, OffsetSpec | int | str],
        *,
        isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted",
        timeout_ms: float | None = None,
    ) -> Results[TopicPartition, ListOffsetsResult]:
        """Offsets by spec: ``"earliest"``/``"latest"``/``"max_timestamp"``, an
        ``OffsetSpec``, or a timestamp in ms (first offset with a timestamp >= it)."""
        norm: dict[TopicPartition, int] = {}
        for tp, spec in specs.items():
            if isinstance(spec, str):
                try:
                    norm[tp] = int(_OFFSET_SPECS[spec.lower()])
                except KeyError:
                    raise E.ConfigError(f"unknown offset spec {spec!r}") from None
            else:
                norm[tp] = int(spec)
        iso = 1 if isolation_level == "read_committed" else 0
        deadline = self._deadline(timeout_ms)

        async def send(node: int, batch: list[TopicPartition]) -> dict[TopicPartition, Outcome]:
            by_topic: dict[str, list[TopicPartition]] = {}
            for tp in sorted(batch):
                by_topic.setdefault(tp.topic, []).append(tp)
            cluster = self._client.cluster

            def make(version: int) -> Request:
                return ListOffsetsRequest(
                    replica_id=-1,
                    isolation_level=iso if version >= 2 else 0,
                    topics=[
                        ListOffsetsRequest.ListOffsetsTopic(
                            name=topic,
                            partitions=[
                                ListOffsetsRequest.ListOffsetsPartition(
                                    partition_index=tp.partition,
                                    current_leader_epoch=cluster.leader_epoch(tp) if version >= 4 else -1,
                                    timestamp=norm[tp],
                                )
                                for tp in parts
                            ],
                        )
                        for topic, parts in by_topic.items()
                    ],
                    timeout_ms=int(self._remaining_ms(deadline)) if version >= 10 else 0,
                )

            resp = await self._call(make, node, deadline)
            assert isinstance(resp, ListOffsetsResponse)
            out: dict[TopicPartition, Outcome] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    err = _err(p.error_code)
                    if err is not None:
                        out[tp] = err
                    else:
                        out[tp] = ListOffsetsResult(p.offset, p.timestamp, p.leader_epoch)
            return out

        outcomes = await self._by_leader(list(norm), send, deadline)
        return self._results(norm, outcomes, lambda tp, e: ListOffsetsResult(error=e))

    async def delete_records(
        self, before: Mapping[TopicPartition, int], *, timeout_ms: float | None = None
    ) -> Results[TopicPartition, DeleteRecordsResult]:
        """Delete records below ``before[tp]`` (-1: up to the high watermark)."""
        deadline = self._deadline(timeout_ms)

        async def send(node: int, batch: list[TopicPartition]) -> dict[TopicPartition, Outcome]:
            by_topic: dict[str, list[TopicPartition]] = {}
            for tp in sorted(batch):
                by_topic.setdefault(tp.topic, []).append(tp)

            def make(version: int) -> Request:
                return DeleteRecordsRequest(
                    topics=[
                        DeleteRecordsRequest.DeleteRecordsTopic(
                            name=topic,
                            partitions=[
                                DeleteRecordsRequest.DeleteRecordsPartition(
                                    partition_index=tp.partition, offset=before[tp]
                                )
                                for tp in parts
                            ],
                        )
                        for topic, parts in by_topic.items()
                    ],
                    timeout_ms=int(self._remaining_ms(deadline)),
                )

            resp = await self._call(make, node, deadline)
            assert isinstance(resp, DeleteRecordsResponse)
            out: dict[TopicPartition, Outcome] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = _err(p.error_code) or DeleteRecordsResult(p.low_watermark)
            return out

        outcomes = await self._by_leader(list(before), send, deadline)
        return self._results(before, outcomes, lambda tp, e: DeleteRecordsResult(error=e))


# ---------------------------------------------------------------------------- helpers


class _Listing:
    """Wrapper so a broker's group list can travel through ``_per_item`` as one outcome."""

    __slots__ = ("groups",)

    def __init__(self, groups: list[GroupListing]) -> None:
        self.groups = groups


def _default_retry(err: E.KafkaError) -> bool:
    # UNKNOWN_TOPIC_OR_PARTITION is retriable for producers (metadata may lag) but, from
    # the admin's point of view, the named topic simply does not exist.
    return err.retriable and not isinstance(err, E.UnknownTopicOrPartitionError)


_controller_retry = _default_retry


def _creatable(t: NewTopic) -> CreateTopicsRequest.CreatableTopic:
    if t.replica_assignment:
        assignments = [
            CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p, broker_ids=list(ids))
            for p, ids in sorted(t.replica_assignment.items())
        ]
        partitions, rf = -1, -1
    else:
        assignments = []
        partitions, rf = t.partitions, t.replication_factor
    return CreateTopicsRequest.CreatableTopic(
        name=t.name,
        num_partitions=partitions,
        replication_factor=rf,
        assignments=assignments,
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in t.configs.items()],
    )


def _source(code: int) -> ConfigSource | int:
    try:
        return ConfigSource(code)
    except ValueError:
        return code


def _member(m: DescribeGroupsResponse.DescribedGroupMember, protocol_type: str) -> MemberDescription:
    assignment: tuple[TopicPartition, ...] = ()
    raw = bytes(m.member_assignment)
    if protocol_type == "consumer" and len(raw) >= 2:
        version = int.from_bytes(raw[:2], "big", signed=True)
        try:
            decoded = ConsumerProtocolAssignment.decode(
                raw[2:], min(max(version, 0), ConsumerProtocolAssignment.MAX_VERSION), strict=False
            )
            assignment = tuple(
                TopicPartition(tp.topic, p) for tp in decoded.assigned_partitions for p in tp.partitions
            )
        except E.KafkaError:
            assignment = ()
    return MemberDescription(
        member_id=m.member_id,
        group_instance_id=m.group_instance_id,
        client_id=m.client_id,
        client_host=m.client_host,
        assignment=assignment,
        metadata=bytes(m.member_metadata),
        raw_assignment=raw,
    )


def _offset_fetch_request(
    group_id: str, wanted: list[TopicPartition] | None, require_stable: bool, version: int, client: Client
) -> OffsetFetchRequest:
    by_topic: dict[str, list[int]] = {}
    for tp in wanted or []:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    stable = require_stable and version >= 7
    if version >= 8:
        cluster = client.cluster
        topics = (
            None
            if wanted is None
            else [
                OffsetFetchRequest.OffsetFetchRequestTopics(
                    name=t,
                    topic_id=(cluster.topic_id(t) or ZERO_UUID) if version >= 10 else ZERO_UUID,
                    partition_indexes=ps,
                )
                for t, ps in by_topic.items()
            ]
        )
        return OffsetFetchRequest(
            groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group_id, topics=topics)],
            require_stable=stable,
        )
    old_topics = (
        None
        if wanted is None
        else [
            OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
            for t, ps in by_topic.items()
        ]
    )
    return OffsetFetchRequest(group_id=group_id, topics=old_topics, require_stable=stable)
