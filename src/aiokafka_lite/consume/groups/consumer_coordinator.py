"""``ConsumerGroupCoordinator``: the async driver of ``consumer_membership.ConsumerMembership``
(the next-generation consumer group protocol, KIP-848), for ``group_protocol="consumer"``.

It is a ``GroupCoordinator`` for everything the consumer, ``OrderedWorkers`` and
``TransactSession`` see (``poll``, ``commit``, ``fetch_committed``, listeners,
``group_metadata``); only the membership differs. Two tasks:

* the *main loop* asks the machine for work (``tick``) and executes it in order:
  coordinator lookup, reconciliations (pause, commit, revoke listener, remove; then add
  and assign listener), metadata for topic ids not known yet, auto-commits, leaving;
* the *heartbeat loop* sends ``ConsumerGroupHeartbeat`` at the interval the broker
  gives, also while listener callbacks run, and feeds the answers back.

Offset commits carry the member epoch (OffsetCommit v9+); a commit answered
STALE_MEMBER_EPOCH is retried with the epoch the next heartbeat brings, until the
commit's deadline.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from typing import Any

from aiokafka_lite.consume.groups.consumer_membership import (
    ConsumerAction,
    ConsumerGroupSettings,
    ConsumerMembership,
    ConsumerMemberState,
    Continue,
    DescribeSessionTimeout,
    ResolveTopics,
    SendLeaveHeartbeat,
    re2_pattern_of,
)
from aiokafka_lite.consume.groups.coordinator import (
    _COORDINATOR_LOADING,
    _COORDINATOR_MOVED,
    _REQUEST_TIMED_OUT,
    ConsumerGroupMetadata,
    GroupCoordinator,
    _client_backoffs,
)
from aiokafka_lite.consume.groups.membership import Action, AddPartitions
from aiokafka_lite.consume.subscription import SubscriptionType
from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core.errors import (
    BrokerResponseError,
    CommitFailedError,
    ConfigError,
    KafkaError,
    error_for,
)
from aiokafka_lite.net.client import Lane
from aiokafka_lite.wire.messages import (
    ConsumerGroupHeartbeatResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)

__all__ = ["ConsumerGroupCoordinator"]

log = logging.getLogger(__name__)

_STALE_MEMBER_EPOCH = 113
_GROUP_RESOURCE = 32  # DescribeConfigs resource type of a group (KIP-848 group configs)
_SESSION_TIMEOUT_CONFIG = "consumer.session.timeout.ms"
# Commit answers that end the commit with CommitFailedError (or the fatal error).
_MEMBER_ERRORS = (22, 25, 27, 82, 110)  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS,
# FENCED_INSTANCE_ID, FENCED_MEMBER_EPOCH


class ConsumerGroupCoordinator(GroupCoordinator):
    """Membership of ``config.group_id`` with the consumer group protocol (KIP-848)."""

    _m: ConsumerMembership  # type: ignore[assignment]
    _settings: ConsumerGroupSettings  # type: ignore[assignment]

    def _init_membership(self, config: Any) -> None:
        settings = (
            config if isinstance(config, ConsumerGroupSettings) else ConsumerGroupSettings.from_config(config)
        )
        self._settings = _client_backoffs(settings, config, self._client)
        self._m = ConsumerMembership(self._settings, now=self._now())
        self._seen_consumer_subscription: tuple[int, SubscriptionType, str | None] | None = None
        self._regex_seen: tuple[re.Pattern[str], re.Pattern[str] | None, str | None] | None = None

    # ------------------------------------------------------------------ introspection
    def group_metadata(self) -> ConsumerGroupMetadata:
        """For ``send_offsets_to_transaction``: the member epoch stands for the generation
        (TxnOffsetCommit checks it as OffsetCommit does)."""
        return ConsumerGroupMetadata(
            group_id=self._settings.group_id,
            generation_id=self._m.epoch,
            member_id=self._m.member_id,
            group_instance_id=self._settings.group_instance_id,
        )

    @property
    def member_epoch(self) -> int:
        return self._m.epoch

    # ------------------------------------------------------------------ application side
    async def poll(self) -> None:
        await super().poll()
        reported, self._m.reported = self._m.reported, None
        if reported is not None:
            raise reported

    def _sync_subscription(self) -> bool:
        sub = self._sub
        regex: str | None = None
        if sub.subscription_type is SubscriptionType.PATTERN and sub.pattern is not None:
            regex = self._broker_regex(sub.pattern, sub.exclude_pattern)
            if regex is None:
                return False
        # Pattern matches found in the client's metadata do not matter here (the broker
        # matches), so the version only counts for topic subscriptions.
        version = sub.subscription_version if regex is None else 0
        seen = (version, sub.subscription_type, regex)
        if seen == self._seen_consumer_subscription:
            return False
        self._seen_consumer_subscription = seen
        topics = sub.subscribed_topics if regex is None else ()
        if sub.subscription_type is SubscriptionType.TOPICS:
            self._m.forget({tp for tp in self._m.owned if tp.topic not in sub.subscribed_topics})
        self._m.update_subscription(topics, regex, sub.is_subscribed, self._now())
        self._hb_wake.set()
        return True

    def _broker_regex(self, pattern: re.Pattern[str], exclude: re.Pattern[str] | None) -> str | None:
        """The pattern as sent to the broker (checked once per pattern: this runs on every
        poll); None after failing the membership when the broker cannot run it."""
        cached = self._regex_seen
        if cached is not None and cached[0] is pattern and cached[1] is exclude:
            return cached[2]
        try:
            if exclude is not None:
                raise ConfigError(
                    "exclude= cannot be used with group_protocol='consumer': the broker matches the "
                    "pattern itself (RE2/J, which has no lookaround to leave topics out); narrow the "
                    "pattern, list the topics, or use the classic protocol"
                )
            regex: str | None = re2_pattern_of(pattern)
        except ConfigError as exc:
            regex = None
            if self._m.fatal is None:
                self._m.fail(exc)
                self._wake.set()
        self._regex_seen = (pattern, exclude, regex)
        return regex

    def on_state_changed(self) -> None:
        sub = self._sub
        current = self._seen_consumer_subscription
        if (
            current is None
            or current[1] is not sub.subscription_type
            or (sub.subscription_type is SubscriptionType.TOPICS and current[0] != sub.subscription_version)
            or (
                sub.subscription_type is SubscriptionType.PATTERN
                and (self._regex_seen is None or self._regex_seen[0] is not sub.pattern)
            )
        ):
            self._wake.set()

    # ------------------------------------------------------------------ main loop
    def _resolve(self, topic_id: uuid.UUID) -> str | None:
        try:
            name: str | None = self._client.cluster.topic_name(topic_id)
        except Exception:  # no metadata yet
            return None
        return name

    def _tick(self, now: float) -> list[Action]:
        """The machine's work at ``now``; it names assigned topic ids from the client's
        metadata (``_resolve``). Once joined, and with nothing else to do, it asks the
        broker for the group's session timeout (the machine's session clock)."""
        actions: list[Any] = self._m.tick(now, self._resolve)
        if not actions and self._m.session_timeout_wanted():
            actions = [DescribeSessionTimeout()]
        return actions

    def _membership_failed(self) -> bool:
        return self._m.state is ConsumerMemberState.FAILED

    def _idle_wait_ms(self) -> float:
        """The heartbeat interval the broker gave (1 s until it has given one)."""
        return float(self._m.heartbeat_interval_ms or 1000)

    async def _do(self, action: Action) -> list[Action]:
        act: ConsumerAction | Action = action
        m = self._m
        if isinstance(act, Continue):
            return m.resume(act.attempt, act.step, self._now())  # type: ignore[return-value]
        if isinstance(act, ResolveTopics):
            await self._resolve_topics(act)
            return []
        if isinstance(act, SendLeaveHeartbeat):
            await self._send_leave(act)
            return []
        if isinstance(act, DescribeSessionTimeout):
            m.session_timeout_learned(await self._describe_session_timeout())
            return []
        if isinstance(act, AddPartitions):
            # Topics assigned through a regex are not tracked by the consumer: keep their
            # metadata (leaders) fresh.
            track = getattr(self._client, "track_topics", None)
            if track is not None:
                track({tp.topic for tp in act.partitions})
        return await super()._do(action)

    async def _resolve_topics(self, action: ResolveTopics) -> None:
        log.info(
            "group %s: assignment names topic ids unknown to the metadata (%s); refreshing it",
            self.group_id,
            ", ".join(str(t) for t in sorted(action.topic_ids, key=str)),
        )
        try:
            await self._io(self._client.refresh_metadata(all_topics=True))  # type: ignore[call-arg]
        except asyncio.CancelledError:
            if self._interrupted_by_close():
                return
            raise
        except KafkaError as exc:
            log.info("group %s: metadata refresh failed (%r)", self.group_id, exc)

    async def _describe_session_timeout(self) -> int | None:
        """The group's session timeout (its group config, or the broker's default), for the
        machine's session clock; None when the broker cannot or may not say (it is then
        logged: the machine keeps assuming Kafka's default)."""
        node = self._m.coordinator
        if node is None:
            return None
        request = DescribeConfigsRequest(
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=_GROUP_RESOURCE,
                    resource_name=self.group_id,
                    configuration_keys=[_SESSION_TIMEOUT_CONFIG],
                )
            ]
        )
        try:
            resp = await self._io(
                self._client.send(
                    request, node_id=node, timeout_ms=self._session_budget_ms(5000.0), lane=Lane.COORDINATOR
                )
            )
        except asyncio.CancelledError:
            if self._interrupted_by_close():
                return None
            raise
        except KafkaError as exc:
            log.info("group %s: could not read the group's session timeout (%r)", self.group_id, exc)
            return None
        assert isinstance(resp, DescribeConfigsResponse)
        for result in resp.results:
            if result.error_code:
                log.info(
                    "group %s: could not read the group's session timeout: %s; assuming %d ms",
                    self.group_id,
                    error_for(result.error_code).name,
                    self._m.session_timeout_ms,
                )
                return None
            for config in result.configs or []:
                if config.name == _SESSION_TIMEOUT_CONFIG and config.value and config.value.isdigit():
                    return int(config.value)
        return None

    async def _send_leave(self, action: SendLeaveHeartbeat) -> None:
        m = self._m
        node = m.coordinator
        req = m.leave_request(action.attempt)
        if req is None:
            return
        try:
            if node is None:
                log.info("group %s: coordinator unknown, leaving without telling it", self.group_id)
                return
            resp = await self._client.send(req, node_id=node, timeout_ms=5000, lane=Lane.COORDINATOR)
        except (asyncio.CancelledError, _backend.cancelled_exc()):
            raise
        except KafkaError as exc:
            log.info("group %s: leave heartbeat failed (ignored): %r", self.group_id, exc)
            return
        finally:
            m.left(action.attempt)
        if isinstance(resp, ConsumerGroupHeartbeatResponse) and resp.error_code:
            log.info("group %s: leave heartbeat answered %s", self.group_id, error_for(resp.error_code).name)
        else:
            log.info(
                "group %s: member %s left the group (epoch %d)",
                self.group_id,
                req.member_id,
                req.member_epoch,
            )

    # ------------------------------------------------------------------ heartbeats
    # The loop is GroupCoordinator's; these are the consumer protocol's outcomes.
    def _heartbeat_failed(self, request: object, exc: KafkaError) -> None:
        if self._m.heartbeat_failed(exc, self._now()):
            self._client.invalidate_coordinator(self.group_id)
            self._wake.set()

    def _heartbeat_answered(self, request: object, response: object) -> None:
        assert isinstance(response, ConsumerGroupHeartbeatResponse)
        m = self._m
        if m.heartbeat_response(response, self._now()):
            if m.coordinator is None:
                self._client.invalidate_coordinator(self.group_id)
            self._wake.set()

    def _heartbeat_timeout_ms(self) -> float:
        request_timeout = getattr(getattr(self._client, "config", None), "request_timeout_ms", None)
        return float(request_timeout) if isinstance(request_timeout, int | float) else 30000.0

    # ------------------------------------------------------------------ offsets
    # The retries are GroupCoordinator._commit's; these are the consumer protocol's answers.
    def _commit_without_identity(self) -> CommitFailedError:
        return CommitFailedError(
            "cannot commit: this member has no active member epoch (it is joining, was fenced or "
            "left the group); its partitions may have been reassigned"
        )

    def _commit_rejected(self, generation: int, code: int) -> KafkaError:
        """``generation`` is the member epoch the commit carried. STALE_MEMBER_EPOCH is
        retried: the heartbeat the machine asks for at once brings the current epoch."""
        failure = self._m.commit_failed(generation, code, self._now())
        self._hb_wake.set()
        if code in _MEMBER_ERRORS:
            self._wake.set()
            raise failure
        if code in _COORDINATOR_MOVED:
            self._client.invalidate_coordinator(self.group_id)
            self._wake.set()
        elif code not in (_COORDINATOR_LOADING, _REQUEST_TIMED_OUT, _STALE_MEMBER_EPOCH):
            if not failure.retriable:
                raise failure
        return failure

    def _commit_gave_up(self, err: KafkaError) -> KafkaError:
        if isinstance(err, BrokerResponseError) and err.code == _STALE_MEMBER_EPOCH:
            final = CommitFailedError(
                "offset commit rejected: the member epoch stayed stale until the commit timed out"
            )
            final.__cause__ = err  # as ``raise final from err``
            return final
        return err
