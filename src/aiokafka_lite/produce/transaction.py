"""Transactions for the producer: a pure state machine and the coordinator requests.

``TransactionManager`` is the sans-I/O part. It extends the idempotence bookkeeping
(``sequencing.IdempotenceManager``) with the transaction state, Java's states and
rules::

    UNINITIALIZED -> INITIALIZING -> READY -> IN_TRANSACTION -> COMMITTING -> READY
                                                    |               |
                                                    v               v
                               READY <- ABORTING <- ABORTABLE_ERROR
    (any state) -> FATAL_ERROR

and the partitions of the open transaction. Two transaction protocols are explicit
states (``TransactionProtocol``), chosen from the cluster's finalized
``transaction.version`` feature (ApiVersions) after InitProducerId and again at every
``begin`` (fixed while a transaction is open), as Java 4.x does:

* **V1** (level < 2: brokers before 4.0, or a cluster set back with kafka-features.sh):
  a partition's batches are sent only after AddPartitionsToTxn for it succeeded
  (``is_send_allowed``, consulted at drain time); a partition is registered when its
  first batch of the transaction is created (``on_batch_created``). Offsets need
  AddOffsetsToTxn once per group, then TxnOffsetCommit (up to v4); EndTxn up to v4 keeps
  the epoch. A broken sequence makes the transaction abortable, and the abort asks the
  coordinator for a bumped epoch (InitProducerId with the current id and epoch, KIP-360).
* **V2** (KIP-890 part 2, level >= 2, the default of new Kafka 4.x clusters): Produce
  v12+ adds a partition to the transaction itself, so a new partition's batches go at
  once and no AddPartitionsToTxn is sent; TxnOffsetCommit v5 adds the group's offsets
  partition (no AddOffsetsToTxn). EndTxn v5 ends every transaction, commit or abort,
  with an epoch bump: the response's producer id and epoch (a new id at epoch 0 when the
  epoch is exhausted) replace ours. The abort after a broken sequence gets its new epoch
  from that EndTxn, not from InitProducerId. Late writes of the old epoch (a zombie, or
  our own batch after a timeout) are refused by the partition leaders.

In both, sequence numbers are never re-based locally as the idempotent producer does:
after a new id or epoch every partition starts again at sequence 0.

``Transactions`` is the thin async shell: it sends InitProducerId, AddPartitionsToTxn
and AddOffsetsToTxn (V1) and EndTxn to the transaction coordinator and TxnOffsetCommit
(with the group generation and member id, KIP-447) to the group coordinator, over the
shared client's coordinator lane, rediscovering coordinators and retrying retriable
errors (CONCURRENT_TRANSACTIONS, e.g. while the markers of the previous EndTxn are
written, with a short first backoff as Java).

Errors (see ``classify``):

* *fatal* -- ``ProducerFencedError`` (a newer instance with the same transactional id
  took over, or the coordinator aborted our transaction after its timeout),
  ``InvalidProducerEpochError``, authorization failures for the transactional id or
  cluster, ``InvalidTxnStateError`` (in V2 also an EndTxn commit after the coordinator
  aborted the transaction on its timeout), unsupported versions: the producer is unusable;
  every later call raises the error again. Close it and create a new one.
* *abortable* -- everything else that is not retriable (a record that could not be
  delivered, ``CommitFailedError`` from a rebalance, topic/group authorization,
  ``TransactionAbortableError`` (TRANSACTION_ABORTABLE) from Produce, TxnOffsetCommit
  or EndTxn...):
  the operation raises it, later operations raise ``TransactionAbortableError``, and
  ``abort_transaction()`` brings the producer back to READY.
* *retriable* errors (coordinator moved or loading, CONCURRENT_TRANSACTIONS,
  disconnects) are retried inside the operation.

Deviations from the Java client: ``InvalidProducerEpochError`` from a produce response
is fatal at once (Java first treats it as abortable and learns of the fencing at the
abort); in V1 the producer's Produce requests are not capped at v11 as Java's are
(harmless: the partitions are added before their batches are sent, and a broker keys
the implicit add to the request version only for partitions not yet added);
InitProducerId stays at v5 (v6 is KIP-939's two-phase commit, not supported).
"""

from __future__ import annotations

import asyncio
import copy
import enum
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client, CoordinatorType, Lane
from aiokafka_lite.net.retry import Backoff
from aiokafka_lite.produce.batch import ProducerBatch
from aiokafka_lite.produce.sequencing import IdempotenceManager, ProducerIdAndEpoch
from aiokafka_lite.wire.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

if TYPE_CHECKING:
    from aiokafka_lite.produce.producer_config import ProducerConfig
    from aiokafka_lite.wire.message import Request, Response

__all__ = [
    "TRANSACTION_VERSION_FEATURE",
    "ErrorKind",
    "GroupMetadataLike",
    "TransactionContext",
    "TransactionManager",
    "TransactionProtocol",
    "Transactions",
    "TxnState",
    "check_config",
    "classify",
]

log = logging.getLogger("aiokafka_lite.producer.transactions")

T = TypeVar("T")

# Newest versions with transaction protocol 1 semantics (see module doc).
_MAX_INIT_PRODUCER_ID: Final = 5  # v6 adds two-phase commit (KIP-939), not spoken
_MAX_ADD_PARTITIONS: Final = 3  # v4+ are broker-to-broker (KIP-890)
_MAX_ADD_OFFSETS: Final = 4
_MAX_END_TXN_V1: Final = 4
_MAX_TXN_OFFSET_COMMIT_V1: Final = 4
# Transactions V2 (KIP-890 part 2): EndTxn v5 bumps the epoch and returns it;
# TxnOffsetCommit v5 adds the group's offsets partition implicitly (v6 names topics by id).
_MAX_END_TXN_V2: Final = 5
_MAX_TXN_OFFSET_COMMIT_V2: Final = 5

#: The finalized feature that selects the transaction protocol (KIP-890), and the level
#: from which the client speaks Transactions V2 (as Java 4.x).
TRANSACTION_VERSION_FEATURE: Final = "transaction.version"
_TV2_LEVEL: Final = 2

_NOT_COORDINATOR: Final = E.NotCoordinatorError.code
_COORDINATOR_NOT_AVAILABLE: Final = E.CoordinatorNotAvailableError.code
_CONCURRENT_TRANSACTIONS: Final = E.ConcurrentTransactionsError.code
_OPERATION_NOT_ATTEMPTED: Final = E.OperationNotAttemptedError.code
_INVALID_TXN_STATE: Final = E.InvalidTxnStateError.code
_GENERATION_ERRORS: Final = frozenset(
    {
        E.IllegalGenerationError.code,
        E.UnknownMemberIdError.code,
        E.FencedInstanceIdError.code,
        E.RebalanceInProgressError.code,
        # Consumer-protocol groups (KIP-848): the member epoch stands for the generation.
        E.FencedMemberEpochError.code,
        E.StaleMemberEpochError.code,
    }
)
#: CONCURRENT_TRANSACTIONS clears within milliseconds (markers being written): retry fast.
_CONCURRENT_BACKOFF_MS: Final = 20.0


class TxnState(enum.StrEnum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING = "COMMITTING"
    ABORTING = "ABORTING"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TxnState
#: target state -> states it may be entered from (FATAL_ERROR: from any).
_SOURCES: Final[dict[TxnState, frozenset[TxnState]]] = {
    S.INITIALIZING: frozenset({S.UNINITIALIZED}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING, S.ABORTING}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING: frozenset({S.IN_TRANSACTION}),
    S.ABORTING: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING, S.ABORTABLE_ERROR}),
    S.FATAL_ERROR: frozenset(TxnState),
}
#: States in which the open transaction's batches may be sent.
_SENDING: Final = frozenset({S.IN_TRANSACTION, S.COMMITTING})


class TransactionProtocol(enum.Enum):
    """Which transaction protocol the open (or next) transaction uses (see module doc)."""

    V1 = 1
    V2 = 2

    @classmethod
    def from_features(cls, finalized: Mapping[str, int]) -> TransactionProtocol:
        """V2 when the cluster finalized ``transaction.version >= 2``, V1 otherwise (an
        older broker, or a cluster set back to level 1 with kafka-features.sh)."""
        return cls.V2 if finalized.get(TRANSACTION_VERSION_FEATURE, 0) >= _TV2_LEVEL else cls.V1


class ErrorKind(enum.Enum):
    RETRIABLE = "retriable"
    ABORTABLE = "abortable"
    FATAL = "fatal"


_FATAL_TYPES: Final[tuple[type[BaseException], ...]] = (
    E.ProducerFencedError,
    E.InvalidProducerEpochError,
    E.TransactionalIdAuthorizationFailedError,
    E.ClusterAuthorizationFailedError,
    E.TransactionCoordinatorFencedError,
    E.InvalidTxnStateError,
    E.InvalidTransactionTimeoutError,
    E.UnsupportedVersionError,
    E.UnsupportedForMessageFormatError,
    E.AuthenticationError,
)


def classify(exc: BaseException) -> ErrorKind:
    """How a transactional producer treats ``exc`` (see module doc)."""
    if isinstance(exc, _FATAL_TYPES):
        return ErrorKind.FATAL
    if isinstance(exc, E.KafkaError) and (exc.retriable or getattr(exc, "coordinator_error", False)):
        return ErrorKind.RETRIABLE
    return ErrorKind.ABORTABLE


def check_config(cfg: ProducerConfig) -> None:
    """Cross-option rules of a transactional producer (as in Java)."""
    if cfg.transactional_id is None:
        return
    if cfg.enable_idempotence is False:
        raise E.ConfigError("transactional_id requires idempotence; do not set enable_idempotence=False")
    if cfg.acks_value != -1:
        raise E.ConfigError("transactional_id requires acks='all'")
    if cfg.max_in_flight_requests_per_connection > 5:
        raise E.ConfigError("transactional_id requires max_in_flight_requests_per_connection <= 5")
    if cfg.retries == 0:
        raise E.ConfigError("transactional_id requires retries > 0")


def _fresh(exc: BaseException) -> BaseException:
    """A copy of a stored error to raise again (no traceback pile-up on the original)."""
    try:
        return copy.copy(exc).with_traceback(None)
    except Exception:  # an exception type that cannot be copied: raise the original
        return exc


class TransactionManager(IdempotenceManager):
    """Transaction state and the open transaction's partitions (pure; see module doc).

    The async shell registers ``on_change`` (state changed: refresh the producer's
    refusal flag, wake the sender) and ``on_new_partitions`` (a partition needs
    AddPartitionsToTxn).
    """

    def __init__(self, transactional_id: str, transaction_timeout_ms: int = 60000) -> None:
        super().__init__()
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.state = TxnState.UNINITIALIZED
        #: The error behind ABORTABLE_ERROR / FATAL_ERROR.
        self.last_error: BaseException | None = None
        #: Partitions written in this transaction: waiting for AddPartitionsToTxn, being
        #: added (request in flight), added.
        self._new: set[TopicPartition] = set()
        self._pending: set[TopicPartition] = set()
        self._added: set[TopicPartition] = set()
        #: Consumer groups whose offsets were added to this transaction (AddOffsetsToTxn).
        self._groups: set[str] = set()
        #: The coordinator has (or, after an interrupted AddPartitionsToTxn, may have) an
        #: ongoing transaction for us: ending needs EndTxn.
        self.started = False
        self.maybe_started = False
        self._send_open = False
        self._abort_error: BaseException | None = None
        self.on_change: Callable[[], None] | None = None
        self.on_new_partitions: Callable[[], None] | None = None
        #: Chosen from the finalized ``transaction.version`` at init and again at every
        #: begin (the level can change while the producer runs, as Java re-checks it).
        self.protocol = TransactionProtocol.V1
        # Counters (observability, tests).
        self.committed = 0
        self.aborted = 0
        #: Epoch bumps taken from EndTxn responses (Transactions V2).
        self.end_txn_bumps = 0

    # -- state --------------------------------------------------------------------------

    def _transition(self, target: TxnState, error: BaseException | None = None) -> None:
        if self.state not in _SOURCES.get(target, ()):
            raise E.IllegalStateError(f"invalid transaction state transition {self.state} -> {target}")
        log.debug("transactional id %s: %s -> %s", self.transactional_id, self.state, target)
        self.state = target
        if target is S.ABORTABLE_ERROR or target is S.FATAL_ERROR:
            self.last_error = error
        if target is S.FATAL_ERROR:
            self.fatal_error = error  # the sender fails everything and stops sending
        self._send_open = target in _SENDING
        if self.on_change is not None:
            self.on_change()

    def _require(self, op: str, *allowed: TxnState) -> None:
        if self.state not in allowed:
            raise self._state_error(op)

    def _state_error(self, op: str) -> BaseException:
        """Why ``op`` cannot run in the current state."""
        state = self.state
        if state is S.FATAL_ERROR:
            assert self.last_error is not None
            return _fresh(self.last_error)
        if state is S.ABORTABLE_ERROR:
            exc = E.TransactionAbortableError(
                f"cannot {op}: the transaction hit an error and must be aborted with "
                f"abort_transaction(): {self.last_error}"
            )
            exc.__cause__ = self.last_error
            return exc
        if state is S.UNINITIALIZED or state is S.INITIALIZING:
            return E.IllegalStateError(
                f"cannot {op}: transactions are not initialized yet (transaction state {state}); "
                "start the producer first"
            )
        return E.IllegalStateError(f"cannot {op} in transaction state {state}")

    @property
    def accepts_records(self) -> bool:
        """Whether send/enqueue may add records now (only inside a transaction)."""
        return self.state is S.IN_TRANSACTION

    def refusal(self) -> BaseException:
        """The error for a record refused in the current state."""
        return self._state_error(
            "send records (they are accepted between begin_transaction() and commit_transaction() or "
            "abort_transaction())"
        )

    @property
    def abort_error(self) -> BaseException | None:
        """While aborting (or waiting to be aborted), batches not sent yet are failed
        with this instead of being sent."""
        if self.state is S.ABORTING:
            return self._abort_error
        if self.state is S.ABORTABLE_ERROR:
            return self.last_error
        return None

    @property
    def needs_end_txn(self) -> bool:
        return self.started or self.maybe_started

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        """Partitions added to the open transaction."""
        return frozenset(self._added)

    # -- operations (each validates the state first) ------------------------------------

    def begin_init(self) -> None:
        self._require("initialize transactions", S.UNINITIALIZED)
        self._transition(S.INITIALIZING)

    def init_done(
        self, producer_id: int, epoch: int, finalized_features: Mapping[str, int] | None = None
    ) -> None:
        self.set_producer_id_and_epoch(producer_id, epoch)
        if finalized_features is not None:
            self.protocol = TransactionProtocol.from_features(finalized_features)
        self._transition(S.READY)

    def begin(self, finalized_features: Mapping[str, int] | None = None) -> None:
        """Open a transaction; ``finalized_features`` (the cluster's current levels)
        re-selects the protocol, which then stays fixed until the transaction ends."""
        self._require("begin a transaction", S.READY)
        if finalized_features is not None:
            protocol = TransactionProtocol.from_features(finalized_features)
            if protocol is not self.protocol:
                log.info(
                    "transactional id %s: transaction protocol %s -> %s (finalized transaction.version %s)",
                    self.transactional_id,
                    self.protocol.name,
                    protocol.name,
                    finalized_features.get(TRANSACTION_VERSION_FEATURE),
                )
                self.protocol = protocol
        self._reset_transaction()
        self._transition(S.IN_TRANSACTION)

    @property
    def is_v2(self) -> bool:
        return self.protocol is TransactionProtocol.V2

    @property
    def end_txn_max_version(self) -> int:
        return _MAX_END_TXN_V2 if self.is_v2 else _MAX_END_TXN_V1

    @property
    def txn_offset_commit_max_version(self) -> int:
        return _MAX_TXN_OFFSET_COMMIT_V2 if self.is_v2 else _MAX_TXN_OFFSET_COMMIT_V1

    def check_send_offsets(self) -> None:
        self._require("send offsets to the transaction", S.IN_TRANSACTION)

    def needs_add_offsets(self, group_id: str) -> bool:
        """V1: AddOffsetsToTxn once per group. V2: never (TxnOffsetCommit v5 adds the
        group's offsets partition to the transaction itself)."""
        return not self.is_v2 and group_id not in self._groups

    def offsets_sending(self, group_id: str) -> None:
        """V2: a TxnOffsetCommit is about to be sent; once it may have reached the
        coordinator, the transaction may have started."""
        if self.is_v2:
            self.maybe_started = True

    def offsets_committed(self, group_id: str) -> None:
        """V2: TxnOffsetCommit v5 succeeded, so the transaction has started."""
        if self.is_v2:
            self._groups.add(group_id)
            self.started = True

    def end_txn_succeeded(self, producer_id: int, epoch: int) -> None:
        """EndTxn succeeded. V2: the coordinator bumped the epoch (or, at the epoch's end,
        gave a new producer id at epoch 0); every partition starts again at sequence 0.
        V1: the response carries no id (-1), nothing changes."""
        if not self.is_v2:
            return
        if producer_id < 0 or epoch < 0:
            raise E.IllegalStateError(
                f"EndTxn v5 of {self.transactional_id!r} succeeded without a producer id/epoch "
                f"({producer_id}, {epoch})"
            )
        log.debug(
            "transactional id %s: EndTxn bumped producer %s to id %d epoch %d",
            self.transactional_id,
            tuple(self.producer),
            producer_id,
            epoch,
        )
        self.set_producer_id_and_epoch(producer_id, epoch)
        self.end_txn_bumps += 1

    def offsets_added(self, group_id: str) -> None:
        self._groups.add(group_id)
        self.started = True

    def begin_commit(self) -> None:
        self._require("commit the transaction", S.IN_TRANSACTION)
        self._transition(S.COMMITTING)

    def begin_abort(self) -> None:
        self._require("abort the transaction", S.IN_TRANSACTION, S.ABORTABLE_ERROR)
        self._abort_error = E.TransactionAbortedError(
            f"transaction of {self.transactional_id!r} aborted before the record was delivered"
        )
        self._transition(S.ABORTING)

    def end_done(self) -> None:
        """EndTxn succeeded (or was not needed): back to READY."""
        if self.state is S.COMMITTING:
            self.committed += 1
        elif self.state is S.ABORTING:
            self.aborted += 1
        self._transition(S.READY)
        self._reset_transaction()

    def _reset_transaction(self) -> None:
        self._new.clear()
        self._pending.clear()
        self._added.clear()
        self._groups.clear()
        self.started = False
        self.maybe_started = False
        self._abort_error = None

    # -- errors ---------------------------------------------------------------------------

    def fail_fatal(self, exc: BaseException) -> None:
        if self.state is not S.FATAL_ERROR:
            log.error(
                "transactional id %s: fatal error, the producer is unusable: %s", self.transactional_id, exc
            )
            self._transition(S.FATAL_ERROR, exc)

    def fail_abortable(self, exc: BaseException) -> None:
        """Abortable error: only while a transaction is open (the first error is kept)."""
        if self.state is S.IN_TRANSACTION or self.state is S.COMMITTING:
            log.warning("transactional id %s: transaction must be aborted: %s", self.transactional_id, exc)
            self._transition(S.ABORTABLE_ERROR, exc)

    def handle_error(self, exc: BaseException) -> BaseException:
        """Apply a non-retriable error of a transactional request; returns what to raise."""
        if classify(exc) is ErrorKind.FATAL:
            self.fail_fatal(exc)
        else:
            self.fail_abortable(exc)
        return exc

    def on_batch_failed(self, batch: ProducerBatch) -> None:
        """A batch failed for good: fatal errors are fatal in any state; anything else
        makes the open transaction abortable (our own abort's failures are expected)."""
        exc = batch.error
        if exc is None:
            return
        if classify(exc) is ErrorKind.FATAL:
            self.fail_fatal(exc)
        else:
            self.fail_abortable(exc)

    # -- partitions -----------------------------------------------------------------------

    def is_send_allowed(self, tp: TopicPartition) -> bool:
        return self._send_open and tp in self._added

    def on_batch_created(self, batch: ProducerBatch) -> None:
        tp = batch.tp
        if tp in self._added or tp in self._pending or tp in self._new:
            return
        if self.is_v2:
            # Produce v12+ adds the partition to the transaction itself: its batches may
            # go at once, and the transaction has started (EndTxn is needed to end it).
            self._added.add(tp)
            self.started = True
            return
        self._new.add(tp)
        if self.on_new_partitions is not None:
            self.on_new_partitions()

    @property
    def has_new_partitions(self) -> bool:
        return bool(self._new)

    def take_new_partitions(self) -> set[TopicPartition]:
        """Partitions for the next AddPartitionsToTxn (moved to pending)."""
        tps = self._new
        self._new = set()
        self._pending |= tps
        return tps

    def partitions_added(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        self._pending -= tps
        self._added |= tps
        self.started = True
        if self.on_change is not None:
            self.on_change()  # their batches may go now

    def partitions_retry(self, tps: Iterable[TopicPartition]) -> None:
        """A retriable failure: the partitions go into the next request again."""
        tps = set(tps)
        self._pending -= tps
        self._new |= tps

    def partitions_uncertain(self, tps: Iterable[TopicPartition]) -> None:
        """The request's outcome is unknown (interrupted): the coordinator may have
        started the transaction."""
        tps = set(tps)
        if tps:
            self._pending -= tps
            self.maybe_started = True

    # -- sequences (overrides of the idempotent producer's rules) -----------------------------

    def request_epoch_bump(self, tp: TopicPartition) -> None:
        # No local bump: the transaction must be aborted, then the coordinator bumps.
        self._bump_required = True
        self.fail_abortable(
            E.OutOfOrderSequenceNumberError(
                f"{tp.topic}-{tp.partition}: the producer's sequence state is broken; "
                "the transaction must be aborted (the epoch is bumped after the abort)"
            )
        )

    def maybe_bump_epoch(self) -> bool:
        return False

    def set_producer_id_and_epoch(self, producer_id: int, epoch: int) -> None:
        if ProducerIdAndEpoch(producer_id, epoch) != self.producer:
            # A new id or epoch: every partition starts again at sequence 0 (batches of
            # the old epoch are all finished: this happens at init or after an abort).
            self._partitions.clear()
            self._unresolved.clear()
            self._to_rewrite.clear()
        self._bump_required = False
        self.producer = ProducerIdAndEpoch(producer_id, epoch)


class GroupMetadataLike(Protocol):
    """What ``send_offsets_to_transaction`` needs of ``consumer.group_metadata()``."""

    @property
    def group_id(self) -> str: ...
    @property
    def generation_id(self) -> int: ...
    @property
    def member_id(self) -> str: ...
    @property
    def group_instance_id(self) -> str | None: ...


class _GroupOnly:
    """A bare group id (no KIP-447 fencing by generation)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.generation_id = -1
        self.member_id = ""
        self.group_instance_id: str | None = None


def _normalize_offsets(offsets: Mapping[TopicPartition, Any]) -> dict[TopicPartition, tuple[int, str, int]]:
    """``{tp: (offset, metadata, leader_epoch)}`` from ints or OffsetAndMetadata-like values."""
    out: dict[TopicPartition, tuple[int, str, int]] = {}
    for tp, om in offsets.items():
        if not isinstance(tp, tuple) or len(tp) != 2:
            raise TypeError(f"offsets keys must be TopicPartition, got {tp!r}")
        if isinstance(om, int) and not isinstance(om, bool):
            offset, metadata, epoch = om, "", -1
        elif hasattr(om, "offset"):
            offset = om.offset
            metadata = getattr(om, "metadata", "") or ""
            le = getattr(om, "leader_epoch", None)
            epoch = -1 if le is None else le
        else:
            raise TypeError(f"offset for {tp} must be an int or OffsetAndMetadata, not {type(om).__name__}")
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset for {tp} must be a non-negative int, got {offset!r}")
        out[TopicPartition(*tp)] = (offset, metadata, epoch)
    return out


class Transactions:
    """The async operations of a transactional producer (owned by ``Producer``).

    Every user-facing operation runs as a task of its own: if the caller times out
    (``max_block_ms``) or is cancelled, the operation goes on, and calling the same
    method again waits for it (as Java's retried ``commitTransaction`` does).
    """

    def __init__(
        self,
        client: Callable[[], Client],
        manager: TransactionManager,
        config: ProducerConfig,
        *,
        wake_sender: Callable[[], None],
        flush: Callable[[], Awaitable[None]],
        on_state_change: Callable[[], None] | None = None,
    ) -> None:
        self._client_of = client  # the producer may replace its client after a failed start
        self.manager = manager
        self._cfg = config
        self._wake_sender = wake_sender
        self._flush = flush
        self._on_state_change = on_state_change
        self._tid = manager.transactional_id
        self._op: tuple[str, asyncio.Task[Any]] | None = None
        self._add_task: asyncio.Task[None] | None = None
        self._closed = False
        manager.on_change = self._changed
        manager.on_new_partitions = self._schedule_add

    @property
    def transactional_id(self) -> str:
        return self._tid

    @property
    def state(self) -> TxnState:
        return self.manager.state

    def _changed(self) -> None:
        if self._on_state_change is not None:
            self._on_state_change()
        self._wake_sender()

    # -- running operations -----------------------------------------------------------------

    async def _run(self, name: str, factory: Callable[[], Awaitable[T]], timeout_ms: float | None) -> T:
        op = self._op
        if op is not None and op[1].done() and (op[0] != name or name == "send_offsets_to_transaction"):
            # Finished while nobody waited. Only commit/abort hand their outcome to the
            # next call (a retried commit learns it succeeded); offsets are sent afresh.
            op = self._op = None
        if op is not None:
            if op[0] != name:
                raise E.IllegalStateError(f"cannot {name} while {op[0]} is in progress")
            task: asyncio.Task[T] = op[1]
        else:
            if self._closed:
                raise E.ProducerClosedError("producer is closed")
            task = self._spawn(_as_coroutine(factory), f"txn-{name}")
            self._op = (name, task)
        timeout = self._cfg.max_block_ms if timeout_ms is None else timeout_ms
        try:
            async with _backend.timeout(timeout / 1000):
                result = await _backend.shield(task)
        except TimeoutError:
            if not task.done():
                raise E.KafkaTimeoutError(
                    f"{name} did not complete within {timeout:g} ms; it goes on in the background "
                    f"(call it again to keep waiting)"
                ) from None
            result = task.result()  # finished meanwhile (or timed out by itself: raises that)
        finally:
            if task.done() and self._op is not None and self._op[1] is task:
                self._op = None
        return result

    async def abort_open(self, timeout_s: float | None) -> None:
        """At a graceful close: abort an open transaction (errors are logged)."""
        state = self.manager.state
        if state not in (S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.ABORTING):
            return
        log.info("transactional id %s: aborting the open transaction at close", self._tid)
        try:
            await self.abort(None if timeout_s is None else timeout_s * 1000)
        except E.KafkaError as exc:
            log.warning("transactional id %s: abort at close failed: %s", self._tid, exc)

    async def close(self) -> None:
        """Cancel background work (the producer is closing)."""
        self._closed = True
        tasks = [t for t in (self._add_task, self._op[1] if self._op else None) if t is not None]
        for t in tasks:
            t.cancel()
        await _backend.gather(*tasks, return_exceptions=True)
        self._add_task = None

    def _spawn(self, coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        """asyncio: a task whose outcome is always retrieved; trio: a task in the
        client's task group (the producer closes this session before its client)."""
        task: asyncio.Task[T] | None = _backend.spawn(self._client_of()._owner, coro, name)
        if task is None:
            raise E.ProducerClosedError("the producer's client is closed")
        task.add_done_callback(_retrieve)
        return task
        self._op = None

    # -- coordinator requests ------------------------------------------------------------------

    def _backoff_ms(self, attempt: int, code: int) -> float:
        """The shared policy (net/retry) without jitter, from a shorter first wait while the
        coordinator reports a concurrent transaction (as the Java client)."""
        base = _CONCURRENT_BACKOFF_MS if code == _CONCURRENT_TRANSACTIONS else self._cfg.retry_backoff_ms
        return Backoff(base, max(self._cfg.retry_backoff_max_ms, base), jitter=0).delay_ms(attempt)

    async def _coordinator_send(
        self,
        key: str,
        key_type: CoordinatorType,
        build: Callable[[int], Request],
        error_of: Callable[[Response], int],
        api_key: int,
        max_version: int,
        what: str,
        final_codes: frozenset[int] = frozenset(),
    ) -> Response:
        """Send to the coordinator of ``key`` until the response has no retriable error.
        Raises the first non-retriable error (the caller classifies it)."""
        client = self._client_of()
        attempt = 0
        while True:
            code = -1
            try:
                node = await client.find_coordinator(key, key_type)
                version = min(
                    max_version, await client.negotiated_version(node, api_key, lane=Lane.COORDINATOR)
                )
                resp = await client.send(
                    build(version),
                    node_id=node,
                    version=version,
                    timeout_ms=self._cfg.request_timeout_ms,
                    lane=Lane.COORDINATOR,
                )
                assert resp is not None
            except (E.KafkaConnectionError, E.KafkaTimeoutError) as exc:
                client.invalidate_coordinator(key, key_type)
                err: BaseException = exc
            except E.BrokerResponseError as exc:  # FindCoordinator gave up
                if not exc.retriable and not exc.coordinator_error:
                    raise
                err = exc
            else:
                code = error_of(resp)
                if code == 0:
                    return resp
                err = E.error_for(code, f"{what} ({key_type.name.lower()} coordinator for {key!r})")
                if code in (_NOT_COORDINATOR, _COORDINATOR_NOT_AVAILABLE):
                    client.invalidate_coordinator(key, key_type)
                elif code in final_codes or classify(err) is not ErrorKind.RETRIABLE:
                    raise err
            if self._closed:
                raise err
            delay = self._backoff_ms(attempt, code)
            attempt += 1
            log.debug("%s for %r failed (%s); retrying in %.0f ms", what, key, err, delay)
            await _backend.sleep(delay / 1000)

    async def _txn_send(
        self,
        build: Callable[[int], Request],
        error_of: Callable[[Response], int],
        api_key: int,
        max_version: int,
        what: str,
    ) -> Response:
        return await self._coordinator_send(
            self._tid, CoordinatorType.TRANSACTION, build, error_of, api_key, max_version, what
        )

    async def _init_producer_id(self, current: ProducerIdAndEpoch | None) -> None:
        """InitProducerId: a fresh epoch (fencing older instances, aborting their open
        transaction) or, with ``current``, a bump of our own epoch (KIP-360)."""
        m = self.manager
        pid, epoch = current if current is not None else (-1, -1)

        def build(version: int) -> Request:
            return InitProducerIdRequest(
                transactional_id=self._tid,
                transaction_timeout_ms=m.transaction_timeout_ms,
                producer_id=pid if version >= 3 else -1,
                producer_epoch=epoch if version >= 3 else -1,
            )

        resp = await self._txn_send(
            build,
            lambda r: r.error_code if isinstance(r, InitProducerIdResponse) else -1,
            InitProducerIdRequest.API_KEY,
            _MAX_INIT_PRODUCER_ID,
            "InitProducerId",
        )
        assert isinstance(resp, InitProducerIdResponse)
        log.debug(
            "transactional id %s: producer id %d epoch %d", self._tid, resp.producer_id, resp.producer_epoch
        )
        m.set_producer_id_and_epoch(resp.producer_id, resp.producer_epoch)

    async def _end_txn(self, commit: bool) -> None:
        m = self.manager
        pid, epoch = m.producer

        def build(version: int) -> Request:
            return EndTxnRequest(
                transactional_id=self._tid, producer_id=pid, producer_epoch=epoch, committed=commit
            )

        try:
            resp = await self._txn_send(
                build,
                lambda r: r.error_code if isinstance(r, EndTxnResponse) else -1,
                EndTxnRequest.API_KEY,
                m.end_txn_max_version,
                "EndTxn(commit)" if commit else "EndTxn(abort)",
            )
        except E.InvalidTxnStateError:
            if commit or m.started:
                raise
            # Only an interrupted AddPartitionsToTxn suggested a transaction: there was none.
            return
        assert isinstance(resp, EndTxnResponse)
        m.end_txn_succeeded(resp.producer_id, resp.producer_epoch)

    # -- init / begin --------------------------------------------------------------------------

    async def init(self, timeout_ms: float | None = None) -> None:
        """InitProducerId for the transactional id (run once, at producer start)."""
        m = self.manager
        if m.state is S.UNINITIALIZED:
            m.begin_init()
        elif m.state is not S.INITIALIZING:
            m._require("initialize transactions", S.UNINITIALIZED)
        await self._run("init_transactions", self._do_init, timeout_ms)

    async def _do_init(self) -> None:
        m = self.manager
        try:
            await self._init_producer_id(None)
        except E.KafkaError as exc:
            m.fail_fatal(exc)  # not initialized: nothing else can be done
            raise
        m.init_done(*m.producer, finalized_features=self._client_of().finalized_features())
        log.info("transactional id %s: transaction protocol %s", self._tid, m.protocol.name)

    def begin(self) -> None:
        op = self._op
        if op is not None:
            if not op[1].done():
                raise E.IllegalStateError(f"cannot begin a transaction while {op[0]} is in progress")
            self._op = None  # a new transaction: the previous outcome is no longer asked for
        self.manager.begin(self._client_of().finalized_features())

    # -- AddPartitionsToTxn ---------------------------------------------------------------------

    def _schedule_add(self) -> None:
        if self._add_task is None and not self._closed:
            self._add_task = self._spawn(self._add_partitions(), "txn-add-partitions")

    async def _add_partitions(self) -> None:
        m = self.manager
        tps: set[TopicPartition] = set()
        try:
            await _backend.sleep(0)  # partitions created in the same burst share one request
            while m.has_new_partitions and m.state in _SENDING:
                tps = m.take_new_partitions()
                try:
                    await self._send_add_partitions(tps)
                except E.KafkaError as exc:
                    m.partitions_uncertain(tps)
                    if m.state in _SENDING:
                        m.handle_error(exc)
                    return
                m.partitions_added(tps)
                tps = set()
        except (asyncio.CancelledError, _backend.cancelled_exc()):
            m.partitions_uncertain(tps)
            raise
        finally:
            self._add_task = None
            if m.has_new_partitions and m.state in _SENDING and not self._closed:
                self._schedule_add()

    async def _send_add_partitions(self, tps: set[TopicPartition]) -> None:
        m = self.manager
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(tps):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        pid, epoch = m.producer
        topics = [
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
            for t, ps in by_topic.items()
        ]

        def build(version: int) -> Request:
            return AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self._tid,
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=topics,
            )

        await self._txn_send(
            build,
            _add_partitions_error,
            AddPartitionsToTxnRequest.API_KEY,
            _MAX_ADD_PARTITIONS,
            "AddPartitionsToTxn",
        )

    async def _wait_add_task(self) -> None:
        task = self._add_task
        while task is not None:
            await _backend.wait_done((task,))
            task = self._add_task if self._add_task is not task else None

    # -- offsets ------------------------------------------------------------------------------

    async def send_offsets(
        self,
        offsets: Mapping[TopicPartition, Any],
        group_metadata: GroupMetadataLike | str,
        timeout_ms: float | None = None,
    ) -> None:
        self.manager.check_send_offsets()
        normalized = _normalize_offsets(offsets)
        group: GroupMetadataLike = (
            _GroupOnly(group_metadata) if isinstance(group_metadata, str) else group_metadata
        )
        if not group.group_id:
            raise E.ConfigError("send_offsets_to_transaction needs a consumer group id")
        await self._run(
            "send_offsets_to_transaction", lambda: self._do_send_offsets(normalized, group), timeout_ms
        )

    async def _do_send_offsets(
        self, offsets: dict[TopicPartition, tuple[int, str, int]], group: GroupMetadataLike
    ) -> None:
        m = self.manager
        try:
            if m.needs_add_offsets(group.group_id):
                pid, epoch = m.producer
                await self._txn_send(
                    lambda v: AddOffsetsToTxnRequest(
                        transactional_id=self._tid,
                        producer_id=pid,
                        producer_epoch=epoch,
                        group_id=group.group_id,
                    ),
                    lambda r: r.error_code if isinstance(r, AddOffsetsToTxnResponse) else -1,
                    AddOffsetsToTxnRequest.API_KEY,
                    _MAX_ADD_OFFSETS,
                    "AddOffsetsToTxn",
                )
                m.offsets_added(group.group_id)
            if offsets:
                m.offsets_sending(group.group_id)
                await self._txn_offset_commit(offsets, group)
                m.offsets_committed(group.group_id)
        except E.KafkaError as exc:
            raise m.handle_error(exc) from None

    async def _txn_offset_commit(
        self, offsets: dict[TopicPartition, tuple[int, str, int]], group: GroupMetadataLike
    ) -> None:
        m = self.manager
        pending = dict(offsets)
        failed: dict[TopicPartition, int] = {}

        def build(version: int) -> Request:
            pid, epoch = m.producer
            by_topic: dict[str, list[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]] = {}
            for tp in sorted(pending):
                off, meta, le = pending[tp]
                by_topic.setdefault(tp.topic, []).append(
                    TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                        partition_index=tp.partition,
                        committed_offset=off,
                        committed_leader_epoch=le if version >= 2 else -1,
                        committed_metadata=meta,
                    )
                )
            kip447 = version >= 3
            return TxnOffsetCommitRequest(
                transactional_id=self._tid,
                group_id=group.group_id,
                producer_id=pid,
                producer_epoch=epoch,
                generation_id_or_member_epoch=group.generation_id if kip447 else -1,
                member_id=group.member_id if kip447 else "",
                group_instance_id=group.group_instance_id if kip447 else None,
                topics=[
                    TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()
                ],
            )

        def error_of(resp: Response) -> int:
            # Partitions that succeeded are done; a retriable code retries the rest.
            assert isinstance(resp, TxnOffsetCommitResponse)
            failed.clear()
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code == 0:
                        pending.pop(tp, None)
                    else:
                        failed[tp] = p.error_code
            for code in failed.values():
                if code in _GENERATION_ERRORS:
                    return code
            return next(iter(failed.values()), 0)

        try:
            await self._coordinator_send(
                group.group_id,
                CoordinatorType.GROUP,
                build,
                error_of,
                TxnOffsetCommitRequest.API_KEY,
                m.txn_offset_commit_max_version,
                "TxnOffsetCommit",
                final_codes=_GENERATION_ERRORS,
            )
        except E.BrokerResponseError as exc:
            if exc.code in _GENERATION_ERRORS:
                raise E.CommitFailedError(
                    f"transactional offset commit for group {group.group_id!r} failed: the group moved on "
                    f"(generation {group.generation_id}, {exc.name}); its partitions may have been reassigned"
                ) from exc
            raise

    # -- commit / abort ---------------------------------------------------------------------

    async def commit(self, timeout_ms: float | None = None) -> None:
        m = self.manager
        op = self._op
        if not (op is not None and op[0] == "commit_transaction"):
            if op is not None and not op[1].done():
                raise E.IllegalStateError(f"cannot commit the transaction while {op[0]} is in progress")
            m.begin_commit()
        await self._run("commit_transaction", self._do_commit, timeout_ms)

    async def _do_commit(self) -> None:
        m = self.manager
        await self._flush()  # everything sent in the transaction is delivered (or failed)
        await self._wait_add_task()
        if m.state is not S.COMMITTING:  # a record failed meanwhile
            m._require("commit the transaction", S.COMMITTING)
        try:
            if m.needs_end_txn:
                await self._end_txn(commit=True)
        except E.KafkaError as exc:
            raise m.handle_error(exc) from None
        m.end_done()

    async def abort(self, timeout_ms: float | None = None) -> None:
        m = self.manager
        op = self._op
        if op is not None and op[0] == "send_offsets_to_transaction" and not op[1].done():
            # Its caller gave up waiting (a timeout, or cancelled: a task stopped mid-commit).
            # The abort ends the transaction whatever became of those offsets, but EndTxn
            # must not overtake their AddOffsetsToTxn/TxnOffsetCommit: let them finish first.
            # (Java makes the caller retry sendOffsetsToTransaction; refusing here would
            # leave the transaction open, e.g. at close, until Kafka times it out, holding
            # back every read_committed consumer of its partitions.)
            timeout = self._cfg.max_block_ms if timeout_ms is None else timeout_ms
            loop = _backend.loop()
            start = loop.time()
            await _backend.wait_done((op[1],), timeout / 1000)
            timeout_ms = max(timeout - (loop.time() - start) * 1000, 0.0)
            op = self._op
        if not (op is not None and op[0] == "abort_transaction"):
            if op is not None and not op[1].done():
                raise E.IllegalStateError(f"cannot abort the transaction while {op[0]} is in progress")
            m.begin_abort()
        await self._run("abort_transaction", self._do_abort, timeout_ms)

    async def _do_abort(self) -> None:
        m = self.manager
        add = self._add_task
        if add is not None:
            add.cancel()  # its partitions count as maybe added
            await _backend.wait_done((add,))
        self._wake_sender()  # fails the batches not sent yet
        await self._flush()  # and waits for those in flight
        if m.state is S.FATAL_ERROR:  # e.g. a batch learnt that we are fenced
            assert m.last_error is not None
            raise _fresh(m.last_error)
        try:
            if m.is_v2:
                # EndTxn v5 bumps the epoch whether or not anything was added, which is
                # also how a broken sequence gets its new epoch (no InitProducerId).
                if m.needs_end_txn or m.bump_required:
                    await self._end_txn(commit=False)
            else:
                if m.needs_end_txn:
                    await self._end_txn(commit=False)
                if m.bump_required:
                    await self._init_producer_id(m.producer)
                    m.epoch_bumps += 1
        except E.KafkaError as exc:
            m.fail_fatal(exc)  # the transaction cannot be ended: nothing else to fall back on
            raise
        m.end_done()


def _add_partitions_error(resp: Response) -> int:
    assert isinstance(resp, AddPartitionsToTxnResponse)
    if resp.error_code:
        return resp.error_code
    first = 0
    for t in resp.results_by_topic_v3_and_below:
        for p in t.results_by_partition:
            code = p.partition_error_code
            if code and code != _OPERATION_NOT_ATTEMPTED:
                return code
            first = first or code
    return first


async def _as_coroutine(factory: Callable[[], Awaitable[T]]) -> T:
    return await factory()


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # the caller may have timed out: do not warn about it


class _TransactionalProducer(Protocol):
    @property
    def transaction_state(self) -> TxnState: ...
    async def begin_transaction(self) -> None: ...
    async def commit_transaction(self) -> None: ...
    async def abort_transaction(self) -> None: ...


class TransactionContext:
    """``async with producer.transaction():`` begin; commit on success; abort on an
    exception (or on an abortable commit failure) and re-raise."""

    def __init__(self, producer: _TransactionalProducer) -> None:
        self._producer = producer

    async def __aenter__(self) -> None:
        await self._producer.begin_transaction()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        p = self._producer
        if exc is None:
            try:
                await p.commit_transaction()
            except BaseException:
                if p.transaction_state is S.ABORTABLE_ERROR:
                    await self._abort_quietly()
                raise
            return
        if p.transaction_state in (S.IN_TRANSACTION, S.ABORTABLE_ERROR):
            await self._abort_quietly()

    async def _abort_quietly(self) -> None:
        # The error that ended the block matters more; an abort failure is logged (a
        # fatal one also leaves the producer in FATAL_ERROR, raised by the next call).
        try:
            await self._producer.abort_transaction()
        except E.KafkaError as exc:
            log.error("aborting the transaction failed: %s", exc)
