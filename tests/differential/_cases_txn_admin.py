"""Differential cases of the transactions admin APIs (KIP-664), area ``txnadmin``:
DescribeProducers, WriteTxnMarkers as ``Admin.abort_transaction`` sends it (an ABORT
marker from an admin, not from the coordinator), ListTransactions' filters and
DescribeTransactions.

Observations never hold producer ids or wall-clock times (each broker has its own):
only whether ids match and how offsets, sequences and epochs relate.
"""

from __future__ import annotations

from _diffkit import (
    Observation,
    Target,
    add_partitions,
    batch,
    case,
    fetch,
    init_producer_id,
    produce,
)

from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

WRITE_TXN_MARKERS_VERSION = 1  # what Java's admin sends for abortTransaction on Kafka 4.x


async def _open_txn(t: Target, prefix: str, records: int = 3) -> tuple[str, RawClient, str, int, int]:
    """A transaction (the version-1 protocol: AddPartitionsToTxn, Produce v11) left open
    on partition 0 of a new topic with ``records`` records after one plain record."""
    topic = await t.create_topic(prefix, partitions=2)
    c = await t.client()
    await produce(c, topic, batch([b"plain"]))
    txn = t.unique("txnadm")
    pid = await init_producer_id(c, txn, timeout_ms=300_000)
    assert pid.error_code == 0, pid
    assert await add_partitions(c, txn, pid.producer_id, pid.producer_epoch, topic) == 0
    data = batch(
        [b"t%d" % i for i in range(records)],
        producer_id=pid.producer_id,
        producer_epoch=pid.producer_epoch,
        base_sequence=0,
        transactional=True,
    )
    r = await produce(c, topic, data, transactional_id=txn)
    assert r.error == 0, r
    return topic, c, txn, pid.producer_id, pid.producer_epoch


async def _producers(c: RawClient, topic: str, partitions: list[int], pid: int, epoch: int) -> Observation:
    resp = await c.request(
        DescribeProducersRequest(
            topics=[DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=partitions)]
        ),
        0,
    )
    assert isinstance(resp, DescribeProducersResponse)
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            out[f"p{p.partition_index}"] = {
                "error": p.error_code,
                "producers": [
                    {
                        "ours": s.producer_id == pid,
                        "epoch_delta": s.producer_epoch - epoch,
                        "last_sequence": s.last_sequence,
                        "coordinator_epoch": s.coordinator_epoch,
                        "txn_start": s.current_txn_start_offset,
                        "has_timestamp": s.last_timestamp > 0,
                    }
                    for s in sorted(p.active_producers, key=lambda s: s.producer_id != pid)
                ],
            }
    return out


async def _abort_marker(
    c: RawClient, topic: str, partition: int, pid: int, epoch: int, coordinator_epoch: int
) -> int:
    resp = await c.request(
        WriteTxnMarkersRequest(
            markers=[
                WriteTxnMarkersRequest.WritableTxnMarker(
                    producer_id=pid,
                    producer_epoch=epoch,
                    transaction_result=False,
                    topics=[
                        WriteTxnMarkersRequest.WritableTxnMarkerTopic(
                            name=topic, partition_indexes=[partition]
                        )
                    ],
                    coordinator_epoch=coordinator_epoch,
                )
            ]
        ),
        WRITE_TXN_MARKERS_VERSION,
    )
    assert isinstance(resp, WriteTxnMarkersResponse)
    return resp.markers[0].topics[0].partitions[0].error_code


@case("txnadmin")
async def case_describe_producers_of_an_open_transaction(t: Target) -> Observation:
    topic, c, _txn, pid, epoch = await _open_txn(t, "dprod")
    missing = await c.request(
        DescribeProducersRequest(
            topics=[DescribeProducersRequest.TopicRequest(name=t.unique("nosuch"), partition_indexes=[0])]
        ),
        0,
    )
    assert isinstance(missing, DescribeProducersResponse)
    return {
        # partition 0: the open transaction; 1: no producer; 7: no such partition.
        "producers": await _producers(c, topic, [0, 1, 7], pid, epoch),
        "unknown_topic": [p.error_code for t_ in missing.topics for p in t_.partitions],
    }


@case("txnadmin")
async def case_admin_abort_marker_ends_the_open_transaction(t: Target) -> Observation:
    topic, c, _txn, pid, epoch = await _open_txn(t, "abort")
    before = await fetch(c, topic, read_committed=True)
    code = await _abort_marker(c, topic, 0, pid, epoch, 0)
    after = await fetch(c, topic, read_committed=True)
    return {
        "before": {"lso": before.last_stable_offset, "hw": before.high_watermark},
        "abort": code,
        "after": after.observe(),
        "producers": await _producers(c, topic, [0], pid, epoch),
    }


@case("txnadmin")
async def case_admin_abort_marker_errors(t: Target) -> Observation:
    topic, c, _txn, pid, epoch = await _open_txn(t, "aborterr")
    return {
        "unknown_topic": await _abort_marker(c, t.unique("nosuch"), 0, pid, epoch, 0),
        "unknown_partition": await _abort_marker(c, topic, 9, pid, epoch, 0),
        # A marker from a coordinator epoch 5 ends it; a later one from epoch 3 is fenced.
        "first": await _abort_marker(c, topic, 0, pid, epoch, 5),
        "older_coordinator": await _abort_marker(c, topic, 0, pid, epoch, 3),
        # A producer epoch older than the partition's.
        "bumped": await _abort_marker(c, topic, 0, pid, epoch + 2, 5),
        "stale_epoch": await _abort_marker(c, topic, 0, pid, epoch + 1, 5),
        "producers": await _producers(c, topic, [0], pid, epoch),
    }


@case("txnadmin")
async def case_list_and_describe_transactions(t: Target) -> Observation:
    topic, c, txn, pid, _epoch = await _open_txn(t, "list")

    async def listed(version: int, **fields: object) -> Observation:
        resp = await c.request(ListTransactionsRequest(**fields), version)  # type: ignore[arg-type]
        assert isinstance(resp, ListTransactionsResponse)
        return {
            "error": resp.error_code,
            "unknown_states": resp.unknown_state_filters,
            "ours": [(s.transactional_id == txn, s.transaction_state) for s in resp.transaction_states],
        }

    # An id with a producer but no transaction yet (Empty, no start time).
    idle = t.unique("txnadm-idle")
    idle_pid = await init_producer_id(c, idle)
    assert idle_pid.error_code == 0, idle_pid
    described = await c.request(DescribeTransactionsRequest(transactional_ids=[txn, t.unique("nosuch")]), 0)
    assert isinstance(described, DescribeTransactionsResponse)
    ours, unknown = described.transaction_states
    return {
        "by_pid": await listed(0, producer_id_filters=[pid]),
        "by_pid_and_state": await listed(0, producer_id_filters=[pid], state_filters=["Ongoing", "Sleeping"]),
        "by_pid_other_state": await listed(0, producer_id_filters=[pid], state_filters=["CompleteCommit"]),
        "by_pid_long_running": await listed(1, producer_id_filters=[pid], duration_filter=3_600_000),
        "by_pid_running": await listed(1, producer_id_filters=[pid], duration_filter=0),
        "by_pattern": await listed(2, transactional_id_pattern=txn.replace("-", ".")),
        "idle_long_running": await listed(
            1, producer_id_filters=[idle_pid.producer_id], duration_filter=3_600_000
        ),
        "idle_by_state": await listed(0, producer_id_filters=[idle_pid.producer_id], state_filters=["Empty"]),
        "describe": {
            "error": ours.error_code,
            "state": ours.transaction_state,
            "timeout": ours.transaction_timeout_ms,
            "same_pid": ours.producer_id == pid,
            "has_start": ours.transaction_start_time_ms > 0,
            "topics": [(x.topic == topic, x.partitions) for x in ours.topics],
        },
        "unknown": unknown.error_code,
    }
