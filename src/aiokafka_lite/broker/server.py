"""One broker's listener and connection loop.

Each connection is an ``asyncio.Protocol`` that splits the byte stream into frames
(bounded by ``socket.request.max.bytes``) and a task that serves them one at a time,
in order, as Kafka does (it mutes a connection while a request is in progress). A
long-polling fetch therefore waits only on its own connection. Reading pauses when too
many frames are queued, and writing waits for the transport to drain, so a client that
floods or never reads cannot grow the broker's memory without bound.

Protocol violations close the connection, as Kafka does: a malformed or oversized
frame, an unknown API key, an unsupported version of any API but ApiVersions (which is
answered with UNSUPPORTED_VERSION and the supported ranges in a v0 body so the client
can retry), or any request but ApiVersions/SASL before a SASL client authenticated.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import struct
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from aiokafka_lite.broker.api.common import CloseConnection, error_response
from aiokafka_lite.broker.api.fastpath import decode_produce_request, parse_request_header
from aiokafka_lite.broker.context import EncodedResponse, HandlerRegistry, RequestContext
from aiokafka_lite.broker.faults import Faults, ObservedRequest
from aiokafka_lite.broker.sasl import ServerMechanism
from aiokafka_lite.broker.state import ClusterState
from aiokafka_lite.broker.tls_principal import tls_principal
from aiokafka_lite.core.errors import (
    AuthenticationError,
    CorruptFrameError,
    IllegalSaslStateError,
    KafkaError,
    SaslAuthenticationFailedError,
    UnknownServerError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
)
from aiokafka_lite.wire.framing import (
    FrameReader,
    encode_response,
    peek_request_header,
    request_header_version,
    response_header_version,
)
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    REQUESTS,
    ApiVersionsResponse,
    RequestHeader,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from aiokafka_lite.wire.primitives import Reader

__all__ = ["BrokerServer", "SaslSettings"]

log = logging.getLogger("aiokafka_lite.broker")

_SIZE: Final = struct.Struct(">i")
_SIZE_CORR: Final = struct.Struct(">ii")
PRODUCE: Final = 0
API_VERSIONS: Final = 18
SASL_HANDSHAKE: Final = 17
SASL_AUTHENTICATE: Final = 36
_MAX_QUEUED_FRAMES: Final = 64  # pause reading beyond this many unserved requests
_MAX_QUEUED_BYTES: Final = 16 * 1024 * 1024
IDLE_TIMEOUT: Final = 600.0  # connections.max.idle.ms
_DIRECT_WRITE: Final = 64 * 1024  # response parts at least this big are written without joining
_COALESCE_BYTES: Final = 256 * 1024
# Requests whose core handlers never wait: responses before them may be held back and
# written together with theirs. (Keyed by the frame's first two bytes, the API key.)
_NON_BLOCKING: Final = frozenset(
    struct.pack(">h", k) for k in (0, 2, 3, 18, 19, 20, 21, 23, 32, 33, 37, 44, 60)
)
_conn_ids = itertools.count(1)

MechanismFactory = Callable[[], ServerMechanism]


@dataclass(slots=True)
class SaslSettings:
    """Enabled server mechanisms by name (a fresh state machine per connection)."""

    mechanisms: Mapping[str, MechanismFactory] = field(default_factory=dict)
    #: Kafka's ``connections.max.reauth.ms`` (KIP-368): 0 keeps sessions forever; otherwise a
    #: session lasts this long (less if the credential, an OAUTHBEARER token, expires
    #: sooner), the client must re-authenticate on the connection before then, and a
    #: request other than SaslHandshake/SaslAuthenticate after expiry closes the connection.
    max_reauth_ms: int = 0


class BrokerServer:
    """One broker of an embedded cluster: a TCP (or TLS) listener serving the registry."""

    def __init__(
        self,
        node_id: int,
        state: ClusterState,
        registry: HandlerRegistry,
        faults: Faults,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslSettings | None = None,
        advertised_port: int | None = None,
    ) -> None:
        self.node_id = node_id
        self.state = state
        self.registry = registry
        self.faults = faults
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.sasl = sasl
        # The port Metadata gives clients, when they must reach the broker through
        # something in between (a test's proxy); the listening port otherwise.
        self.advertised_port = advertised_port
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self.connections: set[_Connection] = set()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self, *, mark_alive: bool = True) -> None:
        if self._server is not None:
            return
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self), self.host, self.port, ssl=self.ssl_context, backlog=256
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]  # keep it: a restart binds the same port
        info = self.state.brokers[self.node_id]
        info.host, info.port = self.host, self.advertised_port or self.port
        if mark_alive:
            self.state.set_broker_alive(self.node_id, True)
        self._sweeper = loop.create_task(self._sweep_idle(), name=f"kafka-broker-{self.node_id}-idle")
        log.debug("broker %d listening on %s", self.node_id, self.address)

    async def stop(self, *, fence: bool = True) -> None:
        """Closes the listener and every connection (abruptly, like a killed broker).
        ``fence=False``: metadata still names the broker and the partitions it leads
        until ``state.set_broker_alive(node_id, False)``."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None
        conns = list(self.connections)
        for c in conns:
            c.abort()
        await asyncio.gather(*(c.wait_closed() for c in conns), return_exceptions=True)
        try:
            await asyncio.wait_for(server.wait_closed(), 2.0)
        except TimeoutError:
            log.warning("broker %d: listener did not close in time", self.node_id)
        if fence:
            self.state.set_broker_alive(self.node_id, False)

    async def _sweep_idle(self) -> None:
        """Closes connections idle for longer than connections.max.idle.ms (10 minutes)."""
        while True:
            await asyncio.sleep(min(IDLE_TIMEOUT / 10, 60.0))
            cutoff = time.monotonic() - IDLE_TIMEOUT
            for c in list(self.connections):
                if c.last_active < cutoff and not c.busy:
                    log.info("%s: closing idle connection", c.id)
                    c.abort()

    def close_connections(self) -> None:
        for c in list(self.connections):
            c.abort()


class _Connection(asyncio.Protocol):
    """A client connection: frame splitting in callbacks, request serving in a task."""

    def __init__(self, broker: BrokerServer) -> None:
        self.broker = broker
        self.id = f"b{broker.node_id}-c{next(_conn_ids)}"
        self.transport: asyncio.Transport | None = None
        self.client_host = ""
        self._reader = FrameReader(broker.state.config.max_request_size)
        self._frames: deque[bytes] = deque()
        self._queued_bytes = 0
        self._out: list[bytes | bytearray] = []  # coalesced responses not yet written
        self._out_size = 0
        self._reading_paused = False
        self._wakeup: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._closed = False
        self._eof = False
        self.last_active = time.monotonic()
        self._task: asyncio.Task[None] | None = None
        self._done = asyncio.get_running_loop().create_future()
        # SASL
        self.authenticated = broker.sasl is None
        self.principal: str | None = None
        self.token_authenticated = False
        self._mechanism: ServerMechanism | None = None
        self._raw_sasl = False  # SaslHandshake v0: raw tokens follow, without Kafka headers
        self._session_expires: float | None = None  # monotonic; KIP-368 sessions only
        self._reauthenticating = False

    # -- transport callbacks -------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        # Room for a few stored batches before the loop waits for the socket to drain.
        transport.set_write_buffer_limits(high=1024 * 1024)
        peer = transport.get_extra_info("peername")
        self.client_host = str(peer[0]) if peer else ""
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None and ssl_object.getpeercert():
            # Mutual TLS: the certificate's subject names the principal until SASL (if the
            # listener has it) authenticates someone, as Kafka's default principal builder.
            self.principal = tls_principal(ssl_object.getpeercert())
        if len(self.broker.connections) >= self.broker.state.config.max_connections:
            log.warning("broker %d: too many connections, closing %s", self.broker.node_id, self.id)
            transport.abort()
            self._done.set_result(None)
            return
        self.broker.connections.add(self)
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"kafka-conn-{self.id}")

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        try:
            frames = self._reader.feed(data)
        except CorruptFrameError as e:
            log.info("%s: closing: %s", self.id, e)
            self.abort()
            return
        if frames:
            self._frames.extend(frames)
            self._queued_bytes += sum(len(f) for f in frames)
            if (
                len(self._frames) > _MAX_QUEUED_FRAMES or self._queued_bytes > _MAX_QUEUED_BYTES
            ) and not self._reading_paused:
                assert self.transport is not None
                self.transport.pause_reading()
                self._reading_paused = True
            self._wake()

    def eof_received(self) -> bool | None:
        # The client will send nothing more: answer what it sent, then close.
        self._eof = True
        self._wake()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        for listener in self.broker.state.connection_listeners:
            listener(self.id)
        self._wake()
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def pause_writing(self) -> None:
        if self._writable is None or self._writable.done():
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    @property
    def busy(self) -> bool:
        """Serving a request (e.g. a long-polling fetch) or holding queued ones."""
        return self._wakeup is None or bool(self._frames)

    def _wake(self) -> None:
        w = self._wakeup
        if w is not None and not w.done():
            w.set_result(None)

    def abort(self) -> None:
        self._closed = True
        if self.transport is not None:
            self.transport.abort()
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._wake()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._done)

    # -- serving -------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                if not self._frames:
                    if self._out:
                        await self._flush()
                        continue  # more frames may have arrived meanwhile
                    if self._closed or self._eof:
                        return
                    self._wakeup = loop.create_future()
                    try:
                        await self._wakeup
                    finally:
                        self._wakeup = None
                    continue
                frame = self._frames.popleft()
                self._queued_bytes -= len(frame)
                self.last_active = time.monotonic()
                if self._reading_paused and len(self._frames) <= _MAX_QUEUED_FRAMES // 2:
                    self._reading_paused = False
                    if self.transport is not None and not self._closed:
                        self.transport.resume_reading()
                if self._closed:
                    return
                if not self.authenticated and self._raw_sasl:
                    await self._raw_sasl_token(frame)
                else:
                    await self._serve(frame)
        except CloseConnection as e:
            if str(e):
                log.info("%s: closing: %s", self.id, e)
            # Answers to earlier requests still go out before the close.
            if self._out and self.transport is not None and not self.transport.is_closing():
                self.transport.write(b"".join(self._out))
                self._out.clear()
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("%s: connection failed", self.id)
        finally:
            self._closed = True
            if self.transport is not None:
                self.transport.close()
            self.broker.connections.discard(self)
            if not self._done.done():
                self._done.set_result(None)

    async def _write(self, data: bytes | bytearray) -> None:
        """Queues a response; pipelined requests that cannot block get their responses
        written together (one send for many small produce acks)."""
        if self._closed or self.transport is None:
            raise CloseConnection()
        self._out.append(data)
        self._out_size += len(data)
        if self._out_size < _COALESCE_BYTES and self._frames and self._frames[0][:2] in _NON_BLOCKING:
            return
        await self._flush()

    async def _flush(self) -> None:
        if not self._out:
            return
        transport = self.transport
        if self._closed or transport is None:
            raise CloseConnection()
        out = self._out
        transport.write(out[0] if len(out) == 1 else b"".join(out))
        out.clear()
        self._out_size = 0
        w = self._writable
        if w is not None and not w.done():
            await w

    async def _write_parts(self, parts: list[bytes | bytearray | memoryview]) -> None:
        """Writes a response given as buffers (stored batches) without joining it whole.

        Large parts go to the transport as they are (the socket usually takes them
        without a copy); runs of small ones are joined. Waiting for the transport to
        drain between parts keeps its buffer small, so a 50 MB fetch response never
        sits in (and is shifted around within) one transport buffer.
        """
        await self._flush()
        transport = self.transport
        if self._closed or transport is None:
            raise CloseConnection()
        small: list[bytes | bytearray | memoryview] = []
        small_size = 0
        for part in parts:
            if len(part) < _DIRECT_WRITE:
                small.append(part)
                small_size += len(part)
                if small_size < _DIRECT_WRITE:
                    continue
                part = b"".join(small)
                small.clear()
                small_size = 0
            elif small:
                transport.write(b"".join(small))
                small.clear()
                small_size = 0
            transport.write(part)
            w = self._writable
            if w is not None and not w.done():
                await w
                if self._closed:
                    raise CloseConnection()
        if small:
            transport.write(b"".join(small))
        w = self._writable
        if w is not None and not w.done():
            await w

    async def _serve(self, frame: bytes) -> None:
        broker = self.broker
        try:
            api_key, api_version, corr = peek_request_header(frame)
        except CorruptFrameError as e:
            raise CloseConnection(str(e)) from None
        entry = broker.registry.get(api_key)
        if entry is None:
            raise CloseConnection(f"unknown api key {api_key}")
        if not entry.min_version <= api_version <= entry.max_version:
            if api_key == API_VERSIONS:
                # KIP-511: an ApiVersions from a newer client is answered in the v0 format
                # once its (flexible, v2) header parses, as Kafka does; else Kafka closes.
                try:
                    parse_request_header(frame, 2)
                except (KafkaError, struct.error, IndexError, ValueError):
                    raise CloseConnection(f"ApiVersions v{api_version} with a malformed header") from None
                await self._write(self._api_versions_fallback(corr))
                return
            raise CloseConnection(f"unsupported version {api_version} of api key {api_key}")
        cls = REQUESTS.get(api_key)
        if cls is None or not cls.MIN_VERSION <= api_version <= cls.MAX_VERSION:
            raise CloseConnection(f"unsupported version {api_version} of api key {api_key}")
        header_version = request_header_version(api_key, api_version)
        request: Request
        try:
            # Hand-written codecs first (produce is the hot path); they raise on anything
            # unexpected and the generated codec below has the last word.
            client_id, pos = parse_request_header(frame, header_version)
            if api_key == PRODUCE:
                request = decode_produce_request(frame, pos, api_version)
            else:
                request = cls.decode_from(Reader(frame, pos), api_version, strict=False)
        except (KafkaError, struct.error, IndexError, ValueError):
            try:
                r = Reader(frame)
                header = RequestHeader.decode_from(r, header_version, strict=False)
                client_id = header.client_id
                # Trailing bytes are ignored, as Kafka does (librdkafka sends some with Metadata v13).
                request = cls.decode_from(r, api_version, strict=False)
            except KafkaError as e:
                raise CloseConnection(f"malformed request (api key {api_key} v{api_version}): {e}") from None
        if not self.authenticated and api_key not in (API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE):
            raise CloseConnection(f"api key {api_key} before SASL authentication")
        if (
            self._session_expires is not None
            and api_key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE)
            and time.monotonic() > self._session_expires
        ):
            raise CloseConnection(f"api key {api_key} after the SASL session expired (KIP-368)")
        faults = broker.faults
        drop_after = False
        injected: int | None = None
        if faults.active:
            faults.observe(
                ObservedRequest(broker.node_id, self.id, api_key, api_version, corr, client_id, request)
            )
            drop = faults.take_drop(api_key, broker.node_id)
            if drop == "before":
                raise CloseConnection(f"fault injection: dropped api key {api_key} request")
            drop_after = drop == "after"
            delay = faults.take_latency(api_key, broker.node_id)
            if delay > 0:
                await self._flush()
                await asyncio.sleep(delay)
            injected = faults.take_error(api_key, broker.node_id)
        ctx = RequestContext(
            broker.node_id,
            broker.state,
            api_key,
            api_version,
            corr,
            client_id,
            self.principal,
            self.id,
            self.client_host,
            self.token_authenticated,
        )
        result: Response | EncodedResponse | None
        if api_key == SASL_HANDSHAKE:
            assert isinstance(request, SaslHandshakeRequest)
            result = self._sasl_handshake(request, api_version)
        elif api_key == SASL_AUTHENTICATE:
            assert isinstance(request, SaslAuthenticateRequest)
            result = self._sasl_authenticate(request)
        elif injected is not None:
            result = error_response(request, api_version, injected)
        else:
            try:
                result = await entry.handler(ctx, request)
            except CloseConnection:
                raise
            except Exception:
                log.exception(
                    "broker %d: handler of api key %d v%d failed", broker.node_id, api_key, api_version
                )
                result = error_response(request, api_version, UnknownServerError.code)
        if drop_after:
            raise CloseConnection(f"fault injection: dropped api key {api_key} response")
        if result is None:
            return
        if isinstance(result, EncodedResponse):
            if result.size >= _DIRECT_WRITE:
                await self._write_parts(
                    [self._encoded_head(result, api_key, api_version, corr), *result.parts]
                )
                return
            data = self._frame_encoded(result, api_key, api_version, corr)
        else:
            try:
                data = encode_response(result, api_version, corr)
            except KafkaError:
                # A handler set a field this version cannot carry: a broker bug, but the
                # client still deserves an answer rather than a dropped connection.
                log.exception(
                    "broker %d: encoding api key %d v%d failed", broker.node_id, api_key, api_version
                )
                data = encode_response(
                    error_response(request, api_version, UnknownServerError.code), api_version, corr
                )
        await self._write(data)
        if self._mechanism_failed:
            raise CloseConnection("SASL authentication failed")

    @staticmethod
    def _encoded_head(result: EncodedResponse, api_key: int, api_version: int, corr: int) -> bytes:
        """Size prefix and response header of an ``EncodedResponse``."""
        if response_header_version(api_key, api_version) >= 1:
            return _SIZE_CORR.pack(5 + result.size, corr) + b"\x00"  # header v1: empty tagged fields
        return _SIZE_CORR.pack(4 + result.size, corr)

    @classmethod
    def _frame_encoded(cls, result: EncodedResponse, api_key: int, api_version: int, corr: int) -> bytes:
        return b"".join([cls._encoded_head(result, api_key, api_version, corr), *result.parts])

    def _api_versions_fallback(self, corr: int) -> bytes:
        """UNSUPPORTED_VERSION in a v0 body listing the ApiVersions versions we support,
        and only those, as Kafka does (KIP-511 fallback: the client retries with one)."""
        resp = ApiVersionsResponse(
            error_code=UnsupportedVersionError.code,
            api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, lo, hi in self.broker.registry.version_ranges()
                if k == API_VERSIONS
            ],
        )
        return encode_response(resp, 0, corr)

    # -- SASL ----------------------------------------------------------------------
    _mechanism_failed = False

    def _sasl_handshake(self, req: SaslHandshakeRequest, version: int) -> SaslHandshakeResponse:
        sasl = self.broker.sasl
        enabled = sorted(sasl.mechanisms) if sasl is not None else []
        if sasl is None:
            return SaslHandshakeResponse(error_code=UnsupportedSaslMechanismError.code, mechanisms=[])
        reauth = self.authenticated and self._session_expires is not None  # KIP-368
        if (self.authenticated and not reauth) or self._mechanism is not None:
            return SaslHandshakeResponse(error_code=IllegalSaslStateError.code, mechanisms=enabled)
        self._reauthenticating = reauth
        factory = sasl.mechanisms.get(req.mechanism)
        if factory is None:
            return SaslHandshakeResponse(error_code=UnsupportedSaslMechanismError.code, mechanisms=enabled)
        self._mechanism = factory()
        self._raw_sasl = version == 0
        return SaslHandshakeResponse(error_code=0, mechanisms=enabled)

    def _sasl_authenticate(self, req: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
        mech = self._mechanism
        if mech is None or (self.authenticated and not self._reauthenticating) or self._raw_sasl:
            self._mechanism_failed = True
            return SaslAuthenticateResponse(
                error_code=IllegalSaslStateError.code,
                error_message="SaslAuthenticate without a SaslHandshake",
            )
        try:
            out = mech.step(bytes(req.auth_bytes))
        except AuthenticationError as e:
            self._mechanism_failed = True
            return SaslAuthenticateResponse(
                error_code=SaslAuthenticationFailedError.code, error_message=str(e)
            )
        lifetime_ms = 0
        if mech.complete:
            if self._reauthenticating and mech.authenticated_user != self.principal:
                raise CloseConnection("re-authentication changed the principal (KIP-368)")
            self.authenticated = True
            self._reauthenticating = False
            self.principal = mech.authenticated_user
            self.token_authenticated = bool(getattr(mech, "token_authenticated", False))
            self._mechanism = None
            lifetime_ms = self._session_lifetime_ms(mech)
            self._session_expires = time.monotonic() + lifetime_ms / 1000 if lifetime_ms else None
        return SaslAuthenticateResponse(error_code=0, auth_bytes=out, session_lifetime_ms=lifetime_ms)

    def _session_lifetime_ms(self, mech: ServerMechanism) -> int:
        """KIP-368: ``connections.max.reauth.ms``, shortened to the credential's expiry."""
        sasl = self.broker.sasl
        limit = sasl.max_reauth_ms if sasl is not None else 0
        if limit <= 0:
            return 0
        expires_at = getattr(mech, "credential_expires_at", None)
        if expires_at is not None:
            limit = min(limit, max(1, int((expires_at - time.time()) * 1000)))
        return limit

    async def _raw_sasl_token(self, token: bytes) -> None:
        mech = self._mechanism
        assert mech is not None
        try:
            out = mech.step(token)
        except AuthenticationError as e:
            raise CloseConnection(f"SASL authentication failed: {e}") from None
        await self._write(_SIZE.pack(len(out)) + out)
        if mech.complete:
            self.authenticated = True
            self.principal = mech.authenticated_user
            self.token_authenticated = bool(getattr(mech, "token_authenticated", False))
            self._mechanism = None
            self._raw_sasl = False
