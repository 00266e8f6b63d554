"""A security_protocol that does not match the listener fails fast with an error naming
the likely cause, never an empty reason, a hang or an unexplained oversized frame.

The plaintext-listener tests run on the embedded broker and, with ``--kafka=apache``, on
Apache Kafka (which resets the TLS handshake just like the embedded broker).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core import errors as E
from aiokafka_lite.net import Client, create_ssl_context
from aiokafka_lite.net.connection import describe_error

FAST = {"reconnect_backoff_ms": 5, "retry_backoff_ms": 5, "request_timeout_ms": 10000}


async def _start_error(bootstrap: str, **options: Any) -> E.KafkaError:
    client = Client(bootstrap, **FAST, **options)
    try:
        with pytest.raises(E.NoBrokersAvailableError) as info:
            await asyncio.wait_for(client.start(), 20)
    finally:
        await client.close()
    return info.value


@pytest.mark.parametrize(
    "options",
    [
        {"security_protocol": "SSL"},
        {"security_protocol": "SASL_SSL", "sasl_plain_username": "u", "sasl_plain_password": "p"},
    ],
)
async def test_tls_to_a_plaintext_listener_names_the_cause(
    kafka_bootstrap: str, options: dict[str, str]
) -> None:
    err = await _start_error(kafka_bootstrap, ssl_context=create_ssl_context(verify=False), **options)
    cause = err.__cause__
    assert isinstance(cause, E.SecurityProtocolMismatchError)
    assert isinstance(cause, E.KafkaConnectionError)
    message = str(err)
    assert "TLS handshake with" in message and "is this a plaintext listener?" in message
    assert f"security_protocol (it is {options['security_protocol']!r})" in message


@pytest.mark.kafka_embedded
async def test_plaintext_to_a_tls_listener_that_hangs_up(
    kafka_cluster_factory: Any, tls_files: tuple[Path, Path]
) -> None:
    # The embedded broker's TLS listener (Python's ssl) closes the connection on
    # plaintext without a reply; Kafka's answers with an alert (next test).
    cert, key = tls_files
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    kc: EmbeddedCluster = await kafka_cluster_factory(brokers=1, ssl_context=server_ctx)
    err = await _start_error(kc.bootstrap)
    assert "closed the connection without answering ApiVersions" in str(err)
    assert "is it a TLS listener (then use security_protocol='SSL'" in str(err)


@pytest.fixture
async def tls_alert_listener() -> AsyncIterator[str]:
    """A listener answering whatever it reads with a TLS alert record and closing, as
    Kafka's TLS listener does with a plaintext request (seen on 4.0.2 and 4.4.0)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writer.write(bytes([21, 3, 3, 0, 2, 2, 10]))  # alert: fatal, unexpected_message
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"127.0.0.1:{port}"


@pytest.mark.parametrize("max_response_size", [100 << 20, 1 << 30])
async def test_plaintext_to_a_listener_answering_tls(tls_alert_listener: str, max_response_size: int) -> None:
    err = await _start_error(tls_alert_listener, max_response_size=max_response_size)
    assert isinstance(err.__cause__, E.SecurityProtocolMismatchError)
    assert "answered with a TLS alert record" in str(err)
    assert "frame" not in str(err)  # not reported as an oversized or corrupt frame


async def test_tls_handshake_never_answered_says_so() -> None:
    # A listener that accepts and stays silent: the TLS handshake times out, and the
    # error says which step did not finish (an empty TimeoutError before).
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        err = await _start_error(
            f"127.0.0.1:{port}",
            security_protocol="SSL",
            ssl_context=create_ssl_context(verify=False),
            socket_connection_setup_timeout_ms=300,
        )
    assert "127.0.0.1: TCP connection and TLS handshake not done within 300 ms" in str(err)


def test_connection_errors_never_have_an_empty_reason() -> None:
    assert describe_error(ConnectionResetError()) == "ConnectionResetError"
    assert describe_error(TimeoutError()) == "TimeoutError"
    assert (
        describe_error(ConnectionResetError(104, "Connection reset by peer"))
        == "[Errno 104] Connection reset by peer"
    )
