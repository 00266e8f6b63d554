"""The embedded broker's quorum answer (broker/api/quorum.py) on a cluster of several
brokers, and the admin's reading of DescribeQuorum answers (pure). Runs in every pass:
it starts its own embedded cluster.
"""

from __future__ import annotations

import uuid

import pytest

from aiokafka_lite.admin import Admin, QuorumNode, RaftVoterEndpoint
from aiokafka_lite.admin.quorum import quorum_info
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.errors import UnknownServerError
from aiokafka_lite.wire.messages import DescribeQuorumRequest, DescribeQuorumResponse


async def test_three_brokers_one_voter_two_observers_and_a_new_leader_when_it_stops() -> None:
    async with EmbeddedCluster(brokers=3) as cluster, Admin(cluster.bootstrap) as admin:
        first = await admin.describe_metadata_quorum()
        assert first.leader_id == 1
        assert [v.replica_id for v in first.voters] == [1]
        assert [o.replica_id for o in first.observers] == [2, 3]
        # The brokers share one in-memory state: everyone is caught up.
        assert {r.log_end_offset for r in first.voters + first.observers} == {first.high_watermark}

        await cluster.stop_broker(1)
        moved = await admin.describe_metadata_quorum()
        # The controller moved: a new leader in a new epoch, the log grew.
        assert moved.leader_id == 2
        assert moved.leader_epoch == first.leader_epoch + 1
        assert [v.replica_id for v in moved.voters] == [2]
        assert [o.replica_id for o in moved.observers] == [3]
        assert moved.high_watermark > first.high_watermark
        assert (await admin.describe_cluster()).controller_id == moved.leader_id

        await cluster.start_broker(1)
        back = await admin.describe_metadata_quorum()
        assert back.leader_id == 1 and back.leader_epoch == moved.leader_epoch + 1
        assert [o.replica_id for o in back.observers] == [2, 3]


async def test_another_partition_than_the_metadata_log_is_unknown() -> None:
    # As Kafka answers (checked on 4.4): a partition-level UNKNOWN_TOPIC_OR_PARTITION.
    async with EmbeddedCluster(brokers=1) as cluster, Admin(cluster.bootstrap) as admin:

        def make(version: int) -> DescribeQuorumRequest:
            return DescribeQuorumRequest(
                topics=[
                    DescribeQuorumRequest.TopicData(
                        topic_name="x", partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)]
                    )
                ]
            )

        resp = await admin.request(make)
        assert isinstance(resp, DescribeQuorumResponse)
        assert resp.error_code == 0
        (part,) = resp.topics[0].partitions
        assert resp.topics[0].topic_name == "x" and part.error_code == 3


def _answer(**partition: object) -> DescribeQuorumResponse:
    R = DescribeQuorumResponse
    fields: dict[str, object] = {
        "partition_index": 0,
        "leader_id": 2,
        "leader_epoch": 7,
        "high_watermark": 41,
        "current_voters": [
            R.ReplicaState(replica_id=2, replica_directory_id=uuid.UUID(int=5), log_end_offset=42),
            R.ReplicaState(
                replica_id=1,
                replica_directory_id=uuid.UUID(int=6),
                log_end_offset=40,
                last_fetch_timestamp=1000,
                last_caught_up_timestamp=900,
            ),
        ],
        "observers": [R.ReplicaState(replica_id=4, log_end_offset=39)],
        **partition,
    }
    return R(
        topics=[R.TopicData(topic_name="__cluster_metadata", partitions=[R.PartitionData(**fields)])],  # type: ignore[arg-type]
        nodes=[
            R.Node(node_id=2, listeners=[R.Listener(name="CONTROLLER", host="h2", port=9093)]),
            R.Node(node_id=1, listeners=[R.Listener(name="CONTROLLER", host="h1", port=9094)]),
        ],
    )


def test_quorum_info_reads_java_s_quorum_info_fields() -> None:
    info = quorum_info(_answer())
    assert (info.leader_id, info.leader_epoch, info.high_watermark) == (2, 7, 41)
    leader, follower = info.voters
    assert leader.replica_directory_id == uuid.UUID(int=5) and leader.log_end_offset == 42
    # -1 on the wire (the schema default) is "no timestamp", Java's empty OptionalLong.
    assert leader.last_fetch_timestamp is None and leader.last_caught_up_timestamp is None
    assert (follower.last_fetch_timestamp, follower.last_caught_up_timestamp) == (1000, 900)
    assert [o.replica_id for o in info.observers] == [4]
    assert info.nodes == {
        2: QuorumNode(2, (RaftVoterEndpoint("CONTROLLER", "h2", 9093),)),
        1: QuorumNode(1, (RaftVoterEndpoint("CONTROLLER", "h1", 9094),)),
    }
    assert str(info.nodes[2].endpoints[0]) == "CONTROLLER://h2:9093"


def test_an_answer_of_another_shape_is_a_broker_error() -> None:
    with pytest.raises(UnknownServerError, match=r"partitions \[3\]"):
        quorum_info(_answer(partition_index=3))
    wrong_topic = _answer()
    wrong_topic.topics[0].topic_name = "other"
    with pytest.raises(UnknownServerError, match="other"):
        quorum_info(wrong_topic)
    with pytest.raises(UnknownServerError, match="0 topics"):
        quorum_info(DescribeQuorumResponse(topics=[]))
