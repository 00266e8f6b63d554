"""What the consumer reads: subscription, assignment and per-partition positions.

``SubscriptionState`` is pure state shared by three parties: the user-facing
``Consumer`` (subscribe/assign/seek/pause), the group coordinator (assigns and revokes
partitions, reads ``consumed_offsets`` to commit) and the fetcher (reads positions and
pause flags, drops buffered data when partitions go away or are seeked). Positions
change only through its methods and those of :class:`PartitionState`, whoever asks. It
never does I/O; interested parties register a :class:`SubscriptionListener` to be told
synchronously about changes (so, for example, buffered records of a revoked partition
are gone before ``revoke`` returns).

Three mutually exclusive modes, as in the Java client: explicit topics, a pattern
(optionally with an exclude pattern), or manual assignment.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from aiokafka_lite.core.errors import IllegalStateError
from aiokafka_lite.core.structs import TopicPartition

__all__ = [
    "OffsetAndMetadata",
    "PartitionState",
    "PositionCursor",
    "SubscriptionListener",
    "SubscriptionState",
    "SubscriptionType",
]


@dataclass(slots=True)
class OffsetAndMetadata:
    """An offset to commit (or a committed one): next offset to read, metadata, leader epoch."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


class SubscriptionType(enum.Enum):
    NONE = "none"
    TOPICS = "topics"
    PATTERN = "pattern"
    MANUAL = "manual"


class SubscriptionListener(Protocol):
    """Receives synchronous notifications from :class:`SubscriptionState`."""

    def on_partitions_removed(self, tps: set[TopicPartition]) -> None:
        """Partitions left the assignment: drop everything buffered for them."""

    def on_position_changed(self, tp: TopicPartition) -> None:
        """The position was set from outside the fetch path (seek/reset): drop buffered data."""

    def on_state_changed(self) -> None:
        """Assignment, pause flags or subscription changed: fetchers may need to wake up."""


class PositionCursor(Protocol):
    """Whoever hands out the records of one partition one at a time (the consumer's current
    chunk), followed by that partition's position instead of writing it per record."""

    def cursor_position(self) -> int | None:
        """The offset after the last record handed out (None: none handed out yet)."""


class PartitionState:
    """Per-partition state. Attribute access is the hot path, hence ``__slots__``.

    ``position`` is the offset of the next record to hand to the user (``None`` until
    known). ``position_epoch`` is the leader epoch of the last consumed record (or of
    the committed offset) and is what KIP-320 validation checks against.

    The position has one owner: it changes only through the methods here and those of
    :class:`SubscriptionState` (seek, reset). While the consumer hands out the records of
    a chunk one by one it does not write the position per record: the state *follows* the
    consumer's :class:`PositionCursor` (``follow``) until the chunk ends (``settle``), and
    ``position`` reads through it. The fetcher writes only what the leader reports
    (``high_watermark``, ``last_stable_offset``, ``log_start_offset``).
    """

    __slots__ = (
        "_cursor",
        "_position",
        "awaiting_validation",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "paused",
        "position_epoch",
        "reset_requested",
        "reset_to",
    )

    def __init__(self) -> None:
        self._position: int | None = None
        self._cursor: PositionCursor | None = None
        self.position_epoch: int | None = None
        self.paused = False
        # True once OFFSET_OUT_OF_RANGE (or a seek_to_*) asked for auto_offset_reset /
        # a ListOffsets lookup, instead of the committed offset.
        self.reset_requested = False
        # What the reset looks up: "earliest"/"latest", or None for auto_offset_reset.
        self.reset_to: str | None = None
        # True when the position must be checked with OffsetForLeaderEpoch before fetching.
        self.awaiting_validation = False
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1

    @property
    def position(self) -> int | None:
        cursor = self._cursor
        if cursor is not None:
            at = cursor.cursor_position()
            if at is not None:
                return at
        return self._position

    def advance(self, next_offset: int, epoch: int | None) -> None:
        """Records up to ``next_offset`` were consumed (``epoch``: the leader epoch of the
        last one); the consumer's path, for a batch handed out at once."""
        self._position = next_offset
        self.position_epoch = epoch

    def follow(self, cursor: PositionCursor, epoch: int | None) -> None:
        """From now on the position is where ``cursor`` is (records of leader epoch
        ``epoch`` are handed out one by one), until ``settle``."""
        self._cursor = cursor
        self.position_epoch = epoch

    def settle(self) -> None:
        """Stop following the cursor, keeping the position it reached."""
        cursor = self._cursor
        if cursor is not None:
            self._cursor = None
            at = cursor.cursor_position()
            if at is not None:
                self._position = at

    def _move(self, offset: int | None, epoch: int | None) -> None:
        """Set from outside the consuming path (seek, reset): the cursor is left behind."""
        self._cursor = None
        self._position = offset
        self.position_epoch = epoch

    def __repr__(self) -> str:
        return (
            f"PartitionState(position={self.position}, epoch={self.position_epoch}, "
            f"paused={self.paused}, reset={self.reset_requested}, validate={self.awaiting_validation})"
        )


class SubscriptionState:
    """Subscription, assignment and positions of one consumer. Pure state, no I/O."""

    def __init__(self) -> None:
        self.subscription_type = SubscriptionType.NONE
        # For TOPICS: the user's topics. For PATTERN: the topics currently matching the
        # pattern in cluster metadata (maintained by ``update_pattern_matches``), so the
        # group coordinator can always use ``subscribed_topics`` as "what we subscribe to".
        self.subscribed_topics: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self.exclude_pattern: re.Pattern[str] | None = None
        # Bumped whenever subscribed_topics changes; the coordinator rejoins when it moves.
        self.subscription_version = 0
        # Bumped whenever the assignment changes.
        self.assignment_version = 0
        # The user's rebalance listener (``subscribe(..., listener=...)``); the group
        # coordinator invokes it, the consumer never does. Any object with optional
        # ``on_partitions_revoked/assigned/lost(tps)`` (sync or async) methods.
        self.rebalance_listener: object | None = None
        self._partitions: dict[TopicPartition, PartitionState] = {}
        self._listeners: list[SubscriptionListener] = []

    # ------------------------------------------------------------------ listeners
    def add_listener(self, listener: SubscriptionListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: SubscriptionListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _notify_removed(self, tps: set[TopicPartition]) -> None:
        if tps:
            for listener in self._listeners:
                listener.on_partitions_removed(tps)

    def _notify_position(self, tp: TopicPartition) -> None:
        for listener in self._listeners:
            listener.on_position_changed(tp)

    def _notify_changed(self) -> None:
        for listener in self._listeners:
            listener.on_state_changed()

    # ------------------------------------------------------------------ subscription
    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        pattern: str | re.Pattern[str] | None = None,
        exclude: str | re.Pattern[str] | None = None,
        listener: object | None = None,
    ) -> None:
        """Subscribe to explicit topics or to a pattern (not both); replaces a previous subscription.

        ``exclude`` (pattern subscriptions only) removes matching topics, for blacklists.
        ``listener`` is the rebalance listener the group coordinator will call.
        Raises ``IllegalStateError`` if partitions were assigned manually (``unsubscribe`` first).
        """
        if self.subscription_type is SubscriptionType.MANUAL:
            raise IllegalStateError("subscription and manual assignment are mutually exclusive")
        if topics is not None and not isinstance(topics, str):
            topic_set = set(topics)
        elif isinstance(topics, str):
            topic_set = {topics}
        else:
            topic_set = set()
        if pattern is not None and topic_set:
            raise IllegalStateError("subscribe to topics or to a pattern, not both")
        if exclude is not None and pattern is None:
            raise IllegalStateError("an exclude pattern needs a pattern subscription")
        if pattern is None and not topic_set:
            raise IllegalStateError("subscribe needs topics or a pattern")
        for t in topic_set:
            if not isinstance(t, str) or not t:
                raise IllegalStateError(f"invalid topic name {t!r}")
        self.rebalance_listener = listener
        if pattern is not None:
            self.subscription_type = SubscriptionType.PATTERN
            self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            self.exclude_pattern = re.compile(exclude) if isinstance(exclude, str) else exclude
            # Matches are recomputed from metadata; keep current ones that still match.
            new_topics = {t for t in self.subscribed_topics if self.matches(t)}
        else:
            self.subscription_type = SubscriptionType.TOPICS
            self.pattern = None
            self.exclude_pattern = None
            new_topics = topic_set
        self._set_topics(new_topics)
        # Partitions of topics no longer subscribed leave the assignment right away
        # (the group would revoke them at the next rebalance anyway).
        gone = {tp for tp in self._partitions if tp.topic not in self.subscribed_topics}
        if gone:
            self._remove(gone)
        self._notify_changed()

    def _set_topics(self, topics: set[str]) -> bool:
        if topics != self.subscribed_topics:
            self.subscribed_topics = topics
            self.subscription_version += 1
            return True
        return False

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` belongs to the subscription (explicit topic or pattern match)."""
        if self.subscription_type is SubscriptionType.PATTERN:
            assert self.pattern is not None
            if self.pattern.fullmatch(topic) is None:
                return False
            return self.exclude_pattern is None or self.exclude_pattern.fullmatch(topic) is None
        if self.subscription_type is SubscriptionType.MANUAL:
            return any(tp.topic == topic for tp in self._partitions)
        return topic in self.subscribed_topics

    def update_pattern_matches(self, all_topics: Iterable[str]) -> bool:
        """Recompute the topics matching the pattern from cluster metadata; True if they changed."""
        if self.subscription_type is not SubscriptionType.PATTERN:
            return False
        changed = self._set_topics({t for t in all_topics if self.matches(t)})
        if changed:
            self._notify_changed()
        return changed

    @property
    def is_subscribed(self) -> bool:
        """True for topic or pattern subscriptions (partitions come from a group or from metadata)."""
        return self.subscription_type in (SubscriptionType.TOPICS, SubscriptionType.PATTERN)

    @property
    def is_manual(self) -> bool:
        return self.subscription_type is SubscriptionType.MANUAL

    def unsubscribe(self) -> None:
        """Forget subscription and assignment (buffered data is dropped)."""
        self._remove(set(self._partitions))
        self.subscription_type = SubscriptionType.NONE
        self.pattern = None
        self.exclude_pattern = None
        self.rebalance_listener = None
        self._set_topics(set())
        self._notify_changed()

    # ------------------------------------------------------------------ assignment
    def assign_manually(self, tps: Iterable[TopicPartition]) -> None:
        """Manual assignment (no group): replaces the assignment, keeping positions of kept partitions."""
        if self.is_subscribed:
            raise IllegalStateError("subscription and manual assignment are mutually exclusive")
        new = {_check_tp(tp) for tp in tps}
        self.subscription_type = SubscriptionType.MANUAL if new else SubscriptionType.NONE
        self._replace(new)

    def set_assignment(self, tps: Iterable[TopicPartition]) -> None:
        """Replace the assignment of a subscription (used without a group: all partitions of the topics)."""
        self._replace({_check_tp(tp) for tp in tps})

    def _replace(self, new: set[TopicPartition]) -> None:
        gone = set(self._partitions) - new
        if gone:
            self._remove(gone)
        added = False
        for tp in sorted(new):
            if tp not in self._partitions:
                self._partitions[tp] = PartitionState()
                added = True
        if added or gone:
            self.assignment_version += 1
        self._notify_changed()

    def assign_from_group(self, tps: Iterable[TopicPartition]) -> None:
        """Add partitions assigned by the group (cooperative: existing ones are kept).

        Positions of new partitions are unknown until resolved from committed offsets
        or ``auto_offset_reset``.
        """
        added = False
        for tp in tps:
            tp = _check_tp(tp)
            if tp not in self._partitions:
                self._partitions[tp] = PartitionState()
                added = True
        if added:
            self.assignment_version += 1
        self._notify_changed()

    def revoke(self, tps: Iterable[TopicPartition]) -> None:
        """Remove partitions from the assignment; buffered records for them are dropped first."""
        gone = {tp for tp in tps if tp in self._partitions}
        if gone:
            self._remove(gone)
        self._notify_changed()

    def _remove(self, gone: set[TopicPartition]) -> None:
        # Listeners drop buffered data while the states still exist.
        self._notify_removed(gone)
        for tp in gone:
            del self._partitions[tp]
        self.assignment_version += 1

    def assignment(self) -> set[TopicPartition]:
        return set(self._partitions)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._partitions

    def state(self, tp: TopicPartition) -> PartitionState:
        """The live state of an assigned partition (``IllegalStateError`` if not assigned)."""
        try:
            return self._partitions[tp]
        except KeyError:
            raise IllegalStateError(f"{tp.topic}-{tp.partition} is not assigned to this consumer") from None

    def get_state(self, tp: TopicPartition) -> PartitionState | None:
        return self._partitions.get(tp)

    def states(self) -> dict[TopicPartition, PartitionState]:
        """The live per-partition states (do not mutate the dict)."""
        return self._partitions

    # ------------------------------------------------------------------ positions
    def position(self, tp: TopicPartition) -> int | None:
        return self.state(tp).position

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int | None = None) -> None:
        """Set the next offset to read. With a leader epoch the position is validated (KIP-320)."""
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise TypeError(f"offset must be an int, not {type(offset).__name__}")
        if offset < 0:
            raise ValueError(f"invalid offset {offset} for {tp.topic}-{tp.partition}")
        st = self.state(tp)
        st._move(offset, leader_epoch)
        st.reset_requested = False
        st.reset_to = None
        st.awaiting_validation = leader_epoch is not None
        self._notify_position(tp)
        self._notify_changed()

    def request_reset(self, tp: TopicPartition, to: str | None = None) -> None:
        """Forget the position and look it up again: ``to`` is "earliest" or "latest"
        (``seek_to_beginning/end``), None applies auto_offset_reset (e.g. after OFFSET_OUT_OF_RANGE)."""
        if to not in (None, "earliest", "latest"):
            raise IllegalStateError(f"invalid reset target {to!r}")
        st = self.state(tp)
        st._move(None, None)
        st.reset_requested = True
        st.reset_to = to
        st.awaiting_validation = False
        self._notify_position(tp)
        self._notify_changed()

    def reset_position(self, tp: TopicPartition, offset: int, leader_epoch: int | None = None) -> None:
        """Set a position that needs no validation (it came from the leader: ListOffsets, truncation point)."""
        self.seek(tp, offset)
        self._partitions[tp].position_epoch = leader_epoch

    def hold_for_validation(self, tp: TopicPartition) -> None:
        """Stop fetching ``tp`` until its position is validated (OffsetForLeaderEpoch, after
        a leader change) or, after a truncation the user must see, until a seek. Quiet:
        the fetcher, the caller, wakes what must act."""
        st = self._partitions.get(tp)
        if st is not None:
            st.awaiting_validation = True

    def use_reset_policy(self, tp: TopicPartition) -> None:
        """No committed offset: the missing position of ``tp`` comes from auto_offset_reset."""
        st = self._partitions.get(tp)
        if st is not None and st.position is None:
            st.reset_requested = True

    def complete_validation(self, tp: TopicPartition) -> None:
        st = self._partitions.get(tp)
        if st is not None:
            st.awaiting_validation = False
            self._notify_changed()

    def consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Offsets to commit: the position of every assigned partition whose position is known."""
        return {
            tp: OffsetAndMetadata(st.position, "", st.position_epoch)
            for tp, st in self._partitions.items()
            if st.position is not None
        }

    def needs_reset(self, tp: TopicPartition) -> bool:
        """True if the partition has no position yet (committed offset or auto_offset_reset needed)."""
        return self.state(tp).position is None

    def missing_positions(self) -> set[TopicPartition]:
        return {tp for tp, st in self._partitions.items() if st.position is None}

    def awaiting_validation(self) -> set[TopicPartition]:
        return {tp for tp, st in self._partitions.items() if st.awaiting_validation}

    def has_all_positions(self) -> bool:
        return all(st.position is not None for st in self._partitions.values())

    # ------------------------------------------------------------------ pause
    def pause(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self.state(tp).paused = True
        self._notify_changed()

    def resume(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self.state(tp).paused = False
        self._notify_changed()

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._partitions.items() if st.paused}

    def is_fetchable(self, tp: TopicPartition) -> bool:
        """Assigned, not paused, with a known and validated position."""
        st = self._partitions.get(tp)
        return st is not None and not st.paused and st.position is not None and not st.awaiting_validation


def _check_tp(tp: object) -> TopicPartition:
    if isinstance(tp, TopicPartition):
        return tp
    if (
        isinstance(tp, tuple)
        and len(tp) == 2
        and isinstance(tp[0], str)
        and isinstance(tp[1], int)
        and not isinstance(tp[1], bool)
    ):
        return TopicPartition(tp[0], tp[1])
    raise TypeError(f"expected a TopicPartition, got {tp!r}")
