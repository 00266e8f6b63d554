"""In-memory transport and a scriptable fake Kafka cluster for network-layer tests.

No sockets: ``FakeCluster.opener`` plugs into ``Client(opener=...)`` /
``BrokerConnection(opener=...)`` and wires each connection to a ``FakeBroker`` that
decodes request frames and answers them through ``loop.call_soon``. Tests can hold
responses, drop connections, corrupt frames and count requests.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiokafka_lite.net.connection import BrokerConnection
from aiokafka_lite.wire.framing import FrameReader, RequestFrame, decode_request, encode_response
from aiokafka_lite.wire.message import Response
from aiokafka_lite.wire.messages import (
    REQUESTS,
    ApiVersionsResponse,
    FindCoordinatorResponse,
    MetadataResponse,
)

Handler = Callable[["FakeBroker", RequestFrame], Response | None]


@dataclass
class FakePartition:
    leader: int
    epoch: int = 0
    replicas: list[int] = field(default_factory=list)


@dataclass
class FakeTopic:
    partitions: dict[int, FakePartition]
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)
    error_code: int = 0


class MemoryTransport(asyncio.Transport):
    def __init__(self, broker: FakeBroker, protocol: BrokerConnection) -> None:
        super().__init__()
        self.broker = broker
        self.protocol = protocol
        self.closed = False
        self.reader = FrameReader()
        self.written = 0
        self.held: list[bytes] = []  # responses held back while broker.hold is True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.closed:
            return
        self.written += len(data)
        for frame in self.reader.feed(data):
            self.broker.on_frame(self, frame)

    def deliver(self, data: bytes) -> None:
        if not self.closed:
            asyncio.get_running_loop().call_soon(self._deliver_now, data)

    def _deliver_now(self, data: bytes) -> None:
        if not self.closed:
            self.protocol.data_received(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.broker.transports.discard(self)
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def abort(self) -> None:
        self.close()

    def drop(self) -> None:
        """The network goes away under the client."""
        if not self.closed:
            self.closed = True
            self.broker.transports.discard(self)
            asyncio.get_running_loop().call_soon(
                self.protocol.connection_lost, ConnectionResetError("reset by fake")
            )

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


class FakeBroker:
    def __init__(self, cluster: FakeCluster, node_id: int, host: str, port: int) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.host = host
        self.port = port
        self.up = True
        self.hold = False  # queue responses instead of sending them
        self.transports: set[MemoryTransport] = set()
        self.requests: Counter[int] = Counter()
        self.log: list[RequestFrame] = []
        self.handlers: dict[int, Handler] = {}
        self.api_versions: dict[int, tuple[int, int]] = {
            k: (c.MIN_VERSION, c.MAX_VERSION) for k, c in REQUESTS.items()
        }

    def on_frame(self, transport: MemoryTransport, frame: bytes) -> None:
        req = decode_request(frame)
        self.requests[req.api_key] += 1
        self.log.append(req)
        handler = (
            self.handlers.get(req.api_key)
            or self.cluster.handlers.get(req.api_key)
            or _DEFAULT.get(req.api_key)
        )
        if handler is None:
            raise AssertionError(f"fake broker has no handler for api key {req.api_key}")
        resp = handler(self, req)
        if resp is None:
            return  # no response (acks=0) or the handler answers later via respond()
        self.respond(transport, req, resp)

    def respond(self, transport: MemoryTransport, req: RequestFrame, resp: Response) -> None:
        data = encode_response(resp, req.api_version, req.correlation_id)
        if self.hold:
            transport.held.append(data)
        else:
            transport.deliver(data)

    def release(self) -> None:
        self.hold = False
        for t in list(self.transports):
            held, t.held = t.held, []
            for data in held:
                t.deliver(data)

    def drop_connections(self) -> None:
        for t in list(self.transports):
            t.drop()


class FakeCluster:
    """Brokers 0..n-1 at fake addresses ``broker<i>:9092``; topics with leaders and epochs."""

    def __init__(self, n: int = 3) -> None:
        self.brokers = {i: FakeBroker(self, i, f"broker{i}", 9092) for i in range(n)}
        self.topics: dict[str, FakeTopic] = {}
        self.controller_id = 0
        self.cluster_id = "fake-cluster"
        self.coordinator_for: Callable[[str], int] = lambda key: 0
        self.handlers: dict[int, Handler] = {}
        self.connects: Counter[int] = Counter()
        self.opened: list[MemoryTransport] = []

    def add_topic(self, name: str, partitions: int, leader: Callable[[int], int] | None = None) -> FakeTopic:
        ids = sorted(self.brokers)
        topic = FakeTopic(
            {p: FakePartition(leader(p) if leader else ids[p % len(ids)], 0, ids) for p in range(partitions)}
        )
        self.topics[name] = topic
        return topic

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{b.host}:{b.port}" for b in self.brokers.values())

    def broker_at(self, host: str, port: int) -> FakeBroker | None:
        for b in self.brokers.values():
            if (b.host, b.port) == (host, port):
                return b
        return None

    async def opener(self, conn: BrokerConnection) -> None:
        broker = self.broker_at(conn.host, conn.port)
        await asyncio.sleep(0)
        if broker is None or not broker.up:
            raise ConnectionRefusedError(f"fake: nothing listening on {conn.host}:{conn.port}")
        transport = MemoryTransport(broker, conn)
        broker.transports.add(transport)
        self.connects[broker.node_id] += 1
        self.opened.append(transport)
        conn.connection_made(transport)

    def total(self, api_key: int) -> int:
        return sum(b.requests[api_key] for b in self.brokers.values())


# ---------------------------------------------------------------------------- handlers


def _api_versions(broker: FakeBroker, req: RequestFrame) -> Response:
    return ApiVersionsResponse(
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(broker.api_versions.items())
        ]
    )


def _metadata(broker: FakeBroker, req: RequestFrame) -> Response:
    cluster = broker.cluster
    body: Any = req.body
    names = list(cluster.topics) if body.topics is None else [t.name for t in body.topics]
    topics = []
    for name in names:
        t = cluster.topics.get(name)
        if t is None:
            topics.append(MetadataResponse.MetadataResponseTopic(name=name, error_code=3))
            continue
        topics.append(
            MetadataResponse.MetadataResponseTopic(
                name=name,
                topic_id=t.topic_id,
                error_code=t.error_code,
                partitions=[
                    MetadataResponse.MetadataResponsePartition(
                        partition_index=i,
                        leader_id=p.leader,
                        leader_epoch=p.epoch,
                        replica_nodes=p.replicas,
                        isr_nodes=p.replicas,
                    )
                    for i, p in sorted(t.partitions.items())
                ],
            )
        )
    return MetadataResponse(
        brokers=[
            MetadataResponse.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port)
            for b in cluster.brokers.values()
        ],
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        topics=topics,
    )


def _find_coordinator(broker: FakeBroker, req: RequestFrame) -> Response:
    cluster = broker.cluster
    body: Any = req.body
    if req.api_version >= 4:
        out = []
        for key in body.coordinator_keys:
            node = cluster.brokers[cluster.coordinator_for(key)]
            out.append(
                FindCoordinatorResponse.Coordinator(
                    key=key, node_id=node.node_id, host=node.host, port=node.port
                )
            )
        return FindCoordinatorResponse(coordinators=out)
    node = cluster.brokers[cluster.coordinator_for(body.key)]
    return FindCoordinatorResponse(node_id=node.node_id, host=node.host, port=node.port)


_DEFAULT: dict[int, Handler] = {18: _api_versions, 3: _metadata, 10: _find_coordinator}


class FakeSasl:
    """Broker-side PLAIN / OAUTHBEARER for the fake cluster, with a session lifetime (KIP-368)."""

    def __init__(
        self, users: dict[str, str] | None = None, tokens: set[str] | None = None, lifetime_ms: int = 0
    ) -> None:
        self.users = users or {}
        self.tokens = tokens or set()
        self.lifetime_ms = lifetime_ms
        self.handshakes: list[str] = []
        self.auths: list[str] = []
        self._mechanism: dict[int, str] = {}

    def install(self, cluster: FakeCluster) -> None:
        cluster.handlers[17] = self._handshake
        cluster.handlers[36] = self._authenticate

    def _handshake(self, broker: FakeBroker, req: RequestFrame) -> Response:
        from aiokafka_lite.wire.messages import SaslHandshakeResponse

        body: Any = req.body
        self.handshakes.append(body.mechanism)
        enabled = ["PLAIN", "OAUTHBEARER"]
        if body.mechanism not in enabled:
            return SaslHandshakeResponse(error_code=33, mechanisms=enabled)
        self._mechanism[broker.node_id] = body.mechanism
        return SaslHandshakeResponse(mechanisms=enabled)

    def _authenticate(self, broker: FakeBroker, req: RequestFrame) -> Response:
        from aiokafka_lite.wire.messages import SaslAuthenticateResponse

        data = bytes(req.body.auth_bytes)  # type: ignore[attr-defined]
        mech = self._mechanism.get(broker.node_id)
        ok = False
        if mech == "PLAIN":
            _, user, password = data.split(b"\0")
            ok = self.users.get(user.decode()) == password.decode()
            who = user.decode()
        else:
            text = data.decode()
            token = text.split("auth=Bearer ", 1)[1].split("\x01", 1)[0] if "auth=Bearer " in text else ""
            ok = token in self.tokens
            who = "token"
        if not ok:
            return SaslAuthenticateResponse(
                error_code=58, error_message="Authentication failed: invalid credentials"
            )
        self.auths.append(who)
        return SaslAuthenticateResponse(session_lifetime_ms=self.lifetime_ms)


async def eventually(predicate: Callable[[], bool], within_s: float = 10.0) -> None:
    """Wait until ``predicate()`` holds (checked every 10 ms), failing after ``within_s``."""
    async with asyncio.timeout(within_s):
        while not predicate():  # noqa: ASYNC110 - polling external state, no event to wait on
            await asyncio.sleep(0.01)
