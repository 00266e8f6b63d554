"""Client side of incremental fetch sessions (KIP-227), sans-I/O.

One :class:`FetchSession` per broker. Each round the fetcher passes the partitions it
wants from that broker (with offsets and limits) to :meth:`FetchSession.build`, which
returns a :class:`FetchPlan`: either a *full* request listing every partition, or an
*incremental* one listing only partitions that are new or whose fetch parameters
changed since the broker last saw them, plus the partitions to forget. The fetcher
sends the plan and feeds the outcome back through :meth:`FetchSession.handle_response`
(or :meth:`FetchSession.handle_send_error`), which advances the epoch or falls back to
a full request.

Request metadata, as in KIP-227::

    session_id  epoch   meaning
    0           -1      full fetch, no session (sessions disabled)
    0            0      full fetch, create a session if the broker wants to
    ID           0      close session ID, full fetch, create a new session
    ID          >0      incremental fetch in session ID
    ID          -1      close session ID (full fetch, no new session)

Partitions are identified by name; with Fetch v13+ requests and responses carry topic
ids, so the plan records the topic id each partition was sent with and a partition
whose topic id changed (topic re-created) is forgotten under the old id and re-added.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.messages.fetch_request import FetchRequest
from aiokafka_lite.wire.messages.fetch_response import FetchResponse
from aiokafka_lite.wire.primitives import ZERO_UUID

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "FetchPlan",
    "FetchSession",
    "PartitionFetch",
    "ResponseCheck",
]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

# Top-level errors that mean "the broker no longer agrees with our session state".
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FETCH_SESSION_TOPIC_ID_ERROR = 106
SESSION_ERRORS = frozenset(
    {FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR}
)


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """What we ask of one partition. Equality decides whether an incremental request resends it."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    topic_id: uuid.UUID = ZERO_UUID


@dataclass(slots=True)
class FetchPlan:
    """One request to send: metadata plus the partitions to list and to forget."""

    session_id: int
    epoch: int
    full: bool
    to_send: dict[TopicPartition, PartitionFetch]
    to_forget: list[tuple[TopicPartition, uuid.UUID]]
    # Every partition the broker's session holds once this request succeeds; a
    # response may only carry these.
    session_after: dict[TopicPartition, PartitionFetch] = field(default_factory=dict)

    @property
    def is_incremental(self) -> bool:
        return not self.full

    def to_request(
        self,
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        isolation_level: int,
        rack_id: str = "",
    ) -> FetchRequest:
        """Build the FetchRequest; topics carry both name and id (the codec keeps the one in use)."""
        by_topic: dict[str, FetchRequest.FetchTopic] = {}
        for tp, pf in self.to_send.items():
            ft = by_topic.get(tp.topic)
            if ft is None:
                ft = by_topic[tp.topic] = FetchRequest.FetchTopic(topic=tp.topic, topic_id=pf.topic_id)
            ft.partitions.append(
                FetchRequest.FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=pf.current_leader_epoch,
                    fetch_offset=pf.fetch_offset,
                    last_fetched_epoch=pf.last_fetched_epoch,
                    log_start_offset=pf.log_start_offset,
                    partition_max_bytes=pf.max_bytes,
                )
            )
        forgotten: dict[tuple[str, uuid.UUID], FetchRequest.ForgottenTopic] = {}
        for tp, topic_id in self.to_forget:
            fg = forgotten.get((tp.topic, topic_id))
            if fg is None:
                fg = forgotten[(tp.topic, topic_id)] = FetchRequest.ForgottenTopic(
                    topic=tp.topic, topic_id=topic_id
                )
            fg.partitions.append(tp.partition)
        return FetchRequest(
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            isolation_level=isolation_level,
            session_id=self.session_id,
            session_epoch=self.epoch,
            topics=list(by_topic.values()),
            forgotten_topics_data=list(forgotten.values()),
            rack_id=rack_id,
        )


@dataclass(slots=True)
class ResponseCheck:
    """Outcome of :meth:`FetchSession.handle_response`.

    ``ok`` False means the partition data must be ignored (session error or an
    inconsistent response); the next request is a full one. ``error_code`` is the
    top-level error, if any.
    """

    ok: bool
    error_code: int = 0
    problem: str = ""


class FetchSession:
    """Fetch-session state for one broker."""

    def __init__(self, node_id: int, *, enabled: bool = True) -> None:
        self.node_id = node_id
        self.enabled = enabled
        self.session_id = 0
        self.epoch = INITIAL_EPOCH if enabled else FINAL_EPOCH
        # What the broker's session holds (only meaningful while session_id != 0).
        self.partitions: dict[TopicPartition, PartitionFetch] = {}
        # Counters, for tests and metrics.
        self.full_requests = 0
        self.incremental_requests = 0
        self.resets = 0

    @property
    def has_session(self) -> bool:
        return self.session_id != 0 and self.epoch > INITIAL_EPOCH

    def build(self, wanted: Mapping[TopicPartition, PartitionFetch]) -> FetchPlan:
        """Plan the next request for the partitions we want from this broker now."""
        if not self.has_session:
            self.full_requests += 1
            epoch = INITIAL_EPOCH if self.enabled else FINAL_EPOCH
            return FetchPlan(
                self.session_id if self.enabled else 0, epoch, True, dict(wanted), [], dict(wanted)
            )
        to_send: dict[TopicPartition, PartitionFetch] = {}
        to_forget: list[tuple[TopicPartition, uuid.UUID]] = []
        for tp, pf in wanted.items():
            prev = self.partitions.get(tp)
            if prev is None:
                to_send[tp] = pf
            elif prev != pf:
                if prev.topic_id != pf.topic_id:
                    to_forget.append((tp, prev.topic_id))
                to_send[tp] = pf
        for tp, prev in self.partitions.items():
            if tp not in wanted:
                to_forget.append((tp, prev.topic_id))
        self.incremental_requests += 1
        return FetchPlan(self.session_id, self.epoch, False, to_send, to_forget, dict(wanted))

    def close_plan(self) -> FetchPlan | None:
        """A request closing the broker-side session (sent best-effort on shutdown), if any."""
        if self.session_id == 0:
            return None
        return FetchPlan(self.session_id, FINAL_EPOCH, True, {}, [], {})

    def handle_response(
        self,
        plan: FetchPlan,
        response: FetchResponse,
        topic_name: Callable[[uuid.UUID], str | None] | None = None,
    ) -> ResponseCheck:
        """Advance the session after a response to ``plan``; tells whether its data is usable."""
        code = response.error_code
        if code:
            self._reset(keep_id=code != FETCH_SESSION_ID_NOT_FOUND and code in SESSION_ERRORS)
            return ResponseCheck(False, code)
        problem = self._unexpected_partitions(plan, response, topic_name)
        if problem:
            self._reset(keep_id=True)
            return ResponseCheck(False, 0, problem)
        if not self.enabled:
            return ResponseCheck(True)
        if plan.full:
            if response.session_id == 0:
                # The broker declined (or we asked it to close): next request is full again.
                self.session_id = 0
                self.epoch = INITIAL_EPOCH
                self.partitions = {}
            else:
                self.session_id = response.session_id
                self.epoch = 1
                self.partitions = plan.session_after
            return ResponseCheck(True)
        if response.session_id == 0:
            # The broker closed our session; the data is still valid.
            self.session_id = 0
            self.epoch = INITIAL_EPOCH
            self.partitions = {}
            return ResponseCheck(True)
        self.partitions = plan.session_after
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1
        return ResponseCheck(True)

    def handle_send_error(self) -> None:
        """The request failed without a response: we cannot know what the broker applied."""
        self._reset(keep_id=True)

    def _reset(self, *, keep_id: bool) -> None:
        self.resets += 1
        self.partitions = {}
        if not self.enabled:
            return
        if not keep_id:
            self.session_id = 0
        # With a known id, epoch 0 asks the broker to close it and start a new session.
        self.epoch = INITIAL_EPOCH

    @staticmethod
    def _unexpected_partitions(
        plan: FetchPlan,
        response: FetchResponse,
        topic_name: Callable[[uuid.UUID], str | None] | None,
    ) -> str:
        allowed = plan.session_after
        ids: dict[uuid.UUID, str] | None = None
        for topic in response.responses:
            name = topic.topic
            if not name and topic.topic_id != ZERO_UUID:
                if ids is None:
                    ids = {pf.topic_id: tp.topic for tp, pf in allowed.items()}
                resolved = ids.get(topic.topic_id)
                if resolved is None and topic_name is not None:
                    resolved = topic_name(topic.topic_id)
                name = resolved or ""
            for p in topic.partitions:
                if TopicPartition(name, p.partition_index) not in allowed:
                    return f"unexpected partition {name or topic.topic_id}-{p.partition_index} in response"
        return ""
