"""TransactionManager's two transaction protocols without a broker (pure): how the
finalized ``transaction.version`` chooses V1 or V2, what each sends before a partition's
batches may go, offsets, and the producer id/epoch taken from EndTxn v5."""

from __future__ import annotations

import pytest

from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce.batch import ProducerBatch
from aiokafka_lite.produce.transaction import TransactionManager, TransactionProtocol, TxnState
from aiokafka_lite.wire.records import BatchBuilder

S = TxnState
P = TransactionProtocol
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
TV2 = {"transaction.version": 2, "group.version": 1}
TV1 = {"transaction.version": 1}


def new_batch(tp: TopicPartition = TP0, records: int = 1) -> ProducerBatch:
    builder = BatchBuilder(max_batch_size=1 << 20, is_transactional=True)
    for i in range(records):
        builder.append(0, None, b"v%d" % i, ())
    batch = ProducerBatch(tp, builder, 1 << 20, 0, 0.0)
    batch.is_transactional = True
    batch.record_count = records
    return batch


def ready(features: dict[str, int] | None, pid: int = 7, epoch: int = 0) -> TransactionManager:
    m = TransactionManager("tx", 1000)
    m.begin_init()
    m.init_done(pid, epoch, finalized_features=features)
    return m


@pytest.mark.parametrize(
    ("features", "protocol"),
    [
        (TV2, P.V2),
        ({"transaction.version": 3}, P.V2),  # a later level still includes V2
        (TV1, P.V1),
        ({"transaction.version": 0}, P.V1),
        ({}, P.V1),  # an older broker reports no such feature
        ({"group.version": 1}, P.V1),
    ],
)
def test_protocol_from_the_finalized_level(features: dict[str, int], protocol: TransactionProtocol) -> None:
    assert TransactionProtocol.from_features(features) is protocol
    assert ready(features).protocol is protocol


def test_protocol_is_rechecked_at_begin_and_fixed_inside_a_transaction() -> None:
    m = ready(TV2)
    m.begin(TV1)  # the cluster was set back to level 1 meanwhile
    assert m.protocol is P.V1
    m.begin_commit()
    m.end_done()
    m.begin(TV2)
    assert m.protocol is P.V2
    # Nothing but begin chooses: a level change mid-transaction does not apply.
    with pytest.raises(E.IllegalStateError):
        m.begin(TV1)
    assert m.protocol is P.V2 and m.state is S.IN_TRANSACTION


def test_begin_without_features_keeps_the_protocol() -> None:
    m = ready(TV2)
    m.begin()
    assert m.protocol is P.V2


def test_v1_partition_waits_for_add_partitions() -> None:
    m = ready(TV1)
    added: list[int] = []
    m.on_new_partitions = lambda: added.append(1)
    m.begin()
    m.on_batch_created(new_batch(TP0))
    assert added == [1] and m.has_new_partitions
    assert not m.is_send_allowed(TP0) and not m.needs_end_txn
    tps = m.take_new_partitions()
    m.partitions_added(tps)
    assert m.is_send_allowed(TP0) and m.needs_end_txn


def test_v2_partition_is_sendable_at_once() -> None:
    m = ready(TV2)
    m.on_new_partitions = lambda: pytest.fail("V2 sends no AddPartitionsToTxn")
    m.begin()
    assert not m.needs_end_txn  # nothing written: no transaction on the coordinator yet
    m.on_batch_created(new_batch(TP0))
    m.on_batch_created(new_batch(TP1))
    assert not m.has_new_partitions
    assert m.is_send_allowed(TP0) and m.is_send_allowed(TP1)
    assert m.partitions == {TP0, TP1}
    assert m.needs_end_txn  # Produce v12 will start the transaction


def test_v2_sends_nothing_before_begin_or_after_commit_started() -> None:
    m = ready(TV2)
    m.begin()
    m.on_batch_created(new_batch(TP0))
    m.fail_abortable(E.TopicAuthorizationFailedError("no"))
    assert not m.is_send_allowed(TP0)  # aborting: unsent batches are failed, not sent


@pytest.mark.parametrize(("features", "needs"), [(TV1, True), (TV2, False)])
def test_add_offsets_only_in_v1(features: dict[str, int], needs: bool) -> None:
    m = ready(features)
    m.begin()
    assert m.needs_add_offsets("g") is needs


def test_v2_offsets_start_the_transaction() -> None:
    m = ready(TV2)
    m.begin()
    m.offsets_sending("g")
    assert m.needs_end_txn and not m.started  # outcome unknown: the abort must end it
    m.offsets_committed("g")
    assert m.started


@pytest.mark.parametrize(("features", "end_txn", "offset_commit"), [(TV1, 4, 4), (TV2, 5, 5)])
def test_request_versions(features: dict[str, int], end_txn: int, offset_commit: int) -> None:
    m = ready(features)
    m.begin()
    assert (m.end_txn_max_version, m.txn_offset_commit_max_version) == (end_txn, offset_commit)


def test_v2_end_txn_takes_the_bumped_epoch_and_restarts_sequences() -> None:
    m = ready(TV2, pid=7, epoch=3)
    m.begin()
    b = new_batch(TP0, 3)
    m.on_batch_created(b)
    m.assign_sequence(b)
    m.on_success(b, 0)
    assert m.next_sequence(TP0) == 3
    m.begin_commit()
    m.end_txn_succeeded(7, 4)
    m.end_done()
    assert tuple(m.producer) == (7, 4) and m.end_txn_bumps == 1 and m.committed == 1
    assert m.next_sequence(TP0) == 0
    m.begin()
    nxt = new_batch(TP0)
    m.on_batch_created(nxt)
    m.assign_sequence(nxt)
    assert (nxt.producer_id, nxt.producer_epoch, nxt.base_sequence) == (7, 4, 0)


def test_v2_epoch_overflow_takes_the_new_producer_id() -> None:
    m = ready(TV2, pid=7, epoch=32766)
    m.begin()
    m.on_batch_created(new_batch(TP0))
    m.begin_abort()
    m.end_txn_succeeded(8, 0)  # the coordinator ran out of epochs: a new id at epoch 0
    m.end_done()
    assert tuple(m.producer) == (8, 0) and m.aborted == 1


def test_v2_end_txn_without_an_epoch_is_refused() -> None:
    m = ready(TV2)
    m.begin()
    m.begin_commit()
    with pytest.raises(E.IllegalStateError, match="without a producer id"):
        m.end_txn_succeeded(-1, -1)


def test_v1_end_txn_keeps_the_epoch() -> None:
    m = ready(TV1, pid=7, epoch=3)
    m.begin()
    m.begin_commit()
    m.end_txn_succeeded(-1, -1)  # EndTxn up to v4 carries no producer id
    m.end_done()
    assert tuple(m.producer) == (7, 3) and m.end_txn_bumps == 0


def test_v2_broken_sequence_is_bumped_by_the_abort() -> None:
    m = ready(TV2, pid=7, epoch=3)
    m.begin()
    m.on_batch_created(new_batch(TP0))
    m.request_epoch_bump(TP0)
    assert m.state is S.ABORTABLE_ERROR and m.bump_required
    assert not m.maybe_bump_epoch()  # never bumped locally
    m.begin_abort()
    m.end_txn_succeeded(7, 4)
    m.end_done()
    assert not m.bump_required and tuple(m.producer) == (7, 4)
