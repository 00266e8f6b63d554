"""The transactional producer, on the embedded cluster or on Apache Kafka (--kafka=apache):
visibility at both isolation levels, fencing, offsets in transactions, abortable and fatal
errors, coordinator moves and failures, timeouts and the request flow."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _support.reading import read_topic
from txn_testlib import crash_broker, short_session_ms, stable_group_offsets, txn_cluster, values

from aiokafka_lite import Consumer, Producer, TopicPartition
from aiokafka_lite.admin import Admin
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.core import errors as E
from aiokafka_lite.net import CoordinatorType
from aiokafka_lite.produce.transaction import TxnState
from aiokafka_lite.wire.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
)
from aiokafka_lite.wire.records import decode_batches

T = "txn"


def txn_producer(cluster: EmbeddedCluster, tid: str = "tx-1", **options: Any) -> Producer:
    return Producer(cluster.bootstrap, transactional_id=tid, **{"linger_ms": 1, **options})


def txn_state(cluster: EmbeddedCluster, tid: str) -> Any:
    return cluster.state.services["transactions"].txns[tid]  # type: ignore[attr-defined]


async def test_read_committed_never_sees_aborted_records(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic(T, 3)
    async with txn_producer(kafka_cluster) as p:
        assert p.transaction_state is TxnState.READY
        async with p.transaction():
            await p.send_batch(T, [b"c1-%d" % i for i in range(30)])
        await p.begin_transaction()
        await p.send_batch(T, [b"a-%d" % i for i in range(20)])
        await p.abort_transaction()
        async with p.transaction():
            for i in range(10):
                await p.enqueue(T, b"c2-%d" % i, key=b"k%d" % i)
        # An open transaction: its records are above the last stable offset.
        await p.begin_transaction()
        await p.send_batch(T, [b"open-%d" % i for i in range(5)])

        committed = [b"c1-%d" % i for i in range(30)] + [b"c2-%d" % i for i in range(10)]
        aborted = [b"a-%d" % i for i in range(20)]
        still_open = [b"open-%d" % i for i in range(5)]
        rc = await read_topic(kafka_cluster.bootstrap, T, 3, "read_committed")
        ru = await read_topic(kafka_cluster.bootstrap, T, 3, "read_uncommitted")
        assert values(rc) == sorted(committed)
        assert values(ru) == sorted(committed + aborted + still_open)
        # Same records at the same offsets; control markers take offsets but never surface.
        where = {r.value: (r.partition, r.offset) for r in ru}
        assert all(where[r.value] == (r.partition, r.offset) for r in rc)
        hw = sum(kafka_cluster.high_watermark(T, part) for part in range(3))
        assert hw > len(ru)
        assert all(r.value is not None for r in ru)

        await p.commit_transaction()
        rc = await read_topic(kafka_cluster.bootstrap, T, 3, "read_committed")
        assert values(rc) == sorted(committed + still_open)
        # Transactions V2 (the embedded broker finalizes transaction.version=2, as Kafka 4.x):
        # EndTxn bumps the epoch once per transaction end, commit or abort (4 ends above).
        assert p.metrics()["producer_epoch"] == 4


async def test_calls_in_the_wrong_state(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic(T, 1)
    async with txn_producer(kafka_cluster) as p:
        with pytest.raises(E.IllegalStateError, match="READY"):
            await p.send(T, b"outside")
        with pytest.raises(E.IllegalStateError, match="READY"):
            await p.enqueue_batch(T, [b"x"])
        with pytest.raises(E.IllegalStateError, match="commit the transaction in transaction state READY"):
            await p.commit_transaction()
        with pytest.raises(E.IllegalStateError, match="abort the transaction in transaction state READY"):
            await p.abort_transaction()
        with pytest.raises(E.IllegalStateError, match="READY"):
            await p.send_offsets_to_transaction({TopicPartition(T, 0): 1}, "g")
        await p.begin_transaction()
        with pytest.raises(E.IllegalStateError, match="IN_TRANSACTION"):
            await p.begin_transaction()
        await p.send(T, b"inside")
        await p.commit_transaction()
        with pytest.raises(E.IllegalStateError, match="READY"):
            await p.send(T, b"after")
    async with Producer(kafka_cluster.bootstrap) as plain:
        with pytest.raises(E.IllegalStateError, match="transactional_id"):
            await plain.begin_transaction()
    with pytest.raises(E.ConfigError, match="acks"):
        Producer(kafka_cluster.bootstrap, transactional_id="tx", acks=1)
    assert values(await read_topic(kafka_cluster.bootstrap, T, 1, "read_committed")) == [b"inside"]


async def test_second_producer_fences_the_first(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: Any
) -> None:
    cluster = await txn_cluster(request, brokers=3)
    cluster.create_topic(T, 3)
    zombie = txn_producer(cluster, "tx-fence")
    await zombie.start()
    try:
        await zombie.begin_transaction()
        await zombie.send_batch(T, [b"zombie-%d" % i for i in range(20)])
        async with txn_producer(cluster, "tx-fence") as fresh:  # fences and aborts the zombie's txn
            assert fresh.metrics()["producer_epoch"] > zombie.metrics()["producer_epoch"]
            async with fresh.transaction():
                await fresh.send_batch(T, [b"fresh-%d" % i for i in range(20)])
            with pytest.raises(E.ProducerFencedError):
                await zombie.commit_transaction()
            assert zombie.transaction_state is TxnState.FATAL_ERROR
            # Unusable from now on, with the same error.
            with pytest.raises(E.ProducerFencedError):
                await zombie.send(T, b"more")
            with pytest.raises(E.ProducerFencedError):
                await zombie.abort_transaction()
            with pytest.raises(E.ProducerFencedError):
                await zombie.begin_transaction()
            # The fresh producer goes on.
            async with fresh.transaction():
                await fresh.send(T, b"fresh-last")
    finally:
        await zombie.close()
    rc = await read_topic(cluster.bootstrap, T, 3, "read_committed")
    assert values(rc) == sorted([b"fresh-%d" % i for i in range(20)] + [b"fresh-last"])
    assert len(await read_topic(cluster.bootstrap, T, 3, "read_uncommitted")) == 41


async def test_fenced_producer_fails_its_records(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic(T, 1)
    async with txn_producer(kafka_cluster, "tx-z") as zombie:
        await zombie.begin_transaction()
        await zombie.send(T, b"before")
        async with txn_producer(kafka_cluster, "tx-z"):
            # The zombie's next write carries a stale epoch: fatal.
            with pytest.raises((E.InvalidProducerEpochError, E.ProducerFencedError)):
                await zombie.send(T, b"after-fence")
            assert zombie.transaction_state is TxnState.FATAL_ERROR
            with pytest.raises((E.InvalidProducerEpochError, E.ProducerFencedError)):
                await zombie.enqueue(T, b"refused")
    assert await read_topic(kafka_cluster.bootstrap, T, 1, "read_committed") == []


async def test_offsets_commit_with_the_transaction(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic(T, 1)
    kafka_cluster.create_topic("src", 2)
    tp0, tp1 = TopicPartition("src", 0), TopicPartition("src", 1)
    async with txn_producer(kafka_cluster) as p, Admin(kafka_cluster.bootstrap) as admin:
        async with p.transaction():
            await p.send(T, b"one")
            await p.send_offsets_to_transaction({tp0: 5, tp1: 7}, "offsets-group")
        assert await stable_group_offsets(admin, "offsets-group", present={tp0, tp1}) == {tp0: 5, tp1: 7}

        await p.begin_transaction()
        await p.send_offsets_to_transaction({tp0: 50}, "offsets-group")
        await p.abort_transaction()
        assert (await stable_group_offsets(admin, "offsets-group"))[tp0] == 5

        # Offsets alone (no records) make a transaction too.
        async with p.transaction():
            await p.send_offsets_to_transaction({tp1: 9}, "offsets-group")
        assert (await stable_group_offsets(admin, "offsets-group"))[tp1] == 9
    # A consumer of the group starts from them.
    async with Consumer(kafka_cluster.bootstrap, group_id="offsets-group", enable_auto_commit=False) as c:
        assert await c.committed(tp0) == 5 and await c.committed(tp1) == 9


async def test_stale_group_generation_is_abortable(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: Any
) -> None:
    cluster = await txn_cluster(request)
    cluster.create_topic(T, 1)
    cluster.create_topic("src", 1)
    consumer = Consumer(
        cluster.bootstrap,
        topics="src",
        group_id="kip447",
        enable_auto_commit=False,
        session_timeout_ms=short_session_ms(cluster),
        heartbeat_interval_ms=100,
    )
    async with consumer, txn_producer(cluster) as p:
        async with asyncio.timeout(20):
            while not consumer.assignment():
                await consumer.getmany(timeout_ms=100)
        meta = consumer.group_metadata()
        assert meta.generation_id >= 1 and meta.member_id
        async with p.transaction():
            await p.send(T, b"ok")
            await p.send_offsets_to_transaction({TopicPartition("src", 0): 3}, meta)
        stale = type(meta)(meta.group_id, meta.generation_id - 1, meta.member_id, meta.group_instance_id)
        await p.begin_transaction()
        await p.send(T, b"zombie-output")
        with pytest.raises(E.CommitFailedError, match="generation"):
            await p.send_offsets_to_transaction({TopicPartition("src", 0): 10}, stale)
        assert p.transaction_state is TxnState.ABORTABLE_ERROR
        with pytest.raises(E.TransactionAbortableError):
            await p.commit_transaction()
        await p.abort_transaction()
        async with p.transaction():  # usable again
            await p.send(T, b"after")
        assert await consumer.committed(TopicPartition("src", 0)) == 3
    assert values(await read_topic(cluster.bootstrap, T, 1, "read_committed")) == [b"after", b"ok"]


@pytest.mark.kafka_embedded  # inject_error
async def test_abortable_add_partitions_error(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.set_feature("transaction.version", 1)  # the v1 protocol is what this test checks
    kafka_cluster.create_topic(T, 1)
    async with txn_producer(kafka_cluster) as p:
        await p.begin_transaction()
        kafka_cluster.inject_error(AddPartitionsToTxnRequest, E.TopicAuthorizationFailedError.code)
        with pytest.raises(E.TopicAuthorizationFailedError):
            await p.send(T, b"denied")
        assert p.transaction_state is TxnState.ABORTABLE_ERROR
        with pytest.raises(E.TransactionAbortableError, match="abort_transaction"):
            await p.send(T, b"refused")
        with pytest.raises(E.TransactionAbortableError) as info:
            await p.commit_transaction()
        assert isinstance(info.value.__cause__, E.TopicAuthorizationFailedError)
        await p.abort_transaction()
        assert p.transaction_state is TxnState.READY
        async with p.transaction():
            await p.send(T, b"allowed")
    assert values(await read_topic(kafka_cluster.bootstrap, T, 1, "read_committed")) == [b"allowed"]


@pytest.mark.kafka_embedded  # inject_error, record_requests
async def test_sequence_error_aborts_and_bumps_the_epoch(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.set_feature("transaction.version", 1)  # the v1 protocol is what this test checks
    kafka_cluster.create_topic(T, 1)
    async with txn_producer(kafka_cluster, retry_backoff_ms=10) as p:
        async with p.transaction():
            await p.send(T, b"first")
        await p.begin_transaction()
        kafka_cluster.inject_error(ProduceRequest, E.OutOfOrderSequenceNumberError.code)
        with pytest.raises(E.OutOfOrderSequenceNumberError):
            await p.send(T, b"broken")
        assert p.transaction_state is TxnState.ABORTABLE_ERROR
        with kafka_cluster.record_requests(InitProducerIdRequest) as rec:
            await p.abort_transaction()
        (bump,) = [o.request for o in rec.requests]
        assert isinstance(bump, InitProducerIdRequest)
        assert (bump.producer_id, bump.producer_epoch) == (p.metrics()["producer_id"], 0)
        assert p.metrics()["producer_epoch"] == 1 and p.metrics()["epoch_bumps"] == 1
        with kafka_cluster.record_requests(ProduceRequest) as rec:
            async with p.transaction():
                await p.send(T, b"second")
        (req,) = [o.request for o in rec.requests]
        assert isinstance(req, ProduceRequest)
        (batch,) = decode_batches(req.topic_data[0].partition_data[0].records or b"")
        assert (batch.producer_epoch, batch.base_sequence) == (1, 0)  # sequences restart
    assert values(await read_topic(kafka_cluster.bootstrap, T, 1, "read_committed")) == [b"first", b"second"]


@pytest.mark.kafka_embedded  # observe, record_requests
async def test_request_flow(kafka_cluster: EmbeddedCluster) -> None:
    """One AddPartitionsToTxn for partitions created together, before any of their
    data; transactional batches with the producer id; EndTxn at the end."""
    kafka_cluster.set_feature("transaction.version", 1)  # Transactions V1: AddPartitionsToTxn
    kafka_cluster.create_topic(T, 4)
    order: list[str] = []
    kafka_cluster.observe(lambda obs: order.append(type(obs.request).__name__))
    async with txn_producer(kafka_cluster, linger_ms=20) as p:
        order.clear()
        with kafka_cluster.record_requests(AddPartitionsToTxnRequest, ProduceRequest, EndTxnRequest) as rec:
            async with p.transaction():
                for part in range(4):
                    await p.enqueue(T, b"v%d" % part, partition=part)
        pid = p.metrics()["producer_id"]
    adds = [o.request for o in rec.requests if isinstance(o.request, AddPartitionsToTxnRequest)]
    assert len(adds) == 1
    assert adds[0].v3_and_below_transactional_id == "tx-1"
    assert sorted(adds[0].v3_and_below_topics[0].partitions) == [0, 1, 2, 3]
    produces = [o.request for o in rec.requests if isinstance(o.request, ProduceRequest)]
    assert produces and all(r.transactional_id == "tx-1" for r in produces)
    for req in produces:
        for td in req.topic_data:
            for pd in td.partition_data:
                for batch in decode_batches(pd.records or b""):
                    assert batch.is_transactional and batch.producer_id == pid
    names = [n for n in order if n in {"AddPartitionsToTxnRequest", "ProduceRequest", "EndTxnRequest"}]
    assert names[0] == "AddPartitionsToTxnRequest" and names[-1] == "EndTxnRequest"
    ends = [o.request for o in rec.requests if isinstance(o.request, EndTxnRequest)]
    assert [e.committed for e in ends] == [True]


@pytest.mark.kafka_embedded  # record_requests
async def test_empty_transaction_needs_no_coordinator_round_trip(kafka_cluster: EmbeddedCluster) -> None:
    async with txn_producer(kafka_cluster) as p:
        with kafka_cluster.record_requests(EndTxnRequest, AddOffsetsToTxnRequest) as rec:
            async with p.transaction():
                pass
            await p.begin_transaction()
            await p.abort_transaction()
        assert rec.requests == []


async def test_commit_flushes_lingering_records(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic(T, 2)
    async with txn_producer(kafka_cluster, linger_ms=60000) as p:
        await p.begin_transaction()
        futures = [await p.enqueue(T, b"lingering-%d" % i) for i in range(50)]
        assert not any(f.done() for f in futures)
        await p.commit_transaction()
        assert all(f.done() and f.exception() is None for f in futures)
    assert len(await read_topic(kafka_cluster.bootstrap, T, 2, "read_committed")) == 50


async def test_abort_fails_unsent_records(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic(T, 1)
    async with txn_producer(kafka_cluster, linger_ms=60000) as p:
        await p.begin_transaction()
        fut = await p.enqueue(T, b"never-sent")
        await p.abort_transaction()
        with pytest.raises(E.TransactionAbortedError):
            await fut
    assert await read_topic(kafka_cluster.bootstrap, T, 1, "read_uncommitted") == []


@pytest.mark.kafka_embedded  # move_transaction_coordinator, inject_error; on Kafka: the killed test
async def test_coordinator_moves_and_concurrent_transactions_are_retried(kafka_cluster_factory: Any) -> None:
    cluster: EmbeddedCluster = await kafka_cluster_factory(brokers=3)
    cluster.create_topic(T, 3)
    async with txn_producer(cluster, "tx-move") as p:
        await p.begin_transaction()
        await p.send_batch(T, [b"a%d" % i for i in range(10)])
        current = cluster.state.services["transactions"].placement.coordinator_id("tx-move", 1)  # type: ignore[attr-defined]
        cluster.move_transaction_coordinator("tx-move", current % 3 + 1)
        cluster.inject_error(EndTxnRequest, E.ConcurrentTransactionsError.code, count=2)
        await p.commit_transaction()
        async with p.transaction():
            await p.send(T, b"b")
    assert len(await read_topic(cluster.bootstrap, T, 3, "read_committed")) == 11
    assert str(txn_state(cluster, "tx-move").state) == "CompleteCommit"


@pytest.mark.kafka_embedded  # add_latency
async def test_commit_timeout_goes_on_and_can_be_awaited_again(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic(T, 1)
    async with txn_producer(kafka_cluster) as p:
        await p.begin_transaction()
        await p.send(T, b"slow")
        kafka_cluster.add_latency(EndTxnRequest, 0.5, count=1)
        with pytest.raises(E.KafkaTimeoutError, match="call it again"):
            await p.commit_transaction(timeout_ms=100)
        assert p.transaction_state is TxnState.COMMITTING
        with pytest.raises(E.IllegalStateError, match="in progress"):
            await p.abort_transaction()
        await p.commit_transaction()
        assert p.transaction_state is TxnState.READY
    assert values(await read_topic(kafka_cluster.bootstrap, T, 1, "read_committed")) == [b"slow"]


async def transaction_ended(admin: Admin, tp: TopicPartition) -> bool:
    """Whether no transaction is open on ``tp``: its last stable offset has caught up with
    its high watermark (a commit or abort marker ended the last one)."""
    lso = (await admin.list_offsets({tp: "latest"}, isolation_level="read_committed"))[tp].offset
    hw = (await admin.list_offsets({tp: "latest"}))[tp].offset
    return lso == hw


async def wait_until(check: Any, what: str, limit_s: float = 30.0) -> None:
    try:
        async with asyncio.timeout(limit_s):
            while not await check():  # noqa: ASYNC110 - a remote condition, polled
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"not within {limit_s} s: {what}") from None


async def test_transaction_timeout_fences_the_producer(kafka_cluster: EmbeddedCluster) -> None:
    """The coordinator aborts a transaction open longer than transaction_timeout_ms (Kafka
    checks every 10 s, transaction.abort.timed.out.transaction.cleanup.interval.ms) and
    bumps the epoch: the producer learns it is fenced when it tries to commit."""
    kafka_cluster.create_topic(T, 1)
    tp = TopicPartition(T, 0)
    async with (
        txn_producer(kafka_cluster, "tx-slow", transaction_timeout_ms=1000) as p,
        Admin(kafka_cluster.bootstrap) as admin,
    ):
        await p.begin_transaction()
        await p.send(T, b"too-late")
        await wait_until(lambda: transaction_ended(admin, tp), "the coordinator aborted the transaction")
        # Transactions V1: EndTxn with the fenced epoch -> PRODUCER_FENCED. V2 (Kafka 4.x's
        # default): the commit's EndTxn v5 with the pre-abort epoch -> INVALID_TXN_STATE
        # (the coordinator's abort was the end of that transaction); fatal either way, as Java.
        with pytest.raises((E.ProducerFencedError, E.InvalidTxnStateError)):
            await p.commit_transaction()
        assert p.transaction_state is TxnState.FATAL_ERROR
    assert await read_topic(kafka_cluster.bootstrap, T, 1, "read_committed") == []
    assert [r.value for r in await read_topic(kafka_cluster.bootstrap, T, 1, "read_uncommitted")] == [
        b"too-late"
    ]


@pytest.mark.kafka_embedded  # record_requests, internal state; on Kafka: the test after it
async def test_close_aborts_an_open_transaction(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic(T, 1)
    p = txn_producer(kafka_cluster, "tx-close")
    await p.start()
    await p.begin_transaction()
    await p.send(T, b"dropped")
    with kafka_cluster.record_requests(EndTxnRequest) as rec:
        await p.close()
    assert [o.request.committed for o in rec.requests] == [False]  # type: ignore[attr-defined]
    assert str(txn_state(kafka_cluster, "tx-close").state) == "CompleteAbort"
    assert await read_topic(kafka_cluster.bootstrap, T, 1, "read_committed") == []


async def test_close_ends_an_open_transaction_with_an_abort(kafka_cluster: EmbeddedCluster) -> None:
    """What readers see of the test above: once the producer has closed, the transaction
    is over (an abort marker after the record) and its record is never visible."""
    kafka_cluster.create_topic(T, 1)
    tp = TopicPartition(T, 0)
    p = txn_producer(kafka_cluster, "tx-close-seen")
    await p.start()
    await p.begin_transaction()
    await p.send(T, b"dropped")
    async with Admin(kafka_cluster.bootstrap) as admin:
        assert not await transaction_ended(admin, tp)
        await p.close()
        await wait_until(lambda: transaction_ended(admin, tp), "the transaction ended", limit_s=10)
    assert kafka_cluster.high_watermark(T, 0) == 2  # the record and the marker
    assert await read_topic(kafka_cluster.bootstrap, T, 1, "read_committed") == []
    assert [r.value for r in await read_topic(kafka_cluster.bootstrap, T, 1, "read_uncommitted")] == [
        b"dropped"
    ]


async def test_abort_waits_for_offsets_whose_sender_was_cancelled(kafka_cluster: EmbeddedCluster) -> None:
    """A task stopped while it sends offsets (shutdown cancels it mid-commit): the request
    goes on without it. An abort, explicit or at close, waits for it and ends the
    transaction, instead of refusing and leaving it open (holding back read_committed
    readers) until Kafka's transaction timeout."""
    kafka_cluster.create_topic(T, 1)
    kafka_cluster.create_topic("src", 1)
    tp = TopicPartition(T, 0)

    async def cancelled_send_offsets(p: Producer) -> None:
        task = asyncio.get_running_loop().create_task(
            p.send_offsets_to_transaction({TopicPartition("src", 0): 3}, "cancelled-group")
        )
        await asyncio.sleep(0)  # the requests are on their way
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async with Admin(kafka_cluster.bootstrap) as admin:
        async with txn_producer(kafka_cluster, "tx-cancelled", transaction_timeout_ms=60000) as p:
            await p.begin_transaction()
            await p.send(T, b"aborted")
            await cancelled_send_offsets(p)
            await p.abort_transaction()
            assert p.transaction_state is TxnState.READY
            await wait_until(
                lambda: transaction_ended(admin, tp), "the aborted transaction ended", limit_s=10
            )

            await p.begin_transaction()
            await p.send(T, b"closed")
            await cancelled_send_offsets(p)
        # (closed: the producer aborted its open transaction)
        await wait_until(lambda: transaction_ended(admin, tp), "the closed transaction ended", limit_s=10)
        assert await stable_group_offsets(admin, "cancelled-group") == {}
    assert await read_topic(kafka_cluster.bootstrap, T, 1, "read_committed") == []
    ru = await read_topic(kafka_cluster.bootstrap, T, 1, "read_uncommitted")
    assert [r.value for r in ru] == [b"aborted", b"closed"]


async def test_transaction_coordinator_killed_mid_transaction(
    request: pytest.FixtureRequest, kafka_mode: str, kafka_cluster_factory: Any
) -> None:
    """The transaction coordinator's broker dies while a transaction is open: the commit
    finds the new coordinator (the transaction log is replicated) and completes; the next
    transaction works, and read_committed readers see both, once."""
    cluster = await txn_cluster(request, replicated=True)
    cluster.create_topic(T, 3)
    async with txn_producer(cluster, "tx-crash") as p:
        await p.begin_transaction()
        await p.send_batch(T, [b"a%d" % i for i in range(10)])
        coordinator = await p.client.find_coordinator("tx-crash", CoordinatorType.TRANSACTION)
        await crash_broker(cluster, coordinator)
        await p.commit_transaction()
        async with p.transaction():
            await p.send_batch(T, [b"b%d" % i for i in range(5)])
        assert p.transaction_state is TxnState.READY
    rc = await read_topic(cluster.bootstrap, T, 3, "read_committed")
    assert values(rc) == sorted([b"a%d" % i for i in range(10)] + [b"b%d" % i for i in range(5)])


@pytest.mark.kafka_embedded  # inject_error
async def test_start_fails_cleanly_when_init_is_fatal(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.inject_error(InitProducerIdRequest, E.TransactionalIdAuthorizationFailedError.code)
    p = txn_producer(kafka_cluster, "tx-denied")
    with pytest.raises(E.TransactionalIdAuthorizationFailedError):
        await p.start()
    assert p.closed
    with pytest.raises(E.ProducerClosedError):
        await p.start()


@pytest.mark.kafka_embedded  # record_requests
async def test_txn_offset_commit_carries_the_member(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("src", 1)
    meta_cls = __import__(
        "aiokafka_lite.consume.groups", fromlist=["ConsumerGroupMetadata"]
    ).ConsumerGroupMetadata
    meta = meta_cls("g447", 3, "member-1", "instance-1")
    async with txn_producer(kafka_cluster) as p:
        await p.begin_transaction()
        with kafka_cluster.record_requests(TxnOffsetCommitRequest) as rec:
            with pytest.raises(E.CommitFailedError):  # no such member in the (empty) group
                await p.send_offsets_to_transaction({TopicPartition("src", 0): 1}, meta)
        await p.abort_transaction()
    (req,) = [o.request for o in rec.requests]
    assert isinstance(req, TxnOffsetCommitRequest)
    assert (req.generation_id_or_member_epoch, req.member_id, req.group_instance_id) == (
        3,
        "member-1",
        "instance-1",
    )
    assert req.transactional_id == "tx-1"


@pytest.mark.kafka_embedded  # drop_connection
async def test_lost_responses_are_retried_safely(kafka_cluster: EmbeddedCluster) -> None:
    """AddPartitionsToTxn and EndTxn executed by the broker but their responses lost:
    the retries find the work done."""
    kafka_cluster.create_topic(T, 1)
    async with txn_producer(kafka_cluster, request_timeout_ms=2000) as p:
        await p.begin_transaction()
        kafka_cluster.drop_connection(AddPartitionsToTxnRequest, when="after")
        await p.send(T, b"one")
        kafka_cluster.drop_connection(EndTxnRequest, when="after")
        await p.commit_transaction()
        async with p.transaction():
            await p.send(T, b"two")
    assert values(await read_topic(kafka_cluster.bootstrap, T, 1, "read_committed")) == [b"one", b"two"]


@pytest.mark.kafka_embedded  # add_latency, record_requests
async def test_abort_while_partitions_are_being_added(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.set_feature("transaction.version", 1)  # the v1 protocol is what this test checks
    kafka_cluster.create_topic(T, 1)
    async with txn_producer(kafka_cluster, linger_ms=0) as p:
        await p.begin_transaction()
        kafka_cluster.add_latency(AddPartitionsToTxnRequest, 0.3, count=1)
        fut = await p.enqueue(T, b"racing")
        await asyncio.sleep(0.05)  # the AddPartitionsToTxn request is on its way
        with kafka_cluster.record_requests(EndTxnRequest) as rec:
            await p.abort_transaction()
        # Its outcome was unknown when the abort began, so the abort ended it for sure.
        assert [o.request.committed for o in rec.requests] == [False]  # type: ignore[attr-defined]
        with pytest.raises(E.TransactionAbortedError):
            await fut
        assert p.transaction_state is TxnState.READY
        async with p.transaction():
            await p.send(T, b"next")
    assert values(await read_topic(kafka_cluster.bootstrap, T, 1, "read_committed")) == [b"next"]
