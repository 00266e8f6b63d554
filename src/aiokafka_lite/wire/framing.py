"""Size-prefixed frames and request/response headers.

Every Kafka message travels as ``int32 size`` + ``header`` + ``body``. Header versions
follow the body: flexible request versions use request header v2 (v1 otherwise);
flexible response versions use response header v1, except ApiVersions responses,
which always use v0 so that a client can read the error of a version it guessed wrong.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from aiokafka_lite.core.errors import CorruptFrameError, KafkaError
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import REQUESTS, RESPONSES, ApiVersionsRequest, RequestHeader, ResponseHeader
from aiokafka_lite.wire.primitives import Reader, Writer

_SIZE: Final = struct.Struct(">i")
_HEADER_PREFIX: Final = struct.Struct(">hhi")  # api key, api version, correlation id

API_VERSIONS_KEY: Final = ApiVersionsRequest.API_KEY
DEFAULT_MAX_FRAME: Final = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes


class FrameTooLargeError(CorruptFrameError):
    """A frame's size prefix exceeds the configured maximum; nothing was allocated for it."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")


class UnsupportedRequestError(KafkaError):
    """A request names an API key or version this side does not implement."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        super().__init__(f"unsupported request: api key {api_key} version {api_version}")


def request_header_version(api_key: int, api_version: int) -> int:
    cls = REQUESTS.get(api_key)
    if cls is None:
        return 1
    return 2 if api_version >= cls.FLEXIBLE_VERSION else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    cls = RESPONSES.get(api_key)
    if cls is None:
        return 0
    return 1 if api_version >= cls.FLEXIBLE_VERSION else 0


def encode_request(
    request: Request, version: int, correlation_id: int, client_id: str | None = "aiokafka_lite"
) -> bytes:
    """A complete frame: size prefix, request header, body."""
    w = Writer(bytearray(4))
    header = RequestHeader(
        request_api_key=request.API_KEY,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    header.encode_into(w, request_header_version(request.API_KEY, version))
    request.encode_into(w, version)
    buf = w.buf
    _SIZE.pack_into(buf, 0, len(buf) - 4)
    return bytes(buf)


def encode_response(response: Response, version: int, correlation_id: int) -> bytes:
    w = Writer(bytearray(4))
    ResponseHeader(correlation_id=correlation_id).encode_into(
        w, response_header_version(response.API_KEY, version)
    )
    response.encode_into(w, version)
    buf = w.buf
    _SIZE.pack_into(buf, 0, len(buf) - 4)
    return bytes(buf)


@dataclass(slots=True)
class RequestFrame:
    header: RequestHeader
    body: Request

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


def peek_request_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a request frame body (no size prefix)."""
    if len(frame) < _HEADER_PREFIX.size:
        raise CorruptFrameError(f"request frame of {len(frame)} bytes is too short for a header")
    key, version, corr = _HEADER_PREFIX.unpack_from(frame, 0)
    return key, version, corr


def decode_request(frame: bytes | bytearray | memoryview) -> RequestFrame:
    """Decodes a request frame (without its size prefix).

    Raises ``UnsupportedRequestError`` (carrying the correlation id, so the caller can
    answer) for unknown keys or versions, ``CorruptFrameError`` for malformed bytes.
    """
    key, version, corr = peek_request_header(frame)
    cls = REQUESTS.get(key)
    if cls is None or not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
        raise UnsupportedRequestError(key, version, corr)
    r = Reader(frame)
    header = RequestHeader.decode_from(r, request_header_version(key, version), strict=False)
    body = cls.decode_from(r, version)
    return RequestFrame(header, body)


def decode_response_header(
    frame: bytes | bytearray | memoryview, api_key: int, api_version: int
) -> tuple[int, Reader]:
    """(correlation id, reader positioned at the body) of a response frame."""
    r = Reader(frame)
    header = ResponseHeader.decode_from(r, response_header_version(api_key, api_version), strict=False)
    return header.correlation_id, r


def peek_correlation_id(frame: bytes | bytearray | memoryview) -> int:
    if len(frame) < 4:
        raise CorruptFrameError(f"response frame of {len(frame)} bytes has no correlation id")
    corr: int = _SIZE.unpack_from(frame, 0)[0]
    return corr


def decode_response(
    frame: bytes | bytearray | memoryview, api_key: int, api_version: int
) -> tuple[int, Response]:
    cls = RESPONSES.get(api_key)
    if cls is None:
        raise CorruptFrameError(f"no response type for api key {api_key}")
    corr, r = decode_response_header(frame, api_key, api_version)
    return corr, cls.decode_from(r, api_version)


class FrameReader:
    """Sans-I/O splitter of a byte stream into frames (size prefix removed).

    ``feed`` accepts whatever the transport delivered and returns the complete frames.
    A size prefix over ``max_frame_size`` raises ``FrameTooLargeError`` before anything
    is allocated for it; a negative one raises ``CorruptFrameError``.
    """

    __slots__ = ("_buf", "_need", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._need = -1  # body size of the frame being assembled, -1 while reading a prefix

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        self._buf += data
        frames: list[bytes] = []
        buf = self._buf
        pos = 0
        end = len(buf)
        while True:
            if self._need < 0:
                if end - pos < 4:
                    break
                size: int = _SIZE.unpack_from(buf, pos)[0]
                if size < 0:
                    raise CorruptFrameError(f"negative frame size {size}")
                if size > self.max_frame_size:
                    raise FrameTooLargeError(size, self.max_frame_size)
                pos += 4
                self._need = size
            if end - pos < self._need:
                break
            frames.append(bytes(buf[pos : pos + self._need]))
            pos += self._need
            self._need = -1
        if pos:
            del buf[:pos]
        return frames

    def next_read_size(self) -> int:
        """How many more bytes complete the current frame (a hint for buffered reads)."""
        if self._need < 0:
            return max(4 - len(self._buf), 1)
        return max(self._need - len(self._buf), 1)
