"""The embedded broker's transaction coordinator (and producer id allocation).

Kafka's transaction state machine, per transactional id: Empty -> Ongoing (first
AddPartitionsToTxn/AddOffsetsToTxn) -> PrepareCommit/PrepareAbort (EndTxn) ->
CompleteCommit/CompleteAbort (markers written) -> Ongoing ... InitProducerId bumps the
producer epoch (fencing older producers of the same transactional id), aborting an
open transaction first, and rotates the producer id when the epoch is exhausted.
KIP-360 resumption (InitProducerId with the current id/epoch) and the transaction
timeout (abort with an epoch bump, so the late producer is fenced) work as in Kafka.

Ending a transaction writes a COMMIT/ABORT control batch to every partition in it with
``PartitionLog.write_control_batch`` (the log maintains the LSO and aborted index and
learns the bumped epoch, which fences zombie produce requests) and completes the
transaction's pending group offsets (TxnOffsetCommit) in the group coordinator.

Markers are written before the EndTxn response by default. The test knob
``transaction.marker.delay.ms`` (a broker ``extra`` config, not a Kafka one) instead
answers EndTxn once the prepare state is recorded and writes the markers after that
delay, as Kafka does asynchronously; meanwhile the id answers CONCURRENT_TRANSACTIONS.

Transactions V2 (KIP-890 part 2) as Kafka 4.4 runs it: the request version decides,
per request, which rules apply (Kafka 4.4 does not gate them on the finalized
``transaction.version``; a client picks its versions from that level). EndTxn v5+ ends
the transaction with an epoch bump (commit and abort; an abort with nothing added too)
and answers the new producer id/epoch; when the epoch would reach Short.MaxValue the
markers carry the last epoch and the transactional id moves to a new producer id at
epoch 0. A retried EndTxn v5 with the pre-bump epoch after the end succeeds with the
same answer; the pre-bump epoch is also the "last epoch" InitProducerId accepts as a
retry. Produce v12+ adds its partition to the transaction (``add_partitions``), and
TxnOffsetCommit v5+ adds the group (``check_offset_commit(..., implicit_add=True)``)
without AddOffsetsToTxn. Older versions keep the version-1 rules on the same cluster.
The finalized level matters only for the coordinator's own aborts (fencing by
InitProducerId, the transaction timeout): see ``_fence_and_abort``.

With an authorizer, as Kafka: ListTransactions lists only the transactional ids the
principal may DESCRIBE; DescribeTransactions answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED
for the others and leaves out the topics it may not DESCRIBE.

Deviations: transaction state is not persisted across cluster restarts; InitProducerId
up to v5 (no KIP-939 2PC); TxnOffsetCommit up to v5 (v6 names topics by id).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.groups import (
    GROUP_KEY,
    TXN_KEY,
    Cancellable,
    Clock,
    LoopClock,
    Timers,
    config_int,
    get_group_coordinator,
    placement_for,
)
from aiokafka_lite.broker.state import ClusterState
from aiokafka_lite.core import errors
from aiokafka_lite.core.acls import AclOperation, ResourceType
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)

__all__ = [
    "TransactionConfig",
    "TransactionCoordinator",
    "TxnMetadata",
    "TxnState",
    "get_txn_coordinator",
    "register_txn_handlers",
]

log = logging.getLogger("aiokafka_lite.broker.transactions")

NONE: Final = 0
NOT_COORDINATOR: Final = errors.NotCoordinatorError.code
INVALID_REQUEST: Final = errors.InvalidRequestError.code
INVALID_PRODUCER_EPOCH: Final = errors.InvalidProducerEpochError.code
PRODUCER_FENCED: Final = errors.ProducerFencedError.code
INVALID_TXN_STATE: Final = errors.InvalidTxnStateError.code
INVALID_PRODUCER_ID_MAPPING: Final = errors.InvalidProducerIdMappingError.code
INVALID_TRANSACTION_TIMEOUT: Final = errors.InvalidTransactionTimeoutError.code
CONCURRENT_TRANSACTIONS: Final = errors.ConcurrentTransactionsError.code
OPERATION_NOT_ATTEMPTED: Final = errors.OperationNotAttemptedError.code
UNKNOWN_TOPIC_OR_PARTITION: Final = errors.UnknownTopicOrPartitionError.code
TRANSACTIONAL_ID_NOT_FOUND: Final = errors.TransactionalIdNotFoundError.code
TRANSACTION_ABORTABLE: Final = errors.TransactionAbortableError.code

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
MAX_EPOCH: Final = 32767  # Short.MaxValue
COORDINATOR_EPOCH: Final = 0  # the embedded coordinator never fails over with a new epoch


class TxnState(StrEnum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"


def _epoch_exhausted(epoch: int) -> bool:
    # Kafka keeps one epoch in reserve so a fencing bump is always possible.
    return epoch >= MAX_EPOCH - 1


@dataclass(slots=True, eq=False)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    # TV2: the producer id the transactional id moves to once the markers of an end
    # whose epoch bump overflowed are written (-1: no move pending).
    next_producer_id: int = NO_PRODUCER_ID
    timeout_ms: int = 60000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    start_wall_ms: int = -1
    last_update_wall_ms: int = -1
    completing: bool = False  # markers being written: other calls get CONCURRENT_TRANSACTIONS
    generation: int = 0  # bumped per transaction, guards stale timeout timers
    timer: Cancellable | None = None


@dataclass(slots=True)
class TransactionConfig:
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    marker_delay_ms: int = 0  # transaction.marker.delay.ms (test knob, see module doc)

    @classmethod
    def from_cluster(cls, cluster: ClusterState) -> TransactionConfig:
        return cls(
            max_timeout_ms=config_int(cluster, "transaction.max.timeout.ms", 900_000),
            marker_delay_ms=config_int(cluster, "transaction.marker.delay.ms", 0),
        )


class TransactionCoordinator:
    """Transactional ids -> producer id/epoch and transaction state, for one cluster.

    Lifecycle: created by ``register_txn_handlers`` (``cluster.services["transactions"]``);
    ``stop()`` (alias ``close()``) cancels the timeout and marker timers.
    """

    def __init__(
        self, cluster: ClusterState, *, config: TransactionConfig | None = None, clock: Clock | None = None
    ) -> None:
        self.cluster = cluster
        self.config = config or TransactionConfig.from_cluster(cluster)
        self.clock: Clock = clock or LoopClock()
        self.timers = Timers(self.clock)
        self.placement = placement_for(cluster)
        self.txns: dict[str, TxnMetadata] = {}

    async def start(self) -> None:
        self.timers.closed = False

    async def stop(self) -> None:
        self.timers.cancel_all()
        for meta in self.txns.values():
            meta.timer = None

    close = stop

    def transaction_version(self) -> int:
        """The cluster's finalized ``transaction.version`` (what the coordinator's own
        aborts follow; client requests follow their request versions)."""
        return self.cluster.config.features.get("transaction.version", 0)

    def coordinator_error(self, transactional_id: str, broker_id: int) -> int:
        return self.placement.check(transactional_id, TXN_KEY, broker_id)

    # -- InitProducerId ---------------------------------------------------------------
    def init_producer_id(
        self,
        transactional_id: str | None,
        timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> tuple[int, int, int]:
        """(error, producer id, epoch). PRODUCER_FENCED is returned as is (callers map it)."""
        if transactional_id is None:
            # Idempotent producer: always a fresh id (also for KIP-360 resets), epoch 0.
            return NONE, self.cluster.allocate_producer_id(), 0
        if transactional_id == "":
            return INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return INVALID_TRANSACTION_TIMEOUT, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        expected = (producer_id, producer_epoch) if producer_id != NO_PRODUCER_ID else None
        meta = self.txns.get(transactional_id)
        if meta is None:
            meta = self.txns[transactional_id] = TxnMetadata(
                transactional_id, self.cluster.allocate_producer_id(), timeout_ms=timeout_ms
            )
        if meta.completing:
            return CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if expected is not None and not self._valid_expected_producer(meta, *expected):
            return PRODUCER_FENCED, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if meta.state is TxnState.ONGOING:
            # Fence the current producer: bump the epoch and abort its transaction with
            # it; the caller retries (CONCURRENT_TRANSACTIONS) and gets a second bump.
            self._fence_and_abort(meta)
            return CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        # Empty / CompleteCommit / CompleteAbort
        if _epoch_exhausted(meta.producer_epoch) and (expected is None or expected[1] == meta.producer_epoch):
            meta.last_producer_id = meta.producer_id
            meta.last_producer_epoch = meta.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
            meta.producer_id = self.cluster.allocate_producer_id()
            meta.producer_epoch = 0
        elif expected is None:
            meta.producer_epoch += 1
            meta.last_producer_epoch = NO_PRODUCER_EPOCH
        elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == meta.producer_epoch:
            meta.last_producer_epoch = meta.producer_epoch
            meta.producer_epoch += 1
        elif expected[1] == meta.last_producer_epoch:
            pass  # a retry of the bump whose response was lost: same answer again
        else:
            return PRODUCER_FENCED, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        meta.timeout_ms = timeout_ms
        meta.state = TxnState.EMPTY
        meta.partitions.clear()
        meta.groups.clear()
        meta.start_wall_ms = -1
        meta.last_update_wall_ms = _wall_ms()
        return NONE, meta.producer_id, meta.producer_epoch

    @staticmethod
    def _valid_expected_producer(meta: TxnMetadata, producer_id: int, epoch: int) -> bool:
        # A given id/epoch is acceptable when the metadata is fresh, the id is current,
        # or it is the previous id whose epoch ran out (a retried rotation).
        return (
            meta.producer_epoch == NO_PRODUCER_EPOCH
            or producer_id == meta.producer_id
            or (producer_id == meta.last_producer_id and _epoch_exhausted(epoch))
        )

    def _fence_and_abort(self, meta: TxnMetadata) -> None:
        """The coordinator's own abort (InitProducerId of a new instance, a timeout).

        Kafka runs it with the cluster's finalized ``transaction.version``: at level 2 the
        pre-fence epoch stays the "last epoch", so the fenced producer's InitProducerId
        with its own id/epoch is taken for a retry and answered with the new epoch (as
        Kafka 4.4 does; differential txn2/fenced_producer_resumes_with_its_epoch); at
        level 1 that producer is fenced for good (PRODUCER_FENCED).
        """
        previous = meta.producer_epoch
        if meta.producer_epoch < MAX_EPOCH:
            meta.producer_epoch += 1
        meta.last_producer_epoch = previous if self.transaction_version() >= 2 else NO_PRODUCER_EPOCH
        log.info(
            "transactional id %s: fencing epoch, aborting its transaction (epoch now %d)",
            meta.transactional_id,
            meta.producer_epoch,
        )
        self._end(meta, commit=False)

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------
    def _check_producer(self, meta: TxnMetadata | None, producer_id: int, producer_epoch: int) -> int:
        if meta is None or meta.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return PRODUCER_FENCED
        if meta.completing or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return CONCURRENT_TRANSACTIONS
        return NONE

    def _begin_if_needed(self, meta: TxnMetadata) -> None:
        if meta.state is TxnState.ONGOING:
            return
        meta.state = TxnState.ONGOING
        meta.partitions = set()
        meta.groups = set()
        meta.start_wall_ms = _wall_ms()
        meta.generation += 1
        generation = meta.generation
        self.timers.cancel(meta.timer)
        meta.timer = self.timers.schedule(meta.timeout_ms, lambda: self._on_timeout(meta, generation))

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> int:
        if not transactional_id:
            return INVALID_REQUEST
        meta = self.txns.get(transactional_id)
        err = self._check_producer(meta, producer_id, producer_epoch)
        if err:
            return err
        assert meta is not None
        parts = set(partitions)
        if meta.state is TxnState.ONGOING and parts <= meta.partitions:
            return NONE
        self._begin_if_needed(meta)
        meta.partitions |= parts
        meta.last_update_wall_ms = _wall_ms()
        return NONE

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn ``verify_only``: are these partitions in the open transaction?

        Kafka's answers: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED or (markers being
        written) CONCURRENT_TRANSACTIONS for all, else per partition NONE or
        TRANSACTION_ABORTABLE (not in the transaction)."""
        meta = self.txns.get(transactional_id)
        parts = list(partitions)
        if meta is None or meta.producer_id != producer_id:
            return dict.fromkeys(parts, INVALID_PRODUCER_ID_MAPPING)
        if meta.producer_epoch != producer_epoch:
            return dict.fromkeys(parts, PRODUCER_FENCED)
        if meta.completing or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return dict.fromkeys(parts, CONCURRENT_TRANSACTIONS)
        ongoing = meta.state is TxnState.ONGOING
        return {tp: NONE if ongoing and tp in meta.partitions else TRANSACTION_ABORTABLE for tp in parts}

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> int:
        if not transactional_id:
            return INVALID_REQUEST
        meta = self.txns.get(transactional_id)
        err = self._check_producer(meta, producer_id, producer_epoch)
        if err:
            return err
        assert meta is not None
        self._begin_if_needed(meta)
        meta.groups.add(group_id)
        meta.last_update_wall_ms = _wall_ms()
        return NONE

    def check_offset_commit(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        *,
        implicit_add: bool = False,
        abortable: bool = False,
    ) -> int:
        """TxnOffsetCommit's producer check (the group coordinator asks before storing).

        ``implicit_add`` (TxnOffsetCommit v5+, TV2): the group joins the transaction here,
        as Kafka's offsets partition is added through the transaction coordinator.
        ``abortable`` (v4): a group outside the transaction is TRANSACTION_ABORTABLE
        rather than INVALID_TXN_STATE (as Kafka 4.4 answers).
        """
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != meta.producer_epoch:
            return INVALID_PRODUCER_EPOCH  # what a stale epoch gets from the offsets log in Kafka
        if meta.completing or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            # Kafka's verification answers CONCURRENT_TRANSACTIONS, which TxnOffsetCommit
            # passes on (the client retries).
            return CONCURRENT_TRANSACTIONS if implicit_add else INVALID_TXN_STATE
        if implicit_add:
            self._begin_if_needed(meta)
            meta.groups.add(group_id)
            meta.last_update_wall_ms = _wall_ms()
            return NONE
        if meta.state is not TxnState.ONGOING or group_id not in meta.groups:
            return TRANSACTION_ABORTABLE if abortable else INVALID_TXN_STATE
        return NONE

    # -- EndTxn --------------------------------------------------------------------------------
    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        from_client: bool = True,
    ) -> int:
        """EndTxn v0-v4 (transaction protocol version 1): no epoch bump."""
        if not transactional_id:
            return INVALID_REQUEST
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING
        if (from_client and producer_epoch != meta.producer_epoch) or producer_epoch < meta.producer_epoch:
            return PRODUCER_FENCED
        if meta.completing:
            same = (meta.state is TxnState.PREPARE_COMMIT) == commit
            return CONCURRENT_TRANSACTIONS if same else INVALID_TXN_STATE
        state = meta.state
        if state is TxnState.ONGOING:
            self._end(meta, commit)
            return NONE
        if state is TxnState.COMPLETE_COMMIT:
            return NONE if commit else INVALID_TXN_STATE
        if state is TxnState.COMPLETE_ABORT:
            return INVALID_TXN_STATE if commit else NONE
        if state is TxnState.PREPARE_COMMIT:
            return CONCURRENT_TRANSACTIONS if commit else INVALID_TXN_STATE
        if state is TxnState.PREPARE_ABORT:
            return INVALID_TXN_STATE if commit else CONCURRENT_TRANSACTIONS
        return INVALID_TXN_STATE  # Empty: nothing to end

    def end_txn_v2(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> tuple[int, int, int]:
        """EndTxn v5+ (Transactions V2): (error, producer id, epoch) for the response.

        Every end bumps the epoch; the answer carries the id/epoch of the next
        transaction (errors carry -1/-1). States and epochs as Kafka 4.4 judges them:

        ========================  =====================  ==========================
        state                     same epoch             previous epoch (a retry)
        ========================  =====================  ==========================
        Ongoing                   end it, bump           PRODUCER_FENCED
        Empty                     abort: bump;           PRODUCER_FENCED
                                  commit: INVALID_TXN
        CompleteCommit/Abort      abort: bump;           same outcome: NONE (no new
                                  commit: INVALID_TXN    bump); other: INVALID_TXN
        PrepareCommit/Abort       PRODUCER_FENCED        same outcome: CONCURRENT_
                                                         TRANSACTIONS; other: INVALID_TXN
        ========================  =====================  ==========================
        """
        fail = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if not transactional_id:
            return INVALID_REQUEST, *fail
        meta = self.txns.get(transactional_id)
        if meta is None:
            return INVALID_PRODUCER_ID_MAPPING, *fail
        # A retry of an end whose bump overflowed: the id moved on, the epoch restarted.
        retry_on_overflow = (
            meta.last_producer_id == producer_id
            and producer_epoch == MAX_EPOCH - 1
            and meta.producer_epoch == 0
            and meta.producer_id != producer_id
        )
        retry_on_bump = meta.producer_epoch == producer_epoch + 1
        state = meta.state
        preparing = meta.completing or state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
        if preparing:
            valid_epoch = retry_on_bump
        elif state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == meta.producer_epoch
        else:
            valid_epoch = producer_epoch == meta.producer_epoch
        if meta.producer_id != producer_id and not retry_on_overflow:
            return INVALID_PRODUCER_ID_MAPPING, *fail
        if not valid_epoch:
            return PRODUCER_FENCED, *fail
        is_retry = retry_on_bump or retry_on_overflow
        if preparing:
            same = (state is TxnState.PREPARE_COMMIT) == commit
            return (CONCURRENT_TRANSACTIONS if same else INVALID_TXN_STATE), *fail
        if state is TxnState.ONGOING:
            return self._end_v2(meta, commit)
        if state is TxnState.COMPLETE_COMMIT:
            if commit:
                return (
                    (NONE, meta.producer_id, meta.producer_epoch) if is_retry else (INVALID_TXN_STATE, *fail)
                )
            return (INVALID_TXN_STATE, *fail) if is_retry else self._end_v2(meta, commit=False)
        if state is TxnState.COMPLETE_ABORT:
            if commit:
                return INVALID_TXN_STATE, *fail
            return (
                (NONE, meta.producer_id, meta.producer_epoch)
                if is_retry
                else self._end_v2(meta, commit=False)
            )
        if state is TxnState.EMPTY and not commit:
            return self._end_v2(meta, commit=False)
        return INVALID_TXN_STATE, *fail

    def _end_v2(self, meta: TxnMetadata, commit: bool) -> tuple[int, int, int]:
        """Ends the transaction with an epoch bump (a new producer id past the last epoch)."""
        if _epoch_exhausted(meta.producer_epoch):
            meta.next_producer_id = self.cluster.allocate_producer_id()
        meta.last_producer_epoch = meta.producer_epoch
        meta.producer_epoch += 1
        if meta.state is not TxnState.ONGOING:
            # Nothing open (Empty / Complete*): an abort that only bumps the epoch.
            meta.partitions = set()
            meta.groups = set()
            meta.start_wall_ms = _wall_ms()
        self._end(meta, commit)
        if meta.next_producer_id != NO_PRODUCER_ID:
            return NONE, meta.next_producer_id, 0
        return NONE, meta.producer_id, meta.producer_epoch

    def _end(self, meta: TxnMetadata, commit: bool) -> None:
        meta.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        meta.completing = True
        meta.last_update_wall_ms = _wall_ms()
        self.timers.cancel(meta.timer)
        meta.timer = None
        if self.config.marker_delay_ms > 0:
            self.timers.schedule(self.config.marker_delay_ms, lambda: self._write_markers(meta, commit))
        else:
            self._write_markers(meta, commit)

    def _write_markers(self, meta: TxnMetadata, commit: bool) -> None:
        pid, epoch = meta.producer_id, meta.producer_epoch
        for tp in sorted(meta.partitions):
            p = self.cluster.get_partition(tp.topic, tp.partition)
            if p is None:
                continue  # deleted meanwhile: nothing to mark
            try:
                p.log.write_control_batch(pid, epoch, commit, COORDINATOR_EPOCH)
            except errors.InvalidProducerEpochError as e:
                log.warning("%s: marker for producer %d rejected: %s", tp, pid, e)
        if meta.groups:
            groups = get_group_coordinator(self.cluster)
            if groups is not None:
                groups.complete_txn(pid, meta.groups, commit)
        if meta.next_producer_id != NO_PRODUCER_ID:
            # The overflowed bump (TV2): the markers carried the last epoch of the old id;
            # the transactional id continues as a new producer id at epoch 0.
            meta.last_producer_id = meta.producer_id
            meta.producer_id = meta.next_producer_id
            meta.producer_epoch = 0
            meta.next_producer_id = NO_PRODUCER_ID
        meta.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        meta.partitions = set()
        meta.groups = set()
        meta.completing = False
        meta.last_update_wall_ms = _wall_ms()
        log.debug("transactional id %s: %s", meta.transactional_id, meta.state)

    def _on_timeout(self, meta: TxnMetadata, generation: int) -> None:
        meta.timer = None
        if meta.generation != generation or meta.state is not TxnState.ONGOING or meta.completing:
            return
        if self.txns.get(meta.transactional_id) is not meta:
            return
        log.info(
            "transactional id %s: transaction timed out after %d ms", meta.transactional_id, meta.timeout_ms
        )
        self._fence_and_abort(meta)

    # -- fault injection / inspection ---------------------------------------------------------
    def abort_timed_out(self, transactional_id: str) -> bool:
        """Treats the open transaction as timed out now (epoch bump + abort)."""
        meta = self.txns.get(transactional_id)
        if meta is None or meta.state is not TxnState.ONGOING or meta.completing:
            return False
        self.timers.cancel(meta.timer)
        self._on_timeout(meta, meta.generation)
        return True

    def move_coordinator(self, transactional_id: str, broker_id: int) -> None:
        self.placement.move(transactional_id, broker_id, TXN_KEY)

    # -- handlers ------------------------------------------------------------------------------
    def register(self, registry: HandlerRegistry) -> None:
        registry.register(InitProducerIdRequest.API_KEY, self.handle_init_producer_id, 0, 5)
        registry.register(AddPartitionsToTxnRequest.API_KEY, self.handle_add_partitions, 0, 5)
        registry.register(AddOffsetsToTxnRequest.API_KEY, self.handle_add_offsets, 0, 4)
        registry.register(EndTxnRequest.API_KEY, self.handle_end_txn, 0, 5)
        registry.register(DescribeTransactionsRequest.API_KEY, self.handle_describe_transactions, 0, 0)
        registry.register(ListTransactionsRequest.API_KEY, self.handle_list_transactions, 0, 2)

    async def handle_init_producer_id(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, InitProducerIdRequest)
        v = ctx.api_version
        tid = req.transactional_id
        if tid:
            err = self.coordinator_error(tid, ctx.broker_id)
            if err:
                return InitProducerIdResponse(error_code=err, producer_id=NO_PRODUCER_ID, producer_epoch=-1)
        err, pid, epoch = self.init_producer_id(
            tid,
            req.transaction_timeout_ms,
            req.producer_id if v >= 3 else NO_PRODUCER_ID,
            req.producer_epoch if v >= 3 else NO_PRODUCER_EPOCH,
        )
        return InitProducerIdResponse(error_code=_fenced(err, v, 4), producer_id=pid, producer_epoch=epoch)

    async def handle_add_partitions(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, AddPartitionsToTxnRequest)
        v = ctx.api_version
        if v <= 3:
            results = self._add_partitions_one(
                ctx,
                req.v3_and_below_transactional_id,
                req.v3_and_below_producer_id,
                req.v3_and_below_producer_epoch,
                req.v3_and_below_topics,
                False,
            )
            return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=results)
        out = []
        for t in req.transactions:
            out.append(
                AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
                    transactional_id=t.transactional_id,
                    topic_results=self._add_partitions_one(
                        ctx, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only
                    ),
                )
            )
        return AddPartitionsToTxnResponse(results_by_transaction=out)

    def _add_partitions_one(
        self,
        ctx: RequestContext,
        tid: str,
        pid: int,
        epoch: int,
        topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic],
        verify_only: bool,
    ) -> list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult]:
        tps = [TopicPartition(t.name, p) for t in topics for p in t.partitions]
        unknown = {tp for tp in tps if self.cluster.get_partition(tp.topic, tp.partition) is None}
        result: dict[TopicPartition, int]
        err = self.coordinator_error(tid, ctx.broker_id) if tid else INVALID_REQUEST
        if err:
            result = dict.fromkeys(tps, err)
        elif unknown:
            # Kafka adds nothing when some partition is unknown.
            result = {
                tp: UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else OPERATION_NOT_ATTEMPTED for tp in tps
            }
        elif verify_only:
            result = self.verify_partitions(tid, pid, epoch, tps)
        else:
            code = _fenced(self.add_partitions(tid, pid, epoch, tps), ctx.api_version, 2)
            result = dict.fromkeys(tps, code)
        return [
            AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(
                name=t.name,
                results_by_partition=[
                    AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(
                        partition_index=p, partition_error_code=result[TopicPartition(t.name, p)]
                    )
                    for p in t.partitions
                ],
            )
            for t in topics
        ]

    async def handle_add_offsets(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, AddOffsetsToTxnRequest)
        err = self.coordinator_error(req.transactional_id, ctx.broker_id) if req.transactional_id else NONE
        if not err:
            err = _fenced(
                self.add_offsets(req.transactional_id, req.producer_id, req.producer_epoch, req.group_id),
                ctx.api_version,
                2,
            )
        return AddOffsetsToTxnResponse(error_code=err)

    async def handle_end_txn(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, EndTxnRequest)
        err = self.coordinator_error(req.transactional_id, ctx.broker_id) if req.transactional_id else NONE
        if err:
            return EndTxnResponse(
                error_code=err, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH
            )
        if ctx.api_version >= 5:
            code, pid, epoch = self.end_txn_v2(
                req.transactional_id, req.producer_id, req.producer_epoch, req.committed
            )
            return EndTxnResponse(error_code=code, producer_id=pid, producer_epoch=epoch)
        err = _fenced(
            self.end_txn(req.transactional_id, req.producer_id, req.producer_epoch, req.committed),
            ctx.api_version,
            2,
        )
        return EndTxnResponse(error_code=err)

    async def handle_describe_transactions(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, DescribeTransactionsRequest)
        out = []
        for tid in req.transactional_ids:
            st = DescribeTransactionsResponse.TransactionState(transactional_id=tid)
            err = self.coordinator_error(tid, ctx.broker_id) if tid else TRANSACTIONAL_ID_NOT_FOUND
            if not err and not _may(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
                err = errors.TransactionalIdAuthorizationFailedError.code
            meta = self.txns.get(tid)
            if err:
                st.error_code = err
            elif meta is None:
                st.error_code = TRANSACTIONAL_ID_NOT_FOUND
            else:
                st.transaction_state = meta.state.value
                st.transaction_timeout_ms = meta.timeout_ms
                st.transaction_start_time_ms = meta.start_wall_ms
                st.producer_id = meta.producer_id
                st.producer_epoch = meta.producer_epoch
                by_topic: dict[str, list[int]] = {}
                # Kafka adds a group's offsets partition to the transaction
                # (AddOffsetsToTxn, or TxnOffsetCommit v5+): listed as Kafka lists it.
                offsets_parts = {
                    TopicPartition("__consumer_offsets", self.placement.partition_for(g, GROUP_KEY))
                    for g in meta.groups
                }
                for tp in sorted(meta.partitions | offsets_parts):
                    # Kafka leaves out the topics the principal may not DESCRIBE.
                    if _may(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, tp.topic):
                        by_topic.setdefault(tp.topic, []).append(tp.partition)
                st.topics = [
                    DescribeTransactionsResponse.TopicData(topic=name, partitions=parts)
                    for name, parts in by_topic.items()
                ]
            out.append(st)
        return DescribeTransactionsResponse(transaction_states=out)

    async def handle_list_transactions(self, ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, ListTransactionsRequest)
        v = ctx.api_version
        valid = {s.value for s in TxnState}
        states = set(req.state_filters)
        unknown_states = sorted(states - valid)
        pids = set(req.producer_id_filters)
        min_duration = req.duration_filter if v >= 1 else -1
        pattern = None
        if v >= 2 and req.transactional_id_pattern:
            try:
                pattern = re.compile(req.transactional_id_pattern)
            except re.error:
                return ListTransactionsResponse(error_code=INVALID_REQUEST)
        now = _wall_ms()
        listed = []
        for tid, meta in self.txns.items():
            if self.coordinator_error(tid, ctx.broker_id):
                continue
            if states and meta.state.value not in states:
                continue
            if pids and meta.producer_id not in pids:
                continue
            # Kafka's test, as it is: running longer than the filter, counted from the start
            # time even when none is set (-1: an Empty id), which then always passes.
            if min_duration >= 0 and now - meta.start_wall_ms <= min_duration:
                continue
            if pattern is not None and not pattern.fullmatch(tid):
                continue
            if not _may(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
                continue  # Kafka lists only the ids the principal may DESCRIBE
            listed.append(
                ListTransactionsResponse.TransactionState(
                    transactional_id=tid, producer_id=meta.producer_id, transaction_state=meta.state.value
                )
            )
        return ListTransactionsResponse(unknown_state_filters=unknown_states, transaction_states=listed)


def _fenced(code: int, version: int, first_fenced_version: int) -> int:
    """Clients older than the PRODUCER_FENCED version (KIP-588) get INVALID_PRODUCER_EPOCH."""
    if code == PRODUCER_FENCED and version < first_fenced_version:
        return INVALID_PRODUCER_EPOCH
    return code


def _may(ctx: RequestContext, op: AclOperation, resource: ResourceType, name: str) -> bool:
    """Whether the request's principal may ``op`` the resource (always without an authorizer)."""
    auth = ctx.cluster.authorizer
    return auth is None or auth.authorize(ctx.kafka_principal, ctx.client_host, op, resource, name)


def _wall_ms() -> int:
    return int(time.time() * 1000)


def get_txn_coordinator(cluster: ClusterState) -> TransactionCoordinator | None:
    svc = cluster.services.get("transactions")
    return svc if isinstance(svc, TransactionCoordinator) else None


def register_txn_handlers(registry: HandlerRegistry, cluster: ClusterState) -> TransactionCoordinator:
    """Registers InitProducerId and the transaction APIs; one coordinator per cluster.

    Publishes it as ``cluster.services["transactions"]`` (started/stopped by the cluster).
    InitProducerId without a transactional id (idempotent producers) is served here too.
    """
    coordinator = get_txn_coordinator(cluster)
    if coordinator is None:
        coordinator = TransactionCoordinator(cluster)
        cluster.services["transactions"] = coordinator
    coordinator.register(registry)
    return coordinator
