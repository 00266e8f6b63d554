"""TransactionManager without a broker: every state transition, the errors of calls in
the wrong state, error classification, the partition gate and the sequence rules."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce.batch import ProducerBatch
from aiokafka_lite.produce.producer_config import ProducerConfig
from aiokafka_lite.produce.transaction import (
    ErrorKind,
    TransactionContext,
    TransactionManager,
    TxnState,
    check_config,
    classify,
)
from aiokafka_lite.wire.records import BatchBuilder

S = TxnState
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)

# Written out independently of the implementation's table: (source, target) pairs that
# are legal, as in the Java client (FATAL_ERROR is reachable from anywhere).
LEGAL = {
    (S.UNINITIALIZED, S.INITIALIZING),
    (S.INITIALIZING, S.READY),
    (S.READY, S.IN_TRANSACTION),
    (S.IN_TRANSACTION, S.COMMITTING),
    (S.IN_TRANSACTION, S.ABORTING),
    (S.IN_TRANSACTION, S.ABORTABLE_ERROR),
    (S.COMMITTING, S.READY),
    (S.COMMITTING, S.ABORTABLE_ERROR),
    (S.ABORTING, S.READY),
    (S.ABORTABLE_ERROR, S.ABORTING),
    (S.ABORTABLE_ERROR, S.ABORTABLE_ERROR),
} | {(s, S.FATAL_ERROR) for s in S}


def manager_in(state: TxnState) -> TransactionManager:
    """A manager driven to ``state`` through the public operations."""
    m = TransactionManager("tx", 1000)
    if state is S.UNINITIALIZED:
        return m
    m.begin_init()
    if state is S.INITIALIZING:
        return m
    m.init_done(7, 0)
    if state is S.READY:
        return m
    if state is S.FATAL_ERROR:
        m.fail_fatal(E.ProducerFencedError("fenced"))
        return m
    m.begin()
    if state is S.IN_TRANSACTION:
        return m
    if state is S.COMMITTING:
        m.begin_commit()
    elif state is S.ABORTING:
        m.begin_abort()
    elif state is S.ABORTABLE_ERROR:
        m.fail_abortable(E.TopicAuthorizationFailedError("no"))
    assert m.state is state
    return m


def new_batch(tp: TopicPartition = TP0, records: int = 1) -> ProducerBatch:
    builder = BatchBuilder(max_batch_size=1 << 20, is_transactional=True)
    for i in range(records):
        builder.append(0, None, b"v%d" % i, ())
    batch = ProducerBatch(tp, builder, 1 << 20, 0, 0.0)
    batch.is_transactional = True
    batch.record_count = records
    return batch


@pytest.mark.parametrize(("source", "target"), list(itertools.product(S, S)))
def test_every_transition_is_checked(source: TxnState, target: TxnState) -> None:
    m = manager_in(source)
    if (source, target) in LEGAL:
        m._transition(target, E.KafkaError("x"))
        assert m.state is target
    else:
        with pytest.raises(E.IllegalStateError, match=f"{source} -> {target}"):
            m._transition(target)
        assert m.state is source


def test_happy_path_and_counters() -> None:
    changes: list[TxnState] = []
    m = TransactionManager("tx")
    m.on_change = lambda: changes.append(m.state)
    m.begin_init()
    m.init_done(5, 3)
    assert m.producer == (5, 3) and m.state is S.READY
    m.begin()
    m.begin_commit()
    m.end_done()
    m.begin()
    m.begin_abort()
    m.end_done()
    assert (m.committed, m.aborted) == (1, 1)
    assert changes == [
        S.INITIALIZING,
        S.READY,
        S.IN_TRANSACTION,
        S.COMMITTING,
        S.READY,
        S.IN_TRANSACTION,
        S.ABORTING,
        S.READY,
    ]


# (operation, states where it is allowed)
OPERATIONS: list[tuple[str, set[TxnState]]] = [
    ("begin", {S.READY}),
    ("begin_commit", {S.IN_TRANSACTION}),
    ("begin_abort", {S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    ("check_send_offsets", {S.IN_TRANSACTION}),
    ("begin_init", {S.UNINITIALIZED}),
]


@pytest.mark.parametrize(("op", "allowed"), OPERATIONS)
@pytest.mark.parametrize("state", list(S))
def test_operations_in_the_wrong_state(op: str, allowed: set[TxnState], state: TxnState) -> None:
    m = manager_in(state)
    if state in allowed:
        getattr(m, op)()
        return
    if state is S.FATAL_ERROR:
        with pytest.raises(E.ProducerFencedError, match="fenced"):
            getattr(m, op)()
    elif state is S.ABORTABLE_ERROR:
        with pytest.raises(E.TransactionAbortableError, match="abort_transaction") as info:
            getattr(m, op)()
        assert isinstance(info.value.__cause__, E.TopicAuthorizationFailedError)
    else:
        with pytest.raises(E.IllegalStateError, match=str(state)):
            getattr(m, op)()
    assert m.state is state


def test_fatal_error_is_raised_again_as_a_fresh_copy() -> None:
    m = manager_in(S.FATAL_ERROR)
    with pytest.raises(E.ProducerFencedError) as first:
        m.begin()
    with pytest.raises(E.ProducerFencedError) as second:
        m.begin()
    assert first.value is not second.value and first.value is not m.last_error
    assert str(second.value) == str(m.last_error)
    assert m.fatal_error is m.last_error  # what the sender fails batches with


def test_refusal_of_records_names_the_state() -> None:
    m = manager_in(S.READY)
    assert not m.accepts_records
    err = m.refusal()
    assert isinstance(err, E.IllegalStateError) and "READY" in str(err) and "begin_transaction" in str(err)
    m.begin()
    assert m.accepts_records
    m.fail_abortable(E.KafkaTimeoutError("late"))
    assert isinstance(m.refusal(), E.TransactionAbortableError)
    m.fail_fatal(E.TransactionalIdAuthorizationFailedError("denied"))
    assert isinstance(m.refusal(), E.TransactionalIdAuthorizationFailedError)


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (E.ProducerFencedError(), ErrorKind.FATAL),
        (E.InvalidProducerEpochError(), ErrorKind.FATAL),
        (E.TransactionalIdAuthorizationFailedError(), ErrorKind.FATAL),
        (E.ClusterAuthorizationFailedError(), ErrorKind.FATAL),
        (E.InvalidTxnStateError(), ErrorKind.FATAL),
        (E.UnsupportedVersionError(), ErrorKind.FATAL),
        (E.TransactionCoordinatorFencedError(), ErrorKind.FATAL),
        (E.NotCoordinatorError(), ErrorKind.RETRIABLE),
        (E.CoordinatorLoadInProgressError(), ErrorKind.RETRIABLE),
        (E.ConcurrentTransactionsError(), ErrorKind.RETRIABLE),
        (E.KafkaConnectionError("down"), ErrorKind.RETRIABLE),
        (E.KafkaTimeoutError("slow"), ErrorKind.RETRIABLE),
        (E.TopicAuthorizationFailedError(), ErrorKind.ABORTABLE),
        (E.GroupAuthorizationFailedError(), ErrorKind.ABORTABLE),
        (E.CommitFailedError("rebalanced"), ErrorKind.ABORTABLE),
        (E.InvalidProducerIdMappingError(), ErrorKind.ABORTABLE),
        (E.MessageSizeTooLargeError(), ErrorKind.ABORTABLE),
        (E.TransactionAbortedError("aborted"), ErrorKind.ABORTABLE),
    ],
)
def test_classify(exc: BaseException, kind: ErrorKind) -> None:
    assert classify(exc) is kind


def test_handle_error_applies_the_classification() -> None:
    m = manager_in(S.IN_TRANSACTION)
    err = E.GroupAuthorizationFailedError("no")
    assert m.handle_error(err) is err
    assert m.state is S.ABORTABLE_ERROR and m.last_error is err
    m.handle_error(E.TopicAuthorizationFailedError("later"))
    assert m.last_error is err  # the first error is the one reported
    m.handle_error(E.ProducerFencedError("fenced"))
    assert m.state is S.FATAL_ERROR


def test_batch_failures() -> None:
    m = manager_in(S.COMMITTING)
    ok = new_batch()
    m.on_batch_failed(ok)  # no error recorded: ignored
    assert m.state is S.COMMITTING
    failed = new_batch()
    failed.fail(E.KafkaTimeoutError("expired"))
    m.on_batch_failed(failed)
    assert m.state is S.ABORTABLE_ERROR and isinstance(m.abort_error, E.KafkaTimeoutError)
    # While aborting, our own aborted batches are expected; a fencing error is still fatal.
    m.begin_abort()
    aborted = new_batch()
    aborted.fail(E.TransactionAbortedError("aborted"))
    m.on_batch_failed(aborted)
    assert m.state is S.ABORTING
    fenced = new_batch()
    fenced.fail(E.InvalidProducerEpochError("old epoch"))
    m.on_batch_failed(fenced)
    assert m.state is S.FATAL_ERROR and isinstance(m.fatal_error, E.InvalidProducerEpochError)


def test_partition_gate() -> None:
    m = manager_in(S.IN_TRANSACTION)
    calls: list[int] = []
    m.on_new_partitions = lambda: calls.append(1)
    m.on_batch_created(new_batch(TP0))
    m.on_batch_created(new_batch(TP0))  # same partition: registered once
    m.on_batch_created(new_batch(TP1))
    assert calls == [1, 1]
    assert not m.is_send_allowed(TP0)
    taken = m.take_new_partitions()
    assert taken == {TP0, TP1} and not m.has_new_partitions
    m.on_batch_created(new_batch(TP0))  # pending: not registered again
    assert calls == [1, 1]
    m.partitions_retry({TP1})  # retriable failure: goes into the next request
    m.partitions_added({TP0})
    assert m.is_send_allowed(TP0) and not m.is_send_allowed(TP1)
    assert m.take_new_partitions() == {TP1}
    assert m.started and not m.maybe_started
    m.partitions_uncertain({TP1})  # interrupted request: the coordinator may have it
    assert m.maybe_started and m.needs_end_txn
    assert m.partitions == {TP0}
    m.begin_commit()
    assert m.is_send_allowed(TP0)  # commit flushes what is left
    m.end_done()
    assert not m.is_send_allowed(TP0) and not m.needs_end_txn and m.partitions == frozenset()


def test_no_sending_while_aborting_or_abortable() -> None:
    m = manager_in(S.IN_TRANSACTION)
    m.on_batch_created(new_batch(TP0))
    m.partitions_added(m.take_new_partitions())
    assert m.is_send_allowed(TP0) and m.abort_error is None
    m.fail_abortable(E.TopicAuthorizationFailedError("no"))
    assert not m.is_send_allowed(TP0)
    assert isinstance(m.abort_error, E.TopicAuthorizationFailedError)
    m.begin_abort()
    assert not m.is_send_allowed(TP0)
    assert isinstance(m.abort_error, E.TransactionAbortedError)
    assert m.should_stop_drain(new_batch(TP0))


def test_offsets_start_the_transaction() -> None:
    m = manager_in(S.IN_TRANSACTION)
    assert not m.needs_end_txn and m.needs_add_offsets("g")
    m.offsets_added("g")
    assert m.needs_end_txn and not m.needs_add_offsets("g") and m.needs_add_offsets("h")
    m.begin_abort()
    m.end_done()
    assert m.needs_add_offsets("g")


def test_sequence_trouble_makes_the_transaction_abortable_and_bumps_after_the_abort() -> None:
    m = manager_in(S.IN_TRANSACTION)
    m.on_batch_created(new_batch(TP0))
    m.partitions_added(m.take_new_partitions())
    first, second = new_batch(TP0, 2), new_batch(TP0, 3)
    m.assign_sequence(first)
    m.on_success(first, 0)
    m.assign_sequence(second)
    assert (second.producer_id, second.producer_epoch, second.base_sequence) == (7, 0, 2)
    # OUT_OF_ORDER_SEQUENCE_NUMBER that is not explained by an earlier failure: the
    # idempotent producer would bump locally; a transactional one must abort first.
    assert m.can_retry(second, E.OutOfOrderSequenceNumberError.code, -1, False)
    assert m.state is S.ABORTABLE_ERROR and m.bump_required
    assert isinstance(m.last_error, E.OutOfOrderSequenceNumberError)
    assert m.maybe_bump_epoch() is False and m.producer == (7, 0)  # never bumped locally
    m.on_failed(second, E.OutOfOrderSequenceNumberError.code, True)
    m.begin_abort()
    m.set_producer_id_and_epoch(7, 1)  # the coordinator's bump (InitProducerId with 7/0)
    assert not m.bump_required
    m.end_done()
    m.begin()
    third = new_batch(TP0)
    m.assign_sequence(third)
    assert (third.producer_epoch, third.base_sequence) == (1, 0)  # sequences restart


def test_same_epoch_keeps_sequences_across_transactions() -> None:
    m = manager_in(S.IN_TRANSACTION)
    b = new_batch(TP0, 4)
    m.assign_sequence(b)
    m.on_success(b, 0)
    m.begin_commit()
    m.end_done()
    m.begin()
    nxt = new_batch(TP0)
    m.assign_sequence(nxt)
    assert (nxt.producer_epoch, nxt.base_sequence) == (0, 4)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"enable_idempotence": False}, "idempotence"),
        ({"acks": 1}, "acks"),
        ({"retries": 0}, "retries"),
    ],
)
def test_check_config(options: dict[str, Any], message: str) -> None:
    with pytest.raises(E.ConfigError, match=message):
        check_config(ProducerConfig(transactional_id="tx", **options))
    check_config(ProducerConfig(**options))  # fine without a transactional id


def test_config_rejects_an_empty_transactional_id() -> None:
    with pytest.raises(E.ConfigError, match="transactional_id"):
        ProducerConfig(transactional_id="")


class FakeProducer:
    def __init__(self, commit_error: BaseException | None = None) -> None:
        self.calls: list[str] = []
        self.transaction_state = S.READY
        self.commit_error = commit_error

    async def begin_transaction(self) -> None:
        self.calls.append("begin")
        self.transaction_state = S.IN_TRANSACTION

    async def commit_transaction(self) -> None:
        self.calls.append("commit")
        if self.commit_error is not None:
            self.transaction_state = S.ABORTABLE_ERROR
            raise self.commit_error
        self.transaction_state = S.READY

    async def abort_transaction(self) -> None:
        self.calls.append("abort")
        self.transaction_state = S.READY


async def test_transaction_context_commits_or_aborts() -> None:
    p = FakeProducer()
    async with TransactionContext(p):
        pass
    assert p.calls == ["begin", "commit"]

    p = FakeProducer()
    with pytest.raises(KeyError):
        async with TransactionContext(p):
            raise KeyError("boom")
    assert p.calls == ["begin", "abort"]

    p = FakeProducer(commit_error=E.TransactionAbortableError("record failed"))
    with pytest.raises(E.TransactionAbortableError):
        async with TransactionContext(p):
            pass
    assert p.calls == ["begin", "commit", "abort"]
