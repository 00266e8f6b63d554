"""Transaction coordinator of the embedded broker, driven through its handlers.

Real ``PartitionLog``s receive transactional batches and the coordinator's markers, so
the tests check what consumers would see: last stable offset, aborted index, epoch
fencing of produce requests. Time is a ManualClock (transaction timeouts).
"""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.groups import GroupConfig, GroupCoordinator, ManualClock, register_group_handlers
from aiokafka_lite.broker.state import BrokerConfig, BrokerInfo, ClusterState
from aiokafka_lite.broker.transactions import (
    TransactionConfig,
    TransactionCoordinator,
    TxnState,
    register_txn_handlers,
)
from aiokafka_lite.core import errors
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
)
from aiokafka_lite.wire.records import RecordBatch, as_byte_view, encode_batch, read_batch

NONE = 0
E = errors


class Env:
    def __init__(self, brokers: int = 1, **txn_config: Any) -> None:
        self.cluster = ClusterState(BrokerConfig())
        for i in range(1, brokers + 1):
            self.cluster.brokers[i] = BrokerInfo(i, "127.0.0.1", 9000 + i, alive=True)
        self.cluster.create_topic("t", 2)
        self.clock = ManualClock()
        self.gc = GroupCoordinator(
            self.cluster, config=GroupConfig(min_session_timeout_ms=100), clock=self.clock
        )
        self.tc = TransactionCoordinator(
            self.cluster, config=TransactionConfig(**txn_config), clock=self.clock
        )
        self.cluster.services["groups"] = self.gc
        self.cluster.services["transactions"] = self.tc
        self.registry = HandlerRegistry()
        register_group_handlers(self.registry, self.cluster)
        register_txn_handlers(self.registry, self.cluster)

    def log(self, partition: int = 0) -> Any:
        p = self.cluster.get_partition("t", partition)
        assert p is not None
        return p.log

    async def call(self, req: Request, version: int, *, broker: int | None = None) -> Any:
        entry = self.registry.get(req.API_KEY)
        assert entry is not None and entry.min_version <= version <= entry.max_version
        req = type(req).decode(req.encode(version), version)
        if broker is None:
            tid = getattr(req, "transactional_id", None) or getattr(req, "v3_and_below_transactional_id", "")
            key_type = 0 if isinstance(req, TxnOffsetCommitRequest | OffsetFetchRequest) else 1
            key = req.group_id if key_type == 0 else tid
            broker = self.tc.placement.coordinator_id(key or "x", key_type)
        ctx = RequestContext(broker, self.cluster, req.API_KEY, version, 1, "cli", None, "c1", "127.0.0.1")
        resp = await entry.handler(ctx, req)
        assert isinstance(resp, Response)
        return type(resp).decode(resp.encode(version), version)

    async def init(
        self,
        tid: str | None = "tx",
        version: int = 5,
        txn_timeout: int = 10000,
        pid: int = -1,
        epoch: int = -1,
    ) -> Any:
        return await self.call(
            InitProducerIdRequest(
                transactional_id=tid,
                transaction_timeout_ms=txn_timeout,
                producer_id=pid,
                producer_epoch=epoch,
            ),
            version,
        )

    async def add(
        self, pid: int, epoch: int, partitions: list[int] | None = None, version: int = 3, tid: str = "tx"
    ) -> dict[int, int]:
        r = await self.call(
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=tid,
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[
                    AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="t", partitions=partitions or [0])
                ],
            ),
            version,
        )
        return {
            p.partition_index: p.partition_error_code
            for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }

    async def end(self, pid: int, epoch: int, commit: bool, version: int = 4, tid: str = "tx") -> int:
        r = await self.call(
            EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit),
            version,
        )
        return int(r.error_code)

    def produce(self, pid: int, epoch: int, seq: int, partition: int = 0, n: int = 2) -> int:
        data = encode_batch(
            [(1000, b"k", b"v%d" % i, []) for i in range(n)],
            is_transactional=True,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
        )
        batch = read_batch(as_byte_view(data))
        assert isinstance(batch, RecordBatch)
        return int(self.log(partition).append(batch).base_offset)


# -- InitProducerId ---------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 2, 3, 5])
async def test_init_producer_id_idempotent_gives_fresh_ids(version: int) -> None:
    env = Env()
    a = await env.init(None, version)
    b = await env.init(None, version)
    assert (a.error_code, b.error_code) == (NONE, NONE)
    assert a.producer_epoch == b.producer_epoch == 0
    assert a.producer_id != b.producer_id and a.producer_id >= 0


async def test_init_producer_id_transactional_bumps_epoch_same_id() -> None:
    env = Env()
    first = await env.init()
    second = await env.init()
    assert (first.producer_id, first.producer_epoch) == (second.producer_id, 0) and second.producer_epoch == 1
    other = await env.init("other")
    assert other.producer_id != first.producer_id


async def test_init_producer_id_validation() -> None:
    env = Env(max_timeout_ms=60000)
    assert (await env.init(txn_timeout=60001)).error_code == E.InvalidTransactionTimeoutError.code
    assert (await env.init(txn_timeout=0)).error_code == E.InvalidTransactionTimeoutError.code
    assert (
        await env.init("")
    ).error_code == E.InvalidRequestError.code  # null means idempotent, "" is invalid
    assert (await env.init(pid=5)).error_code == E.InvalidRequestError.code  # id without epoch


async def test_init_producer_id_not_coordinator() -> None:
    env = Env(brokers=3)
    right = env.tc.placement.coordinator_id("tx", 1)
    wrong = next(b for b in (1, 2, 3) if b != right)
    r = await env.call(
        InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=1000), 4, broker=wrong
    )
    assert r.error_code == E.NotCoordinatorError.code
    r = await env.call(
        InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000), 4, broker=wrong
    )
    assert r.error_code == NONE  # idempotent producers may ask any broker


async def test_kip360_resume_with_current_epoch() -> None:
    env = Env()
    r = await env.init()
    pid, epoch = r.producer_id, r.producer_epoch
    r2 = await env.init(pid=pid, epoch=epoch)
    assert (r2.error_code, r2.producer_id, r2.producer_epoch) == (NONE, pid, epoch + 1)
    r3 = await env.init(pid=pid, epoch=epoch)  # retry of that bump (response lost): same answer
    assert (r3.error_code, r3.producer_epoch) == (NONE, epoch + 1)
    r4 = await env.init(pid=pid, epoch=epoch + 7)
    assert r4.error_code == E.ProducerFencedError.code
    r5 = await env.init(pid=pid + 1000, epoch=0)
    assert r5.error_code == E.ProducerFencedError.code
    r6 = await env.init(pid=pid + 1000, epoch=0, version=3)
    assert r6.error_code == E.InvalidProducerEpochError.code  # pre-KIP-588 clients


async def test_epoch_exhaustion_rotates_producer_id() -> None:
    env = Env()
    r = await env.init()
    meta = env.tc.txns["tx"]
    meta.producer_epoch = 32766
    r2 = await env.init()
    assert r2.producer_id != r.producer_id and r2.producer_epoch == 0
    assert meta.last_producer_id == r.producer_id


# -- transactions end to end in the logs ----------------------------------------------------
async def test_commit_writes_markers_and_advances_lso() -> None:
    env = Env()
    r = await env.init()
    pid, epoch = r.producer_id, r.producer_epoch
    assert await env.add(pid, epoch, [0, 1]) == {0: NONE, 1: NONE}
    assert env.tc.txns["tx"].state is TxnState.ONGOING
    env.produce(pid, epoch, 0, partition=0)
    assert env.log(0).last_stable_offset == 0
    assert await env.end(pid, epoch, True) == NONE
    assert env.tc.txns["tx"].state is TxnState.COMPLETE_COMMIT
    assert env.log(0).log_end_offset == 3  # 2 records + marker
    assert env.log(0).last_stable_offset == 3
    assert env.log(1).log_end_offset == 1  # added but empty: marker only
    assert env.log(0).aborted == []
    # Retrying the commit is harmless, an abort now is not.
    assert await env.end(pid, epoch, True) == NONE
    assert await env.end(pid, epoch, False) == E.InvalidTxnStateError.code


async def test_abort_records_aborted_index() -> None:
    env = Env()
    r = await env.init()
    pid, epoch = r.producer_id, r.producer_epoch
    await env.add(pid, epoch)
    first = env.produce(pid, epoch, 0)
    assert await env.end(pid, epoch, False) == NONE
    aborted = env.log(0).aborted_in_range(0, 10)
    assert [(a.producer_id, a.first_offset) for a in aborted] == [(pid, first)]
    assert env.tc.txns["tx"].state is TxnState.COMPLETE_ABORT
    # A second transaction by the same producer starts fresh.
    assert await env.add(pid, epoch) == {0: NONE}
    assert env.tc.txns["tx"].partitions == {("t", 0)}


async def test_end_txn_state_errors() -> None:
    env = Env()
    r = await env.init()
    pid, epoch = r.producer_id, r.producer_epoch
    assert await env.end(pid, epoch, True) == E.InvalidTxnStateError.code  # Empty
    assert await env.end(pid + 1, epoch, True) == E.InvalidProducerIdMappingError.code
    assert await env.end(pid, epoch, True, tid="unknown") == E.InvalidProducerIdMappingError.code
    assert await env.end(pid, epoch - 1, True) == E.ProducerFencedError.code
    assert await env.end(pid, epoch - 1, True, version=1) == E.InvalidProducerEpochError.code
    assert await env.add(pid + 1, epoch) == {0: E.InvalidProducerIdMappingError.code}


async def test_new_producer_fences_old_one_and_aborts_its_transaction() -> None:
    env = Env()
    old = await env.init()
    pid, e0 = old.producer_id, old.producer_epoch
    await env.add(pid, e0)
    env.produce(pid, e0, 0)
    # A second instance with the same transactional id: the open transaction is aborted
    # with a bumped epoch, the caller is told to retry.
    r = await env.init()
    assert r.error_code == E.ConcurrentTransactionsError.code
    assert env.tc.txns["tx"].state is TxnState.COMPLETE_ABORT
    assert [a.producer_id for a in env.log(0).aborted] == [pid]
    assert env.log(0).last_stable_offset == env.log(0).log_end_offset
    new = await env.init()
    assert (new.error_code, new.producer_id, new.producer_epoch) == (NONE, pid, e0 + 2)
    # The zombie is fenced everywhere.
    assert await env.add(pid, e0) == {0: E.ProducerFencedError.code}
    assert await env.add(pid, e0, version=1) == {0: E.InvalidProducerEpochError.code}
    assert await env.end(pid, e0, True) == E.ProducerFencedError.code
    with pytest.raises(E.InvalidProducerEpochError):
        env.produce(pid, e0, 1)
    r = await env.call(
        AddOffsetsToTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=e0, group_id="g"), 3
    )
    assert r.error_code == E.ProducerFencedError.code
    # The new instance works.
    assert await env.add(pid, new.producer_epoch) == {0: NONE}
    env.produce(pid, new.producer_epoch, 0)
    assert await env.end(pid, new.producer_epoch, True) == NONE


async def test_transaction_timeout_aborts_and_fences() -> None:
    env = Env()
    r = await env.init(txn_timeout=1000)
    pid, epoch = r.producer_id, r.producer_epoch
    await env.add(pid, epoch)
    env.produce(pid, epoch, 0)
    env.clock.advance(999)
    assert env.tc.txns["tx"].state is TxnState.ONGOING
    env.clock.advance(2)
    meta = env.tc.txns["tx"]
    assert meta.state is TxnState.COMPLETE_ABORT and meta.producer_epoch == epoch + 1
    assert len(env.log(0).aborted) == 1
    assert await env.end(pid, epoch, True) == E.ProducerFencedError.code
    assert await env.add(pid, epoch) == {0: E.ProducerFencedError.code}
    # Committed in time: the timer does nothing later.
    r = await env.init(txn_timeout=1000)
    await env.add(r.producer_id, r.producer_epoch)
    assert await env.end(r.producer_id, r.producer_epoch, True) == NONE
    env.clock.advance(5000)
    assert env.tc.txns["tx"].state is TxnState.COMPLETE_COMMIT


async def test_concurrent_transactions_while_markers_pending() -> None:
    env = Env(marker_delay_ms=50)
    r = await env.init()
    pid, epoch = r.producer_id, r.producer_epoch
    await env.add(pid, epoch)
    env.produce(pid, epoch, 0)
    assert await env.end(pid, epoch, True) == NONE  # answered once PrepareCommit is recorded
    assert env.tc.txns["tx"].state is TxnState.PREPARE_COMMIT
    assert env.log(0).last_stable_offset == 0
    assert await env.add(pid, epoch) == {0: E.ConcurrentTransactionsError.code}
    assert await env.end(pid, epoch, True) == E.ConcurrentTransactionsError.code
    assert await env.end(pid, epoch, False) == E.InvalidTxnStateError.code
    assert (await env.init()).error_code == E.ConcurrentTransactionsError.code
    env.clock.advance(50)
    assert env.tc.txns["tx"].state is TxnState.COMPLETE_COMMIT
    assert env.log(0).last_stable_offset == env.log(0).log_end_offset
    assert await env.add(pid, epoch) == {0: NONE}


async def test_add_partitions_unknown_partition_and_batched_form() -> None:
    env = Env()
    r = await env.init()
    pid, epoch = r.producer_id, r.producer_epoch
    res = await env.call(
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="tx",
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="t", partitions=[0]),
                AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="missing", partitions=[0]),
            ],
        ),
        3,
    )
    got = {
        (t.name, p.partition_index): p.partition_error_code
        for t in res.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }
    assert got == {
        ("t", 0): E.OperationNotAttemptedError.code,
        ("missing", 0): E.UnknownTopicOrPartitionError.code,
    }
    assert env.tc.txns["tx"].state is TxnState.EMPTY
    # v4+: several transactions per request, and verify-only checks.
    txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    res = await env.call(
        AddPartitionsToTxnRequest(
            transactions=[
                txn(
                    transactional_id="tx",
                    producer_id=pid,
                    producer_epoch=epoch,
                    topics=[topic(name="t", partitions=[1])],
                )
            ]
        ),
        5,
    )
    assert res.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code == NONE
    res = await env.call(
        AddPartitionsToTxnRequest(
            transactions=[
                txn(
                    transactional_id="tx",
                    producer_id=pid,
                    producer_epoch=epoch,
                    verify_only=True,
                    topics=[topic(name="t", partitions=[0, 1])],
                )
            ]
        ),
        4,
    )
    codes = [
        p.partition_error_code for p in res.results_by_transaction[0].topic_results[0].results_by_partition
    ]
    # Kafka 4.4's verify answer for a partition outside the transaction (differential txn2/verify_only).
    assert codes == [E.TransactionAbortableError.code, NONE]


# -- offsets in transactions -----------------------------------------------------------------
def txn_commit(
    pid: int, epoch: int, offset: int, version: int = 3, gen: int = -1, member: str = ""
) -> TxnOffsetCommitRequest:
    return TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id="g",
        producer_id=pid,
        producer_epoch=epoch,
        generation_id_or_member_epoch=gen if version >= 3 else -1,
        member_id=member if version >= 3 else "",
        topics=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                name="t",
                partitions=[
                    TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                        partition_index=0, committed_offset=offset
                    )
                ],
            )
        ],
    )


async def fetch_offset(env: Env, require_stable: bool) -> tuple[int, int]:
    r = await env.call(
        OffsetFetchRequest(
            groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id="g",
                    topics=[OffsetFetchRequest.OffsetFetchRequestTopics(name="t", partition_indexes=[0])],
                )
            ],
            require_stable=require_stable,
        ),
        8,
    )
    p = r.groups[0].topics[0].partitions[0]
    return int(p.committed_offset), int(p.error_code)


@pytest.mark.parametrize("commit", [True, False])
async def test_txn_offset_commit_pending_until_end(commit: bool) -> None:
    env = Env()
    r = await env.init()
    pid, epoch = r.producer_id, r.producer_epoch
    res = await env.call(
        AddOffsetsToTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g"), 3
    )
    assert res.error_code == NONE
    res = await env.call(txn_commit(pid, epoch, 42), 3)
    assert res.topics[0].partitions[0].error_code == NONE
    assert await fetch_offset(env, require_stable=False) == (-1, NONE)
    assert await fetch_offset(env, require_stable=True) == (-1, E.UnstableOffsetCommitError.code)
    assert await env.end(pid, epoch, commit) == NONE
    expected = 42 if commit else -1
    assert await fetch_offset(env, require_stable=True) == (expected, NONE)


async def test_txn_offset_commit_checks() -> None:
    env = Env()
    r = await env.init()
    pid, epoch = r.producer_id, r.producer_epoch
    # Without AddOffsetsToTxn the group is not part of the transaction.
    res = await env.call(txn_commit(pid, epoch, 1), 3)
    assert res.topics[0].partitions[0].error_code == E.InvalidTxnStateError.code
    await env.call(
        AddOffsetsToTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g"), 3
    )
    res = await env.call(txn_commit(pid, epoch - 1, 1), 2)
    assert res.topics[0].partitions[0].error_code == E.InvalidProducerEpochError.code
    # KIP-447 member checks (v3+) against an active group: unknown member / generation.
    env.gc._get_or_create("g")
    res = await env.call(txn_commit(pid, epoch, 1, gen=3, member="nobody"), 3)
    assert res.topics[0].partitions[0].error_code == E.UnknownMemberIdError.code
    res = await env.call(txn_commit(pid, epoch, 1, gen=3), 3)
    assert res.topics[0].partitions[0].error_code == E.IllegalGenerationError.code
    res = await env.call(txn_commit(pid, epoch, 1, gen=0), 4)
    assert res.topics[0].partitions[0].error_code == NONE


# -- describe / list --------------------------------------------------------------------------
async def test_describe_and_list_transactions() -> None:
    env = Env()
    r = await env.init()
    await env.add(r.producer_id, r.producer_epoch, [0, 1])
    await env.init("idle")
    d = await env.call(DescribeTransactionsRequest(transactional_ids=["tx", "nope"]), 0)
    tx, nope = d.transaction_states
    assert (tx.error_code, tx.transaction_state, tx.producer_id) == (NONE, "Ongoing", r.producer_id)
    assert [(t.topic, sorted(t.partitions)) for t in tx.topics] == [("t", [0, 1])]
    assert tx.transaction_start_time_ms > 0 and tx.transaction_timeout_ms == 10000
    assert nope.error_code == E.TransactionalIdNotFoundError.code
    lst = await env.call(ListTransactionsRequest(), 0)
    assert sorted((s.transactional_id, s.transaction_state) for s in lst.transaction_states) == [
        ("idle", "Empty"),
        ("tx", "Ongoing"),
    ]
    lst = await env.call(ListTransactionsRequest(state_filters=["Ongoing", "Bogus"]), 1)
    assert [s.transactional_id for s in lst.transaction_states] == ["tx"]
    assert lst.unknown_state_filters == ["Bogus"]
    lst = await env.call(ListTransactionsRequest(transactional_id_pattern="id.*"), 2)
    assert [s.transactional_id for s in lst.transaction_states] == ["idle"]


async def test_stop_cancels_timers() -> None:
    env = Env()
    r = await env.init(txn_timeout=5000)
    await env.add(r.producer_id, r.producer_epoch)
    assert len(env.tc.timers) == 1
    await env.tc.stop()
    assert len(env.tc.timers) == 0 and env.clock.pending() == 0
