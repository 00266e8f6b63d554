"""A small HTTP/1.1 server on asyncio streams, enough for a JSON REST API in tests.

Keep-alive, Content-Length bodies (a chunked request body is refused with 411), one request at a time
per connection. Not a general web server: it binds to loopback by default and trusts its clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

_REASONS = {200: "OK", 204: "No Content", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            405: "Method Not Allowed", 409: "Conflict", 411: "Length Required", 413: "Payload Too Large",
            422: "Unprocessable Entity", 500: "Internal Server Error"}  # fmt: skip

MAX_BODY = 16 * 1024 * 1024


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Response:
    status: int
    body: Any
    content_type: str = "application/vnd.schemaregistry.v1+json"


Handler = Callable[[Request], Awaitable[Response]]


class HttpServer:
    def __init__(
        self,
        handler: Handler,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._handler = handler
        self._ssl = ssl_context
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._port, ssl=self._ssl)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            # Closing the transports ends each connection's read with EOF; cancelling the tasks instead
            # would make asyncio's stream callback log the CancelledError as an unhandled exception.
            for writer in list(self._connections.values()):
                writer.close()
            for task in list(self._connections):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = writer
        try:
            while True:
                request = await self._read_request(reader)
                if request is None:
                    return
                if isinstance(request, Response):
                    await self._write(writer, request, keep_alive=False)
                    return
                try:
                    response = await self._handler(request)
                except Exception as exc:  # the registry answers 500 as Confluent's does, never drops the link
                    response = Response(
                        500, {"error_code": 50001, "message": f"Error in the backend: {exc!r}"}
                    )
                keep_alive = request.headers.get("connection", "").lower() != "close"
                await self._write(writer, response, keep_alive=keep_alive)
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            return
        except asyncio.CancelledError:
            # Only the loop's shutdown cancels a connection task; ending quietly keeps asyncio's
            # stream callback (Python 3.11) from logging the cancellation as an unhandled error.
            return
        finally:
            self._connections.pop(task, None)
            writer.close()

    @staticmethod
    async def _read_request(reader: asyncio.StreamReader) -> Request | Response | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        except asyncio.LimitOverrunError:
            return Response(413, {"error_code": 413, "message": "request head too large"})
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, _version = lines[0].split(" ", 2)
        except ValueError:
            return Response(400, {"error_code": 400, "message": "malformed request line"})
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return Response(411, {"error_code": 411, "message": "chunked request bodies are not supported"})
        length = int(headers.get("content-length") or 0)
        if length > MAX_BODY:
            return Response(413, {"error_code": 413, "message": "request body too large"})
        body = await reader.readexactly(length) if length else b""
        parts = urllib.parse.urlsplit(target)
        query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
        return Request(method.upper(), parts.path, query, headers, body)

    @staticmethod
    async def _write(writer: asyncio.StreamWriter, response: Response, *, keep_alive: bool) -> None:
        payload = b"" if response.body is None else json.dumps(response.body).encode()
        head = (
            f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Status')}\r\n"
            f"Content-Type: {response.content_type}\r\n"
            f"Content-Length: {len(payload)}\r\n"
            f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + payload)
        await writer.drain()
