"""A TCP proxy that can turn into a silent network partition, for tests.

``BlackholeProxy(upstream_host, upstream_port)`` listens on a free loopback port and
forwards every connection to the upstream address. It runs in a daemon thread with its
own asyncio event loop, so it works the same under asyncio and trio tests and is never
starved by the test's loop::

    with BlackholeProxy("127.0.0.1", broker_port) as proxy:
        client = Producer(bootstrap_servers=proxy.address)   # .host, .port, .address
        proxy.blackhole()        # a silent partition: nothing passes, no RST, no FIN
        ...                      # calls with a timeout must return or raise within it
        proxy.restore()          # the network heals
        proxy.reset_connections()  # optional: abort every proxied connection (RST)

A Kafka client connects to the addresses the broker advertises in Metadata, not only to
its bootstrap address, so the broker must advertise the proxy. ``embedded_behind_proxy()``
and ``apache_behind_proxy(version)`` set up a one-broker cluster that does, and yield a
``ProxiedKafka``: ``.bootstrap`` (the proxy's address), ``.proxy`` (the
``BlackholeProxy``) and ``.create_topic(name, partitions=1)``. The pytest plugin's
``kafka_blackhole`` fixture gives one for ``--kafka=embedded`` (a fresh embedded broker
per test, in a thread) and ``--kafka=apache`` (one Apache Kafka node for the session
behind its own proxy; after each test the network is restored and the test's topics and
groups deleted)::

    def test_commit_keeps_its_deadline(kafka_blackhole):
        kafka_blackhole.create_topic("t", 1)
        consumer = Consumer(bootstrap_servers=kafka_blackhole.bootstrap, ...)
        kafka_blackhole.proxy.blackhole()

Semantics, chosen to look like a real partition to both ends:

- ``blackhole()`` returns once forwarding has stopped. Existing connections stay open,
  but the proxy stops reading from both of their sides, so bytes pile up in socket
  buffers and a sender eventually blocks, as on a dead link. New connections are
  accepted (the client sees its connect succeed) but nothing is connected upstream.
  A side that closes during the partition is not noticed until ``restore()``. Bytes
  the proxy had already written to a socket before the call may still arrive, like
  packets already on the wire.
- ``restore()`` resumes forwarding: the bytes held during the partition are delivered
  late, as TCP's retransmissions deliver them after a partition heals, and connections
  accepted meanwhile are connected upstream. A client that gave up on a request during
  the partition has usually closed that connection by then; call
  ``reset_connections()`` to make every surviving connection fail instead.
- ``retarget(host, port)`` changes the upstream for connections made afterwards (for a
  broker whose port is known only after the proxy's).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from aiokafka_lite.testing.loop_thread import LoopThread

__all__ = ["BlackholeProxy", "ProxiedKafka", "apache_behind_proxy", "embedded_behind_proxy"]

log = logging.getLogger(__name__)

_CHUNK = 65536


class _ProxiedConnection:
    """One client connection and, once the network allows it, its upstream connection."""

    def __init__(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.client_reader = client_reader
        self.client_writer = client_writer
        self.upstream_writer: asyncio.StreamWriter | None = None

    def abort(self) -> None:
        for writer in (self.client_writer, self.upstream_writer):
            if writer is not None:
                writer.transport.abort()

    def close(self) -> None:
        for writer in (self.client_writer, self.upstream_writer):
            if writer is not None:
                writer.close()


class BlackholeProxy:
    """Forwards TCP connections to ``upstream_host:upstream_port`` until told to drop
    everything silently; see the module docstring for the exact semantics."""

    def __init__(self, upstream_host: str, upstream_port: int, *, listen_host: str = "127.0.0.1") -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.host = listen_host
        self.port = 0
        self._loop_thread: LoopThread | None = None
        # Set while traffic may flow; every forwarding step waits on it (proxy loop only).
        self._open: asyncio.Event | None = None
        self._blackholed = False
        self._connections: set[_ProxiedConnection] = set()

    # -- addresses -------------------------------------------------------------------
    @property
    def address(self) -> str:
        """``host:port`` that clients connect to."""
        return f"{self.host}:{self.port}"

    @property
    def blackholed(self) -> bool:
        return self._blackholed

    @property
    def connection_count(self) -> int:
        """Client connections currently open through the proxy."""
        return len(self._connections)

    # -- lifetime --------------------------------------------------------------------
    def start(self, timeout: float = 10.0) -> None:
        if self._loop_thread is not None:
            return
        loop_thread = LoopThread(f"blackhole-proxy-{self.upstream_port}")
        server: asyncio.Server | None = None

        async def setup() -> None:
            nonlocal server
            self._open = asyncio.Event()
            if not self._blackholed:
                self._open.set()
            server = await asyncio.start_server(self._serve, self.host, self.port)
            self.port = server.sockets[0].getsockname()[1]

        async def teardown() -> None:
            assert server is not None
            server.close()
            for conn in list(self._connections):
                conn.abort()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self._loop_thread = loop_thread
        loop_thread.start(setup, teardown, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Stops listening and aborts every proxied connection."""
        if self._loop_thread is not None:
            self._loop_thread.stop(timeout)
        self._loop_thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- the network's state ---------------------------------------------------------
    def blackhole(self) -> None:
        """Silently drops all traffic from now on (returns once forwarding has stopped)."""
        self._blackholed = True
        self._on_loop(lambda: self._gate().clear())

    def restore(self) -> None:
        """Forwards again; bytes held during the partition are delivered late."""
        self._blackholed = False
        self._on_loop(lambda: self._gate().set())

    def reset_connections(self) -> None:
        """Aborts every proxied connection at both ends (the peers see a reset)."""

        def abort_all() -> None:
            for conn in list(self._connections):
                conn.abort()
            self._connections.clear()

        self._on_loop(abort_all)

    def retarget(self, upstream_host: str, upstream_port: int) -> None:
        """Connections made from now on go to this upstream address."""
        self.upstream_host, self.upstream_port = upstream_host, upstream_port

    def _gate(self) -> asyncio.Event:
        assert self._open is not None
        return self._open

    def _on_loop(self, fn: Callable[[], None]) -> None:
        """Runs ``fn()`` on the proxy's loop and waits for it, so that the caller's next
        step sees its effect. Before ``start()`` only the flag matters."""
        loop_thread = self._loop_thread
        if loop_thread is None or not loop_thread.running:
            return
        loop_thread.call(fn, 10.0)

    # -- forwarding (proxy loop) ------------------------------------------------------
    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        conn = _ProxiedConnection(client_reader, client_writer)
        self._connections.add(conn)
        try:
            await self._gate().wait()
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection(
                    self.upstream_host, self.upstream_port
                )
            except OSError as e:
                log.debug(
                    "proxy %s: upstream %s:%d refused: %r",
                    self.address,
                    self.upstream_host,
                    self.upstream_port,
                    e,
                )
                return
            conn.upstream_writer = upstream_writer
            if conn not in self._connections:  # reset while connecting
                return
            pumps = [
                asyncio.ensure_future(self._pump(client_reader, upstream_writer)),
                asyncio.ensure_future(self._pump(upstream_reader, client_writer)),
            ]
            try:
                # Either side closing ends the connection: Kafka never half-closes.
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for p in pumps:
                    p.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
        finally:
            if conn in self._connections:
                self._connections.discard(conn)
                conn.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        gate = self._gate()
        while True:
            # Waiting before reading stops the reads during a partition: the bytes stay in
            # the socket buffers and the end of a closed peer goes unnoticed until restore.
            await gate.wait()
            try:
                data = await reader.read(_CHUNK)
            except OSError:
                data = b""  # a reset peer: passed on as a close, once the network allows
            # A chunk (or an end) read just before the partition began is held, not forwarded.
            await gate.wait()
            if not data:
                return
            try:
                writer.write(data)
                await writer.drain()
            except OSError:
                return


# -- a Kafka cluster reachable only through a proxy ------------------------------------


@dataclass(frozen=True)
class ProxiedKafka:
    """A one-broker cluster whose clients reach it only through ``proxy``."""

    proxy: BlackholeProxy
    create_topic: Callable[..., None]  # (name, partitions=1): created and served when it returns
    clear: Callable[[], None] = lambda: None  # deletes the topics and groups tests made

    @property
    def bootstrap(self) -> str:
        return self.proxy.address

    def reset(self) -> None:
        """Between two tests sharing the cluster: the network heals, the connections made
        through the proxy are cut, and the topics and groups are deleted."""
        self.proxy.restore()
        self.proxy.reset_connections()
        self.clear()


@contextlib.contextmanager
def embedded_behind_proxy(**cluster_kwargs: object) -> Iterator[ProxiedKafka]:
    """A fresh one-broker ``EmbeddedCluster`` (in its own thread) advertising a proxy."""
    from aiokafka_lite.testing.threaded import ThreadedCluster

    with BlackholeProxy("127.0.0.1", 0) as proxy:
        tc = ThreadedCluster(brokers=1, advertised_ports=[proxy.port], **cluster_kwargs)
        tc.start()
        try:
            host, port = tc.call(lambda c: (c.brokers[0].host, c.brokers[0].port))
            proxy.retarget(host, port)

            def create_topic(name: str, partitions: int = 1) -> None:
                tc.call(lambda c: c.create_topic(name, partitions))

            yield ProxiedKafka(proxy, create_topic)
        finally:
            proxy.restore()
            tc.close()


@contextlib.contextmanager
def apache_behind_proxy(version: str | None = None) -> Iterator[ProxiedKafka]:
    """A one-node Apache Kafka whose client listener advertises a proxy (replication and
    the launcher's own admin client use a second listener, so they never cross it)."""
    from aiokafka_lite.testing.apache import ApacheCluster

    with BlackholeProxy("127.0.0.1", 0) as proxy:
        cluster = ApacheCluster(1, version=version, advertised_ports=[proxy.port])
        cluster.start()
        try:
            node = cluster.nodes[0]
            proxy.retarget(node.host, node.port)
            yield ProxiedKafka(
                proxy, lambda name, partitions=1: cluster.create_topic(name, partitions), cluster.reset
            )
        finally:
            proxy.restore()
            cluster.close()
