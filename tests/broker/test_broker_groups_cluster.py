"""Group coordinator inside a running EmbeddedCluster, over real sockets (RawClient).

Covers what only the assembled cluster shows: offsets persisting in the data
directory across a restart, coordinator failover when the coordinator broker stops,
the cluster's fault-injection hook, and the advertised API versions.
"""

from __future__ import annotations

from typing import Any

from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.core import errors
from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.message import Request
from aiokafka_lite.wire.messages import (
    ApiVersionsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

NONE = 0


async def call(cluster: EmbeddedCluster, node_id: int, req: Request, version: int) -> Any:
    async with await RawClient.connect(f"127.0.0.1:{cluster.broker(node_id).port}") as rc:
        return await rc.request(req, version)


async def coordinator(cluster: EmbeddedCluster, group: str, via: int) -> int:
    r = await call(cluster, via, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
    assert r.coordinators[0].error_code == NONE
    return int(r.coordinators[0].node_id)


def commit(group: str, offsets: dict[int, int], gen: int = -1, member: str = "") -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=gen,
        member_id=member,
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name="t",
                partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=o, committed_metadata="md"
                    )
                    for p, o in offsets.items()
                ],
            )
        ],
    )


async def fetch(cluster: EmbeddedCluster, group: str) -> dict[int, tuple[int, str | None]]:
    node = await coordinator(cluster, group, via=cluster.brokers[0].node_id)
    r = await call(
        cluster,
        node,
        OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)]),
        8,
    )
    g = r.groups[0]
    assert g.error_code == NONE
    return {p.partition_index: (p.committed_offset, p.metadata) for t in g.topics for p in t.partitions}


async def test_committed_offsets_survive_restart(tmp_path: Any) -> None:
    async with EmbeddedCluster(brokers=1, data_dir=tmp_path, topics={"t": 3}) as cluster:
        node = await coordinator(cluster, "g", via=1)
        r = await call(cluster, node, commit("g", {0: 5, 2: 9}), 8)
        assert [p.error_code for p in r.topics[0].partitions] == [NONE, NONE]
        r = await call(cluster, node, commit("g", {0: 7}), 8)
        await call(cluster, node, commit("other", {1: 1}), 8)
    assert (tmp_path / "groups" / "offsets.jsonl").exists()
    async with EmbeddedCluster(brokers=1, data_dir=tmp_path) as cluster:
        assert await fetch(cluster, "g") == {0: (7, "md"), 2: (9, "md")}
        assert await fetch(cluster, "other") == {1: (1, "md")}


async def test_coordinator_failover_keeps_the_generation() -> None:
    async with EmbeddedCluster(brokers=3, topics={"t": 3}) as cluster:
        group = "failover"
        node = await coordinator(cluster, group, via=1)
        join = JoinGroupRequest(
            group_id=group,
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00")],
        )
        async with await RawClient.connect(f"127.0.0.1:{cluster.broker(node).port}") as rc:
            r = await rc.request(join, 9)
            assert r.error_code == errors.MemberIdRequiredError.code
            join.member_id = r.member_id
            r = await rc.request(join, 9)
            assert (r.error_code, r.generation_id) == (NONE, 1)
            s = await rc.request(
                SyncGroupRequest(group_id=group, generation_id=1, member_id=join.member_id), 5
            )
            assert s.error_code == NONE
        await cluster.stop_broker(node)
        survivor = next(b.node_id for b in cluster.brokers if b.node_id != node)
        new = await coordinator(cluster, group, via=survivor)
        assert new != node
        hb = HeartbeatRequest(group_id=group, generation_id=1, member_id=join.member_id)
        assert (await call(cluster, new, hb, 4)).error_code == NONE
        other = next(b.node_id for b in cluster.brokers if b.node_id not in (node, new))
        assert (await call(cluster, other, hb, 4)).error_code == errors.NotCoordinatorError.code
        r = await call(cluster, new, commit(group, {0: 3}, gen=1, member=join.member_id), 8)
        assert r.topics[0].partitions[0].error_code == NONE


async def test_cluster_expire_member_and_move_coordinator() -> None:
    async with EmbeddedCluster(brokers=2, topics={"t": 1}) as cluster:
        node = await coordinator(cluster, "g", via=1)
        join = JoinGroupRequest(
            group_id="g",
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
        )
        r = await call(cluster, node, join, 3)  # pre-KIP-394: joins at once
        assert r.error_code == NONE
        assert cluster.expire_group_member("g", r.member_id)
        assert not cluster.expire_group_member("g", r.member_id)
        other = 2 if node == 1 else 1
        cluster.move_group_coordinator("g", other)
        assert await coordinator(cluster, "g", via=node) == other
        r = await call(cluster, node, join, 3)
        assert r.error_code == errors.NotCoordinatorError.code


async def test_api_versions_advertise_group_and_txn_apis() -> None:
    async with EmbeddedCluster(brokers=1) as cluster:
        r = await call(cluster, 1, ApiVersionsRequest(), 3)
        ranges = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        assert ranges[11] == (0, 9)  # JoinGroup
        assert ranges[8] == (2, 9)  # OffsetCommit
        assert ranges[9] == (1, 9)  # OffsetFetch
        assert ranges[10] == (0, 6)  # FindCoordinator
        assert ranges[22] == (0, 5)  # InitProducerId
        assert ranges[26] == (0, 5)  # EndTxn (v5: Transactions V2)
        assert ranges[28] == (0, 5)  # TxnOffsetCommit (v5: Transactions V2)
