"""BlackholeProxy: forwards, then holds every byte silently, then forwards again."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from aiokafka_lite import Producer
from aiokafka_lite.core.errors import KafkaError
from aiokafka_lite.testing.proxy import BlackholeProxy, ProxiedKafka


@pytest.fixture
def echo_server() -> Iterator[tuple[str, int]]:
    """A blocking TCP echo server on loopback (one thread per connection)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[:2]
    finally:
        stop.set()
        listener.close()


def _nothing_arrives(sock: socket.socket, wait: float = 0.3) -> bool:
    """True when no byte and no end-of-stream arrives within ``wait`` (the socket stays
    open and silent: a partition, not a close or a reset)."""
    sock.settimeout(wait)
    try:
        sock.recv(1)
    except TimeoutError:
        return True
    return False


def test_forwards_then_holds_silently_then_delivers_late(echo_server: tuple[str, int]) -> None:
    with BlackholeProxy(*echo_server) as proxy:
        assert proxy.address == f"127.0.0.1:{proxy.port}"
        with socket.create_connection((proxy.host, proxy.port), 5) as before:
            before.sendall(b"ping")
            assert before.recv(4) == b"ping"

            proxy.blackhole()
            before.sendall(b"held")
            assert _nothing_arrives(before)
            # A connection made during the partition is accepted and then stays silent.
            with socket.create_connection((proxy.host, proxy.port), 5) as during:
                during.sendall(b"new!")
                assert _nothing_arrives(during)

                proxy.restore()
                during.settimeout(5)
                before.settimeout(5)
                assert during.recv(4) == b"new!"
                assert before.recv(4) == b"held"


def test_reset_connections_cuts_the_open_connections(echo_server: tuple[str, int]) -> None:
    with BlackholeProxy(*echo_server) as proxy:
        with socket.create_connection((proxy.host, proxy.port), 5) as conn:
            conn.sendall(b"x")
            assert conn.recv(1) == b"x"
            assert proxy.connection_count == 1
            proxy.reset_connections()
            conn.settimeout(5)
            try:
                assert conn.recv(1) == b""
            except ConnectionResetError:
                pass
        # New connections still work.
        with socket.create_connection((proxy.host, proxy.port), 5) as conn:
            conn.sendall(b"y")
            assert conn.recv(1) == b"y"


async def test_kafka_blackhole_fixture_routes_clients_through_the_proxy(
    kafka_blackhole: ProxiedKafka,
) -> None:
    """Metadata advertises the proxy, so a partition cuts the client off entirely: a send
    fails at its delivery timeout, and works again once the network is back."""
    kafka_blackhole.create_topic("through-proxy", 1)
    producer = Producer(
        bootstrap_servers=kafka_blackhole.bootstrap,
        delivery_timeout_ms=3000,
        request_timeout_ms=1000,
        linger_ms=0,
    )
    await producer.start()
    try:
        await producer.send("through-proxy", b"before")
        kafka_blackhole.proxy.blackhole()
        with pytest.raises(KafkaError):
            await producer.send("through-proxy", b"during")
        kafka_blackhole.proxy.restore()
        await producer.send("through-proxy", b"after")
    finally:
        await producer.close(timeout=5)
