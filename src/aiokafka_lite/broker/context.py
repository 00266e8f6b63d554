"""The handler interface of the embedded broker.

Every API is served by a handler ``async def handler(ctx, request) -> response``
registered in a ``HandlerRegistry`` under its API key and the version range it
supports. The ApiVersions response is derived from the registry, so registering a
handler is all it takes to advertise an API.

Handlers of optional parts (the group and transaction coordinators) are registered at
cluster start by ``register_group_handlers(registry, cluster)`` /
``register_txn_handlers(registry, cluster)``; such a part may also publish a
long-lived object in ``cluster.services`` (see ``Service``) that the cluster starts
after registration and stops at shutdown.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from aiokafka_lite.wire.message import Request, Response

if TYPE_CHECKING:
    from aiokafka_lite.broker.state import ClusterState

__all__ = [
    "EncodedResponse",
    "Handler",
    "HandlerEntry",
    "HandlerRegistry",
    "RequestContext",
    "Service",
]


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    broker_id: int  # the broker that received the request
    cluster: ClusterState
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    principal: str | None  # authenticated SASL user, None without SASL
    connection_id: str  # unique per connection, e.g. "b1-c17"
    client_host: str
    # SASL-authenticated with a delegation token (SCRAM tokenauth=true): such a connection
    # may not create, renew or expire tokens (Kafka's DELEGATION_TOKEN_REQUEST_NOT_ALLOWED).
    token_authenticated: bool = False
    # The connection's Kafka principal when its listener decides it (e.g. "User:CN=app"
    # from a TLS client certificate); None: derived from the SASL user.
    listener_principal: str | None = None

    @property
    def kafka_principal(self) -> str:
        """The principal the authorizer checks: the listener's, else ``User:<SASL user>``,
        else ``User:ANONYMOUS`` (Kafka's principal of an unauthenticated connection)."""
        if self.listener_principal is not None:
            return self.listener_principal
        return "User:ANONYMOUS" if self.principal is None else f"User:{self.principal}"


@dataclass(slots=True)
class EncodedResponse:
    """A response body the handler encoded itself (the fetch hot path).

    ``parts`` are concatenated after the response header; they may be memoryviews of
    stored batches, so the body is never copied into one buffer by the handler.
    """

    parts: list[bytes | bytearray | memoryview]
    size: int  # total length of ``parts``


HandlerResult = Response | EncodedResponse | None
# ``None`` means "send no response" (Produce with acks=0).
Handler = Callable[[RequestContext, Request], Awaitable[HandlerResult]]


@dataclass(slots=True, frozen=True)
class HandlerEntry:
    api_key: int
    handler: Handler
    min_version: int
    max_version: int


class HandlerRegistry:
    """API key -> handler and supported version range."""

    def __init__(self) -> None:
        self._entries: dict[int, HandlerEntry] = {}

    def register(self, api_key: int, handler: Handler, min_version: int, max_version: int) -> None:
        """Registers (or replaces) the handler of ``api_key`` for ``min_version..max_version``."""
        if min_version > max_version or min_version < 0:
            raise ValueError(f"bad version range {min_version}..{max_version} for api key {api_key}")
        self._entries[api_key] = HandlerEntry(api_key, handler, min_version, max_version)

    def unregister(self, api_key: int) -> None:
        self._entries.pop(api_key, None)

    def get(self, api_key: int) -> HandlerEntry | None:
        return self._entries.get(api_key)

    def __contains__(self, api_key: object) -> bool:
        return api_key in self._entries

    def __iter__(self) -> Iterator[HandlerEntry]:
        return iter(sorted(self._entries.values(), key=lambda e: e.api_key))

    def __len__(self) -> int:
        return len(self._entries)

    def supports(self, api_key: int, api_version: int) -> bool:
        e = self._entries.get(api_key)
        return e is not None and e.min_version <= api_version <= e.max_version

    def version_ranges(self) -> Sequence[tuple[int, int, int]]:
        """(api key, min, max) for every registered API, ordered by key."""
        return [(e.api_key, e.min_version, e.max_version) for e in self]


@runtime_checkable
class Service(Protocol):
    """A long-lived part of the cluster (e.g. a coordinator with timers).

    ``start`` runs once the cluster's listeners are up, ``stop`` at cluster shutdown;
    both must be quick and cancellation-safe.
    """

    async def start(self) -> None: ...

    async def stop(self) -> None: ...
