"""Share-group membership (KIP-932) as a pure state machine (no I/O, no clock, no asyncio).

The protocol is KIP-848's, simplified: one request, ``ShareGroupHeartbeat``, both joins
and keeps the member alive, and the coordinator computes the assignment. There is
nothing to revoke (records are locked one by one, not partitions owned), so a new
assignment applies at once.

States::

    JOINING --response--> STABLE --subscription changed--> STABLE (names sent again)
    JOINING/STABLE --UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH--> JOINING (epoch 0, same id)
    any --leave_request()--> LEAVING --response/failure--> LEFT
    any --fatal error--> FAILED

The member id is generated here, once, as a UUID string: KIP-932 has the client
create it, and it is kept for the consumer's whole life, also across fencing (the
coordinator then knows the rejoining member is the same one).

Time is an argument (``now``, monotonic milliseconds). The driver asks
``heartbeat_due(now)``, sends ``heartbeat_request(now)`` to the coordinator, and feeds
the outcome back with ``heartbeat_response`` or ``heartbeat_failed``. The resulting
assignment is a set of (topic id, partition) pairs: names are the driver's to resolve
through metadata, because the coordinator may assign a topic the client has no
metadata for yet.

Errors are handled as the Java client's share heartbeat manager handles them:
coordinator moves and loads retry after a backoff (``coordinator_unknown`` tells the
driver to look the coordinator up again); fencing rejoins at once with epoch 0;
``TOPIC_AUTHORIZATION_FAILED`` is reported but heartbeating goes on; authorization of
the group, invalid requests, a full group and unsupported versions are fatal.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from aiokafka_lite.core.errors import KafkaError, error_for
from aiokafka_lite.wire.messages import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse

__all__ = ["LEAVE_EPOCH", "ShareMemberState", "ShareMembership", "TopicIdPartition"]

#: (topic id, partition): how the coordinator names assigned partitions.
TopicIdPartition = tuple[uuid.UUID, int]

LEAVE_EPOCH: Final = -1
JOIN_EPOCH: Final = 0

# Error codes, named once so the transitions read like the protocol guide.
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
UNKNOWN_MEMBER_ID = 25
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
GROUP_ID_NOT_FOUND = 69
GROUP_MAX_SIZE_REACHED = 81
FENCED_MEMBER_EPOCH = 110

_COORDINATOR_MOVED: Final = frozenset({COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR})
_FENCED: Final = frozenset({UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH})
# Retrying cannot help: the application must hear about these.
_FATAL: Final = frozenset(
    {
        GROUP_AUTHORIZATION_FAILED,
        UNSUPPORTED_VERSION,
        INVALID_REQUEST,
        GROUP_MAX_SIZE_REACHED,
        GROUP_ID_NOT_FOUND,
    }
)


class ShareMemberState(enum.Enum):
    JOINING = "joining"  # epoch 0 heartbeats until the coordinator gives an epoch
    STABLE = "stable"
    LEAVING = "leaving"  # the epoch -1 heartbeat is in flight
    LEFT = "left"
    FAILED = "failed"  # fatal error; see ShareMembership.fatal


@dataclass
class ShareMembership:
    """One share-group member's view of its membership (see the module docstring)."""

    group_id: str
    topics: tuple[str, ...]
    rack_id: str | None = None
    retry_backoff_ms: float = 100.0
    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    state: ShareMemberState = ShareMemberState.JOINING
    epoch: int = JOIN_EPOCH
    #: The coordinator's interval; 0 until the first answer (heartbeat at once).
    heartbeat_interval_ms: int = 0
    assignment: frozenset[TopicIdPartition] = frozenset()
    #: The driver must find the coordinator again before the next heartbeat.
    coordinator_unknown: bool = True
    #: Why the member failed (state FAILED).
    fatal: KafkaError | None = None
    #: A non-fatal error the application should hear about (taken by the driver).
    reported: KafkaError | None = None
    _next_heartbeat_ms: float = 0.0
    _in_flight: bool = False
    # The subscription as last acknowledged by the coordinator; None: send it.
    _sent_topics: tuple[str, ...] | None = None
    # The subscription carried by the heartbeat in flight (None: it carries none).
    _topics_in_flight: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ValueError("group_id must not be empty")
        self.topics = tuple(sorted(set(self.topics)))

    # ------------------------------------------------------------------ queries

    @property
    def active(self) -> bool:
        """Still a member or trying to be (not leaving, left or failed)."""
        return self.state in (ShareMemberState.JOINING, ShareMemberState.STABLE)

    def heartbeat_due(self, now: float) -> bool:
        return self.active and not self._in_flight and now >= self._next_heartbeat_ms

    def ms_until_heartbeat(self, now: float) -> float:
        """How long the driver may sleep; 0 when a heartbeat is due."""
        return max(self._next_heartbeat_ms - now, 0.0)

    # ------------------------------------------------------------------ events

    def subscribe(self, topics: Iterable[str], now: float) -> None:
        """A new subscription goes out with the next heartbeat, sent at once."""
        self.topics = tuple(sorted(set(topics)))
        if self.topics != self._sent_topics:
            self._next_heartbeat_ms = now

    def heartbeat_request(self, now: float) -> ShareGroupHeartbeatRequest:
        """The heartbeat to send now; the machine waits for its outcome."""
        if not self.active:
            raise RuntimeError(f"no heartbeat in state {self.state.value}")
        self._in_flight = True
        joining = self.epoch == JOIN_EPOCH
        # Subscription and rack go out when joining and whenever the coordinator may
        # not have them (changed, or the last heartbeat failed): null means unchanged.
        send_topics = joining or self._sent_topics != self.topics
        self._topics_in_flight = self.topics if send_topics else None
        return ShareGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.epoch,
            rack_id=self.rack_id if joining else None,
            subscribed_topic_names=list(self.topics) if send_topics else None,
        )

    def heartbeat_response(self, resp: ShareGroupHeartbeatResponse, now: float) -> bool:
        """Apply the coordinator's answer; True when the assignment changed."""
        self._in_flight = False
        if not self.active:
            return False
        code = resp.error_code
        if code == NONE:
            return self._accepted(resp, now)
        err = error_for(code, resp.error_message)
        self._sent_topics = None
        if code in _FENCED:
            # The coordinator no longer knows this member (session expired, epoch
            # stale): rejoin now with the same member id; the assignment is gone.
            self.epoch = JOIN_EPOCH
            self.state = ShareMemberState.JOINING
            self._next_heartbeat_ms = now
            changed = bool(self.assignment)
            self.assignment = frozenset()
            return changed
        if code in _COORDINATOR_MOVED:
            self.coordinator_unknown = True
            self._next_heartbeat_ms = now
            return False
        if code == COORDINATOR_LOAD_IN_PROGRESS:
            self._next_heartbeat_ms = now + self.retry_backoff_ms
            return False
        if code == TOPIC_AUTHORIZATION_FAILED:
            self.reported = err
            self._next_heartbeat_ms = now + (self.heartbeat_interval_ms or self.retry_backoff_ms)
            return False
        if code in _FATAL or not err.retriable:
            return self._fail(err)
        self._next_heartbeat_ms = now + self.retry_backoff_ms
        return False

    def heartbeat_failed(self, exc: KafkaError, now: float) -> None:
        """The heartbeat got no answer (connection lost, timeout): retry after a backoff
        with the full subscription, at a coordinator looked up again."""
        self._in_flight = False
        if not self.active:
            return
        if not exc.retriable:
            self._fail(exc)
            return
        self._sent_topics = None
        self.coordinator_unknown = True
        self._next_heartbeat_ms = now + self.retry_backoff_ms

    def coordinator_found(self) -> None:
        self.coordinator_unknown = False

    def leave_request(self) -> ShareGroupHeartbeatRequest | None:
        """The epoch -1 heartbeat that leaves the group; None when there is nothing to
        leave (never joined, already left or failed)."""
        was_member = self.state == ShareMemberState.STABLE or (
            self.state == ShareMemberState.JOINING and self._in_flight
        )
        if self.state in (ShareMemberState.LEFT, ShareMemberState.FAILED, ShareMemberState.LEAVING):
            return None
        self.assignment = frozenset()
        self._in_flight = False
        if not was_member:
            self.state = ShareMemberState.LEFT
            return None
        self.state = ShareMemberState.LEAVING
        return ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=LEAVE_EPOCH
        )

    def left(self) -> None:
        """The leave heartbeat was answered, or will never be: either way, we are out."""
        self.state = ShareMemberState.LEFT
        self.epoch = LEAVE_EPOCH

    # ------------------------------------------------------------------ internals

    def _accepted(self, resp: ShareGroupHeartbeatResponse, now: float) -> bool:
        self.state = ShareMemberState.STABLE
        self.epoch = resp.member_epoch
        if resp.heartbeat_interval_ms > 0:
            self.heartbeat_interval_ms = resp.heartbeat_interval_ms
        if self._topics_in_flight is not None:
            self._sent_topics = self._topics_in_flight
        if self._sent_topics != self.topics:  # changed while the heartbeat was in flight
            self._next_heartbeat_ms = now
        else:
            self._next_heartbeat_ms = now + (self.heartbeat_interval_ms or self.retry_backoff_ms)
        if resp.assignment is None:  # null: unchanged since the last heartbeat
            return False
        new = frozenset((tp.topic_id, p) for tp in resp.assignment.topic_partitions for p in tp.partitions)
        if new == self.assignment:
            return False
        self.assignment = new
        return True

    def _fail(self, err: KafkaError) -> bool:
        self.state = ShareMemberState.FAILED
        self.fatal = err
        changed = bool(self.assignment)
        self.assignment = frozenset()
        return changed
