"""Sans-I/O client side of one Kafka connection.

``ConnectionProtocol`` assigns correlation ids, encodes requests, remembers what is in
flight and turns received bytes into ``(InFlight, Response)`` pairs. Kafka answers the
requests of one connection in the order they were sent (requests without a response,
Produce with acks=0, are not tracked), so a response whose correlation id is not the
oldest outstanding one means the stream is out of sync: ``CorruptFrameError``.

A TLS listener answers plaintext with a TLS record (Kafka's sends an alert). Read as a
Kafka size prefix its header announces a frame of over 335 MB, which would surface as
an unexplained oversized or corrupt frame; the first bytes of a connection are checked
for it and reported as ``SecurityProtocolMismatchError`` instead.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final

from aiokafka_lite.core.errors import CorruptFrameError, KafkaError, SecurityProtocolMismatchError
from aiokafka_lite.wire.framing import (
    DEFAULT_MAX_FRAME,
    FrameTooLargeError,
    decode_response_header,
    encode_request,
)
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import RESPONSES, ApiVersionsResponse

__all__ = ["ConnectionProtocol", "FrameAssembler", "InFlight", "tls_record_type"]

_API_VERSIONS: Final = ApiVersionsResponse.API_KEY
_MAX_CORRELATION_ID: Final = 2**31 - 1


_SCRATCH: Final = 64 * 1024

# TLS record content types (RFC 8446 section 5.1; change_cipher_spec and heartbeat
# from earlier versions), and the record layer's major protocol version.
_TLS_CONTENT_TYPES: Final = {20: "change_cipher_spec", 21: "alert", 22: "handshake", 23: "application_data"}
_TLS_MAJOR_VERSION: Final = 3
_TLS_MAX_MINOR_VERSION: Final = 4


def tls_record_type(head: bytes | bytearray | memoryview) -> str | None:
    """The content type's name if ``head`` (at least 3 bytes) starts like a TLS record
    (type, then protocol version 3.0-3.4), else None."""
    if len(head) < 3:
        return None
    if head[1] != _TLS_MAJOR_VERSION or head[2] > _TLS_MAX_MINOR_VERSION:
        return None
    return _TLS_CONTENT_TYPES.get(head[0])


class FrameAssembler:
    """Splits a byte stream into frames, reading big frames in place (no copies).

    Designed for ``asyncio.BufferedProtocol``: ``get_buffer()`` hands the transport a
    writable view, ``buffer_updated(n)`` returns the frames completed by those ``n``
    bytes. Small frames are cut out of a reused 64 KiB scratch buffer (one copy each,
    so that decoded zero-copy fields never alias reused memory); a frame larger than
    what the scratch holds gets its own ``bytearray`` of exactly its size, which the
    kernel then fills directly. ``feed(data)`` serves transports that push bytes.
    A size prefix over ``max_frame_size`` raises ``FrameTooLargeError`` before any
    allocation; a negative one ``CorruptFrameError``.
    """

    __slots__ = ("_big", "_big_filled", "_end", "_scratch", "_start", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame_size = max_frame_size
        self._scratch = bytearray(_SCRATCH)
        self._start = 0  # unconsumed bytes are scratch[_start:_end]
        self._end = 0
        self._big: bytearray | None = None  # body of a large frame being filled in place
        self._big_filled = 0

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        big = self._big
        if big is not None:
            return memoryview(big)[self._big_filled :]
        if self._end == len(self._scratch):
            self._compact()
        return memoryview(self._scratch)[self._end :]

    def _compact(self) -> None:
        start, end = self._start, self._end
        if start:
            self._scratch[: end - start] = self._scratch[start:end]
            self._start, self._end = 0, end - start

    def buffer_updated(self, nbytes: int) -> list[bytes | bytearray]:
        big = self._big
        if big is not None:
            self._big_filled += nbytes
            if self._big_filled < len(big):
                return []
            self._big = None
            return [big]
        self._end += nbytes
        return self._split()

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes | bytearray]:
        frames: list[bytes | bytearray] = []
        view = memoryview(data).cast("B")
        while view:
            buf = self.get_buffer(len(view))
            n = min(len(buf), len(view))
            buf[:n] = view[:n]
            view = view[n:]
            frames.extend(self.buffer_updated(n))
        return frames

    def _split(self) -> list[bytes | bytearray]:
        frames: list[bytes | bytearray] = []
        scratch = self._scratch
        pos, end = self._start, self._end
        while end - pos >= 4:
            size = int.from_bytes(scratch[pos : pos + 4], "big", signed=True)
            if size < 0:
                raise CorruptFrameError(f"negative frame size {size}")
            if size > self.max_frame_size:
                raise FrameTooLargeError(size, self.max_frame_size)
            if end - pos - 4 >= size:
                frames.append(bytes(scratch[pos + 4 : pos + 4 + size]))
                pos += 4 + size
                continue
            if size + 4 > len(scratch):
                # Too big for the scratch buffer: give it its own, filled in place from now on.
                have = end - pos - 4
                big = bytearray(size)
                big[:have] = scratch[pos + 4 : end]
                self._big, self._big_filled = big, have
                pos = end
            break
        if pos == end:
            pos = end = 0
        self._start, self._end = pos, end
        return frames

    @property
    def buffered(self) -> int:
        return (
            self._end - self._start + self._big_filled if self._big is not None else self._end - self._start
        )


@dataclass(slots=True, eq=False)
class InFlight:
    """One request awaiting its response. ``waiter`` is the I/O shell's business."""

    correlation_id: int
    api_key: int
    api_version: int
    sent_at: float = 0.0
    request_size: int = 0
    waiter: Any = field(default=None, repr=False)


class ConnectionProtocol:
    """Request encoding and in-order response matching for one connection (no I/O)."""

    __slots__ = (
        "_client_id",
        "_head",
        "_in_flight",
        "_next_id",
        "_peer",
        "_reader",
        "_unchecked_view",
        "bytes_received",
        "bytes_sent",
    )

    def __init__(
        self,
        client_id: str | None = "aiokafka-lite",
        max_response_size: int = DEFAULT_MAX_FRAME,
        *,
        peer: str = "the broker",
    ) -> None:
        self._client_id = client_id
        self._next_id = 0
        self._in_flight: deque[InFlight] = deque()
        self._reader = FrameAssembler(max_response_size)
        self._peer = peer
        # The connection's first bytes, kept until there are enough to tell a TLS
        # record from a Kafka size prefix; ``None`` once checked.
        self._head: bytearray | None = bytearray()
        self._unchecked_view: memoryview | None = None
        self.bytes_sent = 0
        self.bytes_received = 0

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def pending(self) -> list[InFlight]:
        return list(self._in_flight)

    def oldest(self) -> InFlight | None:
        return self._in_flight[0] if self._in_flight else None

    def send(
        self, request: Request, version: int, *, expect_response: bool = True, now: float = 0.0
    ) -> tuple[InFlight | None, bytes]:
        """Encode ``request``; returns its in-flight record (None without response) and the frame."""
        corr = self._next_id
        self._next_id = 0 if corr >= _MAX_CORRELATION_ID else corr + 1
        frame = encode_request(request, version, corr, self._client_id)
        self.bytes_sent += len(frame)
        if not expect_response:
            return None, frame
        entry = InFlight(corr, request.API_KEY, version, now, len(frame))
        self._in_flight.append(entry)
        return entry, frame

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the transport should put the next received bytes (BufferedProtocol)."""
        view = self._reader.get_buffer(sizehint)
        if self._head is not None:
            self._unchecked_view = view
        return view

    def _check_head(self, data: bytes | bytearray | memoryview) -> KafkaError | None:
        """Collect the first bytes of the stream; a TLS record there is an error."""
        head = self._head
        assert head is not None
        head += data[: 3 - len(head)]
        if len(head) < 3:
            return None
        self._head = None
        self._unchecked_view = None
        kind = tls_record_type(head)
        if kind is None:
            return None
        return SecurityProtocolMismatchError(
            f"{self._peer} answered with a TLS {kind} record where a Kafka response was expected: "
            "it is a TLS listener; use security_protocol='SSL' (or 'SASL_SSL'), or the plaintext port"
        )

    def buffer_updated(self, nbytes: int) -> tuple[list[tuple[InFlight, Response, int]], KafkaError | None]:
        """``nbytes`` were written into the last ``get_buffer()``; like ``receive``."""
        self.bytes_received += nbytes
        if self._head is not None and self._unchecked_view is not None:
            mismatch = self._check_head(self._unchecked_view[:nbytes])
            if mismatch is not None:
                return [], mismatch
        try:
            frames = self._reader.buffer_updated(nbytes)
        except CorruptFrameError as e:
            return [], e
        return self._match(frames)

    def receive(
        self, data: bytes | bytearray | memoryview
    ) -> tuple[list[tuple[InFlight, Response, int]], KafkaError | None]:
        """Feed received bytes.

        Returns ``(request, decoded response, frame size)`` for every complete frame,
        plus the error that broke the stream, if any (``FrameTooLargeError`` for
        oversized frames, ``SecurityProtocolMismatchError`` for a TLS reply): responses
        decoded before it are still delivered, the connection must then be closed and
        the rest of ``pending()`` failed.
        """
        self.bytes_received += len(data)
        if self._head is not None:
            mismatch = self._check_head(data)
            if mismatch is not None:
                return [], mismatch
        try:
            frames = self._reader.feed(data)
        except CorruptFrameError as e:
            return [], e
        return self._match(frames)

    def _match(
        self, frames: list[bytes | bytearray]
    ) -> tuple[list[tuple[InFlight, Response, int]], CorruptFrameError | None]:
        if not frames:
            return [], None
        out: list[tuple[InFlight, Response, int]] = []
        in_flight = self._in_flight
        for frame in frames:
            if not in_flight:
                return out, CorruptFrameError("response received while no request is in flight")
            entry = in_flight[0]
            try:
                resp = self._decode(entry, frame)
            except CorruptFrameError as e:
                return out, e
            in_flight.popleft()
            out.append((entry, resp, len(frame) + 4))
        return out, None

    @staticmethod
    def _decode(entry: InFlight, frame: bytes | bytearray) -> Response:
        corr, r = decode_response_header(frame, entry.api_key, entry.api_version)
        if corr != entry.correlation_id:
            raise CorruptFrameError(
                f"correlation id mismatch: got {corr}, expected {entry.correlation_id} "
                f"(api key {entry.api_key})"
            )
        cls = RESPONSES[entry.api_key]
        if entry.api_key == _API_VERSIONS and entry.api_version > 0:
            # A broker that does not support our ApiVersions version answers in v0
            # format with UNSUPPORTED_VERSION and its supported range (KIP-511).
            start = r.pos
            if r.remaining() >= 2 and int.from_bytes(r.buf[start : start + 2], "big", signed=True) == 35:
                return cls.decode_from(r, 0)
            try:
                return cls.decode_from(r, entry.api_version)
            except CorruptFrameError:
                r.pos = start
                return cls.decode_from(r, 0)
        return cls.decode_from(r, entry.api_version)
