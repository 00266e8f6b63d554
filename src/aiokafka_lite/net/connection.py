"""The asyncio shell around ``ConnectionProtocol``: one connection to one broker.

Reading is callback-driven (``asyncio.BufferedProtocol``) instead of a reader task:
the event loop reads straight into the buffer the sans-I/O protocol hands out (large
responses into a buffer of their exact size, without copies), complete frames are
decoded and each waiting ``Future`` is resolved on the spot. This is the same "one reader per
connection" structure with one fewer task switch per response, and nothing to cancel
on close.

Guarantees:

* pipelining with at most ``max_in_flight_requests_per_connection`` requests awaiting
  responses; requests without a response (Produce acks=0) never hold a slot or a waiter;
* a cancelled caller leaves the stream in sync: the slot is released only when the
  response is actually read (and dropped);
* on disconnect every in-flight request fails with ``KafkaConnectionError``
  (retriable); a corrupt stream fails them with ``CorruptFrameError``; a request that
  was written and got no answer within its timeout fails with ``KafkaTimeoutError`` and
  closes the connection (the broker is presumed stuck, as in the Java client);
* on connect: ApiVersions (KIP-511, with the v0 fallback), optional SASL, and
  re-authentication before the session expires (KIP-368).
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import ssl
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.net.api_versions import CLIENT_API_VERSIONS
from aiokafka_lite.net.client_config import ClientConfig
from aiokafka_lite.net.hooks import BrokerStats, HookDispatcher
from aiokafka_lite.net.protocol import ConnectionProtocol, InFlight
from aiokafka_lite.net.sasl import OAuthBearerMechanism, SaslMechanism, create_mechanism
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    REQUESTS,
    ApiVersionsRequest,
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

__all__ = [
    "BrokerConnection",
    "Opener",
    "api_name",
    "canonical_host_names",
    "describe_error",
    "negotiate_version",
]

log = logging.getLogger("aiokafka_lite.net.connection")

#: Opens the transport for a connection: must end with ``conn.connection_made(transport)``
#: having been called (``loop.create_connection(lambda: conn, ...)`` does that).
Opener = Callable[["BrokerConnection"], Awaitable[None]]

_UNSUPPORTED_VERSION: Final = 35
_API_VERSIONS_KEY: Final = ApiVersionsRequest.API_KEY
_SASL_HANDSHAKE_KEY: Final = SaslHandshakeRequest.API_KEY
_SASL_AUTHENTICATE_KEY: Final = SaslAuthenticateRequest.API_KEY
_CORK_LIMIT: Final = 64 * 1024  # bigger frames are written at once, without a copy into the cork


def describe_error(exc: BaseException) -> str:
    """``str(exc)``, or the exception's type name when that is empty (a bare
    ``ConnectionResetError()`` or ``TimeoutError()``): an error message never ends
    with an empty reason."""
    return str(exc) or type(exc).__name__


def api_name(api_key: int) -> str:
    cls = REQUESTS.get(api_key)
    if cls is None:
        return f"api key {api_key}"
    return cls.NAME.removesuffix("Request")


def negotiate_version(
    api_key: int, broker: dict[int, tuple[int, int]], cap: int | None = None, *, node_id: int | None = None
) -> int:
    """min(our max, broker max), or ``UnsupportedVersionError`` naming the API if no overlap.

    Our max is the version the client's logic implements (``CLIENT_API_VERSIONS``), not
    the codec's ``MAX_VERSION``."""
    cls = REQUESTS.get(api_key)
    implemented = CLIENT_API_VERSIONS.get(api_key)
    if cls is None or implemented is None:
        raise E.UnsupportedVersionError(f"{api_name(api_key)} is not implemented by this client")
    where = "broker" if node_id is None else f"broker {node_id}"
    rng = broker.get(api_key)
    if rng is None:
        raise E.UnsupportedVersionError(f"{where} does not support {api_name(api_key)} (api key {api_key})")
    ours_max = implemented if cap is None else min(implemented, cap)
    version = min(ours_max, rng[1])
    if version < max(cls.MIN_VERSION, rng[0]):
        raise E.UnsupportedVersionError(
            f"{where} supports {api_name(api_key)} versions {rng[0]}-{rng[1]}, "
            f"this client {cls.MIN_VERSION}-{ours_max}: no common version"
        )
    return version


class BrokerConnection(asyncio.BufferedProtocol):
    """One TCP (optionally TLS) connection to a broker, with pipelined requests."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        config: ClientConfig,
        *,
        hooks: HookDispatcher | None = None,
        stats: BrokerStats | None = None,
        on_close: Callable[[BrokerConnection, BaseException | None], None] | None = None,
        opener: Opener | None = None,
        owner: _backend.TaskOwner | None = None,
    ) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.config = config
        self.hooks = hooks if hooks is not None else HookDispatcher()
        self.stats = stats if stats is not None else BrokerStats(config.metrics_latency_samples)
        self._on_close = on_close
        self._opener = opener
        bk = _backend.current()
        self._bk = bk
        self._owner = owner
        # asyncio: the running loop itself (its create_future/call_soon/time on the hot
        # paths, unwrapped); trio: the backend, which offers the same three.
        self._loop: Any = _backend.loop()
        # A stream transport's writer task (trio) corks on its own (it sends all that was
        # queued since it last ran), so frames go to it at once.
        self._cork_limit = _CORK_LIMIT if bk.protocol_transports else 0
        self._proto = ConnectionProtocol(
            config.client_id, config.max_response_size, peer=f"broker {host}:{port}"
        )
        self._transport: asyncio.Transport | None = None
        self._state = "new"  # new -> connecting -> ready -> closed
        self._close_exc: BaseException | None = None
        self._free_slots = config.max_in_flight_requests_per_connection
        self._slot_waiters: deque[asyncio.Future[None]] = deque()
        self._can_write = bk.event()
        self._can_write.set()
        self._gate = bk.event()  # cleared while re-authenticating
        self._gate.set()
        self._drained = bk.event()  # set whenever nothing is in flight
        self._drained.set()
        self._throttled_until = 0.0
        self._wbuf: list[bytes] = []
        self._flush_scheduled = False
        self._reauth_task: Any = None
        self._closed_event = bk.event()
        self.api_versions: dict[int, tuple[int, int]] = {}
        #: The broker's finalized feature levels (ApiVersions v3+; name -> max level) and
        #: their epoch (-1: not reported), e.g. ``transaction.version`` for the producer.
        self.finalized_features: dict[str, int] = {}
        self.finalized_features_epoch = -1
        self.last_used = self._loop.time()
        self.session_lifetime_ms = 0

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port} {self._state} in_flight={self.in_flight}>"

    # ------------------------------------------------------------------ state

    @property
    def ready(self) -> bool:
        return self._state == "ready"

    @property
    def closed(self) -> bool:
        return self._state == "closed"

    @property
    def in_flight(self) -> int:
        return self._proto.in_flight

    @property
    def load(self) -> int:
        """In-flight plus queued requests (for least-loaded node selection)."""
        return self._proto.in_flight + len(self._slot_waiters)

    def version_for(self, api_key: int) -> int:
        return negotiate_version(
            api_key, self.api_versions, self.config.max_versions.get(api_key), node_id=self.node_id
        )

    # ------------------------------------------------------------------ connect

    async def connect(self) -> None:
        """Open the transport, negotiate versions and authenticate; raise on any failure."""
        if self._state != "new":
            raise E.IllegalStateError(f"connection is {self._state}")
        self._state = "connecting"
        start = self._loop.time()
        try:
            opener = self._opener or (_open_tcp if self._bk.protocol_transports else _open_stream)
            await opener(self)
            if self._transport is None:  # pragma: no cover - opener contract violation
                raise E.KafkaConnectionError("opener did not establish a transport")
            await self._negotiate_api_versions()
            if self.config.uses_sasl:
                await self._authenticate()
        except BaseException as exc:
            err = exc
            if isinstance(exc, OSError | TimeoutError) and not isinstance(exc, E.KafkaError):
                err = E.KafkaConnectionError(
                    f"cannot connect to {self.host}:{self.port}: {describe_error(exc)}"
                )
            elif self._closed_unanswered(exc, tls=True):
                err = E.KafkaConnectionError(
                    f"{self.host}:{self.port} closed the TLS connection right after the handshake, "
                    "without answering ApiVersions and without a TLS alert: if the listener "
                    "requires client certificates (mTLS), it most likely rejected ours (check "
                    "ssl_certfile, its expiry and issuing CA); else the broker is shutting down"
                )
            elif self._closed_unanswered(exc):
                err = E.KafkaConnectionError(
                    f"{self.host}:{self.port} closed the connection without answering ApiVersions, "
                    "the first request: is it a TLS listener (then use security_protocol='SSL' or "
                    "'SASL_SSL'), or not a Kafka listener at all?"
                )
            self.stats.connect_errors += 1
            self._fail(
                err if isinstance(err, Exception) else E.ClosedError("connect cancelled"), notify=False
            )
            self.hooks.call(
                "on_broker_connect", self.node_id, self.host, self.port, self._loop.time() - start, err
            )
            if err is not exc:
                raise err from exc
            raise
        if self._state != "connecting":  # closed while authenticating
            raise self._close_exc or E.KafkaConnectionError("connection closed during setup")
        self._state = "ready"
        self.stats.connects += 1
        self.last_used = self._loop.time()
        log.debug("connected to node %s at %s:%s", self.node_id, self.host, self.port)
        self.hooks.call(
            "on_broker_connect", self.node_id, self.host, self.port, self._loop.time() - start, None
        )

    def _closed_unanswered(self, exc: BaseException, *, tls: bool = False) -> bool:
        """The broker hung up on our first plaintext request without a byte of reply.
        A TLS listener that does not answer plaintext with an alert (Kafka's does, see
        ``ConnectionProtocol``) looks like this. ``tls=True``: the same after a TLS
        handshake (a server that rejects a TLS 1.3 client certificate without an alert)."""
        return (
            type(exc) is E.KafkaConnectionError
            and self.config.uses_ssl == tls
            and self._transport is not None
            and self._proto.bytes_received == 0
            and not self.api_versions
        )

    async def _negotiate_api_versions(self) -> None:
        cap = self.config.max_versions.get(_API_VERSIONS_KEY)
        implemented = CLIENT_API_VERSIONS[_API_VERSIONS_KEY]
        version = implemented if cap is None else min(cap, implemented)
        req = ApiVersionsRequest(
            client_software_name=self.config.client_software_name,
            client_software_version=self.config.client_software_version,
        )
        for _ in range(3):
            resp = await self._request(
                req, version, timeout_s=self.config.request_timeout_ms / 1000, internal=True
            )
            assert isinstance(resp, ApiVersionsResponse)
            if resp.error_code == _UNSUPPORTED_VERSION:
                theirs = {k.api_key: k.max_version for k in resp.api_keys}.get(_API_VERSIONS_KEY, 0)
                new_version = min(version - 1, theirs)
                if new_version < 0:
                    break
                version = new_version
                continue
            if resp.error_code:
                raise E.error_for(resp.error_code, f"ApiVersions v{version} to {self.host}:{self.port}")
            self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            self.finalized_features = {f.name: f.max_version_level for f in resp.finalized_features}
            self.finalized_features_epoch = resp.finalized_features_epoch
            return
        raise E.UnsupportedVersionError(
            f"broker at {self.host}:{self.port} supports no usable ApiVersions version"
        )

    # ------------------------------------------------------------------ SASL

    async def _mechanism(self) -> SaslMechanism:
        cfg = self.config
        if cfg.sasl_mechanism.upper() == "GSSAPI":
            return await self._gssapi_mechanism()
        if cfg.sasl_mechanism.upper() == "OAUTHBEARER":
            provider = cfg.oauth_token_provider  # the callable or the OIDC retriever
            assert provider is not None  # enforced by ClientConfig.validate
            token = await provider()
            return OAuthBearerMechanism(token, cfg.sasl_oauthbearer_extensions)
        return create_mechanism(
            cfg.sasl_mechanism,
            username=cfg.sasl_plain_username,
            password=cfg.sasl_plain_password,
            token_auth=cfg.sasl_scram_token_auth,
        )

    async def _gssapi_mechanism(self) -> SaslMechanism:
        import anyio

        from aiokafka_lite.net.gssapi import GssapiMechanism

        cfg = self.config
        mech = GssapiMechanism(
            self.host,
            service_name=cfg.sasl_kerberos_service_name,
            domain_name=cfg.sasl_kerberos_domain_name,
            keytab=cfg.sasl_kerberos_keytab,
            principal=cfg.sasl_kerberos_principal,
        )
        # The KDC round trips block: a worker thread, bounded by the request timeout (an
        # abandoned thread ends when the Kerberos library's own KDC timeout fires).
        timeout = cfg.request_timeout_ms / 1000
        try:
            with anyio.fail_after(timeout):
                await anyio.to_thread.run_sync(mech.prepare, abandon_on_cancel=True)
        except TimeoutError:
            raise E.KerberosError(
                f"GSSAPI (Kerberos): no answer from the KDC within {timeout:.0f} s (request_timeout_ms) "
                "while getting a ticket for the broker: check the KDC in krb5.conf (KRB5_CONFIG)"
            ) from None
        return mech

    async def _authenticate(self) -> None:
        timeout = self.config.request_timeout_ms / 1000
        mech = await self._mechanism()
        hs_version = negotiate_version(_SASL_HANDSHAKE_KEY, self.api_versions, node_id=self.node_id)
        if hs_version < 1:
            raise E.UnsupportedVersionError(
                f"broker {self.node_id} is too old for SaslAuthenticate (KIP-152)"
            )
        hs = await self._request(
            SaslHandshakeRequest(mechanism=mech.name), hs_version, timeout_s=timeout, internal=True
        )
        assert isinstance(hs, SaslHandshakeResponse)
        if hs.error_code:
            raise E.error_for(hs.error_code, f"{mech.name} not enabled; broker offers {hs.mechanisms}")
        auth_version = negotiate_version(_SASL_AUTHENTICATE_KEY, self.api_versions, node_id=self.node_id)
        token: bytes | None = mech.initial_response()
        lifetime = 0
        while token is not None:
            resp = await self._request(
                SaslAuthenticateRequest(auth_bytes=token), auth_version, timeout_s=timeout, internal=True
            )
            assert isinstance(resp, SaslAuthenticateResponse)
            if resp.error_code:
                # The broker's message is about our credentials, never contains them.
                raise E.error_for(resp.error_code, _auth_failure(mech.name, resp.error_message))
            lifetime = resp.session_lifetime_ms
            token = mech.step(bytes(resp.auth_bytes))
        if not mech.complete:
            raise E.AuthenticationError(f"{mech.name}: exchange ended before completion")
        self.session_lifetime_ms = lifetime
        if lifetime > 0:
            delay = lifetime / 1000 * random.uniform(0.85, 0.95)
            if self._reauth_task is None or self._reauth_task.done():
                coro = self._reauthenticate_after(delay)
                if self._owner is not None:
                    self._reauth_task = self._owner.spawn(coro, f"reauth-{self.node_id}")
                else:  # a connection outside a client (tests): a task of the running loop
                    self._reauth_task = _backend.spawn(None, coro, f"reauth-{self.node_id}")
            else:
                self._reauth_delay = delay
        log.debug(
            "authenticated to node %s with %s (session lifetime %s ms)", self.node_id, mech.name, lifetime
        )

    _reauth_delay: float = 0.0

    async def _reauthenticate_after(self, delay: float) -> None:
        """KIP-368: re-authenticate before the broker's session expires (loops while open)."""
        timeout = self.config.request_timeout_ms / 1000
        while True:
            self._reauth_delay = 0.0
            await self._bk.sleep(delay)
            if self._state != "ready":
                return
            self._gate.clear()  # hold new requests; let pipelined ones finish first
            try:
                async with self._bk.timeout(timeout):
                    await self._drained.wait()
                self.session_lifetime_ms = 0
                await self._authenticate()
            except self._bk.cancelled_exc():
                raise
            except BaseException as exc:
                log.warning("re-authentication to node %s failed: %s", self.node_id, exc)
                self._fail(
                    exc
                    if isinstance(exc, E.KafkaError)
                    else E.AuthenticationError(f"re-authentication failed: {exc}")
                )
                return
            finally:
                self._gate.set()
            if not self._reauth_delay:
                return
            delay = self._reauth_delay

    # ------------------------------------------------------------------ requests

    async def send(
        self, request: Request, version: int, *, expect_response: bool = True, timeout_s: float | None = None
    ) -> Response | None:
        """Send one request; see module docstring for the failure modes."""
        if self._state != "ready":
            raise self._unusable()
        return await self._request(
            request,
            version,
            expect_response=expect_response,
            timeout_s=self.config.request_timeout_ms / 1000 if timeout_s is None else timeout_s,
        )

    def _unusable(self) -> BaseException:
        if self._state == "closed":
            return E.KafkaConnectionError(f"connection to node {self.node_id} is closed: {self._close_exc}")
        return E.IllegalStateError(f"connection to node {self.node_id} is {self._state}")

    async def _request(
        self,
        request: Request,
        version: int,
        *,
        expect_response: bool = True,
        timeout_s: float,
        internal: bool = False,
    ) -> Response | None:
        entry: InFlight | None = None
        holds_slot = False
        try:
            async with self._bk.timeout(timeout_s):
                if not internal and not self._gate.is_set():
                    await self._gate.wait()
                if expect_response:
                    await self._acquire_slot()
                    holds_slot = True
                if self._throttled_until and not internal:
                    delay = self._throttled_until - self._loop.time()
                    if delay > 0:
                        await self._bk.sleep(delay)
                entry = self._write(request, version, expect_response)
                holds_slot = False  # now released when the response is read (or the connection fails)
                if not self._can_write.is_set():
                    await self._can_write.wait()
                if entry is None:
                    return None
                waiter: asyncio.Future[Response] = entry.waiter
                return await waiter
        except TimeoutError as e:
            if isinstance(e, E.KafkaError):
                raise
            if entry is not None and (entry.waiter.cancelled() or not entry.waiter.done()):
                # Written but unanswered: the broker is stuck or the network is gone.
                err = E.KafkaTimeoutError(
                    f"{api_name(request.API_KEY)} to node {self.node_id} got no response within {timeout_s * 1000:.0f} ms"
                )
                self._fail(
                    E.KafkaConnectionError(
                        f"connection to node {self.node_id} closed after a request timeout"
                    )
                )
                raise err from None
            if self._state == "closed" and self._close_exc is not None:
                raise self._unusable() from None
            raise E.KafkaTimeoutError(
                f"{api_name(request.API_KEY)} to node {self.node_id} not sent within {timeout_s * 1000:.0f} ms"
            ) from None
        finally:
            if holds_slot:
                self._release_slot()

    async def _acquire_slot(self) -> None:
        if self._free_slots > 0 and not self._slot_waiters:
            self._free_slots -= 1
            return
        fut: asyncio.Future[None] = self._loop.create_future()
        self._slot_waiters.append(fut)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self._release_slot()  # granted and then cancelled: hand it on
            else:
                try:
                    self._slot_waiters.remove(fut)
                except ValueError:
                    pass
            raise

    def _release_slot(self) -> None:
        while self._slot_waiters:
            fut = self._slot_waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self._free_slots += 1

    def _write(self, request: Request, version: int, expect_response: bool) -> InFlight | None:
        transport = self._transport
        if transport is None or self._state == "closed":
            raise self._unusable()
        now = self._loop.time()
        entry, frame = self._proto.send(request, version, expect_response=expect_response, now=now)
        if entry is not None:
            entry.waiter = self._loop.create_future()
            self._drained.clear()
            self.stats.in_flight += 1
        if len(frame) < self._cork_limit:
            if self._flush_scheduled:
                # Cork: the frames written after the first in the same loop round leave
                # together, in one send() call at the start of the next round.
                self._wbuf.append(frame)
            else:
                # The first frame of a round leaves at once: corking it too cost every
                # lone request (a produce at linger 0, a commit) one loop round of latency.
                self._flush_scheduled = True
                self._loop.call_soon(self._flush)
                transport.write(frame)
        else:
            self._flush()
            transport.write(frame)
        self.last_used = now
        stats = self.stats
        stats.requests += 1
        stats.bytes_sent += len(frame)
        if self.hooks.has("on_request_written"):
            self.hooks.call("on_request_written", self.node_id, request.API_KEY, version, len(frame), None)
        return entry

    def _flush(self) -> None:
        self._flush_scheduled = False
        buf = self._wbuf
        if not buf:
            return
        self._wbuf = []
        transport = self._transport
        if transport is not None and self._state != "closed":
            transport.write(buf[0] if len(buf) == 1 else b"".join(buf))

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # asyncio's, or _StreamTransport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._proto.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self._dispatch(*self._proto.buffer_updated(nbytes), nbytes)

    def data_received(self, data: bytes) -> None:
        """For transports that push bytes instead of filling ``get_buffer()``."""
        self._dispatch(*self._proto.receive(data), len(data))

    def _dispatch(
        self, responses: list[tuple[InFlight, Response, int]], error: E.KafkaError | None, nbytes: int
    ) -> None:
        now = self._loop.time()
        self.last_used = now
        stats = self.stats
        stats.bytes_received += nbytes
        call_hooks = self.hooks.has("on_response_read")
        for entry, resp, size in responses:
            self._release_slot()
            stats.in_flight -= 1
            latency = now - entry.sent_at
            stats.record_latency(latency, entry.api_key)
            throttle = getattr(resp, "throttle_time_ms", 0)
            if throttle:
                self._throttle(throttle, entry.api_key, now)
            if call_hooks:
                self.hooks.call(
                    "on_response_read", self.node_id, entry.api_key, entry.api_version, size, latency, None
                )
            waiter = entry.waiter
            if not waiter.done():
                waiter.set_result(resp)
        if not self._proto.in_flight:
            self._drained.set()
        if error is not None:
            log.warning(
                "unreadable response from node %s (%s:%s): %s", self.node_id, self.host, self.port, error
            )
            self._fail(error)

    def _throttle(self, throttle_ms: int, api_key: int, now: float) -> None:
        # KIP-219: the broker answered immediately and expects us to back off.
        self._throttled_until = max(self._throttled_until, now + throttle_ms / 1000)
        self.stats.throttle_ms_total += throttle_ms
        if self.hooks.has("on_throttle"):
            self.hooks.call("on_throttle", self.node_id, throttle_ms, api_key)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._state != "closed":
            if self.config.uses_ssl and (rejected := _certificate_error(self, exc)) is not None:
                self._fail(rejected)
                return
            reason = f": {describe_error(exc)}" if exc else ""
            self._fail(
                E.KafkaConnectionError(
                    f"connection to node {self.node_id} ({self.host}:{self.port}) lost{reason}"
                )
            )

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    # ------------------------------------------------------------------ closing

    def close(self, exc: BaseException | None = None) -> None:
        """Close now; in-flight and queued requests fail with ``exc`` (default ``ClosedError``)."""
        self._fail(exc or E.ClosedError(f"connection to node {self.node_id} closed"))

    async def wait_closed(self) -> None:
        task = self._reauth_task
        if task is not None and not task.done() and not self._in_task(task):
            task.cancel()
            try:
                await task
            except BaseException as exc:
                if isinstance(exc, self._bk.cancelled_exc()) and not task.cancelled():
                    raise  # the caller itself is cancelled
        transport = self._transport
        if transport is not None and hasattr(transport, "wait_closed"):
            await transport.wait_closed()

    def _in_task(self, task: Any) -> bool:
        return _backend.is_current_task(task)

    def _fail(self, exc: BaseException, *, notify: bool = True) -> None:
        if self._state == "closed":
            return
        was_ready = self._state == "ready"
        self._state = "closed"
        self._wbuf = []
        self._close_exc = exc
        transport = self._transport
        if transport is not None:
            if isinstance(exc, E.CorruptFrameError):
                transport.abort()
            else:
                transport.close()
        pending = self._proto.pending()
        stats = self.stats
        stats.in_flight -= len(pending)
        if pending:
            stats.errors += len(pending)
        now = self._loop.time()
        errors_by_api = stats.errors_by_api
        for entry in pending:
            errors_by_api[entry.api_key] = errors_by_api.get(entry.api_key, 0) + 1
            waiter = entry.waiter
            if waiter is not None and not waiter.done():
                waiter.set_exception(_clone(exc))
                # Retrieved by the caller, unless the caller is gone; never warn about it.
                waiter.exception()
            if self.hooks.has("on_response_read"):
                self.hooks.call(
                    "on_response_read",
                    self.node_id,
                    entry.api_key,
                    entry.api_version,
                    0,
                    now - entry.sent_at,
                    exc,
                )
        while self._slot_waiters:
            fut = self._slot_waiters.popleft()
            if not fut.done():
                fut.set_exception(_clone(exc))
                fut.exception()
        self._can_write.set()
        self._gate.set()
        self._drained.set()
        self._closed_event.set()
        task = self._reauth_task
        if task is not None and not task.done() and not self._in_task(task):
            task.cancel()
        if was_ready:
            stats.disconnects += 1
            if isinstance(exc, E.ClosedError):
                log.debug("closed connection to node %s", self.node_id)
            else:
                log.info("disconnected from node %s (%s:%s): %s", self.node_id, self.host, self.port, exc)
            self.hooks.call("on_broker_disconnect", self.node_id, self.host, self.port)
        if notify and self._on_close is not None:
            self._on_close(self, exc)


def _clone(exc: BaseException) -> BaseException:
    """A fresh instance per waiter, so tracebacks of different callers do not pile up on one object."""
    try:
        new = type(exc).__new__(type(exc))
        new.__dict__.update(getattr(exc, "__dict__", {}))
        new.args = exc.args
        return new
    except Exception:  # pragma: no cover - exotic exception types
        return exc


async def canonical_host_names(host: str, port: int) -> list[str]:
    """``client_dns_lookup='resolve_canonical_bootstrap_servers_only'``: the canonical
    name of every address ``host`` resolves to, as Java's ``getCanonicalHostName`` gives
    it (the address itself when the reverse lookup finds no name). Works on asyncio and
    trio (anyio's resolver). ``KafkaConnectionError`` when the name does not resolve."""
    import anyio

    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise E.KafkaConnectionError(f"cannot resolve {host}:{port}: {e}") from e
    names: list[str] = []
    for _family, _type, _proto, _canon, addr in infos:
        ip = str(addr[0])
        try:
            name, _ = await anyio.getnameinfo((ip, port), socket.NI_NAMEREQD)
        except OSError:
            name = ip
        if name not in names:
            names.append(name)
    return names


async def _open_tcp(conn: BrokerConnection) -> None:
    """Resolve the host and try each address in turn, each bounded by the setup timeout."""
    cfg = conn.config
    loop = asyncio.get_running_loop()
    ctx: ssl.SSLContext | None = None
    if cfg.uses_ssl:
        ctx = cfg.client_ssl_context()
    timeout = cfg.socket_connection_setup_timeout_ms / 1000
    try:
        async with asyncio.timeout(timeout):
            infos = await loop.getaddrinfo(conn.host, conn.port, type=socket.SOCK_STREAM)
    except (OSError, TimeoutError) as e:
        raise E.KafkaConnectionError(f"cannot resolve {conn.host}:{conn.port}: {e}") from e
    seen: set[Any] = set()
    errors: list[str] = []
    for family, _type, _proto, _canon, addr in infos:
        if addr in seen:
            continue
        seen.add(addr)
        try:
            async with asyncio.timeout(timeout):
                await loop.create_connection(
                    lambda: conn,
                    host=str(addr[0]),
                    port=int(addr[1]),
                    family=family,
                    ssl=ctx,
                    server_hostname=conn.host if ctx is not None else None,
                )
            return
        except ssl.SSLError as e:
            if _tls_spoken_to_plaintext(e):
                raise _plaintext_listener_error(conn, e) from e
            if (rejected := _certificate_error(conn, e)) is not None:
                raise rejected from e
            raise E.KafkaConnectionError(
                f"TLS handshake with {conn.host}:{conn.port} failed: {describe_error(e)}"
            ) from e
        except TimeoutError:
            step = "TCP connection and TLS handshake" if ctx is not None else "TCP connection"
            errors.append(f"{addr[0]}: {step} not done within {timeout * 1000:.0f} ms")
        except OSError as e:
            if ctx is not None and isinstance(e, _HANDSHAKE_CUT):
                # TCP connected (a refusal is ConnectionRefusedError), then the broker
                # hung up on our ClientHello.
                raise _plaintext_listener_error(conn, e) from e
            errors.append(f"{addr[0]}: {describe_error(e)}")
    raise E.KafkaConnectionError(
        f"cannot connect to {conn.host}:{conn.port} ({'; '.join(errors) or 'no address'})"
    )


# How a TLS handshake ends when the peer is a plaintext Kafka listener: it reads the
# ClientHello as the size prefix of an oversized request and closes the connection.
_HANDSHAKE_CUT: Final = (ConnectionResetError, BrokenPipeError)
# OpenSSL reasons for a handshake answered with EOF or with bytes that are not TLS.
_NOT_TLS_REASONS: Final = frozenset(
    {"UNEXPECTED_EOF_WHILE_READING", "WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG"}
)


def _tls_spoken_to_plaintext(exc: ssl.SSLError) -> bool:
    if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError):
        return True
    return getattr(exc, "reason", None) in _NOT_TLS_REASONS


# TLS alerts a server sends when it rejects the client's certificate (mutual TLS). With
# TLS 1.3 the client has finished its handshake when the alert arrives, so it surfaces on
# the first read (the ApiVersions answer), not from the handshake.
_CLIENT_CERT_REJECTED: Final = frozenset(
    {
        "TLSV13_ALERT_CERTIFICATE_REQUIRED",
        "SSLV3_ALERT_BAD_CERTIFICATE",
        "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
        "SSLV3_ALERT_CERTIFICATE_EXPIRED",
        "SSLV3_ALERT_CERTIFICATE_REVOKED",
        "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE",
        "TLSV1_ALERT_UNKNOWN_CA",
        "TLSV1_ALERT_ACCESS_DENIED",
        "SSLV3_ALERT_HANDSHAKE_FAILURE",
    }
)


def _certificate_error(conn: BrokerConnection, exc: BaseException | None) -> E.SslAuthenticationError | None:
    """The typed error for a handshake in which the broker rejected our certificate, if
    ``exc`` (or what it wraps: anyio's stream errors carry the ``SSLError`` as their
    cause) is one. (A broker certificate we do not trust stays a connection error, as
    before: another bootstrap server may present a good one.)"""
    seen = 0
    while exc is not None and seen < 4:
        if isinstance(exc, ssl.SSLError) and getattr(exc, "reason", None) in _CLIENT_CERT_REJECTED:
            return E.SslAuthenticationError(
                f"mTLS: {conn.host}:{conn.port} rejected the client certificate (TLS alert "
                f"{exc.reason}): the listener wants one signed by a CA it trusts "
                "(ssl.client.auth=required); check that ssl_certfile is set, not expired, "
                "and issued by that CA"
            )
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def _plaintext_listener_error(conn: BrokerConnection, exc: BaseException) -> E.SecurityProtocolMismatchError:
    return E.SecurityProtocolMismatchError(
        f"TLS handshake with {conn.host}:{conn.port} failed ({describe_error(exc)}): the broker "
        f"closed the connection or answered without TLS; is this a plaintext listener? check "
        f"security_protocol (it is {conn.config.security_protocol!r}) and the port"
    )


# ---------------------------------------------------------------------------- trio (anyio streams)

_STREAM_READ_SIZE: Final = 256 * 1024
_STREAM_HIGH_WATER: Final = 1024 * 1024


async def _open_stream(conn: BrokerConnection) -> None:
    """The trio opener: anyio's TCP (and TLS) streams, driven by one I/O task in the
    owning client's task group that feeds the same protocol callbacks as asyncio's
    transports (``data_received``, ``connection_lost``, ``pause_writing``)."""
    import anyio
    from anyio.streams.tls import TLSStream

    cfg = conn.config
    owner = conn._owner
    if owner is None:
        raise E.IllegalStateError("on trio a connection needs the task group of a started client")
    ctx: ssl.SSLContext | None = None
    if cfg.uses_ssl:
        ctx = cfg.client_ssl_context()
    timeout = cfg.socket_connection_setup_timeout_ms / 1000
    stream: anyio.abc.ByteStream
    try:
        with anyio.fail_after(timeout):
            stream = await anyio.connect_tcp(conn.host, conn.port)
            if ctx is not None:
                try:
                    stream = await TLSStream.wrap(
                        stream, hostname=conn.host, ssl_context=ctx, standard_compatible=False
                    )
                except BaseException:
                    await anyio.aclose_forcefully(stream)
                    raise
    except ssl.SSLError as e:
        if _tls_spoken_to_plaintext(e):
            raise _plaintext_listener_error(conn, e) from e
        if (rejected := _certificate_error(conn, e)) is not None:
            raise rejected from e
        raise E.KafkaConnectionError(
            f"TLS handshake with {conn.host}:{conn.port} failed: {describe_error(e)}"
        ) from e
    except (anyio.BrokenResourceError, anyio.EndOfStream, *_HANDSHAKE_CUT) as e:
        if ctx is None:
            raise E.KafkaConnectionError(
                f"cannot connect to {conn.host}:{conn.port}: {describe_error(e)}"
            ) from e
        raise _plaintext_listener_error(conn, e) from e
    except TimeoutError as e:
        step = "TCP connection and TLS handshake" if ctx is not None else "TCP connection"
        raise E.KafkaConnectionError(
            f"cannot connect to {conn.host}:{conn.port} ({step} not done within {timeout * 1000:.0f} ms)"
        ) from e
    except OSError as e:
        raise E.KafkaConnectionError(
            f"cannot connect to {conn.host}:{conn.port} ({describe_error(e)})"
        ) from e
    transport = _StreamTransport(stream, conn)
    conn.connection_made(transport)  # type: ignore[arg-type]
    owner.spawn(transport.run(), f"io-{conn.node_id}")


class _StreamTransport:
    """What ``BrokerConnection`` needs of a transport (``write``/``close``/``abort``),
    on an anyio byte stream. ``write`` only queues: the writer sends everything queued
    since its last wake-up in one ``send``, which corks frames as asyncio's path does."""

    def __init__(self, stream: Any, conn: BrokerConnection) -> None:
        import anyio

        self._stream = stream
        self._conn = conn
        self._queue: list[bytes] = []
        self._queued = 0
        self._paused = False
        self._closing = False
        self._wake = _backend.TrioEvent()
        self._scope = anyio.CancelScope()
        self._done = anyio.Event()

    def write(self, data: bytes) -> None:
        if self._closing:
            return
        self._queue.append(data)
        self._queued += len(data)
        self._wake.set()
        if not self._paused and self._queued > _STREAM_HIGH_WATER:
            self._paused = True
            self._conn.pause_writing()

    def close(self) -> None:
        # Closing fails every request in flight, so nothing queued is worth sending.
        self.abort()

    def abort(self) -> None:
        self._closing = True
        self._scope.cancel()

    def is_closing(self) -> bool:
        return self._closing

    async def wait_closed(self) -> None:
        await self._done.wait()

    async def run(self) -> None:
        import anyio

        lost: BaseException | None = None
        try:
            with self._scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._writer)
                    lost = await self._reader()
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.aclose_forcefully(self._stream)
            self._done.set()
            if not self._closing:
                self._closing = True
                self._conn.connection_lost(lost if isinstance(lost, Exception) else None)

    async def _reader(self) -> BaseException | None:
        import anyio

        stream = self._stream
        conn = self._conn
        try:
            while True:
                data = await stream.receive(_STREAM_READ_SIZE)
                conn.data_received(data)
        except anyio.EndOfStream:
            return None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError, ssl.SSLError) as e:
            return e

    async def _writer(self) -> None:
        import anyio

        stream = self._stream
        while True:
            await self._wake.wait()
            self._wake.clear()
            queue = self._queue
            if not queue:
                continue
            self._queue = []
            self._queued = 0
            try:
                await stream.send(queue[0] if len(queue) == 1 else b"".join(queue))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError, ssl.SSLError) as e:
                self._closing = True
                self._scope.cancel()
                self._conn.connection_lost(e)
                return
            if self._paused and self._queued <= _STREAM_HIGH_WATER // 4:
                self._paused = False
                self._conn.resume_writing()


def _auth_failure(mechanism: str, broker_message: str | None) -> str:
    """The message of a rejected SaslAuthenticate: the broker's (about our credentials,
    never containing them), with the mechanism named and, for OAUTHBEARER, the usual causes."""
    text = broker_message or "authentication failed"
    if mechanism not in text:
        text = f"{mechanism}: {text}"
    if mechanism == "OAUTHBEARER":
        text += (
            " (the broker rejected the token: expired, wrong audience or issuer, signed by a key "
            "its JWKS does not have, or missing the principal claim?)"
        )
    return text
