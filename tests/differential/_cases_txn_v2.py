"""Differential cases of Transactions V2 (KIP-890 part 2), area ``txn2``.

A Kafka 4.x cluster formatted with defaults finalizes ``transaction.version=2``; so does
the embedded broker. Kafka decides per request which protocol a transaction speaks:
EndTxn v5+ ends it with an epoch bump (and answers the new producer id/epoch), Produce
v12+ adds a partition to the transaction implicitly, TxnOffsetCommit v5+ needs no
AddOffsetsToTxn. Older request versions keep the version-1 rules on the same cluster.

Observations never hold producer ids (each broker allocates its own): only whether the
id stayed the same and by how much the epoch moved.
"""

from __future__ import annotations

import asyncio
import time

from _diffkit import (
    RETRIABLE_COORDINATOR_ERRORS,
    Observation,
    Target,
    add_partitions,
    batch,
    case,
    end_txn,
    fetch,
    find_coordinator,
    init_producer_id,
    produce,
)

from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

#: The first versions of the TV2 requests.
END_TXN_V2 = 5
PRODUCE_V2 = 12
TXN_OFFSET_COMMIT_V2 = 5


async def _txn(t: Target, prefix: str) -> tuple[str, RawClient, str, int, int]:
    topic = await t.create_topic(prefix)
    c = await t.client()
    txn = t.unique("txn2")
    pid = await init_producer_id(c, txn)
    assert pid.error_code == 0, pid
    return topic, c, txn, pid.producer_id, pid.producer_epoch


def _txn_batch(pid: int, epoch: int, seq: int, n: int = 1) -> bytes:
    return batch(
        [b"t%d" % (seq + i) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )


async def _end_v5(c: RawClient, txn: str, pid: int, epoch: int, *, commit: bool) -> EndTxnResponse:
    """EndTxn v5 as a client sends it: retried while an earlier end is still completing."""
    deadline = time.monotonic() + 10
    while True:
        resp = await c.request(
            EndTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=commit),
            END_TXN_V2,
        )
        assert isinstance(resp, EndTxnResponse)
        if resp.error_code != 51 or time.monotonic() > deadline:
            return resp
        await asyncio.sleep(0.02)


def _ended(resp: EndTxnResponse, pid: int, epoch: int) -> Observation:
    """An EndTxn v5 answer relative to the producer id/epoch the request carried."""
    return {
        "error": resp.error_code,
        "same_pid": resp.producer_id == pid,
        "epoch_delta": resp.producer_epoch - epoch if resp.producer_epoch >= 0 else None,
        "no_pid": resp.producer_id == -1,
    }


async def _end_v3(c: RawClient, txn: str, pid: int, epoch: int, *, commit: bool) -> int:
    deadline = time.monotonic() + 10
    while True:
        code = await end_txn(c, txn, pid, epoch, commit=commit)
        if code != 51 or time.monotonic() > deadline:
            return code
        await asyncio.sleep(0.02)


async def _views(c: RawClient, topic: str, within: float = 10.0) -> Observation:
    """Both isolation levels once no transaction is open on the partition (Kafka writes
    the markers after answering EndTxn)."""
    deadline = time.monotonic() + within
    while True:
        f = await fetch(c, topic)
        if f.last_stable_offset == f.high_watermark or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.02)
    committed = await fetch(c, topic, read_committed=True)
    uncommitted = await fetch(c, topic)
    return {"read_committed": committed.observe(), "read_uncommitted": uncommitted.observe()}


async def _describe(c: RawClient, txn: str, pid: int, epoch: int) -> Observation:
    resp = await c.request(DescribeTransactionsRequest(transactional_ids=[txn]), 0)
    assert isinstance(resp, DescribeTransactionsResponse)
    st = resp.transaction_states[0]
    return {
        "error": st.error_code,
        "state": st.transaction_state,
        "same_pid": st.producer_id == pid,
        "epoch_delta": st.producer_epoch - epoch,
        # A test topic's name without its unique suffix; Kafka's own topics
        # (__consumer_offsets) with a partition count, not indexes (they differ).
        "topics": sorted(
            (td.topic, len(td.partitions))
            if td.topic.startswith("__")
            else (td.topic.split("-")[1], sorted(td.partitions))
            for td in st.topics
        ),
    }


async def _settled_describe(
    c: RawClient, txn: str, pid: int, epoch: int, within: float = 10.0
) -> Observation:
    """DescribeTransactions once the transaction left PrepareCommit/PrepareAbort."""
    deadline = time.monotonic() + within
    while True:
        d = await _describe(c, txn, pid, epoch)
        if not str(d["state"]).startswith("Prepare") or time.monotonic() > deadline:
            return d
        await asyncio.sleep(0.02)


async def _txn_offset_commit(
    c: RawClient, txn: str, group: str, pid: int, epoch: int, topic: str, *, version: int, offset: int = 5
) -> int:
    deadline = time.monotonic() + 10
    while True:
        resp = await c.request(
            TxnOffsetCommitRequest(
                transactional_id=txn,
                group_id=group,
                producer_id=pid,
                producer_epoch=epoch,
                generation_id_or_member_epoch=-1,
                member_id="",
                topics=[
                    TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                        name=topic,
                        partitions=[
                            TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                                partition_index=0, committed_offset=offset, committed_metadata=""
                            )
                        ],
                    )
                ],
            ),
            version,
        )
        assert isinstance(resp, TxnOffsetCommitResponse)
        code = resp.topics[0].partitions[0].error_code
        # Retried as a client does: the offsets topic may still be loading on a new cluster.
        if code not in RETRIABLE_COORDINATOR_ERRORS or time.monotonic() > deadline:
            return code
        await asyncio.sleep(0.02)


async def _add_offsets(c: RawClient, txn: str, pid: int, epoch: int, group: str) -> int:
    resp = await c.request(
        AddOffsetsToTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch, group_id=group), 3
    )
    assert isinstance(resp, AddOffsetsToTxnResponse)
    return resp.error_code


async def _committed(t: Target, group: str, topic: str) -> list[tuple[int, int]]:
    c = await t.client()
    assert await find_coordinator(c, group, 0) == 0
    resp = await c.request(
        OffsetFetchRequest(
            groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group,
                    topics=[OffsetFetchRequest.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])],
                )
            ],
            require_stable=False,
        ),
        8,
    )
    assert isinstance(resp, OffsetFetchResponse)
    return [(p.committed_offset, p.error_code) for tp in resp.groups[0].topics for p in tp.partitions]


async def _committed_once(
    t: Target, group: str, topic: str, want: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The committed offsets, waited for until they are ``want`` (Kafka completes the
    offsets when the marker reaches the offsets partition, after EndTxn's answer)."""
    deadline = time.monotonic() + 10
    got = await _committed(t, group, topic)
    while got != want and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        got = await _committed(t, group, topic)
    return got


# -- features ------------------------------------------------------------------------


@case("txn2")
async def case_finalized_transaction_version(t: Target) -> Observation:
    c = await t.client()
    resp = await c.request(
        ApiVersionsRequest(client_software_name="differential", client_software_version="1"), 4
    )
    assert isinstance(resp, ApiVersionsResponse)
    supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in resp.finalized_features}
    versions = {k.api_key: k.max_version for k in resp.api_keys}
    return {
        "supported": supported.get("transaction.version"),
        "finalized": finalized.get("transaction.version"),
        "epoch_set": resp.finalized_features_epoch >= 0,
        "end_txn_max": versions.get(EndTxnRequest.API_KEY),
    }


# -- EndTxn v5: the epoch bump ---------------------------------------------------------


@case("txn2")
async def case_commit_bumps_epoch(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "tv2commit")
    r = await produce(c, topic, _txn_batch(pid, epoch, 0, 2), transactional_id=txn, version=PRODUCE_V2)
    during = await _describe(c, txn, pid, epoch)
    ended = await _end_v5(c, txn, pid, epoch, commit=True)
    views = await _views(c, topic)
    after = await _settled_describe(c, txn, pid, epoch)
    # The next transaction runs with the new epoch, sequence numbers from 0 again.
    new_epoch = ended.producer_epoch
    r2 = await produce(c, topic, _txn_batch(pid, new_epoch, 0), transactional_id=txn, version=PRODUCE_V2)
    ended2 = await _end_v5(c, txn, pid, new_epoch, commit=False)
    return {
        "produce": r.observe(),
        "during": during,
        "end": _ended(ended, pid, epoch),
        "views": views,
        "after": after,
        "second_produce": r2.observe(),
        "second_end": _ended(ended2, pid, new_epoch),
        "second_views": await _views(c, topic),
    }


@case("txn2")
async def case_abort_bumps_epoch(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "tv2abort")
    r = await produce(c, topic, _txn_batch(pid, epoch, 0, 2), transactional_id=txn, version=PRODUCE_V2)
    ended = await _end_v5(c, txn, pid, epoch, commit=False)
    return {
        "produce": r.observe(),
        "end": _ended(ended, pid, epoch),
        "views": await _views(c, topic),
        "after": await _settled_describe(c, txn, pid, epoch),
    }


@case("txn2")
async def case_end_empty_transaction(t: Target) -> Observation:
    """Empty: abort bumps the epoch (nothing to mark), commit is INVALID_TXN_STATE."""
    _topic, c, txn, pid, epoch = await _txn(t, "tv2empty")
    commit = await _end_v5(c, txn, pid, epoch, commit=True)
    abort = await _end_v5(c, txn, pid, epoch, commit=False)
    after_abort = await _settled_describe(c, txn, pid, epoch)
    abort_again = await _end_v5(c, txn, pid, epoch + 1, commit=False)
    commit_after = await _end_v5(c, txn, pid, epoch + 2, commit=True)
    return {
        "commit": _ended(commit, pid, epoch),
        "abort": _ended(abort, pid, epoch),
        "after_abort": after_abort,
        "abort_again": _ended(abort_again, pid, epoch + 1),
        "commit_after_aborts": _ended(commit_after, pid, epoch + 2),
    }


@case("txn2")
async def case_end_retried_with_old_epoch(t: Target) -> Observation:
    """After a commit: the same EndTxn again (its answer lost) succeeds with the same new
    epoch; the other outcome with the old epoch, and a commit with the new epoch (nothing
    open), are INVALID_TXN_STATE; an abort with the new epoch bumps again."""
    topic, c, txn, pid, epoch = await _txn(t, "tv2retry")
    await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn, version=PRODUCE_V2)
    first = await _end_v5(c, txn, pid, epoch, commit=True)
    await _settled_describe(c, txn, pid, epoch)
    retry = await _end_v5(c, txn, pid, epoch, commit=True)
    retry_other = await _end_v5(c, txn, pid, epoch, commit=False)
    commit_current = await _end_v5(c, txn, pid, epoch + 1, commit=True)
    older = await _end_v5(c, txn, pid, epoch - 1, commit=True) if epoch > 0 else None
    future = await _end_v5(c, txn, pid, epoch + 5, commit=True)
    abort_current = await _end_v5(c, txn, pid, epoch + 1, commit=False)
    return {
        "first": _ended(first, pid, epoch),
        "retry": _ended(retry, pid, epoch),
        "retry_other_outcome": _ended(retry_other, pid, epoch),
        "commit_current": _ended(commit_current, pid, epoch + 1),
        "older": None if older is None else _ended(older, pid, epoch - 1),
        "future": _ended(future, pid, epoch + 5),
        "abort_current": _ended(abort_current, pid, epoch + 1),
        "views": await _views(c, topic),
    }


@case("txn2")
async def case_end_with_unknown_producer_id(t: Target) -> Observation:
    _topic, c, txn, pid, epoch = await _txn(t, "tv2badpid")
    return {"end": _ended(await _end_v5(c, txn, pid + 1_000_000, epoch, commit=False), pid, epoch)}


@case("txn2")
async def case_end_unknown_transactional_id(t: Target) -> Observation:
    c = await t.client()
    txn = t.unique("txn2none")
    await find_coordinator(c, txn, 1)
    return {"end": _ended(await _end_v5(c, txn, 1, 0, commit=True), 1, 0)}


# -- Produce v12+: implicit AddPartitionsToTxn -------------------------------------------


@case("txn2")
async def case_produce_adds_partition(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "tv2implicit")
    r = await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn, version=PRODUCE_V2)
    during = await _describe(c, txn, pid, epoch)
    views = {"read_committed": (await fetch(c, topic, read_committed=True)).observe()}
    r2 = await produce(c, topic, _txn_batch(pid, epoch, 1), transactional_id=txn, version=PRODUCE_V2)
    return {"produce": r.observe(), "again": r2.observe(), "during": during, **views}


@case("txn2")
async def case_produce_old_epoch_after_commit(t: Target) -> Observation:
    """A zombie write: a batch with the epoch of a committed transaction."""
    topic, c, txn, pid, epoch = await _txn(t, "tv2zombie")
    await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn, version=PRODUCE_V2)
    ended = await _end_v5(c, txn, pid, epoch, commit=True)
    await _views(c, topic)
    late = await produce(c, topic, _txn_batch(pid, epoch, 1), transactional_id=txn, version=PRODUCE_V2)
    late_v11 = await produce(c, topic, _txn_batch(pid, epoch, 1), transactional_id=txn, version=11)
    late_seq0 = await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn, version=PRODUCE_V2)
    return {
        "end": _ended(ended, pid, epoch),
        "late": late.observe(),
        "late_v11": late_v11.observe(),
        "late_seq0": late_seq0.observe(),
        "describe": await _describe(c, txn, pid, epoch),
        "views": await _views(c, topic),
    }


@case("txn2")
async def case_produce_future_epoch(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "tv2future")
    r = await produce(c, topic, _txn_batch(pid, epoch + 1, 0), transactional_id=txn, version=PRODUCE_V2)
    return {
        "produce": r.observe(),
        "describe": await _describe(c, txn, pid, epoch),
        "views": await _views(c, topic),
    }


@case("txn2")
async def case_produce_other_producer_id(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "tv2otherpid")
    other = await init_producer_id(c)
    r = await produce(c, topic, _txn_batch(other.producer_id, 0, 0), transactional_id=txn, version=PRODUCE_V2)
    return {"produce": r.observe(), "describe": await _describe(c, txn, pid, epoch)}


@case("txn2")
async def case_produce_v10_before_add_partitions(t: Target) -> Observation:
    """Before Produce v11 the error for a partition outside the transaction is the
    generic INVALID_TXN_STATE (KIP-890's TRANSACTION_ABORTABLE needs v11)."""
    topic, c, txn, pid, epoch = await _txn(t, "tv2v10")
    r = await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn, version=10)
    return {"produce": r.observe(), "describe": await _describe(c, txn, pid, epoch)}


@case("txn2")
async def case_produce_during_prepare_is_retried(t: Target) -> Observation:
    """A Produce v12 right after EndTxn: fenced if it still carries the old epoch, a new
    transaction with the new epoch once the markers are written."""
    topic, c, txn, pid, epoch = await _txn(t, "tv2next")
    await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn, version=PRODUCE_V2)
    ended = await _end_v5(c, txn, pid, epoch, commit=True)
    deadline = time.monotonic() + 10
    while True:
        r = await produce(
            c, topic, _txn_batch(pid, ended.producer_epoch, 0), transactional_id=txn, version=PRODUCE_V2
        )
        # Kafka answers a retriable error while the previous transaction completes.
        if r.error == 0 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.02)
    return {"produce": r.observe(), "describe": await _describe(c, txn, pid, epoch)}


# -- InitProducerId during a TV2 transaction ---------------------------------------------


@case("txn2")
async def case_init_producer_id_fences_open_transaction(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "tv2fence")
    await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn, version=PRODUCE_V2)
    first = await c.request(
        __import__("aiokafka_lite.wire.messages", fromlist=["InitProducerIdRequest"]).InitProducerIdRequest(
            transactional_id=txn, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
        ),
        5,
    )
    again = await init_producer_id(c, txn, version=5)
    stale_produce = await produce(
        c, topic, _txn_batch(pid, epoch, 1), transactional_id=txn, version=PRODUCE_V2
    )
    stale_end = await _end_v5(c, txn, pid, epoch, commit=True)
    return {
        "first": first.error_code,  # type: ignore[attr-defined]
        "again": again.error_code,
        "same_pid": again.producer_id == pid,
        "epoch_delta": again.producer_epoch - epoch,
        "stale_produce": stale_produce.observe(),
        "stale_end": _ended(stale_end, pid, epoch),
        "views": await _views(c, topic),
    }


@case("txn2")
async def case_init_producer_id_with_bumped_epoch(t: Target) -> Observation:
    """KIP-360 resumption after a TV2 commit: InitProducerId with the epoch EndTxn
    returned bumps once more. With the epoch before the commit, Kafka takes it for a
    retried InitProducerId (it is the last epoch) and answers the current one."""
    topic, c, txn, pid, epoch = await _txn(t, "tv2resume")
    await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn, version=PRODUCE_V2)
    ended = await _end_v5(c, txn, pid, epoch, commit=True)
    await _settled_describe(c, txn, pid, epoch)
    stale = await init_producer_id(c, txn, producer_id=pid, producer_epoch=epoch, version=5)
    current = await init_producer_id(c, txn, producer_id=pid, producer_epoch=ended.producer_epoch, version=5)
    return {
        "stale": stale.error_code,
        "stale_epoch_delta": stale.producer_epoch - epoch,
        "current": current.error_code,
        "same_pid": current.producer_id == pid,
        "epoch_delta": current.producer_epoch - epoch,
    }


# -- TxnOffsetCommit v5 ----------------------------------------------------------------


@case("txn2")
async def case_txn_offset_commit_without_add_offsets(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "tv2off")
    group = t.unique("tv2group")
    assert await find_coordinator(c, group, 0) == 0
    committed = await _txn_offset_commit(c, txn, group, pid, epoch, topic, version=TXN_OFFSET_COMMIT_V2)
    during = await _describe(c, txn, pid, epoch)
    before = await _committed(t, group, topic)
    ended = await _end_v5(c, txn, pid, epoch, commit=True)
    after = await _committed_once(t, group, topic, [(5, 0)])
    return {
        "commit": committed,
        "during_state": during["state"],
        "during_partitions": during["topics"],
        "before_end": before,
        "end": _ended(ended, pid, epoch),
        "after": after,
    }


@case("txn2")
async def case_txn_offset_commit_v4_without_add_offsets(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "tv2off4")
    group = t.unique("tv2group")
    assert await find_coordinator(c, group, 0) == 0
    return {"commit": await _txn_offset_commit(c, txn, group, pid, epoch, topic, version=4)}


@case("txn2")
async def case_txn_offset_commit_aborted(t: Target) -> Observation:
    topic, c, txn, pid, epoch = await _txn(t, "tv2offabort")
    group = t.unique("tv2group")
    assert await find_coordinator(c, group, 0) == 0
    committed = await _txn_offset_commit(c, txn, group, pid, epoch, topic, version=TXN_OFFSET_COMMIT_V2)
    ended = await _end_v5(c, txn, pid, epoch, commit=False)
    await _settled_describe(c, txn, pid, epoch)
    return {"commit": committed, "end": _ended(ended, pid, epoch), "after": await _committed(t, group, topic)}


@case("txn2")
async def case_txn_offset_commit_old_epoch_after_end(t: Target) -> Observation:
    """A zombie offset commit: the epoch of an ended transaction."""
    topic, c, txn, pid, epoch = await _txn(t, "tv2offzombie")
    group = t.unique("tv2group")
    assert await find_coordinator(c, group, 0) == 0
    first = await _txn_offset_commit(c, txn, group, pid, epoch, topic, version=TXN_OFFSET_COMMIT_V2)
    ended = await _end_v5(c, txn, pid, epoch, commit=True)
    await _settled_describe(c, txn, pid, epoch)
    late = await _txn_offset_commit(c, txn, group, pid, epoch, topic, version=TXN_OFFSET_COMMIT_V2, offset=9)
    late_v4 = await _txn_offset_commit(c, txn, group, pid, epoch, topic, version=4, offset=9)
    return {
        "first": first,
        "end": _ended(ended, pid, epoch),
        "late": late,
        "late_v4": late_v4,
        "describe": await _describe(c, txn, pid, epoch),
        "after": await _committed_once(t, group, topic, [(5, 0)]),
    }


@case("txn2")
async def case_txn_offset_commit_with_add_offsets(t: Target) -> Observation:
    """A v1-style client: AddOffsetsToTxn, TxnOffsetCommit v3 and EndTxn v5."""
    topic, c, txn, pid, epoch = await _txn(t, "tv2offmixed")
    group = t.unique("tv2group")
    added = await _add_offsets(c, txn, pid, epoch, group)
    assert await find_coordinator(c, group, 0) == 0
    committed = await _txn_offset_commit(c, txn, group, pid, epoch, topic, version=3)
    ended = await _end_v5(c, txn, pid, epoch, commit=True)
    return {
        "add_offsets": added,
        "commit": committed,
        "end": _ended(ended, pid, epoch),
        "after": await _committed_once(t, group, topic, [(5, 0)]),
    }


# -- version-1 requests on a TV2 cluster --------------------------------------------------


@case("txn2")
async def case_v1_transaction_on_tv2_cluster(t: Target) -> Observation:
    """AddPartitionsToTxn v3 + Produce v11 + EndTxn v3: no epoch bump."""
    topic, c, txn, pid, epoch = await _txn(t, "tv2asv1")
    added = await add_partitions(c, txn, pid, epoch, topic)
    r = await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn, version=11)
    ended = await _end_v3(c, txn, pid, epoch, commit=True)
    after = await _settled_describe(c, txn, pid, epoch)
    again = await _end_v3(c, txn, pid, epoch, commit=True)
    r2 = await produce(c, topic, _txn_batch(pid, epoch, 1), transactional_id=txn, version=11)
    return {
        "added": added,
        "produce": r.observe(),
        "end": ended,
        "after": after,
        "commit_again": again,
        "next_without_add": r2.observe(),
        "views": await _views(c, topic),
    }


@case("txn2")
async def case_explicit_add_then_end_v5(t: Target) -> Observation:
    """AddPartitionsToTxn v3 then EndTxn v5: which rules end the transaction?"""
    topic, c, txn, pid, epoch = await _txn(t, "tv2addv5")
    added = await add_partitions(c, txn, pid, epoch, topic)
    r = await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn, version=11)
    ended = await _end_v5(c, txn, pid, epoch, commit=True)
    return {
        "added": added,
        "produce": r.observe(),
        "end": _ended(ended, pid, epoch),
        "after": await _settled_describe(c, txn, pid, epoch),
        "views": await _views(c, topic),
    }


@case("txn2")
async def case_implicit_add_then_end_v3(t: Target) -> Observation:
    """Produce v12 (implicit add) then EndTxn v3."""
    topic, c, txn, pid, epoch = await _txn(t, "tv2implv3")
    r = await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn, version=PRODUCE_V2)
    ended = await _end_v3(c, txn, pid, epoch, commit=True)
    return {
        "produce": r.observe(),
        "end": ended,
        "after": await _settled_describe(c, txn, pid, epoch),
        "views": await _views(c, topic),
    }


@case("txn2")
async def case_end_v3_after_end_v5(t: Target) -> Observation:
    """EndTxn v5 commits; the old epoch through EndTxn v3 then is fenced."""
    topic, c, txn, pid, epoch = await _txn(t, "tv2v3after")
    await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn, version=PRODUCE_V2)
    ended = await _end_v5(c, txn, pid, epoch, commit=True)
    await _settled_describe(c, txn, pid, epoch)
    old = await _end_v3(c, txn, pid, epoch, commit=True)
    new = await _end_v3(c, txn, pid, ended.producer_epoch, commit=True)
    return {"end": _ended(ended, pid, epoch), "v3_old_epoch": old, "v3_new_epoch": new}


# -- AddPartitionsToTxn verify_only (what Produce's check asks the coordinator) -----------


@case("txn2")
async def case_verify_only(t: Target) -> Observation:
    from aiokafka_lite.wire.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

    topic = await t.create_topic("tv2verify", 2)
    c = await t.client()
    txn = t.unique("txn2")
    init = await init_producer_id(c, txn)
    pid, epoch = init.producer_id, init.producer_epoch

    async def verify(producer_id: int, producer_epoch: int) -> list[int]:
        resp = await c.request(
            AddPartitionsToTxnRequest(
                transactions=[
                    AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                        transactional_id=txn,
                        producer_id=producer_id,
                        producer_epoch=producer_epoch,
                        verify_only=True,
                        topics=[
                            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=[0, 1])
                        ],
                    )
                ]
            ),
            4,
        )
        assert isinstance(resp, AddPartitionsToTxnResponse)
        return [
            p.partition_error_code
            for r in resp.results_by_transaction
            for tr in r.topic_results
            for p in sorted(tr.results_by_partition, key=lambda p: p.partition_index)
        ]

    empty = await verify(pid, epoch)
    await add_partitions(c, txn, pid, epoch, topic, (1,))
    return {
        "empty": empty,
        "ongoing": await verify(pid, epoch),
        "stale_epoch": await verify(pid, epoch - 1) if epoch > 0 else None,
        "future_epoch": await verify(pid, epoch + 1),
        "other_pid": await verify(pid + 1_000_000, epoch),
    }


# -- UpdateFeatures (kafka-features.sh), validate-only: the shared broker keeps its level ----


@case("txn2")
async def case_update_transaction_version_validate_only(t: Target) -> Observation:
    from aiokafka_lite.wire.messages import UpdateFeaturesRequest, UpdateFeaturesResponse

    key = UpdateFeaturesRequest.FeatureUpdateKey
    c = await t.client()
    attempts = {
        "safe_downgrade_to_1": [key(feature="transaction.version", max_version_level=1, upgrade_type=2)],
        "downgrade_as_upgrade": [key(feature="transaction.version", max_version_level=1, upgrade_type=1)],
        "beyond_supported": [key(feature="transaction.version", max_version_level=3, upgrade_type=1)],
        "unknown_feature": [key(feature="no.such.feature", max_version_level=1, upgrade_type=1)],
        "unknown_upgrade_type": [key(feature="transaction.version", max_version_level=1, upgrade_type=7)],
        "same_level": [key(feature="transaction.version", max_version_level=2, upgrade_type=1)],
        "one_bad_of_two": [
            key(feature="transaction.version", max_version_level=1, upgrade_type=2),
            key(feature="no.such.feature", max_version_level=1, upgrade_type=1),
        ],
    }
    out: Observation = {}
    for name, updates in attempts.items():
        resp = await c.request(
            UpdateFeaturesRequest(timeout_ms=30000, feature_updates=updates, validate_only=True), 1
        )
        assert isinstance(resp, UpdateFeaturesResponse)
        out[name] = {
            "error": resp.error_code,
            "message": resp.error_message,
            "results": [(r.feature, r.error_code, r.error_message) for r in resp.results],
        }
    return out


# -- the transaction timeout under TV2 ------------------------------------------------------


@case("txn2")
async def case_transaction_timeout(t: Target) -> Observation:
    """The coordinator aborts a transaction past its timeout (Kafka checks every 10 s by
    default) and fences its epoch; what the producer's next requests get."""
    topic = await t.create_topic("tv2timeout")
    c = await t.client()
    txn = t.unique("txn2")
    init = await init_producer_id(c, txn, timeout_ms=1000)
    pid, epoch = init.producer_id, init.producer_epoch
    r = await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn, version=PRODUCE_V2)
    deadline = time.monotonic() + 30
    while True:
        d = await _describe(c, txn, pid, epoch)
        if d["state"] == "CompleteAbort" or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    late = await produce(c, topic, _txn_batch(pid, epoch, 1), transactional_id=txn, version=PRODUCE_V2)
    end_old = await _end_v5(c, txn, pid, epoch, commit=True)
    abort_old = await _end_v5(c, txn, pid, epoch, commit=False)
    resumed = await init_producer_id(
        c, txn, producer_id=pid, producer_epoch=epoch, timeout_ms=1000, version=5
    )
    return {
        "produce": r.observe(),
        "timed_out": d,
        "late_produce": late.observe(),
        "end_old_epoch": _ended(end_old, pid, epoch),
        "abort_old_epoch": _ended(abort_old, pid, epoch),
        "resume_with_old_epoch": resumed.error_code,
        "resumed_epoch_delta": resumed.producer_epoch - epoch if resumed.error_code == 0 else None,
        "views": await _views(c, topic),
    }


@case("txn2")
async def case_fenced_producer_resumes_with_its_epoch(t: Target) -> Observation:
    """InitProducerId (a new instance) fences an open transaction; then the fenced
    instance asks InitProducerId with its own id/epoch (KIP-360)."""
    from aiokafka_lite.wire.messages import InitProducerIdRequest, InitProducerIdResponse

    topic, c, txn, pid, epoch = await _txn(t, "tv2fenceresume")
    await produce(c, topic, _txn_batch(pid, epoch, 0), transactional_id=txn, version=PRODUCE_V2)
    first = await c.request(
        InitProducerIdRequest(
            transactional_id=txn, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
        ),
        5,
    )
    assert isinstance(first, InitProducerIdResponse)
    await _settled_describe(c, txn, pid, epoch)
    fenced = await _describe(c, txn, pid, epoch)
    old = await init_producer_id(c, txn, producer_id=pid, producer_epoch=epoch, version=5)
    return {
        "first": first.error_code,
        "after_fence": fenced,
        "old_instance": old.error_code,
        "old_instance_epoch_delta": old.producer_epoch - epoch if old.error_code == 0 else None,
    }


@case("txn2")
async def case_sequence_after_epoch_bump(t: Target) -> Observation:
    """After EndTxn v5 the producer's sequence numbers restart at 0 with the new epoch:
    continuing the old sequence is refused, and so is a gap."""
    topic, c, txn, pid, epoch = await _txn(t, "tv2seq")
    await produce(c, topic, _txn_batch(pid, epoch, 0, 2), transactional_id=txn, version=PRODUCE_V2)
    ended = await _end_v5(c, txn, pid, epoch, commit=True)
    new = ended.producer_epoch
    await _views(c, topic)
    continued = await produce(c, topic, _txn_batch(pid, new, 2), transactional_id=txn, version=PRODUCE_V2)
    gap = await produce(c, topic, _txn_batch(pid, new, 5), transactional_id=txn, version=PRODUCE_V2)
    restarted = await produce(c, topic, _txn_batch(pid, new, 0), transactional_id=txn, version=PRODUCE_V2)
    duplicate = await produce(c, topic, _txn_batch(pid, new, 0), transactional_id=txn, version=PRODUCE_V2)
    following = await produce(c, topic, _txn_batch(pid, new, 1), transactional_id=txn, version=PRODUCE_V2)
    return {
        "continued_old_sequence": continued.observe(),
        "gap": gap.observe(),
        "restarted": restarted.observe(),
        "duplicate": duplicate.observe(),
        "following": following.observe(),
        "describe": await _describe(c, txn, pid, epoch),
    }
