"""The admin client's request and routing API: what every admin operation is built on.

An admin operation (``admin/topics.py``, ``configs.py``, ``groups.py``, ``records.py``,
``consumer_groups.py``, ``share_groups.py``) is a small function over ``AdminRequests``:
it builds its request for the negotiated version, says where it goes, and turns the
answer into per-item outcomes (a result object, or the ``KafkaError`` of that item).
``AdminRequests`` does the rest, the same way for every operation:

* **where a request goes** (``Route``): a broker by node id, ``"controller"`` (the
  active controller; any broker in KRaft clusters, which forwards) or ``"any"`` (the
  least-loaded broker); ``split`` sends items grouped by destination concurrently;
  ``by_coordinator`` routes group ids to their group coordinator and ``by_leader``
  partitions to their leader, rediscovering them when they move;
* **retries**: ``request`` retries a failed request until the call's deadline,
  ``per_item`` retries the items whose outcome is a retriable error (refreshing
  metadata when the error says it is stale). Backoff is the client's
  ``retry_backoff`` (``net/retry.py``); the deadline is the public call's
  ``timeout_ms`` (default ``default_timeout_ms``).

A new operation is typically::

    async def delete_groups(rq: AdminRequests, group_ids, *, timeout_ms=None):
        items = list(dict.fromkeys(group_ids))
        deadline = rq.deadline(timeout_ms)

        async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
            make = lambda v: DeleteGroupsRequest(groups_names=batch)
            resp = await rq.request(make, node, deadline)
            return {r.group_id: error_of(r.error_code) or Result() for r in resp.results}

        outcomes = await rq.by_coordinator(items, send, deadline)
        return results(items, outcomes, lambda g, e: Result(e))
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from typing import Any, Final, Literal, TypeAlias, TypeVar

from aiokafka_lite.admin.types import Results
from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net.client import Client
from aiokafka_lite.net.metadata import CoordinatorType
from aiokafka_lite.net.retry import Retry
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.primitives import ZERO_UUID

__all__ = ["AdminRequests", "Outcome", "Route", "default_retry", "error_of", "results"]

log = logging.getLogger("aiokafka_lite.admin")

K = TypeVar("K")
D = TypeVar("D", bound=Hashable)

#: Where a request goes: a broker's node id, the controller, or the least-loaded broker.
Route: TypeAlias = int | Literal["controller", "any"]
#: An item's outcome: its result object, or the ``KafkaError`` it failed with.
Outcome: TypeAlias = Any

_UNKNOWN_TOPIC: Final = 3


def error_of(code: int, message: str | None = None) -> E.KafkaError | None:
    """The error of a response's error code (None for 0)."""
    return E.error_for(code, message or None) if code else None


def default_retry(err: E.KafkaError) -> bool:
    """Which per-item errors ``per_item`` retries unless told otherwise."""
    # UNKNOWN_TOPIC_OR_PARTITION is retriable for producers (metadata may lag) but, from
    # the admin's point of view, the named topic simply does not exist.
    return err.retriable and not isinstance(err, E.UnknownTopicOrPartitionError)


def results(
    items: Iterable[K], outcomes: dict[K, Outcome], on_error: Callable[[K, E.KafkaError], Any]
) -> Results[K, Any]:
    """The public ``Results`` of ``items``, in their order: a failed item's outcome is
    ``on_error(item, error)`` (its result object carrying the error)."""
    out: Results[K, Any] = Results()
    for item in items:
        o = outcomes[item]
        out[item] = on_error(item, o) if isinstance(o, E.KafkaError) else o
    return out


class AdminRequests:
    """Requests of admin operations over a network ``Client``: deadlines, routing,
    retries (see the module docstring). ``Admin.requests`` is the admin's."""

    def __init__(self, client: Client, default_timeout_ms: float) -> None:
        self.client = client
        #: The deadline of a call that gives no ``timeout_ms`` (Java's default.api.timeout.ms).
        self.default_timeout_ms = default_timeout_ms

    # ------------------------------------------------------------------ deadlines

    def deadline(self, timeout_ms: float | None) -> float:
        """The (event-loop clock) deadline of a call given ``timeout_ms`` (None: the default)."""
        return _backend.loop().time() + (self.default_timeout_ms if timeout_ms is None else timeout_ms) / 1000

    def remaining_ms(self, deadline: float) -> float:
        """Milliseconds left until ``deadline`` (at least 1: a request timeout field)."""
        return max((deadline - _backend.loop().time()) * 1000, 1.0)

    def retry_schedule(self, deadline: float) -> Retry:
        """The retry schedule of one call: the client's backoff until the call's deadline."""
        return Retry(self.client.retry_backoff, clock=_backend.loop().time, deadline=deadline)

    # ------------------------------------------------------------------ one request

    def target(self, route: Route) -> int:
        """The node id ``route`` stands for now."""
        cluster = self.client.cluster
        if route == "controller":
            if cluster.controller_id in cluster.brokers:
                return cluster.controller_id
            return self.client.least_loaded_node()
        if route == "any":
            return self.client.least_loaded_node()
        return route

    async def request(self, make: Callable[[int], Request], route: Route, deadline: float) -> Response:
        """Send one request, built by ``make(version)`` for the version negotiated with the
        broker, to ``route``; retried on retriable failures (connection, timeout...) until
        ``deadline``. Error codes inside the response are the caller's."""
        retry = self.retry_schedule(deadline)
        client = self.client
        while True:
            target = self.target(route)
            try:
                timeout = min(client.config.request_timeout_ms, self.remaining_ms(deadline))
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
                if route == "controller" or isinstance(exc, E.KafkaConnectionError):
                    await self.refresh((), deadline)

    async def refresh(
        self, topics: Iterable[str], deadline: float | None, *, all_topics: bool = False
    ) -> None:
        """Refresh metadata, waiting at most until ``deadline`` (the public call's);
        retriable failures are left to the next attempt."""
        timeout_ms = None if deadline is None else self.remaining_ms(deadline)
        try:
            await self.client.refresh_metadata(
                list(topics), all_topics=all_topics, track=False, timeout_ms=timeout_ms
            )
        except E.KafkaError as exc:
            if not exc.retriable:
                raise

    async def negotiated_at_least(self, api_key: int, min_version: int, deadline: float) -> bool:
        """Whether a broker speaks ``api_key`` at ``min_version`` or later (False if unknown)."""
        try:
            version = await self.client.negotiated_version(
                None, api_key, timeout_ms=self.remaining_ms(deadline)
            )
            return version >= min_version
        except E.KafkaError:
            return False

    async def topic_names(self, ids: Iterable[Any], deadline: float) -> dict[Any, str]:
        """Names of topic ids (an answer that names topics by id), refreshing all
        metadata within ``deadline`` when some id is not known yet."""
        ids = {i for i in ids if i != ZERO_UUID}
        cluster = self.client.cluster
        if any(cluster.topic_name(i) is None for i in ids):
            await self.refresh((), deadline, all_topics=True)
            cluster = self.client.cluster
        return {i: name for i in ids if (name := cluster.topic_name(i)) is not None}

    # ------------------------------------------------------------------ many items

    async def per_item(
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

        Items whose error satisfies ``retry_if`` (default ``default_retry``) are retried
        with backoff (``on_retry(item, error)`` first; then a metadata refresh of
        ``refresh_topics(items)`` if an error says metadata is stale) until ``deadline``.
        """
        if retry_if is None:
            retry_if = default_retry
        retry = self.retry_schedule(deadline)
        outcomes: dict[K, Outcome] = {}
        pending = list(dict.fromkeys(items))
        while pending:
            try:
                out = await attempt(pending)
            except E.KafkaError as exc:
                out = dict.fromkeys(pending, exc)
            again: list[K] = []
            stale = False
            delay = retry.next_delay()
            for item in pending:
                outcome = out.get(item)
                if outcome is None:
                    outcome = E.UnknownServerError(f"no result for {item} in the response")
                if isinstance(outcome, E.KafkaError) and delay is not None and retry_if(outcome):
                    again.append(item)
                    stale |= bool(getattr(outcome, "invalidates_metadata", False))
                    if on_retry is not None:
                        on_retry(item, outcome)
                else:
                    outcomes[item] = outcome
            pending = again
            if pending:
                assert delay is not None  # items are retried only with time left
                await _backend.sleep(delay)
                if stale:
                    await self.refresh(
                        refresh_topics(pending) if refresh_topics is not None else (), deadline
                    )
        return outcomes

    async def split(
        self,
        items: list[K],
        route: Callable[[K], D],
        send: Callable[[D, list[K]], Awaitable[dict[K, Outcome]]],
    ) -> dict[K, Outcome]:
        """Group items by ``route(item)`` (an error raised there is that item's outcome),
        ``send`` the groups concurrently, merge the outcomes (an error of a whole group
        is each of its items' outcome)."""
        groups: dict[D, list[K]] = {}
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

    async def by_coordinator(
        self,
        group_ids: list[str],
        send: Callable[[int, list[str]], Awaitable[dict[str, Outcome]]],
        deadline: float,
        key_type: CoordinatorType = CoordinatorType.GROUP,
    ) -> dict[str, Outcome]:
        """``send(coordinator, batch)`` for the groups of each group coordinator; a group
        whose coordinator moved or failed is looked up again and retried until ``deadline``.
        ``key_type=CoordinatorType.TRANSACTION`` routes transactional ids the same way."""

        async def attempt(batch: list[str]) -> dict[str, Outcome]:
            coords = await self._coordinators(batch, deadline, key_type)
            out: dict[str, Outcome] = {g: c for g, c in coords.items() if isinstance(c, E.KafkaError)}
            nodes = {g: c for g, c in coords.items() if not isinstance(c, E.KafkaError)}
            out.update(await self.split([g for g in batch if g in nodes], nodes.__getitem__, send))
            return out

        def forget(group: str, err: E.KafkaError) -> None:
            if getattr(err, "coordinator_error", False) or isinstance(err, E.KafkaConnectionError):
                self.client.invalidate_coordinator(group, key_type)

        return await self.per_item(group_ids, attempt, deadline, on_retry=forget)

    async def _coordinators(
        self, group_ids: list[str], deadline: float, key_type: CoordinatorType = CoordinatorType.GROUP
    ) -> dict[str, int | E.KafkaError]:
        async def one(g: str) -> int | E.KafkaError:
            try:
                return await self.client.find_coordinator(g, key_type, timeout_ms=self.remaining_ms(deadline))
            except E.KafkaError as exc:
                return exc

        found = await _backend.gather(*(one(g) for g in group_ids))
        return dict(zip(group_ids, found, strict=True))

    async def by_leader(
        self,
        tps: list[TopicPartition],
        send: Callable[[int, list[TopicPartition]], Awaitable[dict[TopicPartition, Outcome]]],
        deadline: float,
    ) -> dict[TopicPartition, Outcome]:
        """``send(leader, batch)`` for the partitions of each leader; a partition whose
        leader moved is retried (after a metadata refresh) until ``deadline``; one of a
        topic that does not exist fails at once."""
        await self.refresh({tp.topic for tp in tps}, deadline)

        def route(tp: TopicPartition) -> int:
            cluster = self.client.cluster
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
            return await self.split(batch, route, send)

        def retry_if(err: E.KafkaError) -> bool:
            # A topic that does not exist at all is final; a moving leader is not.
            if isinstance(err, E.UnknownTopicOrPartitionError):
                return False
            return err.retriable

        return await self.per_item(
            tps, attempt, deadline, retry_if=retry_if, refresh_topics=lambda items: {tp.topic for tp in items}
        )
