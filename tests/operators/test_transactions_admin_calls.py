"""The transactions admin calls (KIP-664) against the pass's broker (embedded, or the
session's Apache Kafka with ``--kafka=apache``), on asyncio and trio: list filters,
describe, describe_producers, abort_transaction's errors, fence_producers."""

from __future__ import annotations

import time
import uuid

import anyio
import pytest

from aiokafka_lite import Producer, TopicPartition
from aiokafka_lite.admin import AbortTransactionSpec, Admin, NewTopic, TransactionState
from aiokafka_lite.core.errors import (
    ConfigError,
    InvalidProducerEpochError,
    ProducerFencedError,
    TransactionalIdNotFoundError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from aiokafka_lite.wire.messages import ListTransactionsRequest

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def _open_transaction(bootstrap: str, topic: str, tid: str) -> Producer:
    p = Producer(bootstrap, transactional_id=tid, transaction_timeout_ms=120_000)
    await p.start()
    await p.begin_transaction()
    for v in (b"a", b"b", b"c"):
        await p.send(topic, v, partition=0)
    return p


async def test_list_describe_and_describe_producers_of_an_open_transaction(
    anyio_backend: str, kafka_bootstrap: str
) -> None:
    async with Admin(kafka_bootstrap) as admin:
        await _open_transaction_scenario(admin, kafka_bootstrap)


async def _open_transaction_scenario(admin: Admin, kafka_bootstrap: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic, tid = f"txadm-{suffix}", f"txadm-tx-{suffix}"
    (await admin.create_topics([NewTopic(topic, 2, 1)])).raise_errors()
    tp = TopicPartition(topic, 0)
    before_ms = int(time.time() * 1000)
    producer = await _open_transaction(kafka_bootstrap, topic, tid)
    try:
        listed = await admin.list_transactions(states=["Ongoing"])
        assert not listed.errors
        (mine,) = [t for t in listed.transactions if t.transactional_id == tid]
        assert mine.state is TransactionState.ONGOING and mine.coordinator_id >= 0
        pid = mine.producer_id
        # The filters: by producer id, by state (Java's names too), by duration, by pattern.
        only = await admin.list_transactions(producer_ids=[pid])
        assert [t.transactional_id for t in only.transactions] == [tid]
        assert tid not in {
            t.transactional_id
            for t in (await admin.list_transactions(states=["COMPLETE_COMMIT"])).transactions
        }
        long_ago = await admin.list_transactions(producer_ids=[pid], duration_filter_ms=3_600_000)
        assert long_ago.transactions == []
        running = await admin.list_transactions(producer_ids=[pid], duration_filter_ms=0)
        assert [t.transactional_id for t in running.transactions] == [tid]
        by_pattern = await admin.list_transactions(transactional_id_pattern=f"txadm-tx-{suffix[:4]}.*")
        # Kafka 4.1+ (ListTransactions v2) and the embedded broker; 4.0 answers a little differently.
        newer = await admin.requests.negotiated_at_least(
            ListTransactionsRequest.API_KEY, 2, admin.requests.deadline(30_000)
        )
        if newer:
            assert [t.transactional_id for t in by_pattern.transactions] == [tid]
        else:  # Kafka 4.0: ListTransactions v1, no pattern filter; each broker says why
            assert by_pattern.transactions == [] and by_pattern.errors
            assert all(isinstance(e, UnsupportedVersionError) for e in by_pattern.errors.values())
            assert "KIP-1152" in str(next(iter(by_pattern.errors.values())))
        assert mine in listed.by_broker()[mine.coordinator_id]

        described = await admin.describe_transactions([tid, f"nope-{suffix}"])
        d = described[tid]
        assert d.error is None and d.state is TransactionState.ONGOING
        assert (d.producer_id, d.transaction_timeout_ms) == (pid, 120_000)
        assert d.topic_partitions == frozenset({tp})
        assert d.transaction_start_time_ms is not None and d.transaction_start_time_ms >= before_ms - 1000
        assert isinstance(described[f"nope-{suffix}"].error, TransactionalIdNotFoundError)

        states = await admin.describe_producers(
            [tp, TopicPartition(topic, 1), TopicPartition(f"missing-{suffix}", 0)]
        )
        (p0,) = states[tp].producers
        assert (p0.producer_id, p0.producer_epoch) == (pid, d.producer_epoch)
        assert p0.current_transaction_start_offset == 0 and p0.last_sequence == 2
        assert p0.coordinator_epoch is None  # no marker written for it yet
        assert p0.last_timestamp >= before_ms - 1000
        assert states[TopicPartition(topic, 1)].producers == ()
        assert isinstance(states[TopicPartition(f"missing-{suffix}", 0)].error, UnknownTopicOrPartitionError)

        # Fencing bumps the epoch and aborts the open transaction: the producer is fenced.
        fenced = (await admin.fence_producers([tid])).raise_errors()[tid]
        assert fenced.producer_id == pid and fenced.producer_epoch > p0.producer_epoch
        with pytest.raises(ProducerFencedError):
            await producer.commit_transaction()
        # Kafka writes the fencing abort's markers after answering: wait for the partition.
        with anyio.fail_after(30):
            while await _open_transaction_start(admin, tp) is not None:  # noqa: ASYNC110 - polls the broker
                await anyio.sleep(0.05)
        # The fenced epoch can no longer write a marker there (a stale producer epoch).
        with pytest.raises(InvalidProducerEpochError):
            await admin.abort_transaction(AbortTransactionSpec(tp, pid, p0.producer_epoch, 0))
        after = (await admin.describe_transactions([tid]))[tid]
        assert after.state is TransactionState.EMPTY and after.producer_epoch == fenced.producer_epoch
        assert after.topic_partitions == frozenset()
        # No transaction, no start time; Kafka 4.0 still reports the aborted one's.
        expected_start = None if newer else d.transaction_start_time_ms
        assert after.transaction_start_time_ms == expected_start
    finally:
        await producer.close()


async def _open_transaction_start(admin: Admin, tp: TopicPartition) -> int | None:
    (p,) = (await admin.describe_producers([tp]))[tp].producers
    return p.current_transaction_start_offset


async def test_bad_arguments_are_refused_before_sending(anyio_backend: str, kafka_bootstrap: str) -> None:
    async with Admin(kafka_bootstrap) as admin:
        await _bad_arguments(admin)


async def _bad_arguments(admin: Admin) -> None:
    with pytest.raises(ConfigError, match="unknown transaction state 'Sleeping'"):
        await admin.list_transactions(states=["Sleeping"])
    with pytest.raises(ConfigError, match="duration_filter_ms"):
        await admin.list_transactions(duration_filter_ms=-5)
    with pytest.raises(ConfigError, match="transactional id"):
        await admin.describe_transactions([""])
    with pytest.raises(ConfigError, match="producer_epoch"):
        await admin.abort_transaction(AbortTransactionSpec(TopicPartition("t", 0), 1, -1, 0))


async def test_an_abort_on_a_missing_topic_fails_with_its_error(
    anyio_backend: str, kafka_bootstrap: str
) -> None:
    async with Admin(kafka_bootstrap) as admin:
        with pytest.raises(UnknownTopicOrPartitionError):
            await admin.abort_transaction(
                AbortTransactionSpec(TopicPartition(f"missing-{uuid.uuid4().hex[:8]}", 0), 1, 0, 0),
                timeout_ms=10_000,
            )
