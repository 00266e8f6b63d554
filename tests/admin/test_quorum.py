"""The KRaft quorum admin (``describe_metadata_quorum``, ``add_raft_voter``,
``remove_raft_voter``) against the pass's broker: the embedded one, or with
``--kafka=apache`` the session's one-node Apache Kafka, whose quorum is static
(``controller.quorum.voters``), as the embedded broker's is. The voter changes on a
dynamic quorum are in tests/kafka4/test_metadata_quorum_apache.py.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator

import pytest

from aiokafka_lite.admin import Admin, NewTopic, RaftVoterEndpoint
from aiokafka_lite.admin.quorum import parse_directory_id
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.errors import ConfigError, ControllerIdNotRegisteredError, UnsupportedVersionError
from aiokafka_lite.wire.messages import UnregisterControllerRequest


@pytest.fixture
async def admin(kafka_cluster: EmbeddedCluster) -> AsyncIterator[Admin]:
    async with Admin(kafka_cluster.bootstrap) as a:
        yield a


async def test_a_one_node_quorum_is_led_by_its_only_voter(admin: Admin) -> None:
    info = await admin.describe_metadata_quorum()
    cluster = await admin.describe_cluster()
    node_ids = {b.node_id for b in cluster.brokers}
    # One node that is broker and controller (Apache) or the embedded broker's controller.
    assert [v.replica_id for v in info.voters] == [info.leader_id]
    assert info.leader_id in node_ids
    assert info.leader_epoch >= 1
    assert info.observers == ()
    (leader,) = info.voters
    # The leader has the whole committed log and has just "fetched" from itself.
    assert leader.log_end_offset >= info.high_watermark >= 0
    assert leader.last_fetch_timestamp is not None and leader.last_fetch_timestamp > 0
    assert leader.last_caught_up_timestamp is not None
    # A static quorum has no directory ids.
    assert leader.replica_directory_id == uuid.UUID(int=0)


async def test_the_high_watermark_follows_metadata_changes(admin: Admin) -> None:
    before = await admin.describe_metadata_quorum()
    name = f"quorum-{uuid.uuid4().hex[:10]}"
    (await admin.create_topics([NewTopic(name, partitions=1, replication_factor=1)])).raise_errors()
    # Creating a topic is a metadata record: the committed metadata log grows.
    after = await admin.describe_metadata_quorum()
    assert after.high_watermark > before.high_watermark
    assert after.leader_id == before.leader_id
    await admin.delete_topics([name])


async def test_voter_changes_on_a_static_quorum_say_a_dynamic_one_is_needed(admin: Admin) -> None:
    info = await admin.describe_metadata_quorum()
    endpoint = RaftVoterEndpoint("CONTROLLER", "127.0.0.1", 9093)
    with pytest.raises(UnsupportedVersionError, match="dynamic KRaft quorum") as added:
        await admin.add_raft_voter(info.leader_id + 100, uuid.uuid4(), [endpoint])
    assert "kraft.version" in str(added.value)
    with pytest.raises(UnsupportedVersionError, match="dynamic KRaft quorum") as removed:
        await admin.remove_raft_voter(info.leader_id, uuid.uuid4())
    assert "removing voter" in str(removed.value)
    # Nothing changed.
    assert [v.replica_id for v in (await admin.describe_metadata_quorum()).voters] == [info.leader_id]


async def test_bad_voter_arguments_are_refused_before_sending(admin: Admin) -> None:
    ep = RaftVoterEndpoint("CONTROLLER", "127.0.0.1", 9093)
    with pytest.raises(ConfigError, match="voter_id"):
        await admin.add_raft_voter(-1, uuid.uuid4(), [ep])
    with pytest.raises(ConfigError, match="endpoints"):
        await admin.add_raft_voter(5, uuid.uuid4(), [])
    with pytest.raises(ConfigError, match="given twice"):
        await admin.add_raft_voter(5, uuid.uuid4(), [ep, RaftVoterEndpoint("CONTROLLER", "h", 1)])
    with pytest.raises(ConfigError, match="port"):
        await admin.add_raft_voter(5, uuid.uuid4(), [RaftVoterEndpoint("CONTROLLER", "h", 70000)])
    with pytest.raises(ConfigError, match="voter_directory_id"):
        await admin.remove_raft_voter(5, "not-a-directory-id")
    with pytest.raises(ConfigError, match="voter_id"):
        await admin.remove_raft_voter(True, uuid.uuid4())  # type: ignore[arg-type]


def test_directory_ids_are_read_in_kafka_text_form_and_as_uuids() -> None:
    u = uuid.UUID("7b0f3c1e-9a53-4c1b-8a0e-3f6c2d9e1a42")
    kafka_text = base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")
    assert len(kafka_text) == 22
    assert parse_directory_id(kafka_text) == u
    assert parse_directory_id(str(u)) == u
    assert parse_directory_id(u) is u
    # What kafka-metadata-quorum.sh prints for a static quorum's replicas.
    assert parse_directory_id("AAAAAAAAAAAAAAAAAAAAAA") == uuid.UUID(int=0)
    with pytest.raises(ConfigError):
        parse_directory_id("AAAAAAAAAAAAAAAAAAAAA")  # 21 characters


async def test_unregistering_an_unknown_controller(admin: Admin) -> None:
    # UnregisterController is new in Kafka 4.4; the embedded broker and Kafka 4.0 lack it.
    try:
        await admin.client.negotiated_version(None, UnregisterControllerRequest.API_KEY)
    except UnsupportedVersionError:
        with pytest.raises(UnsupportedVersionError, match=r"needs Kafka 4\.4\+"):
            await admin.unregister_controller(99)
    else:
        with pytest.raises(ControllerIdNotRegisteredError):
            await admin.unregister_controller(99)
    with pytest.raises(ConfigError, match="controller_id"):
        await admin.unregister_controller(-1)
