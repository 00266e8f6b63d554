"""A partition's producer state as the transactions admin APIs see it (KIP-664).

Pure functions over a ``PartitionLog``: the active producers DescribeProducers lists,
and the ABORT marker WriteTxnMarkers writes when an admin aborts a hanging transaction
(``Admin.abort_transaction``). The handlers are in ``broker/api/transactions_admin.py``.

As Kafka's ``ProducerStateManager``: every producer id the partition has seen is
active (idempotent and transactional alike), with its current epoch, the last sequence
and max timestamp of its last batch, the epoch of the coordinator that wrote its last
marker (-1 before any) and the first offset of its open transaction (-1 if none).
The last timestamp is the max timestamp of the producer's last batch, or the time of
its last marker, whichever came last (as Kafka's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aiokafka_lite.broker.log import PartitionLog
from aiokafka_lite.core.errors import InvalidProducerEpochError, TransactionCoordinatorFencedError

__all__ = ["ActiveProducer", "active_producers", "write_txn_marker"]

NONE: Final = 0


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


def active_producers(log: PartitionLog) -> list[ActiveProducer]:
    """The partition's producers, by producer id."""
    out = []
    for pid in sorted(log.producers):
        st = log.producers[pid]
        last = st.batches[-1] if st.batches else None
        out.append(
            ActiveProducer(
                producer_id=pid,
                producer_epoch=st.epoch,
                last_sequence=last.last_seq if last is not None else -1,
                last_timestamp=st.last_timestamp,
                coordinator_epoch=st.coordinator_epoch,
                current_txn_start_offset=log.ongoing_txns.get(pid, -1),
            )
        )
    return out


def write_txn_marker(
    log: PartitionLog, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool = False
) -> int:
    """Writes a COMMIT/ABORT marker for ``producer_id`` as WriteTxnMarkers does; the error
    code of the partition's result. Kafka's checks: a producer epoch older than the
    partition's is INVALID_PRODUCER_EPOCH, a coordinator epoch older than the one of the
    producer's last marker is TRANSACTION_COORDINATOR_FENCED. A producer without an open
    transaction here still gets the marker (Kafka writes it too; it ends nothing)."""
    state = log.producers.get(producer_id)
    if state is not None:
        if producer_epoch < state.epoch:
            return InvalidProducerEpochError.code
        if coordinator_epoch < state.coordinator_epoch:
            return TransactionCoordinatorFencedError.code
    try:
        log.write_control_batch(producer_id, producer_epoch, commit, coordinator_epoch)
    except InvalidProducerEpochError:
        return InvalidProducerEpochError.code
    return NONE
