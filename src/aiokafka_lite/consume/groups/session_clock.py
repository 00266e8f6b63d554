"""``SessionClock``: a group member's own clock of its session at the broker.

Both group protocols keep one (``membership.Membership``, classic;
``consumer_membership.ConsumerMembership``, KIP-848). The broker expires a member it has not
heard from for the session timeout and gives its partitions to others; the member cannot
be told (it is the answers that stopped), so it counts for itself: the last answer that
proved the session alive, whether the session has run out since (the driver then stops
handing out records of the partitions held), and whether a session the coordinator turned
out to have kept must have its partitions handed out again (a *thaw*). Pure state: time is
an argument (monotonic milliseconds), what a timeout is and when a session counts belong
to the protocol's machine.
"""

from __future__ import annotations

__all__ = ["SessionClock"]


class SessionClock:
    """When the session was last proved alive, whether it ran out, and a pending thaw."""

    __slots__ = ("_thaw_pending", "alive_at", "expirations", "expired")

    def __init__(self, now: float) -> None:
        #: When an answer of the coordinator last proved the session alive.
        self.alive_at = now
        #: The session ran out (no answer for a whole timeout); the partitions are frozen
        #: until the coordinator answers whether they are lost.
        self.expired = False
        #: How many times the session ran out (observability, tests).
        self.expirations = 0
        self._thaw_pending = False

    def deadline(self, timeout_ms: float) -> float:
        """When a session of ``timeout_ms`` runs out without another proof of life."""
        return self.alive_at + timeout_ms

    def expire(self) -> None:
        """The session ran out: the partitions held are frozen (no thaw pending)."""
        self.expirations += 1
        self.expired = True
        self._thaw_pending = False

    def alive(self, now: float, *, partitions_kept: bool = True) -> bool:
        """An answer proved the session alive at ``now``. True when the session had run out
        and the coordinator kept it with its partitions (``partitions_kept``): they are to be
        handed out again (``take_thaw``)."""
        self.alive_at = now
        if not self.expired:
            return False
        self.expired = False
        self._thaw_pending = partitions_kept
        return partitions_kept

    def lost(self) -> None:
        """The coordinator answered that the session is gone: the frozen partitions are lost
        (the machine takes the lost path), nothing is to thaw."""
        self.expired = False
        self._thaw_pending = False

    def take_thaw(self) -> bool:
        """Whether the partitions of a kept session are to be handed out again (once)."""
        if not self._thaw_pending:
            return False
        self._thaw_pending = False
        return True
