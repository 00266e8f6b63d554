"""Transaction and producer operations of the admin client (KIP-664), as Java's Admin.

* ``list_transactions``: ListTransactions to every broker (each lists the transactional
  ids it coordinates), merged; filters by state, producer id, (v1+, KIP-994) how long
  the transaction has been open, and (v2+, KIP-1152) a regular expression the whole
  transactional id matches (Java's RE2J syntax on Kafka, Python's ``re`` on the
  embedded broker). Kafka's duration filter counts from the transaction's start time
  even when there is none: an id with no transaction yet (``Empty``) always passes it,
  so pair it with ``states=["Ongoing"]`` to find long-open transactions. A broker that fails is reported in ``errors``
  (Java's ``ListTransactionsResult.all()`` would fail the whole call; ``by_broker`` is
  the same split).
* ``describe_transactions``: DescribeTransactions at each id's transaction coordinator
  (FindCoordinator type TRANSACTION); an unknown id fails per item with
  ``TransactionalIdNotFoundError``.
* ``describe_producers``: DescribeProducers at each partition's leader, or at
  ``broker_id`` when given (then a NOT_LEADER_OR_FOLLOWER answer is final, as in Java:
  the caller asked for that broker).
* ``abort_transaction``: WriteTxnMarkers with one ABORT marker for the producer, sent
  to the partition's leader, exactly as Java's ``abortTransaction``: it ends an open
  ("hanging") transaction on that one partition without the coordinator, so the last
  stable offset advances. The broker needs ClusterAction permission for it. A leader
  that moved is looked up again until the deadline, as Java does; a topic that does not
  exist fails at once with ``UnknownTopicOrPartitionError`` (Java keeps looking until its
  timeout), as every by-leader call of this admin does.
* ``fence_producers``: InitProducerId for each transactional id at its coordinator,
  which bumps the producer epoch (aborting an open transaction first), so the producer
  that held the old epoch is fenced. CONCURRENT_TRANSACTIONS (the coordinator is
  aborting the open transaction) is retried until the deadline, as Java does. The
  transaction timeout sent is ``transaction_timeout_ms`` if given, else the client's
  ``request_timeout_ms`` (Java uses ``FenceProducersOptions.timeoutMs`` or its request
  timeout).

``find_hanging_transactions`` is the logic of ``kafka-transactions.sh find-hanging``
(the CLI's ``transactions find-hanging``), see its docstring.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from aiokafka_lite.admin.requests import AdminRequests, Outcome, error_of, results
from aiokafka_lite.admin.types import Result, Results
from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net.metadata import CoordinatorType
from aiokafka_lite.wire.message import Request
from aiokafka_lite.wire.messages import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

__all__ = [
    "AbortTransactionSpec",
    "FenceProducerResult",
    "HangingTransaction",
    "ListTransactionsResult",
    "PartitionProducerState",
    "ProducerState",
    "TransactionDescription",
    "TransactionListing",
    "TransactionState",
    "abort_transaction",
    "describe_producers",
    "describe_transactions",
    "fence_producers",
    "find_hanging_transactions",
    "list_transactions",
]

DEFAULT_MAX_TRANSACTION_TIMEOUT_MS: Final = 15 * 60_000  # kafka-transactions.sh find-hanging default


class TransactionState(StrEnum):
    """A transaction's state as the coordinator names it (Java's ``TransactionState``)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    UNKNOWN = "Unknown"

    @classmethod
    def parse(cls, value: str) -> TransactionState:
        """The state named ``value`` (case-insensitive, Java's names too: ``ONGOING``);
        UNKNOWN for a name this client does not know (a newer broker's)."""
        for s in cls:
            if value.replace("_", "").lower() == s.value.lower():
                return s
        return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: TransactionState
    coordinator_id: int  # the broker that listed it (its transaction coordinator)


@dataclass(frozen=True, slots=True)
class ListTransactionsResult:
    """Transactions from every broker that answered; ``errors`` holds brokers that failed."""

    transactions: list[TransactionListing]
    errors: dict[int, E.KafkaError] = field(default_factory=dict)

    def by_broker(self) -> dict[int, list[TransactionListing]]:
        out: dict[int, list[TransactionListing]] = {}
        for t in self.transactions:
            out.setdefault(t.coordinator_id, []).append(t)
        return out


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    coordinator_id: int = -1
    state: TransactionState = TransactionState.UNKNOWN
    producer_id: int = -1
    producer_epoch: int = -1
    transaction_timeout_ms: int = -1
    #: When the open transaction started (ms since the epoch); None when none is open.
    transaction_start_time_ms: int | None = None
    topic_partitions: frozenset[TopicPartition] = frozenset()
    error: E.KafkaError | None = None


@dataclass(frozen=True, slots=True)
class ProducerState:
    """A producer's state on one partition (Java's ``ProducerState``)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    #: Epoch of the coordinator that wrote the producer's last marker (None: no marker yet).
    coordinator_epoch: int | None
    #: First offset of the producer's open transaction here (None: no open transaction).
    current_transaction_start_offset: int | None


@dataclass(frozen=True, slots=True)
class PartitionProducerState:
    producers: tuple[ProducerState, ...] = ()
    error: E.KafkaError | None = None


@dataclass(frozen=True, slots=True)
class AbortTransactionSpec:
    """What ``abort_transaction`` aborts: the open transaction of ``producer_id`` at
    ``producer_epoch`` on ``topic_partition``. ``describe_producers`` gives all four."""

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


@dataclass(frozen=True, slots=True)
class FenceProducerResult:
    transactional_id: str
    producer_id: int = -1
    producer_epoch: int = -1
    error: E.KafkaError | None = None


@dataclass(frozen=True, slots=True)
class HangingTransaction:
    """An open transaction ``find_hanging_transactions`` reports, and why (``reason``):

    * ``"unknown-producer"``: no coordinator lists a transactional id for the producer id;
    * ``"unknown-transactional-id"``: the coordinator cannot describe that id;
    * ``"partition-not-in-transaction"``: the coordinator's transaction does not include
      this partition (so it will never write its marker here);
    * ``"open-too-long"`` (ours, not Kafka's tool's): the coordinator's transaction
      includes the partition but has been open longer than the threshold.

    The first three are what ``kafka-transactions.sh find-hanging`` reports."""

    topic_partition: TopicPartition
    producer: ProducerState
    reason: str
    transactional_id: str | None = None

    @property
    def kafka_tool_reports_it(self) -> bool:
        return self.reason != "open-too-long"


def _check_state_filters(states: Iterable[str | TransactionState] | None) -> list[str]:
    out = []
    for s in states or ():
        parsed = s if isinstance(s, TransactionState) else TransactionState.parse(s)
        if parsed is TransactionState.UNKNOWN:
            raise E.ConfigError(
                f"unknown transaction state {s!r}: one of "
                + ", ".join(x.value for x in TransactionState if x is not TransactionState.UNKNOWN)
            )
        out.append(parsed.value)
    return sorted(set(out))


# ---------------------------------------------------------------------------- list


async def list_transactions(
    rq: AdminRequests,
    *,
    states: Iterable[str | TransactionState] | None = None,
    producer_ids: Iterable[int] | None = None,
    duration_filter_ms: int | None = None,
    transactional_id_pattern: str | None = None,
    timeout_ms: float | None = None,
) -> ListTransactionsResult:
    states_f = _check_state_filters(states)
    pids_f = sorted(set(producer_ids or ()))
    if duration_filter_ms is not None and duration_filter_ms < 0:
        raise E.ConfigError(f"duration_filter_ms must be >= 0 (None: no filter), got {duration_filter_ms}")
    duration = -1 if duration_filter_ms is None else int(duration_filter_ms)
    deadline = rq.deadline(timeout_ms)
    await rq.refresh((), deadline)
    nodes = sorted(rq.client.cluster.brokers)

    pattern = transactional_id_pattern or None

    def make(version: int) -> Request:
        if duration >= 0 and 0 <= version < 1:
            raise E.UnsupportedVersionError(
                "duration_filter_ms needs ListTransactions v1 (Kafka 3.8+, KIP-994); the broker "
                "speaks v0 only"
            )
        if pattern is not None and 0 <= version < 2:
            raise E.UnsupportedVersionError(
                "transactional_id_pattern needs ListTransactions v2 (Kafka 4.1+, KIP-1152); the "
                f"broker speaks v{version}"
            )
        return ListTransactionsRequest(
            state_filters=states_f,
            producer_id_filters=pids_f,
            duration_filter=duration if version >= 1 else -1,
            transactional_id_pattern=pattern if version >= 2 else None,
        )

    async def attempt(batch: list[int]) -> dict[int, Outcome]:
        async def one(node: int) -> Outcome:
            try:
                resp = await rq.request(make, node, deadline)
            except E.KafkaError as exc:
                return exc
            assert isinstance(resp, ListTransactionsResponse)
            if resp.error_code:
                return E.error_for(resp.error_code, f"ListTransactions on broker {node}")
            return [
                TransactionListing(
                    t.transactional_id, t.producer_id, TransactionState.parse(t.transaction_state), node
                )
                for t in resp.transaction_states
            ]

        replies = await _backend.gather(*(one(n) for n in batch))
        return dict(zip(batch, replies, strict=True))

    outcomes = await rq.per_item(nodes, attempt, deadline)
    listed: list[TransactionListing] = []
    errors: dict[int, E.KafkaError] = {}
    for node, o in outcomes.items():
        if isinstance(o, E.KafkaError):
            errors[node] = o
        else:
            listed.extend(o)
    return ListTransactionsResult(sorted(listed, key=lambda t: t.transactional_id), errors)


# ---------------------------------------------------------------------------- describe


async def describe_transactions(
    rq: AdminRequests, transactional_ids: Iterable[str], *, timeout_ms: float | None = None
) -> Results[str, TransactionDescription]:
    items = list(dict.fromkeys(transactional_ids))
    for tid in items:
        if not isinstance(tid, str) or not tid:
            raise E.ConfigError(f"a transactional id is a non-empty string, got {tid!r}")
    deadline = rq.deadline(timeout_ms)

    async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
        resp = await rq.request(
            lambda v: DescribeTransactionsRequest(transactional_ids=batch), node, deadline
        )
        assert isinstance(resp, DescribeTransactionsResponse)
        out: dict[str, Outcome] = {}
        for st in resp.transaction_states:
            err = error_of(st.error_code, f"transactional id {st.transactional_id!r}")
            if err is not None:
                out[st.transactional_id] = err
                continue
            out[st.transactional_id] = TransactionDescription(
                transactional_id=st.transactional_id,
                coordinator_id=node,
                state=TransactionState.parse(st.transaction_state),
                producer_id=st.producer_id,
                producer_epoch=st.producer_epoch,
                transaction_timeout_ms=st.transaction_timeout_ms,
                transaction_start_time_ms=(
                    st.transaction_start_time_ms if st.transaction_start_time_ms >= 0 else None
                ),
                topic_partitions=frozenset(
                    TopicPartition(t.topic, p) for t in st.topics for p in t.partitions
                ),
            )
        return out

    outcomes = await rq.by_coordinator(items, send, deadline, CoordinatorType.TRANSACTION)
    return results(items, outcomes, lambda t, e: TransactionDescription(t, error=e))


async def describe_producers(
    rq: AdminRequests,
    partitions: Iterable[TopicPartition],
    *,
    broker_id: int | None = None,
    timeout_ms: float | None = None,
) -> Results[TopicPartition, PartitionProducerState]:
    tps = list(dict.fromkeys(partitions))
    deadline = rq.deadline(timeout_ms)

    async def send(node: int, batch: list[TopicPartition]) -> dict[TopicPartition, Outcome]:
        by_topic: dict[str, list[int]] = {}
        for tp in batch:
            by_topic.setdefault(tp.topic, []).append(tp.partition)

        def make(version: int) -> Request:
            return DescribeProducersRequest(
                topics=[
                    DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()
                ]
            )

        resp = await rq.request(make, node, deadline)
        assert isinstance(resp, DescribeProducersResponse)
        out: dict[TopicPartition, Outcome] = {}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                err = error_of(p.error_code, p.error_message or f"{tp.topic}-{tp.partition}")
                if err is not None:
                    out[tp] = err
                    continue
                out[tp] = PartitionProducerState(
                    tuple(
                        ProducerState(
                            producer_id=s.producer_id,
                            producer_epoch=s.producer_epoch,
                            last_sequence=s.last_sequence,
                            last_timestamp=s.last_timestamp,
                            coordinator_epoch=s.coordinator_epoch if s.coordinator_epoch >= 0 else None,
                            current_transaction_start_offset=(
                                s.current_txn_start_offset if s.current_txn_start_offset >= 0 else None
                            ),
                        )
                        for s in p.active_producers
                    )
                )
        return out

    if broker_id is None:
        outcomes = await rq.by_leader(tps, send, deadline)
    else:
        # The caller named the broker: its answer is final (Java fails NOT_LEADER_OR_FOLLOWER
        # from a broker given in the options instead of looking for the leader).
        def retry_if(err: E.KafkaError) -> bool:
            return err.retriable and not isinstance(
                err, (E.NotLeaderOrFollowerError, E.UnknownTopicOrPartitionError)
            )

        outcomes = await rq.per_item(tps, lambda batch: send(broker_id, batch), deadline, retry_if=retry_if)
    return results(tps, outcomes, lambda tp, e: PartitionProducerState(error=e))


# ---------------------------------------------------------------------------- abort / fence


async def abort_transaction(
    rq: AdminRequests, spec: AbortTransactionSpec, *, timeout_ms: float | None = None
) -> None:
    """Raises the typed error of a failed abort (``InvalidProducerEpochError`` when the
    producer has moved on to a newer epoch, ``TransactionCoordinatorFencedError`` for a
    stale coordinator epoch, ``ClusterAuthorizationFailedError`` without ClusterAction)."""
    for name in ("producer_id", "producer_epoch", "coordinator_epoch"):
        value = getattr(spec, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise E.ConfigError(f"AbortTransactionSpec.{name} must be an int >= 0, got {value!r}")
    tp = spec.topic_partition
    deadline = rq.deadline(timeout_ms)

    async def send(node: int, batch: list[TopicPartition]) -> dict[TopicPartition, Outcome]:
        def make(version: int) -> Request:
            return WriteTxnMarkersRequest(
                markers=[
                    WriteTxnMarkersRequest.WritableTxnMarker(
                        producer_id=spec.producer_id,
                        producer_epoch=spec.producer_epoch,
                        transaction_result=False,  # abort
                        topics=[
                            WriteTxnMarkersRequest.WritableTxnMarkerTopic(
                                name=tp.topic, partition_indexes=[tp.partition]
                            )
                        ],
                        coordinator_epoch=spec.coordinator_epoch,
                    )
                ]
            )

        resp = await rq.request(make, node, deadline)
        assert isinstance(resp, WriteTxnMarkersResponse)
        for m in resp.markers:
            for t in m.topics:
                for p in t.partitions:
                    if t.name == tp.topic and p.partition_index == tp.partition:
                        return {
                            tp: error_of(p.error_code, f"abort of producer {spec.producer_id} on {tp}")
                            or Result()
                        }
        return {tp: E.UnknownServerError(f"WriteTxnMarkers answered nothing for {tp}")}

    outcome = (await rq.by_leader([tp], send, deadline))[tp]
    if isinstance(outcome, E.KafkaError):
        raise outcome


async def fence_producers(
    rq: AdminRequests,
    transactional_ids: Iterable[str],
    *,
    transaction_timeout_ms: int | None = None,
    timeout_ms: float | None = None,
) -> Results[str, FenceProducerResult]:
    items = list(dict.fromkeys(transactional_ids))
    for tid in items:
        if not isinstance(tid, str) or not tid:
            raise E.ConfigError(f"a transactional id is a non-empty string, got {tid!r}")
    txn_timeout = (
        int(rq.client.config.request_timeout_ms) if transaction_timeout_ms is None else transaction_timeout_ms
    )
    deadline = rq.deadline(timeout_ms)

    async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
        async def one(tid: str) -> Outcome:
            try:
                resp = await rq.request(
                    lambda v: InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=txn_timeout),
                    node,
                    deadline,
                )
            except E.KafkaError as exc:
                return exc
            assert isinstance(resp, InitProducerIdResponse)
            err = error_of(resp.error_code, f"fencing transactional id {tid!r}")
            return err or FenceProducerResult(tid, resp.producer_id, resp.producer_epoch)

        replies = await _backend.gather(*(one(t) for t in batch))
        return dict(zip(batch, replies, strict=True))

    outcomes = await rq.by_coordinator(items, send, deadline, CoordinatorType.TRANSACTION)
    return results(items, outcomes, lambda t, e: FenceProducerResult(t, error=e))


# ---------------------------------------------------------------------------- find-hanging


async def find_hanging_transactions(
    rq: AdminRequests,
    partitions: Iterable[TopicPartition],
    *,
    max_transaction_timeout_ms: float = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    broker_id: int | None = None,
    now_ms: int | None = None,
    timeout_ms: float | None = None,
) -> list[HangingTransaction]:
    """Open transactions on ``partitions`` that look hung, as ``kafka-transactions.sh
    find-hanging`` finds them, plus the ones the coordinator still holds open too long.

    Kafka's tool: a producer whose open transaction's last write is older than
    ``max_transaction_timeout_ms`` (its option, in whole minutes, default 15 = the
    broker's ``transaction.max.timeout.ms``) is a candidate; it hangs when no
    coordinator lists a transactional id for its producer id, the coordinator cannot
    describe it, or the coordinator's transaction does not include the partition. A
    candidate that the coordinator still holds open with the partition is not reported
    by Kafka's tool (the coordinator will abort it when its own timeout passes); we
    report it too, as ``"open-too-long"``, when the coordinator's transaction started more
    than ``max_transaction_timeout_ms`` ago: with the default threshold that is a
    transaction the coordinator should already have aborted, and with a smaller one
    (ours accepts any, Kafka's tool whole minutes) it is how an operator finds a
    producer that died with a long transaction timeout without waiting for it.
    """
    if max_transaction_timeout_ms < 0:
        raise E.ConfigError("max_transaction_timeout_ms must be >= 0")
    deadline = rq.deadline(timeout_ms)

    def remaining() -> float:
        return rq.remaining_ms(deadline)

    states = await describe_producers(rq, partitions, broker_id=broker_id, timeout_ms=remaining())
    now = int(time.time() * 1000) if now_ms is None else now_ms
    candidates: list[tuple[TopicPartition, ProducerState]] = []
    for tp, st in states.items():
        if st.error is not None:
            raise st.error
        for p in st.producers:
            if (
                p.current_transaction_start_offset is not None
                and now - p.last_timestamp > max_transaction_timeout_ms
            ):
                candidates.append((tp, p))
    if not candidates:
        return []
    listing = await list_transactions(
        rq, producer_ids={p.producer_id for _, p in candidates}, timeout_ms=remaining()
    )
    if listing.errors:
        raise next(iter(listing.errors.values()))
    tid_of = {t.producer_id: t.transactional_id for t in listing.transactions}
    descriptions = await describe_transactions(rq, set(tid_of.values()), timeout_ms=remaining())
    out: list[HangingTransaction] = []
    for tp, p in candidates:
        tid = tid_of.get(p.producer_id)
        if tid is None:
            out.append(HangingTransaction(tp, p, "unknown-producer"))
            continue
        d = descriptions[tid]
        if d.error is not None:
            if isinstance(d.error, E.TransactionalIdNotFoundError):
                out.append(HangingTransaction(tp, p, "unknown-transactional-id", tid))
                continue
            raise d.error
        if tp not in d.topic_partitions:
            out.append(HangingTransaction(tp, p, "partition-not-in-transaction", tid))
        elif (
            d.transaction_start_time_ms is not None
            and now - d.transaction_start_time_ms > max_transaction_timeout_ms
        ):
            out.append(HangingTransaction(tp, p, "open-too-long", tid))
    return out
