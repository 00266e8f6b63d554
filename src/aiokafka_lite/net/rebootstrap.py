"""When to rebootstrap (KIP-899, KIP-1102): a pure decision, no I/O.

With ``metadata_recovery_strategy='rebootstrap'`` (Java 4.x's default) the client drops
every broker it learned from metadata and starts over from ``bootstrap_servers`` when

* every broker of the cached metadata has failed (a refresh tried each one and none
  could be reached or answered): Java's "no node is available" check of KIP-899;
* metadata refreshes have been failing for ``metadata_recovery_rebootstrap_trigger_ms``
  since the first unanswered attempt (KIP-1102), even while some broker still accepts
  connections (a broker that answers but cannot give metadata, a half-broken network);
* a broker answers Metadata with the top-level error ``REBOOTSTRAP_REQUIRED``
  (MetadataResponse v13, KIP-1102).

With ``'none'`` none of these happens: the client keeps its brokers, as before.

``RebootstrapPolicy`` keeps the one piece of state this needs (since when refreshes
fail); ``Client`` feeds it the clock and the outcome of each attempt and acts on the
reason it returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aiokafka_lite.core.errors import RebootstrapRequiredError

__all__ = ["REBOOTSTRAP_REQUIRED", "RebootstrapPolicy"]

REBOOTSTRAP_REQUIRED: Final = RebootstrapRequiredError.code


@dataclass(eq=False)
class RebootstrapPolicy:
    """Decides whether the client must go back to its bootstrap servers."""

    enabled: bool
    trigger_s: float
    #: Loop time of the first metadata attempt not followed by a success; None while
    #: metadata is being refreshed fine.
    failing_since: float | None = None
    #: How many times the client rebootstrapped (metrics, tests).
    count: int = 0

    def attempt_started(self, now: float) -> None:
        """A metadata refresh begins (the trigger clock starts at the first of a failing run)."""
        if self.failing_since is None:
            self.failing_since = now

    def succeeded(self) -> None:
        """Metadata was refreshed: the trigger clock stops."""
        self.failing_since = None

    def after_failure(
        self, now: float, *, known_brokers: set[int], failed: set[int], error_code: int = 0
    ) -> str | None:
        """Why to rebootstrap now, or None to keep trying the known brokers.

        ``known_brokers``: the broker ids of the cached metadata (empty while only the
        bootstrap servers are known: rebootstrapping then would change nothing);
        ``failed``: the nodes this refresh tried without success; ``error_code``: the
        top-level error of a Metadata response (0 if the attempt got none).
        """
        if not self.enabled:
            return None
        if error_code == REBOOTSTRAP_REQUIRED:
            return "a broker answered REBOOTSTRAP_REQUIRED"
        if not known_brokers:
            return None
        if known_brokers <= failed:
            return f"none of the known brokers {sorted(known_brokers)} could be reached"
        if self.failing_since is not None and now - self.failing_since >= self.trigger_s:
            return (
                f"metadata could not be refreshed for {(now - self.failing_since) * 1000:.0f} ms "
                f"(metadata_recovery_rebootstrap_trigger_ms={self.trigger_s * 1000:.0f})"
            )
        return None

    def rebootstrapped(self, now: float) -> None:
        """The client went back to its bootstrap servers: a fresh trigger period starts."""
        self.count += 1
        self.failing_since = now
