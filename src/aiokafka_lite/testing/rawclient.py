"""A minimal Kafka protocol connection for tests: send one request, read its response.

It speaks the wire format through ``aiokafka_lite.wire`` and nothing else (no retries,
no metadata), so tests can drive a broker exactly, including with malformed frames.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from types import TracebackType
from typing import Self

from aiokafka_lite.core.errors import KafkaConnectionError
from aiokafka_lite.wire.framing import decode_response, encode_request
from aiokafka_lite.wire.message import Request, Response

__all__ = ["RawClient"]

_SIZE = struct.Struct(">i")


class RawClient:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str | None
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.client_id = client_id
        self._corr = 0

    @classmethod
    async def connect(
        cls,
        address: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        client_id: str | None = "raw-test",
        within: float = 10.0,
    ) -> RawClient:
        host, _, port = address.split(",")[0].rpartition(":")
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, int(port), ssl=ssl_context, limit=1 << 26), within
        )
        return cls(reader, writer, client_id)

    def next_correlation_id(self) -> int:
        self._corr += 1
        return self._corr

    async def send(self, request: Request, version: int) -> int:
        corr = self.next_correlation_id()
        self.writer.write(encode_request(request, version, corr, self.client_id))
        await self.writer.drain()
        return corr

    async def read_frame(self, within: float = 10.0) -> bytes:
        try:
            head = await asyncio.wait_for(self.reader.readexactly(4), within)
            (size,) = _SIZE.unpack(head)
            return await asyncio.wait_for(self.reader.readexactly(size), within)
        except asyncio.IncompleteReadError as e:
            raise KafkaConnectionError("connection closed by the broker") from e

    async def request(self, request: Request, version: int, within: float = 10.0) -> Response:
        corr = await self.send(request, version)
        frame = await self.read_frame(within)
        got, resp = decode_response(frame, request.API_KEY, version)
        if got != corr:
            raise KafkaConnectionError(f"correlation id {got} does not match {corr}")
        return resp

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def is_closed_by_peer(self, within: float = 5.0) -> bool:
        """True when the broker closes the connection (EOF) within ``within`` seconds."""
        try:
            data = await asyncio.wait_for(self.reader.read(1 << 16), within)
        except (ConnectionError, OSError):
            return True
        except TimeoutError:
            return False
        return data == b""

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
