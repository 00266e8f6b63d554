"""Fetch sessions (KIP-227), read_committed, DeleteRecords and OffsetForLeaderEpoch."""

from __future__ import annotations

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.errors import (
    FencedLeaderEpochError,
    FetchSessionIdNotFoundError,
    InvalidFetchSessionEpochError,
    OffsetOutOfRangeError,
)
from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    FetchRequest,
    FetchResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    ProduceRequest,
    ProduceResponse,
)
from aiokafka_lite.wire.records import decode_batches, encode_batch


def batch(values: list[bytes], *, pid: int = -1, epoch: int = -1, seq: int = -1, txn: bool = False) -> bytes:
    return encode_batch(
        [(1000 + i, None, v, []) for i, v in enumerate(values)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
    )


async def produce(c: RawClient, topic: str, partition: int, records: bytes, txn_id: str | None = None) -> int:
    resp = await c.request(
        ProduceRequest(
            transactional_id=txn_id,
            acks=-1,
            timeout_ms=1000,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name=topic,
                    partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)],
                )
            ],
        ),
        9,
    )
    assert isinstance(resp, ProduceResponse)
    pr = resp.responses[0].partition_responses[0]
    assert pr.error_code == 0, pr
    return pr.base_offset


def session_fetch(
    sid: int, epoch: int, parts: dict[int, int], *, forget: list[int] | None = None, isolation: int = 0
) -> FetchRequest:
    return FetchRequest(
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=10_000_000,
        isolation_level=isolation,
        session_id=sid,
        session_epoch=epoch,
        topics=[
            FetchRequest.FetchTopic(
                topic="t",
                partitions=[
                    FetchRequest.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1_000_000)
                    for p, o in parts.items()
                ],
            )
        ]
        if parts
        else [],
        forgotten_topics_data=[FetchRequest.ForgottenTopic(topic="t", partitions=forget)] if forget else [],
    )


async def do_fetch(c: RawClient, req: FetchRequest, v: int = 12) -> FetchResponse:
    resp = await c.request(req, v)
    assert isinstance(resp, FetchResponse)
    return resp


def by_partition(resp: FetchResponse) -> dict[int, FetchResponse.PartitionData]:
    return {p.partition_index: p for t in resp.responses for p in t.partitions}


async def test_incremental_fetch_session(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 3)
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        await produce(c, "t", 0, batch([b"a"]))
        full = await do_fetch(c, session_fetch(0, 0, {0: 0, 1: 0, 2: 0}))
        sid = full.session_id
        assert full.error_code == 0 and sid != 0
        assert set(by_partition(full)) == {0, 1, 2}
        # Nothing new: an incremental fetch answers with no partitions.
        inc = await do_fetch(c, session_fetch(sid, 1, {0: 1}))
        assert inc.session_id == sid and by_partition(inc) == {}
        # New data on partition 2 (not named in the request): only it comes back.
        await produce(c, "t", 2, batch([b"b", b"c"]))
        inc = await do_fetch(c, session_fetch(sid, 2, {}))
        parts = by_partition(inc)
        assert set(parts) == {2}
        assert parts[2].high_watermark == 2
        assert [r.value for b in decode_batches(parts[2].records) for r in b.records()] == [b"b", b"c"]
        # Wrong epoch, unknown session.
        bad = await do_fetch(c, session_fetch(sid, 9, {}))
        assert bad.error_code == InvalidFetchSessionEpochError.code
        gone = await do_fetch(c, session_fetch(sid + 1 if sid < 2**31 - 1 else 1, 1, {}))
        assert gone.error_code == FetchSessionIdNotFoundError.code
        # The session survives a wrong-epoch request; forget partition 1 and produce to it.
        inc = await do_fetch(c, session_fetch(sid, 3, {2: 2}, forget=[1]))
        assert inc.error_code == 0 and by_partition(inc) == {}
        await produce(c, "t", 1, batch([b"d"]))
        inc = await do_fetch(c, session_fetch(sid, 4, {}))
        assert by_partition(inc) == {}
        # Closing the session (epoch -1) gives a sessionless full fetch.
        closed = await do_fetch(c, session_fetch(sid, -1, {1: 0}))
        assert closed.session_id == 0 and set(by_partition(closed)) == {1}
        assert (await do_fetch(c, session_fetch(sid, 5, {}))).error_code == FetchSessionIdNotFoundError.code


async def test_fetch_session_eviction(kafka_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    from aiokafka_lite.broker import BrokerConfig

    cluster = await kafka_cluster_factory(config=BrokerConfig(fetch_session_cache_slots=2))
    cluster.create_topic("t", 1)
    async with await RawClient.connect(cluster.bootstrap) as c:
        s1 = (await do_fetch(c, session_fetch(0, 0, {0: 0}))).session_id
        s2 = (await do_fetch(c, session_fetch(0, 0, {0: 0}))).session_id
        assert (await do_fetch(c, session_fetch(s1, 1, {}))).error_code == 0  # s1 is now most recent
        s3 = (await do_fetch(c, session_fetch(0, 0, {0: 0}))).session_id
        assert 0 not in (s1, s2, s3)
        assert (await do_fetch(c, session_fetch(s2, 1, {}))).error_code == FetchSessionIdNotFoundError.code
        assert (await do_fetch(c, session_fetch(s1, 2, {}))).error_code == 0
        assert cluster.state.extensions["fetch_sessions"][1].evictions == 1
    # Sessions younger than the minimum eviction age are kept: the newcomer gets none.
    strict = await kafka_cluster_factory(
        config=BrokerConfig(fetch_session_cache_slots=1, fetch_session_min_evict_ms=60_000)
    )
    strict.create_topic("t", 1)
    async with await RawClient.connect(strict.bootstrap) as c:
        assert (await do_fetch(c, session_fetch(0, 0, {0: 0}))).session_id != 0
        assert (await do_fetch(c, session_fetch(0, 0, {0: 0}))).session_id == 0


async def test_request_recorder_sees_incremental_fetches(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    with kafka_cluster.record_requests(FetchRequest) as rec:
        async with await RawClient.connect(kafka_cluster.bootstrap) as c:
            sid = (await do_fetch(c, session_fetch(0, 0, {0: 0}))).session_id
            await do_fetch(c, session_fetch(sid, 1, {}))
    assert [(r.request.session_id, r.request.session_epoch) for r in rec.requests] == [(0, 0), (sid, 1)]  # type: ignore[attr-defined]
    assert all(r.api_key == 1 and r.broker_id == 1 for r in rec.requests)


async def test_read_committed_and_aborted_transactions(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 1)
    plog = kafka_cluster.topic("t").partitions[0].log
    async with await RawClient.connect(kafka_cluster.bootstrap) as c:
        # Two transactional producers with the partition in their transactions, as Kafka
        # requires before it appends transactional batches.
        pids = {}
        for tid in ("ta", "tb"):
            init = await c.request(
                InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000), 4
            )
            assert isinstance(init, InitProducerIdResponse) and init.error_code == 0
            pids[tid] = init.producer_id
            added = await c.request(
                AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=tid,
                    v3_and_below_producer_id=init.producer_id,
                    v3_and_below_producer_epoch=init.producer_epoch,
                    v3_and_below_topics=[
                        AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="t", partitions=[0])
                    ],
                ),
                3,
            )
            assert isinstance(added, AddPartitionsToTxnResponse)
            assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        pid_a, pid_b = pids["ta"], pids["tb"]
        await produce(c, "t", 0, batch([b"plain"]))  # offset 0
        await produce(c, "t", 0, batch([b"a1", b"a2"], pid=pid_a, epoch=0, seq=0, txn=True), "ta")  # 1-2
        await produce(c, "t", 0, batch([b"b1"], pid=pid_b, epoch=0, seq=0, txn=True), "tb")  # 3
        assert plog.last_stable_offset == 1 and plog.high_watermark == 4
        rc = by_partition(await do_fetch(c, session_fetch(0, -1, {0: 0}, isolation=1)))[0]
        assert rc.last_stable_offset == 1
        assert [r.value for b in decode_batches(rc.records) for r in b.records()] == [b"plain"]
        ru = by_partition(await do_fetch(c, session_fetch(0, -1, {0: 0}, isolation=0)))[0]
        assert ru.aborted_transactions is None
        assert len(decode_batches(ru.records)) == 3
        # Abort A (marker at 4), commit B (marker at 5).
        assert plog.write_control_batch(pid_a, 0, False, 3) == 4
        assert plog.last_stable_offset == 3  # B still open
        assert plog.write_control_batch(pid_b, 0, True, 3) == 5
        assert plog.last_stable_offset == plog.high_watermark == 6
        rc = by_partition(await do_fetch(c, session_fetch(0, -1, {0: 0}, isolation=1)))[0]
        assert [(a.producer_id, a.first_offset) for a in rc.aborted_transactions] == [(pid_a, 1)]
        batches = decode_batches(rc.records)
        assert [b.is_control for b in batches] == [False, False, False, True, True]
        # A fetch starting after the aborted range gets no aborted entries.
        rc = by_partition(await do_fetch(c, session_fetch(0, -1, {0: 5}, isolation=1)))[0]
        assert rc.aborted_transactions == []
        resp = await c.request(
            ListOffsetsRequest(
                replica_id=-1,
                isolation_level=1,
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        name="t",
                        partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)],
                    )
                ],
            ),
            5,
        )
        assert isinstance(resp, ListOffsetsResponse)
        assert resp.topics[0].partitions[0].offset == 6


async def test_delete_records_and_leader_epochs(kafka_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    cluster = await kafka_cluster_factory(brokers=2)
    cluster.create_topic("t", 1, replication_factor=2)
    async with await RawClient.connect(cluster.bootstrap) as c:
        for i in range(3):
            await produce(c, "t", 0, batch([b"x%d" % i, b"y"]))  # 0-1, 2-3, 4-5
        resp = await c.request(
            DeleteRecordsRequest(
                timeout_ms=1000,
                topics=[
                    DeleteRecordsRequest.DeleteRecordsTopic(
                        name="t",
                        partitions=[DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=3)],
                    )
                ],
            ),
            2,
        )
        assert isinstance(resp, DeleteRecordsResponse)
        p = resp.topics[0].partitions[0]
        assert (p.error_code, p.low_watermark) == (0, 3)
        part = by_partition(await do_fetch(c, session_fetch(0, -1, {0: 2})))[0]
        # As Kafka: the error carries no offsets (the client asks ListOffsets for them).
        assert part.error_code == OffsetOutOfRangeError.code
        assert (part.high_watermark, part.last_stable_offset, part.log_start_offset) == (-1, -1, -1)
        part = by_partition(await do_fetch(c, session_fetch(0, -1, {0: 3})))[0]
        assert part.error_code == 0 and decode_batches(part.records)[0].base_offset == 2
        resp = await c.request(
            DeleteRecordsRequest(
                timeout_ms=1000,
                topics=[
                    DeleteRecordsRequest.DeleteRecordsTopic(
                        name="t",
                        partitions=[
                            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=99)
                        ],
                    )
                ],
            ),
            2,
        )
        assert resp.topics[0].partitions[0].error_code == OffsetOutOfRangeError.code  # type: ignore[attr-defined]
    # Leadership moves bump the epoch; OffsetForLeaderEpoch reports where each epoch ended.
    leader, epoch = cluster.move_leader("t", 0)
    async with await RawClient.connect(cluster.broker(leader).address) as c:
        await produce(c, "t", 0, batch([b"z"]))  # offset 6 in the new epoch

        async def ofle(leader_epoch: int, current: int = -1) -> tuple[int, int, int]:
            resp = await c.request(
                OffsetForLeaderEpochRequest(
                    topics=[
                        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                            topic="t",
                            partitions=[
                                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                                    partition=0, current_leader_epoch=current, leader_epoch=leader_epoch
                                )
                            ],
                        )
                    ]
                ),
                4,
            )
            assert isinstance(resp, OffsetForLeaderEpochResponse)
            r = resp.topics[0].partitions[0]
            return r.error_code, r.leader_epoch, r.end_offset

        assert await ofle(0) == (0, 0, 6)
        assert await ofle(epoch) == (0, epoch, 7)
        assert (await ofle(epoch, current=epoch - 1))[0] == FencedLeaderEpochError.code
