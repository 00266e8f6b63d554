"""Transactions V2 (KIP-890 part 2) end to end, on the embedded cluster or on Apache
Kafka (``--kafka=apache``; both finalize ``transaction.version=2`` by default): which
requests the producer writes (the client's request hooks), the epoch bumped by every
EndTxn, offsets committed without AddOffsetsToTxn, what read_committed consumers see;
and, on the embedded broker, the abort after a broken sequence and a level change
between transactions."""

from __future__ import annotations

import pytest
from _support.reading import read_topic
from txn_testlib import stable_group_offsets, values

from aiokafka_lite import Producer, TopicPartition
from aiokafka_lite.admin import Admin
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.core import errors as E
from aiokafka_lite.produce.transaction import TxnState

T = "txn-v2"
GROUP = "txn-v2-group"
PRODUCE, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT, INIT_PRODUCER_ID = 0, 24, 25, 26, 28, 22


class Requests:
    """(API key, version) of every request the client wrote."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int]] = []

    def on_request_written(
        self, node_id: int, api_key: int, api_version: int, bytes_written: int, error: BaseException | None
    ) -> None:
        if error is None:
            self.sent.append((api_key, api_version))

    def versions(self, api_key: int) -> list[int]:
        return [v for k, v in self.sent if k == api_key]


def txn_producer(cluster: EmbeddedCluster, tid: str, **options: object) -> Producer:
    return Producer(cluster.bootstrap, transactional_id=tid, **{"linger_ms": 1, **options})  # type: ignore[arg-type]


async def test_v2_requests_epochs_and_visibility(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic(T, 3)
    kafka_cluster.create_topic("v2-src", 1)
    src = TopicPartition("v2-src", 0)
    reqs = Requests()
    async with txn_producer(kafka_cluster, "v2-flow") as p, Admin(kafka_cluster.bootstrap) as admin:
        epoch0 = p.metrics()["producer_epoch"]
        p.client.add_hooks(reqs)
        async with p.transaction():  # records on three new partitions at once, and offsets
            for part in range(3):
                await p.enqueue(T, b"c1-%d" % part, partition=part)
            await p.send_offsets_to_transaction({src: 5}, GROUP)
        assert p.metrics()["producer_epoch"] == epoch0 + 1
        await p.begin_transaction()
        await p.send_batch(T, [b"a-%d" % i for i in range(4)], partition=1)
        await p.send_offsets_to_transaction({src: 50}, GROUP)
        await p.abort_transaction()
        assert p.metrics()["producer_epoch"] == epoch0 + 2
        async with p.transaction():  # offsets alone make a transaction too
            await p.send_offsets_to_transaction({src: 9}, GROUP)
        assert p.metrics()["producer_epoch"] == epoch0 + 3
        async with p.transaction():  # the new epoch writes from sequence 0 again
            await p.send(T, b"c2", partition=1)
        assert p.metrics()["producer_epoch"] == epoch0 + 4
        assert p.transaction_state is TxnState.READY
        assert await stable_group_offsets(admin, GROUP, present={src}) == {src: 9}

    assert ADD_PARTITIONS not in {k for k, _ in reqs.sent}
    assert ADD_OFFSETS not in {k for k, _ in reqs.sent}
    assert INIT_PRODUCER_ID not in {k for k, _ in reqs.sent}  # the bumps came from EndTxn
    assert set(reqs.versions(END_TXN)) == {5} and len(reqs.versions(END_TXN)) == 4
    assert set(reqs.versions(TXN_OFFSET_COMMIT)) == {5}
    assert min(reqs.versions(PRODUCE)) >= 12
    committed = await read_topic(kafka_cluster.bootstrap, T, 3, "read_committed")
    assert values(committed) == sorted([b"c1-0", b"c1-1", b"c1-2", b"c2"])
    uncommitted = await read_topic(kafka_cluster.bootstrap, T, 3, "read_uncommitted")
    assert values(uncommitted) == sorted([b"c1-0", b"c1-1", b"c1-2", b"c2"] + [b"a-%d" % i for i in range(4)])


async def test_v2_zombie_after_a_new_instance_is_fenced(kafka_cluster: EmbeddedCluster) -> None:
    """A second instance takes over the transactional id while the first has a
    transaction open: the first's next write or commit fails as fenced (fatal), the
    second's transactions carry on with bumped epochs, and none of the first's open
    records become visible."""
    kafka_cluster.create_topic(T, 1)
    async with txn_producer(kafka_cluster, "v2-zombie") as old:
        await old.begin_transaction()
        await old.send(T, b"zombie-open", partition=0)
        async with txn_producer(kafka_cluster, "v2-zombie") as new:
            # A late write of the fenced epoch is refused by the partition leader.
            with pytest.raises(E.InvalidProducerEpochError):
                await old.send(T, b"zombie-late", partition=0)
            assert old.transaction_state is TxnState.FATAL_ERROR
            epoch = new.metrics()["producer_epoch"]
            async with new.transaction():
                await new.send(T, b"new", partition=0)
            assert new.metrics()["producer_epoch"] == epoch + 1
    assert values(await read_topic(kafka_cluster.bootstrap, T, 1, "read_committed")) == [b"new"]


@pytest.mark.kafka_embedded  # inject_error, record_requests
async def test_v2_sequence_error_abort_bumps_through_end_txn(kafka_cluster: EmbeddedCluster) -> None:
    from aiokafka_lite.wire.messages import EndTxnRequest, InitProducerIdRequest, ProduceRequest
    from aiokafka_lite.wire.records import decode_batches

    kafka_cluster.create_topic(T, 1)
    async with txn_producer(kafka_cluster, "v2-seq", retry_backoff_ms=10) as p:
        async with p.transaction():
            await p.send(T, b"first")
        epoch = p.metrics()["producer_epoch"]
        await p.begin_transaction()
        kafka_cluster.inject_error(ProduceRequest, E.OutOfOrderSequenceNumberError.code)
        with pytest.raises(E.OutOfOrderSequenceNumberError):
            await p.send(T, b"broken")
        assert p.transaction_state is TxnState.ABORTABLE_ERROR
        with kafka_cluster.record_requests(InitProducerIdRequest, EndTxnRequest) as rec:
            await p.abort_transaction()
        assert [type(o.request).__name__ for o in rec.requests] == ["EndTxnRequest"]
        assert p.metrics()["producer_epoch"] == epoch + 1
        with kafka_cluster.record_requests(ProduceRequest) as rec:
            async with p.transaction():
                await p.send(T, b"second")
        (req,) = [o.request for o in rec.requests]
        assert isinstance(req, ProduceRequest)
        (batch,) = decode_batches(req.topic_data[0].partition_data[0].records or b"")
        assert (batch.producer_epoch, batch.base_sequence) == (epoch + 1, 0)
    assert values(await read_topic(kafka_cluster.bootstrap, T, 1, "read_committed")) == [b"first", b"second"]


@pytest.mark.kafka_embedded  # set_feature
async def test_v1_at_transaction_version_1(kafka_cluster: EmbeddedCluster) -> None:
    """A cluster at transaction.version=1 (kafka-features.sh downgrade, or an older
    Kafka): the producer speaks V1 as before: AddPartitionsToTxn and AddOffsetsToTxn,
    EndTxn and TxnOffsetCommit up to v4, one epoch for every transaction."""
    kafka_cluster.set_feature("transaction.version", 1)
    kafka_cluster.create_topic(T, 2)
    kafka_cluster.create_topic("v1-src", 1)
    src = TopicPartition("v1-src", 0)
    reqs = Requests()
    async with txn_producer(kafka_cluster, "v1-flow") as p, Admin(kafka_cluster.bootstrap) as admin:
        epoch = p.metrics()["producer_epoch"]
        p.client.add_hooks(reqs)
        async with p.transaction():
            await p.send_batch(T, [b"c1"], partition=0)
            await p.send_batch(T, [b"c2"], partition=1)
            await p.send_offsets_to_transaction({src: 3}, GROUP)
        await p.begin_transaction()
        await p.send(T, b"aborted", partition=0)
        await p.abort_transaction()
        assert p.metrics()["producer_epoch"] == epoch
        assert await stable_group_offsets(admin, GROUP, present={src}) == {src: 3}
    keys = {k for k, _ in reqs.sent}
    assert ADD_PARTITIONS in keys and ADD_OFFSETS in keys
    assert max(reqs.versions(END_TXN)) <= 4 and max(reqs.versions(TXN_OFFSET_COMMIT)) <= 4
    assert values(await read_topic(kafka_cluster.bootstrap, T, 2, "read_committed")) == [b"c1", b"c2"]
