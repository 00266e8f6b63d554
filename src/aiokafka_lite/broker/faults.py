"""Fault injection and request inspection shared by the brokers of a cluster.

Rules are matched per request, in the order they were added, by API key and
(optionally) broker id. A rule with a ``count`` applies to that many matching
requests and then disappears; ``count=None`` applies until cleared.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from aiokafka_lite.wire.message import Request

__all__ = ["Faults", "ObservedRequest", "RequestRecorder"]

log = logging.getLogger("aiokafka_lite.broker")
_R = TypeVar("_R", bound="_Rule")


@dataclass(slots=True)
class _Rule:
    api_key: int | None  # None matches every API
    broker_id: int | None
    remaining: int | None

    def matches(self, api_key: int, broker_id: int) -> bool:
        return (self.api_key is None or self.api_key == api_key) and (
            self.broker_id is None or self.broker_id == broker_id
        )

    def consume(self) -> bool:
        """Uses one application; False when the rule is spent and must be removed."""
        if self.remaining is None:
            return True
        self.remaining -= 1
        return self.remaining > 0


@dataclass(slots=True)
class _ErrorRule(_Rule):
    error_code: int = 0


@dataclass(slots=True)
class _LatencyRule(_Rule):
    seconds: float = 0.0


@dataclass(slots=True)
class _DropRule(_Rule):
    when: Literal["before", "after"] = "before"


@dataclass(slots=True, frozen=True)
class ObservedRequest:
    broker_id: int
    connection_id: str
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    request: Request


Observer = Callable[[ObservedRequest], None]


@dataclass
class RequestRecorder:
    """Collects decoded requests (optionally of some API keys) until closed."""

    api_keys: frozenset[int] | None
    requests: list[ObservedRequest] = field(default_factory=list)
    _faults: Faults | None = None

    def __call__(self, obs: ObservedRequest) -> None:
        if self.api_keys is None or obs.api_key in self.api_keys:
            self.requests.append(obs)

    def of(self, api_key: int) -> list[ObservedRequest]:
        return [r for r in self.requests if r.api_key == api_key]

    def clear(self) -> None:
        self.requests.clear()

    def close(self) -> None:
        if self._faults is not None:
            self._faults.remove_observer(self)
            self._faults = None

    def __enter__(self) -> RequestRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Faults:
    """The fault rules and observers; the connection loop consults it for every request."""

    def __init__(self) -> None:
        self._errors: list[_ErrorRule] = []
        self._latency: list[_LatencyRule] = []
        self._drops: list[_DropRule] = []
        self._observers: list[Observer] = []

    # -- configuration -----------------------------------------------------------
    def add_error(
        self, api_key: int, error_code: int, count: int | None = 1, broker_id: int | None = None
    ) -> None:
        self._errors.append(_ErrorRule(api_key, broker_id, count, error_code))

    def add_latency(
        self, api_key: int | None, seconds: float, count: int | None = None, broker_id: int | None = None
    ) -> None:
        self._latency.append(_LatencyRule(api_key, broker_id, count, seconds))

    def add_drop(
        self,
        api_key: int | None,
        count: int | None = 1,
        broker_id: int | None = None,
        when: Literal["before", "after"] = "before",
    ) -> None:
        self._drops.append(_DropRule(api_key, broker_id, count, when))

    def clear(self) -> None:
        self._errors.clear()
        self._latency.clear()
        self._drops.clear()

    def add_observer(self, fn: Observer) -> None:
        self._observers.append(fn)

    def remove_observer(self, fn: Observer) -> None:
        if fn in self._observers:
            self._observers.remove(fn)

    @property
    def active(self) -> bool:
        return bool(self._errors or self._latency or self._drops or self._observers)

    # -- per request -------------------------------------------------------------
    def observe(self, obs: ObservedRequest) -> None:
        for fn in list(self._observers):
            try:
                fn(obs)
            except Exception:
                log.exception("request observer failed")

    @staticmethod
    def _take(rules: list[_R], api_key: int, broker_id: int) -> _R | None:
        for i, rule in enumerate(rules):
            if rule.matches(api_key, broker_id):
                if not rule.consume():
                    del rules[i]
                return rule
        return None

    def take_error(self, api_key: int, broker_id: int) -> int | None:
        rule = self._take(self._errors, api_key, broker_id)
        return None if rule is None else rule.error_code

    def take_latency(self, api_key: int, broker_id: int) -> float:
        rule = self._take(self._latency, api_key, broker_id)
        return 0.0 if rule is None else rule.seconds

    def take_drop(self, api_key: int, broker_id: int) -> Literal["before", "after"] | None:
        rule = self._take(self._drops, api_key, broker_id)
        return None if rule is None else rule.when
