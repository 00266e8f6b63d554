"""Pure metadata update rules: merges, leader-epoch monotonicity (KIP-320), topic ids."""

from __future__ import annotations

import uuid

from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net.metadata import ClusterMetadata, apply_metadata, fatal_topic_error, topic_error
from aiokafka_lite.wire.messages import MetadataResponse

TID = uuid.UUID(int=1)
TID2 = uuid.UUID(int=2)


def _resp(
    topics: dict[str, list[tuple[int, int, int]]],
    *,
    topic_ids: dict[str, uuid.UUID] | None = None,
    errors: dict[str, int] | None = None,
    controller: int = 1,
) -> MetadataResponse:
    """topics: name -> [(partition, leader, epoch)]."""
    out = []
    for name, parts in topics.items():
        out.append(
            MetadataResponse.MetadataResponseTopic(
                name=name,
                topic_id=(topic_ids or {}).get(name, TID),
                partitions=[
                    MetadataResponse.MetadataResponsePartition(
                        partition_index=p,
                        leader_id=leader,
                        leader_epoch=epoch,
                        replica_nodes=[0, 1],
                        isr_nodes=[0],
                    )
                    for p, leader, epoch in parts
                ],
            )
        )
    for name, code in (errors or {}).items():
        out.append(MetadataResponse.MetadataResponseTopic(name=name, error_code=code))
    return MetadataResponse(
        brokers=[
            MetadataResponse.MetadataResponseBroker(node_id=i, host=f"h{i}", port=9092 + i) for i in range(2)
        ],
        cluster_id="cid",
        controller_id=controller,
        topics=out,
    )


def test_basic_snapshot_and_helpers() -> None:
    md = apply_metadata(ClusterMetadata(), _resp({"t": [(0, 1, 5), (1, -1, 5)]}), full=True)
    assert md.cluster_id == "cid" and md.controller_id == 1
    assert md.brokers[1].port == 9093 and md.brokers[1].address == "h1:9093"
    assert md.partitions_for("t") == [0, 1]
    assert md.leader_for(TopicPartition("t", 0)) == 1
    assert md.leader_for(TopicPartition("t", 1)) is None  # leader -1
    assert md.leader_epoch(TopicPartition("t", 0)) == 5
    assert md.topic_id("t") == TID and md.topic_name(TID) == "t"
    assert md.partitions_for("missing") == [] and md.topic_id("missing") is None
    p = md.partition(TopicPartition("t", 0))
    assert p is not None and p.replicas == (0, 1) and p.isr == (0,)


def test_stale_leader_epoch_is_ignored_per_partition() -> None:
    md = apply_metadata(ClusterMetadata(), _resp({"t": [(0, 1, 5), (1, 0, 3)]}), full=True)
    # A lagging broker reports partition 0 at epoch 4 (older) and partition 1 at epoch 4 (newer).
    md2 = apply_metadata(md, _resp({"t": [(0, 0, 4), (1, 1, 4)]}), full=True)
    assert md2.leader_for(TopicPartition("t", 0)) == 1 and md2.leader_epoch(TopicPartition("t", 0)) == 5
    assert md2.leader_for(TopicPartition("t", 1)) == 1 and md2.leader_epoch(TopicPartition("t", 1)) == 4


def test_recreated_topic_accepts_lower_epoch() -> None:
    md = apply_metadata(ClusterMetadata(), _resp({"t": [(0, 1, 7)]}), full=True)
    md2 = apply_metadata(md, _resp({"t": [(0, 0, 0)]}, topic_ids={"t": TID2}), full=True)
    assert md2.leader_for(TopicPartition("t", 0)) == 0 and md2.topic_id("t") == TID2
    assert md2.topic_name(TID) is None


def test_partial_refresh_merges_full_refresh_replaces() -> None:
    md = apply_metadata(ClusterMetadata(), _resp({"a": [(0, 0, 0)], "b": [(0, 1, 0)]}), full=True)
    md2 = apply_metadata(md, _resp({"a": [(0, 1, 1)]}), full=False)
    assert set(md2.topics) == {"a", "b"} and md2.leader_for(TopicPartition("a", 0)) == 1
    md3 = apply_metadata(md2, _resp({"a": [(0, 1, 1)]}), full=True)
    assert set(md3.topics) == {"a"}


def test_topic_errors_tracked_and_unknown_topics_dropped() -> None:
    md = apply_metadata(ClusterMetadata(), _resp({"a": [(0, 0, 0)]}), full=True)
    md2 = apply_metadata(md, _resp({}, errors={"a": 3, "new": 5}), full=False)
    assert "a" not in md2.topics and md2.topic_errors == {"a": 3, "new": 5}
    md3 = apply_metadata(md2, _resp({"new": [(0, 0, 0)]}), full=False)
    assert "new" in md3.topics and "new" not in md3.topic_errors


def test_leader_not_available_keeps_previous_view() -> None:
    md = apply_metadata(ClusterMetadata(), _resp({"a": [(0, 0, 0)]}), full=True)
    md2 = apply_metadata(md, _resp({}, errors={"a": 5}), full=False)
    assert md2.leader_for(TopicPartition("a", 0)) == 0 and md2.topic_errors == {"a": 5}


def test_partitions_by_leader() -> None:
    md = apply_metadata(ClusterMetadata(), _resp({"t": [(0, 0, 0), (1, 1, 0), (2, -1, 0)]}), full=True)
    grouped, missing = md.partitions_by_leader([TopicPartition("t", i) for i in range(4)])
    assert grouped == {0: [TopicPartition("t", 0)], 1: [TopicPartition("t", 1)]}
    assert missing == [TopicPartition("t", 2), TopicPartition("t", 3)]


def test_fatal_topic_error_authorization_first_then_invalid_names() -> None:
    errors = {"bad name!": 17, "secret": 29, "other secret": 29, "missing": 3, "creating": 5}
    err = fatal_topic_error(errors, ["ok", "bad name!", "secret", "other secret", "missing"])
    assert isinstance(err, E.TopicAuthorizationFailedError)
    assert str(err).endswith(
        "topics 'other secret', 'secret': not authorized (the principal needs Describe on the topic)"
    )
    err = fatal_topic_error(errors, ["bad name!", "missing", "creating"])
    assert isinstance(err, E.InvalidTopicError) and "topic 'bad name!': not a valid topic name" in str(err)
    # Retriable errors (unknown, leader not available) and topics not in use are not fatal.
    assert fatal_topic_error(errors, ["missing", "creating", "ok"]) is None
    assert fatal_topic_error({}, ["bad name!"]) is None


def test_topic_error_names_the_topic_and_the_meaning() -> None:
    assert str(topic_error("t", 3)) == "[Error 3] UNKNOWN_TOPIC_OR_PARTITION: topic 't': does not exist"
    assert str(topic_error("t", 5)) == "[Error 5] LEADER_NOT_AVAILABLE: topic 't'"
