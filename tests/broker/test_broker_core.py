"""Core APIs of the embedded broker, driven at the wire level."""

from __future__ import annotations

import asyncio
import struct

import pytest

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.errors import (
    CorruptMessageError,
    InvalidProducerEpochError,
    InvalidTopicError,
    MessageSizeTooLargeError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceNumberError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from aiokafka_lite.wire.records import Compression, decode_batches, encode_batch


def batch(
    values: list[bytes],
    *,
    ts: int = 1000,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    compression: Compression = Compression.NONE,
    txn: bool = False,
) -> bytes:
    return encode_batch(
        [(ts + i, b"k%d" % i, v, []) for i, v in enumerate(values)],
        compression=compression,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
    )


async def produce(
    client: RawClient, topic: str, partition: int, records: bytes, *, version: int = 9, acks: int = -1
) -> ProduceResponse.PartitionProduceResponse:
    resp = await client.request(
        ProduceRequest(
            acks=acks,
            timeout_ms=5000,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name=topic,
                    partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)],
                )
            ],
        ),
        version,
    )
    assert isinstance(resp, ProduceResponse)
    return resp.responses[0].partition_responses[0]


def fetch_req(
    topic: str,
    partitions: dict[int, int],
    *,
    max_wait: int = 0,
    min_bytes: int = 0,
    max_bytes: int = 50_000_000,
    part_max: int = 1_000_000,
    isolation: int = 0,
) -> FetchRequest:
    return FetchRequest(
        max_wait_ms=max_wait,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequest.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=part_max)
                    for p, o in partitions.items()
                ],
            )
        ],
    )


def with_ids(req: FetchRequest, cluster: EmbeddedCluster) -> FetchRequest:
    for ft in req.topics:
        ft.topic_id = cluster.topic(ft.topic).topic_id
    return req


async def fetch(client: RawClient, req: FetchRequest, version: int = 12) -> FetchResponse:
    resp = await client.request(req, version, within=30)
    assert isinstance(resp, FetchResponse)
    return resp


def values_of(records: object) -> list[tuple[int, bytes | None]]:
    assert records is not None
    return [(r.offset, r.value) for b in decode_batches(records) for r in b.records()]  # type: ignore[arg-type]


async def test_api_versions_lists_registry(kafka_cluster: EmbeddedCluster) -> None:
    supported = next(e for e in kafka_cluster.registry if e.api_key == ApiVersionsRequest.API_KEY)
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        for v in range(supported.min_version, supported.max_version + 1):
            resp = await c.request(
                ApiVersionsRequest(client_software_name="t", client_software_version="1"), v
            )
            assert isinstance(resp, ApiVersionsResponse)
            assert resp.error_code == 0
            keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            assert keys == {e.api_key: (e.min_version, e.max_version) for e in kafka_cluster.registry}
            assert keys[0] == (ProduceRequest.MIN_VERSION, ProduceRequest.MAX_VERSION)


async def test_api_versions_unknown_version_falls_back_to_v0(kafka_cluster: EmbeddedCluster) -> None:
    from aiokafka_lite.wire.framing import decode_response
    from aiokafka_lite.wire.messages import RequestHeader
    from aiokafka_lite.wire.primitives import Writer

    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        w = Writer(bytearray(4))
        RequestHeader(
            request_api_key=18, request_api_version=77, correlation_id=5, client_id="x"
        ).encode_into(w, 2)
        w.buf += b"\x00" * 8  # body of an unknown future version
        w.buf[0:4] = (len(w.buf) - 4).to_bytes(4, "big")
        await c.send_raw(bytes(w.buf))
        corr, resp = decode_response(await c.read_frame(), 18, 0)
        assert corr == 5
        assert isinstance(resp, ApiVersionsResponse)
        assert resp.error_code == UnsupportedVersionError.code
        # Only ApiVersions' own range, as Kafka answers (the client retries within it).
        supported = next(e for e in kafka_cluster.registry if e.api_key == 18)
        assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [
            (18, supported.min_version, supported.max_version)
        ]
        # The connection stays usable for the retry at a supported version.
        assert (await c.request(ApiVersionsRequest(), 0)).error_code == 0  # type: ignore[attr-defined]


async def test_api_versions_unknown_version_with_a_malformed_header_closes(
    kafka_cluster: EmbeddedCluster,
) -> None:
    """Kafka parses an unknown ApiVersions version's header as a flexible (v2) header;
    without its tagged fields the request cannot be read and the connection closes."""
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        body = struct.pack(">hhih", 18, 77, 5, 1) + b"x"  # no tagged-fields byte
        await c.send_raw(struct.pack(">i", len(body)) + body)
        assert await c.is_closed_by_peer()


async def test_metadata_auto_create_and_errors(kafka_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    cluster = await kafka_cluster_factory(brokers=3, default_partitions=4)
    async with await RawClient.connect(cluster.bootstrap) as c:
        auto = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="auto")], allow_auto_topic_creation=True
        )
        # As Kafka (KRaft): the request that creates the topic is answered before it is served.
        resp = await c.request(auto, 12)
        assert isinstance(resp, MetadataResponse)
        assert [(t.name, t.error_code) for t in resp.topics] == [("auto", UnknownTopicOrPartitionError.code)]
        assert "auto" in cluster.state.topics
        resp = await c.request(auto, 12)
        assert isinstance(resp, MetadataResponse)
        assert sorted(b.node_id for b in resp.brokers) == [1, 2, 3]
        assert resp.cluster_id == cluster.state.cluster_id
        assert resp.controller_id == 1
        (t,) = resp.topics
        assert t.error_code == 0 and t.name == "auto" and len(t.partitions) == 4
        assert t.topic_id == cluster.topic("auto").topic_id
        assert sorted({p.leader_id for p in t.partitions}) == [1, 2, 3]
        resp = await c.request(
            MetadataRequest(
                topics=[
                    MetadataRequest.MetadataRequestTopic(name="nope"),
                    MetadataRequest.MetadataRequestTopic(name="bad/name"),
                ],
                allow_auto_topic_creation=False,
            ),
            12,
        )
        assert [t.error_code for t in resp.topics] == [
            UnknownTopicOrPartitionError.code,
            InvalidTopicError.code,
        ]  # type: ignore[attr-defined]
        assert "nope" not in cluster.state.topics
        # By topic id (v12+), and all topics (null list).
        import uuid

        resp = await c.request(
            MetadataRequest(
                topics=[
                    MetadataRequest.MetadataRequestTopic(name=None, topic_id=cluster.topic("auto").topic_id),
                    MetadataRequest.MetadataRequestTopic(name=None, topic_id=uuid.uuid4()),
                ]
            ),
            12,
        )
        assert [t.error_code for t in resp.topics] == [0, UnknownTopicIdError.code]  # type: ignore[attr-defined]
        assert resp.topics[0].name == "auto"  # type: ignore[attr-defined]
        for v in (0, 1, 4, 9, 13):
            resp = await c.request(MetadataRequest(topics=None if v else []), v)
            assert [t.name for t in resp.topics] == ["auto"]  # type: ignore[attr-defined]


async def test_produce_fetch_roundtrip_assigns_offsets(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 2)
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        r1 = await produce(c, "t", 1, batch([b"a", b"b", b"c"]))
        r2 = await produce(c, "t", 1, batch([b"d"], compression=Compression.LZ4))
        assert (r1.error_code, r1.base_offset, r2.base_offset) == (0, 0, 3)
        for v in (4, 11, 12, 13, 16, 17, 18):
            req = fetch_req("t", {0: 0, 1: 0})
            if v >= 13:
                with_ids(req, kafka_cluster)
            resp = await fetch(c, req, v)
            parts = {p.partition_index: p for t in resp.responses for p in t.partitions}
            assert parts[0].high_watermark == 0 and not parts[0].records
            assert parts[1].high_watermark == 4 and parts[1].last_stable_offset == 4
            assert values_of(parts[1].records) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
        # Fetching from the middle of a batch returns the whole batch (clients skip).
        resp = await fetch(c, fetch_req("t", {1: 1}))
        assert values_of(resp.responses[0].partitions[0].records)[0] == (0, b"a")
        # Past the end / before the start is out of range.
        resp = await fetch(c, fetch_req("t", {1: 5}))
        assert resp.responses[0].partitions[0].error_code == OffsetOutOfRangeError.code


async def test_produce_errors(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1, configs={"max.message.bytes": "2000"})
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        good = bytearray(batch([b"x"]))
        good[-1] ^= 0xFF  # corrupt a record byte: CRC mismatch
        assert (await produce(c, "t", 0, bytes(good))).error_code == CorruptMessageError.code
        assert (await produce(c, "t", 0, batch([b"y" * 3000]))).error_code == MessageSizeTooLargeError.code
        assert (await produce(c, "t", 0, b"\x00" * 30)).error_code == CorruptMessageError.code
        assert (await produce(c, "nope", 0, batch([b"x"]))).error_code == UnknownTopicOrPartitionError.code
        assert (await produce(c, "t", 7, batch([b"x"]))).error_code == UnknownTopicOrPartitionError.code
        assert kafka_cluster.high_watermark("t", 0) == 0
        ok = await produce(c, "t", 0, batch([b"x"]))
        assert (ok.error_code, ok.base_offset) == (0, 0)


async def test_message_max_bytes_default(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        assert (
            await produce(c, "t", 0, batch([b"y" * 1_048_588]))
        ).error_code == MessageSizeTooLargeError.code
        assert (await produce(c, "t", 0, batch([b"y" * 1_040_000]))).error_code == 0


async def test_acks_zero_gets_no_response(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        await c.send(
            ProduceRequest(
                acks=0,
                timeout_ms=1000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name="t",
                        partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch([b"z"]))],
                    )
                ],
            ),
            9,
        )
        resp = await c.request(MetadataRequest(topics=None), 9)  # the next response is metadata's
        assert isinstance(resp, MetadataResponse)
        assert kafka_cluster.high_watermark("t", 0) == 1


async def test_idempotent_sequences(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        pid = kafka_cluster.state.allocate_producer_id()
        r = await produce(c, "t", 0, batch([b"a", b"b"], pid=pid, epoch=0, seq=0))
        assert (r.error_code, r.base_offset) == (0, 0)
        r = await produce(c, "t", 0, batch([b"c"], pid=pid, epoch=0, seq=2))
        assert (r.error_code, r.base_offset) == (0, 2)
        # A retry of a cached batch is answered with its original offset, not re-appended.
        r = await produce(c, "t", 0, batch([b"a", b"b"], pid=pid, epoch=0, seq=0))
        assert (r.error_code, r.base_offset) == (0, 0)
        assert kafka_cluster.high_watermark("t", 0) == 3
        # A gap is out of order.
        r = await produce(c, "t", 0, batch([b"e"], pid=pid, epoch=0, seq=5))
        assert r.error_code == OutOfOrderSequenceNumberError.code
        # Push the first batches out of the five-batch cache: a retry of one cannot be told
        # from a gap any more, and Kafka answers it OUT_OF_ORDER_SEQUENCE_NUMBER (not
        # DUPLICATE_SEQUENCE_NUMBER, which Kafka 4.x never sends).
        for i in range(5):
            assert (await produce(c, "t", 0, batch([b"f"], pid=pid, epoch=0, seq=3 + i))).error_code == 0
        r = await produce(c, "t", 0, batch([b"a", b"b"], pid=pid, epoch=0, seq=0))
        assert r.error_code == OutOfOrderSequenceNumberError.code
        # A new epoch restarts at 0; the old epoch is fenced.
        assert (await produce(c, "t", 0, batch([b"g"], pid=pid, epoch=1, seq=3))).error_code == (
            OutOfOrderSequenceNumberError.code
        )
        assert (await produce(c, "t", 0, batch([b"g"], pid=pid, epoch=1, seq=0))).error_code == 0
        r = await produce(c, "t", 0, batch([b"h"], pid=pid, epoch=0, seq=8))
        assert r.error_code == InvalidProducerEpochError.code
        assert kafka_cluster.high_watermark("t", 0) == 9


async def test_not_leader_on_other_broker(kafka_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    cluster = await kafka_cluster_factory(brokers=3)
    cluster.create_topic("t", 3)
    leaders = {p.index: p.leader_id for p in cluster.topic("t").partitions}
    b1 = cluster.broker(1)
    async with await RawClient.connect(b1.address) as c:
        for part, leader in leaders.items():
            r = await produce(c, "t", part, batch([b"x"]), version=10)
            if leader == 1:
                assert r.error_code == 0
            else:
                assert r.error_code == NotLeaderOrFollowerError.code
                assert r.current_leader.leader_id == leader
        resp = await fetch(c, with_ids(fetch_req("t", {0: 0, 1: 0, 2: 0}), cluster), 16)
        errs = {p.partition_index: p.error_code for p in resp.responses[0].partitions}
        assert errs == {i: 0 if leaders[i] == 1 else NotLeaderOrFollowerError.code for i in range(3)}
        assert {e.node_id for e in resp.node_endpoints} == {leaders[i] for i in range(3)} - {1}
        for p in resp.responses[0].partitions:
            if p.error_code:
                assert p.current_leader.leader_id == leaders[p.partition_index]


async def test_fetch_long_poll_wakes_on_produce(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    async with (
        await RawClient.connect(kafka_cluster.bootstrap) as c,
        await RawClient.connect(kafka_cluster.bootstrap) as p,
    ):
        task = asyncio.create_task(fetch(c, fetch_req("t", {0: 0}, max_wait=20_000, min_bytes=1)))
        await asyncio.sleep(0.1)
        assert not task.done()
        await produce(p, "t", 0, batch([b"wake"]))
        # Woken by the produce: well before max_wait (20 s) would have answered it.
        resp = await asyncio.wait_for(task, 10)
        assert values_of(resp.responses[0].partitions[0].records) == [(0, b"wake")]
        # Without data the fetch returns empty after max wait.
        resp = await fetch(c, fetch_req("t", {0: 1}, max_wait=50, min_bytes=1))
        assert not resp.responses[0].partitions[0].records


async def test_fetch_byte_limits_kip74(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 2)
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        for _ in range(3):
            await produce(c, "t", 0, batch([b"x" * 1000]))
            await produce(c, "t", 1, batch([b"y" * 1000]))
        # Partition limit smaller than one batch: the first batch still comes back.
        resp = await fetch(c, fetch_req("t", {0: 0, 1: 0}, part_max=10))
        p0, p1 = resp.responses[0].partitions
        assert len(values_of(p0.records)) == 1
        assert not p1.records  # only the first partition gets the oversized batch
        # Response limit: whole batches up to max_bytes.
        one = len(batch([b"x" * 1000]))
        resp = await fetch(c, fetch_req("t", {0: 0, 1: 0}, max_bytes=2 * one + 10))
        p0, p1 = resp.responses[0].partitions
        assert len(values_of(p0.records)) == 2 and not p1.records


async def test_list_offsets(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        await produce(c, "t", 0, batch([b"a", b"b"], ts=1000))  # 1000, 1001
        await produce(c, "t", 0, batch([b"c", b"d"], ts=5000))  # 5000, 5001
        await produce(c, "t", 0, batch([b"e"], ts=3000))

        async def lo(ts: int, v: int = 7) -> tuple[int, int]:
            resp = await c.request(
                ListOffsetsRequest(
                    replica_id=-1,
                    topics=[
                        ListOffsetsRequest.ListOffsetsTopic(
                            name="t",
                            partitions=[
                                ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=ts)
                            ],
                        )
                    ],
                ),
                v,
            )
            assert isinstance(resp, ListOffsetsResponse)
            p = resp.topics[0].partitions[0]
            assert p.error_code == 0
            return p.offset, p.timestamp

        assert (await lo(-2))[0] == 0
        assert (await lo(-1))[0] == 5
        assert await lo(1001) == (1, 1001)
        assert await lo(2000) == (2, 5000)
        assert await lo(5001) == (3, 5001)
        assert await lo(9999) == (-1, -1)
        assert await lo(-3) == (3, 5001)
        assert (await lo(-1, 1))[0] == 5


async def test_stop_broker_moves_leadership(kafka_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    cluster = await kafka_cluster_factory(brokers=3)
    t = cluster.create_topic("t", 3)
    epochs = [p.leader_epoch for p in t.partitions]
    await cluster.stop_broker(2)
    assert all(p.leader_id != 2 for p in t.partitions)
    assert [p.leader_epoch for p in t.partitions] == [
        e + (1 if p.index == 1 else 0) for p, e in zip(t.partitions, epochs, strict=True)
    ]
    async with await RawClient.connect(cluster.broker(1).address) as c:
        resp = await c.request(MetadataRequest(topics=None), 12)
        assert sorted(b.node_id for b in resp.brokers) == [1, 3]  # type: ignore[attr-defined]
    with pytest.raises(OSError):
        await RawClient.connect(cluster.broker(2).address, within=2)
    await cluster.start_broker(2)
    async with await RawClient.connect(cluster.broker(2).address) as c:
        resp = await c.request(MetadataRequest(topics=None), 12)
        assert sorted(b.node_id for b in resp.brokers) == [1, 2, 3]  # type: ignore[attr-defined]
    leader, epoch = cluster.move_leader("t", 0, 2)
    assert (leader, epoch) == (2, t.partitions[0].leader_epoch)


async def test_api_versions_rejects_bad_software_names(kafka_cluster: EmbeddedCluster) -> None:
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        for name, ver, ok in [
            ("librdkafka", "2.1", True),
            ("a.b-c", "1", True),
            ("under_score", "1", False),
            ("-x", "1", False),
            ("", "1.0", False),
            ("x", "1.0!", False),
        ]:
            resp = await c.request(
                ApiVersionsRequest(client_software_name=name, client_software_version=ver), 3
            )
            assert isinstance(resp, ApiVersionsResponse)
            assert (resp.error_code == 0) is ok, name
