"""Transactions V2 (KIP-890 part 2) in the embedded broker, through its request handlers.

What the differential suite (tests/differential/_cases_txn_v2.py) cannot reach on Apache
Kafka cheaply: the epoch overflow (32 000 transactions), the window in which markers are
still being written (Kafka writes them within a millisecond), and the feature levels the
embedded cluster is started with. Time is a ManualClock; the markers are held back with
the ``transaction.marker.delay.ms`` knob and released by advancing it.
"""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.broker.api import produce as produce_api
from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.groups import GroupConfig, GroupCoordinator, ManualClock, register_group_handlers
from aiokafka_lite.broker.state import BrokerConfig, BrokerInfo, ClusterState
from aiokafka_lite.broker.transactions import (
    MAX_EPOCH,
    TransactionConfig,
    TransactionCoordinator,
    TxnState,
    register_txn_handlers,
)
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.errors import ConfigError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    ProduceResponse,
    TxnOffsetCommitRequest,
)
from aiokafka_lite.wire.records import decode_batches, encode_batch

NONE = 0


class Env:
    """One broker's handlers (produce, groups, transactions) on a ManualClock."""

    def __init__(self, marker_delay_ms: int = 0) -> None:
        self.cluster = ClusterState(BrokerConfig())
        self.cluster.brokers[1] = BrokerInfo(1, "127.0.0.1", 9001, alive=True)
        self.cluster.create_topic("t", 2)
        self.clock = ManualClock()
        self.gc = GroupCoordinator(self.cluster, config=GroupConfig(), clock=self.clock)
        self.tc = TransactionCoordinator(
            self.cluster, config=TransactionConfig(marker_delay_ms=marker_delay_ms), clock=self.clock
        )
        self.cluster.services["groups"] = self.gc
        self.cluster.services["transactions"] = self.tc
        self.registry = HandlerRegistry()
        register_group_handlers(self.registry, self.cluster)
        register_txn_handlers(self.registry, self.cluster)
        produce_api.register(self.registry)

    async def call(self, req: Request, version: int) -> Any:
        entry = self.registry.get(req.API_KEY)
        assert entry is not None and entry.min_version <= version <= entry.max_version
        req = type(req).decode(req.encode(version), version)
        ctx = RequestContext(1, self.cluster, req.API_KEY, version, 1, "cli", None, "c1", "127.0.0.1")
        resp = await entry.handler(ctx, req)
        if not isinstance(resp, Response):  # the produce fast path answers encoded bytes
            return resp
        return type(resp).decode(resp.encode(version), version)

    async def init(self, pid: int = -1, epoch: int = -1) -> Any:
        return await self.call(
            InitProducerIdRequest(
                transactional_id="tx", transaction_timeout_ms=60000, producer_id=pid, producer_epoch=epoch
            ),
            5,
        )

    async def end(self, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
        r = await self.call(
            EndTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=commit), 5
        )
        return r.error_code, r.producer_id, r.producer_epoch

    async def produce(self, pid: int, epoch: int, seq: int, version: int = 12, partition: int = 0) -> int:
        data = encode_batch(
            [(1000, b"k", b"v", [])],
            is_transactional=True,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
        )
        resp = await self.call(
            ProduceRequest(
                transactional_id="tx",
                acks=-1,
                timeout_ms=1000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name="t",
                        partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=data)],
                    )
                ],
            ),
            version,
        )
        if not isinstance(resp, Response):  # EncodedResponse: the body as Kafka would send it
            resp = ProduceResponse.decode(b"".join(bytes(b) for b in resp.parts), version)
        return int(resp.responses[0].partition_responses[0].error_code)

    async def txn_offset_commit(self, pid: int, epoch: int, version: int = 5) -> int:
        r = await self.call(
            TxnOffsetCommitRequest(
                transactional_id="tx",
                group_id="g",
                producer_id=pid,
                producer_epoch=epoch,
                generation_id_or_member_epoch=-1,
                member_id="",
                topics=[
                    TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                        name="t",
                        partitions=[
                            TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                                partition_index=0, committed_offset=3
                            )
                        ],
                    )
                ],
            ),
            version,
        )
        return int(r.topics[0].partitions[0].error_code)

    def markers(self, partition: int = 0) -> list[tuple[int, int]]:
        """(producer id, epoch) of every control batch in the partition."""
        p = self.cluster.get_partition("t", partition)
        assert p is not None
        out = []
        for data in p.log.iter_batches():
            for b in decode_batches(bytes(data)):
                if b.is_control:
                    out.append((b.producer_id, b.producer_epoch))
        return out


# -- the epoch bump and its overflow ----------------------------------------------------------


async def test_end_txn_v5_bumps_epoch_and_markers_carry_the_new_epoch() -> None:
    env = Env()
    r = await env.init()
    pid, epoch = r.producer_id, r.producer_epoch
    assert await env.produce(pid, epoch, 0) == NONE
    assert await env.end(pid, epoch, commit=True) == (NONE, pid, epoch + 1)
    assert env.markers() == [(pid, epoch + 1)]
    meta = env.tc.txns["tx"]
    assert (meta.state, meta.producer_epoch, meta.last_producer_epoch) == (
        TxnState.COMPLETE_COMMIT,
        epoch + 1,
        epoch,
    )
    # The zombie: the ended transaction's epoch is fenced at the partition.
    assert await env.produce(pid, epoch, 1) == E.InvalidProducerEpochError.code
    # The next transaction: new epoch, sequence 0, added implicitly.
    assert await env.produce(pid, epoch + 1, 0) == NONE
    assert meta.state is TxnState.ONGOING


async def test_epoch_overflow_moves_to_a_new_producer_id() -> None:
    env = Env()
    r = await env.init()
    pid = r.producer_id
    meta = env.tc.txns["tx"]
    meta.producer_epoch = MAX_EPOCH - 1  # the last epoch a client may hold (32766)
    assert await env.produce(pid, MAX_EPOCH - 1, 0) == NONE
    code, new_pid, new_epoch = await env.end(pid, MAX_EPOCH - 1, commit=True)
    assert (code, new_epoch) == (NONE, 0) and new_pid not in (pid, -1)
    # The markers end the old id's transaction with Short.MaxValue; the id moves on.
    assert env.markers() == [(pid, MAX_EPOCH)]
    assert (meta.producer_id, meta.producer_epoch, meta.last_producer_id) == (new_pid, 0, pid)
    # The retried EndTxn (its answer lost) still carries the old id and last epoch.
    assert await env.end(pid, MAX_EPOCH - 1, commit=True) == (NONE, new_pid, 0)
    assert (await env.end(pid, MAX_EPOCH - 1, commit=False))[0] == E.InvalidTxnStateError.code
    # The old id is done: its batches are refused, the new one starts at sequence 0.
    assert await env.produce(pid, MAX_EPOCH - 1, 1) == E.InvalidProducerIdMappingError.code
    assert await env.produce(new_pid, 0, 0) == NONE
    assert await env.end(new_pid, 0, commit=False) == (NONE, new_pid, 1)


async def test_overflow_retry_of_init_producer_id_after_rotation() -> None:
    env = Env()
    r = await env.init()
    pid = r.producer_id
    env.tc.txns["tx"].producer_epoch = MAX_EPOCH - 1
    _, new_pid, _ = await env.end(pid, MAX_EPOCH - 1, commit=False)
    # KIP-360 resumption with the id/epoch the producer last held before the rotation.
    again = await env.init(pid=pid, epoch=MAX_EPOCH - 1)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (NONE, new_pid, 0)


# -- while the markers are being written ------------------------------------------------------


async def test_requests_while_markers_are_written() -> None:
    env = Env(marker_delay_ms=100)
    r = await env.init()
    pid, epoch = r.producer_id, r.producer_epoch
    assert await env.produce(pid, epoch, 0) == NONE
    assert await env.txn_offset_commit(pid, epoch) == NONE
    assert await env.end(pid, epoch, commit=True) == (NONE, pid, epoch + 1)
    meta = env.tc.txns["tx"]
    assert meta.state is TxnState.PREPARE_COMMIT and meta.completing
    # The same end retried: CONCURRENT_TRANSACTIONS; the other outcome: INVALID_TXN_STATE;
    # the new epoch cannot end anything yet: PRODUCER_FENCED.
    assert (await env.end(pid, epoch, commit=True))[0] == E.ConcurrentTransactionsError.code
    assert (await env.end(pid, epoch, commit=False))[0] == E.InvalidTxnStateError.code
    assert (await env.end(pid, epoch + 1, commit=False))[0] == E.ProducerFencedError.code
    # The next transaction's first batch and offsets wait (retriable answers).
    assert await env.produce(pid, epoch + 1, 0) == E.NotEnoughReplicasError.code
    assert await env.txn_offset_commit(pid, epoch + 1) == E.ConcurrentTransactionsError.code
    assert (await env.init()).error_code == E.ConcurrentTransactionsError.code
    assert env.markers() == []
    env.clock.advance(100)
    assert env.markers() == [(pid, epoch + 1)]
    assert meta.state is TxnState.COMPLETE_COMMIT
    assert await env.produce(pid, epoch + 1, 0) == NONE
    assert await env.end(pid, epoch, commit=True) == (E.ProducerFencedError.code, -1, -1)


async def test_txn_offset_commit_v5_joins_the_transaction() -> None:
    env = Env()
    r = await env.init()
    pid, epoch = r.producer_id, r.producer_epoch
    assert await env.txn_offset_commit(pid, epoch, version=4) == E.TransactionAbortableError.code
    assert await env.txn_offset_commit(pid, epoch, version=3) == E.InvalidTxnStateError.code
    assert await env.txn_offset_commit(pid, epoch) == NONE
    meta = env.tc.txns["tx"]
    assert meta.state is TxnState.ONGOING and meta.groups == {"g"}
    assert await env.end(pid, epoch, commit=True) == (NONE, pid, epoch + 1)
    committed = env.gc.offsets.get("g", TopicPartition("t", 0))
    assert committed is not None and committed.offset == 3
    assert await env.txn_offset_commit(pid, epoch) == E.InvalidProducerEpochError.code


# -- feature levels ----------------------------------------------------------------------------


def _features(resp: ApiVersionsResponse) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]]]:
    return (
        {f.name: (f.min_version, f.max_version) for f in resp.supported_features},
        {f.name: (f.min_version_level, f.max_version_level) for f in resp.finalized_features},
    )


async def _api_versions(bootstrap: str, version: int = 4) -> ApiVersionsResponse:
    async with await RawClient.connect(bootstrap) as c:
        resp = await c.request(
            ApiVersionsRequest(client_software_name="t", client_software_version="1"), version
        )
    assert isinstance(resp, ApiVersionsResponse)
    return resp


async def test_api_versions_reports_transaction_version() -> None:
    async with EmbeddedCluster() as cluster:
        resp = await _api_versions(cluster.bootstrap)
        assert _features(resp) == ({"transaction.version": (0, 2)}, {"transaction.version": (2, 2)})
        versions = {k.api_key: k.max_version for k in resp.api_keys}
        assert versions[EndTxnRequest.API_KEY] == 5 and versions[TxnOffsetCommitRequest.API_KEY] == 5
        # v3 clients are not told supported features that start at level 0 (as Kafka 4.4).
        assert _features(await _api_versions(cluster.bootstrap, 3)) == ({}, {"transaction.version": (2, 2)})
        epoch = resp.finalized_features_epoch
        cluster.set_feature("transaction.version", 1)
        resp = await _api_versions(cluster.bootstrap)
        assert _features(resp)[1] == {"transaction.version": (1, 1)}
        assert resp.finalized_features_epoch > epoch
        cluster.set_feature("transaction.version", 0)
        assert _features(await _api_versions(cluster.bootstrap))[1] == {}  # level 0 is not listed


async def test_cluster_started_at_transaction_version_1() -> None:
    async with EmbeddedCluster(features={"transaction.version": 1}) as cluster:
        assert _features(await _api_versions(cluster.bootstrap))[1] == {"transaction.version": (1, 1)}


@pytest.mark.parametrize(
    ("features", "match"),
    [({"transaction.version": 3}, "outside the supported 0..2"), ({"no.such.version": 1}, "unknown feature")],
)
def test_unsupported_feature_levels_are_refused(features: dict[str, int], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        EmbeddedCluster(features=features)


async def test_update_features_sets_transaction_version() -> None:
    """kafka-features.sh downgrade/upgrade through UpdateFeatures, as on Apache Kafka."""
    from aiokafka_lite.wire.messages import UpdateFeaturesRequest, UpdateFeaturesResponse

    key = UpdateFeaturesRequest.FeatureUpdateKey
    async with EmbeddedCluster() as cluster:
        async with await RawClient.connect(cluster.bootstrap) as c:

            async def update(level: int, upgrade_type: int, version: int = 1) -> int:
                resp = await c.request(
                    UpdateFeaturesRequest(
                        timeout_ms=1000,
                        feature_updates=[
                            key(
                                feature="transaction.version",
                                max_version_level=level,
                                upgrade_type=upgrade_type,
                            )
                            if version >= 1
                            else key(
                                feature="transaction.version",
                                max_version_level=level,
                                allow_downgrade=upgrade_type != 1,
                            )
                        ],
                    ),
                    version,
                )
                assert isinstance(resp, UpdateFeaturesResponse)
                return resp.error_code

            assert (
                await update(1, upgrade_type=1) == E.InvalidUpdateVersionError.code
            )  # a downgrade needs its type
            assert cluster.config.features["transaction.version"] == 2
            assert await update(1, upgrade_type=2) == NONE
            assert _features(await _api_versions(cluster.bootstrap))[1] == {"transaction.version": (1, 1)}
            assert await update(2, upgrade_type=1, version=0) == NONE  # v0: allow_downgrade=False
            assert _features(await _api_versions(cluster.bootstrap))[1] == {"transaction.version": (2, 2)}


@pytest.mark.parametrize(("level", "resumed"), [(2, (NONE, 1)), (1, (E.ProducerFencedError.code, -1))])
async def test_timed_out_producer_resumes_only_at_level_2(level: int, resumed: tuple[int, int]) -> None:
    """The coordinator's own abort follows the finalized level (as Kafka 4.4): at level 2
    the producer whose transaction timed out may resume with its id/epoch (KIP-360) and
    gets the bumped epoch; at level 1 it is fenced."""
    env = Env()
    env.cluster.config.features["transaction.version"] = level
    r = await env.call(
        InitProducerIdRequest(
            transactional_id="tx", transaction_timeout_ms=1000, producer_id=-1, producer_epoch=-1
        ),
        5,
    )
    pid, epoch = r.producer_id, r.producer_epoch
    assert await env.produce(pid, epoch, 0) == NONE
    env.clock.advance(1000)
    meta = env.tc.txns["tx"]
    assert (meta.state, meta.producer_epoch) == (TxnState.COMPLETE_ABORT, epoch + 1)
    assert env.markers() == [(pid, epoch + 1)]
    again = await env.init(pid=pid, epoch=epoch)
    delta = again.producer_epoch - epoch if again.error_code == NONE else -1
    assert (again.error_code, delta) == resumed
