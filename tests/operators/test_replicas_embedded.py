"""Reassignments, leader elections and log dirs on a 3-broker embedded cluster (the
pass's Apache Kafka has one broker: tests/kafka4/test_replicas_apache.py runs the same
operations on a 3-node Apache Kafka and checks them with Kafka's own tools), and the
``aiokafka-lite reassign|elect-leaders|log-dirs|features|quorum`` commands in process.

The embedded cluster keeps one copy of each log, so a replica on a live broker is caught
up at once: a reassignment stays in flight only while an adding replica's broker is
stopped (broker/api/replicas.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from aiokafka_lite.admin import Admin, ElectionType, NewTopic, PartitionReassignment, TopicPartitionReplica
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.cli.app import app
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition

pytestmark = pytest.mark.kafka_embedded

runner = CliRunner()


async def _replicas(admin: Admin, topic: str) -> list[tuple[int, tuple[int, ...], tuple[int, ...]]]:
    desc = (await admin.describe_topics([topic]))[topic]
    return [(p.leader, p.replicas, p.isr) for p in desc.partitions]


@pytest.mark.asyncio
async def test_reassignment_onto_a_stopped_broker_stays_in_flight_until_it_starts() -> None:
    async with EmbeddedCluster(brokers=3) as cluster, Admin(cluster.bootstrap) as admin:
        (
            await admin.create_topics([NewTopic("moves", replica_assignment={0: [1, 2], 1: [2, 3]})])
        ).raise_errors()
        tp0, tp1 = TopicPartition("moves", 0), TopicPartition("moves", 1)
        await cluster.stop_broker(3)
        res = await admin.alter_partition_reassignments({tp0: [3, 1], tp1: [1, 2]})
        assert res[tp0].error is None and res[tp1].error is None
        # tp1 moves onto live brokers: done at once. tp0 waits for broker 3.
        ongoing = await admin.list_partition_reassignments()
        assert ongoing == {tp0: PartitionReassignment((3, 1, 2), (3,), (2,))}
        assert (await admin.list_partition_reassignments([tp1])) == {}
        leader0, replicas0, isr0 = (await _replicas(admin, "moves"))[0]
        assert replicas0 == (3, 1, 2) and 3 not in isr0 and leader0 == 1
        assert (await _replicas(admin, "moves"))[1][1] == (1, 2)

        await cluster.start_broker(3)
        assert await admin.list_partition_reassignments() == {}
        leader0, replicas0, isr0 = (await _replicas(admin, "moves"))[0]
        assert replicas0 == (3, 1) and set(isr0) == {1, 3} and leader0 == 1  # the leader stayed a replica

        # The preferred replica (3) now takes the lead; a second election is not needed.
        elected = await admin.elect_leaders(ElectionType.PREFERRED, [tp0])
        assert elected[tp0].error is None
        assert (await _replicas(admin, "moves"))[0][0] == 3
        again = await admin.elect_leaders(ElectionType.PREFERRED, [tp0])
        assert isinstance(again[tp0].error, E.ElectionNotNeededError)


@pytest.mark.asyncio
async def test_cancel_restores_the_original_replicas() -> None:
    async with EmbeddedCluster(brokers=3) as cluster, Admin(cluster.bootstrap) as admin:
        (await admin.create_topics([NewTopic("cancel", replica_assignment={0: [1, 2]})])).raise_errors()
        tp = TopicPartition("cancel", 0)
        await cluster.stop_broker(3)
        assert (await admin.alter_partition_reassignments({tp: [3, 2]}))[tp].error is None
        assert tp in await admin.list_partition_reassignments()
        assert (await admin.alter_partition_reassignments({tp: None}))[tp].error is None
        assert await admin.list_partition_reassignments() == {}
        leader, replicas, isr = (await _replicas(admin, "cancel"))[0]
        assert replicas == (1, 2) and set(isr) == {1, 2} and leader == 1
        await cluster.start_broker(3)
        assert (await _replicas(admin, "cancel"))[0][1] == (1, 2)  # nothing resumes
        refused = await admin.alter_partition_reassignments(
            {tp: [1, 2, 3]}, allow_replication_factor_change=False
        )
        assert isinstance(refused[tp].error, E.InvalidReplicationFactorError)


@pytest.mark.asyncio
async def test_a_leader_leaving_the_replica_set_hands_over_and_log_dirs_follow() -> None:
    async with EmbeddedCluster(brokers=3) as cluster, Admin(cluster.bootstrap) as admin:
        (await admin.create_topics([NewTopic("handover", replica_assignment={0: [1, 2]})])).raise_errors()
        tp = TopicPartition("handover", 0)
        before = cluster.state.require_partition("handover", 0).leader_epoch
        assert (await admin.alter_partition_reassignments({tp: [2, 3]}))[tp].error is None
        leader, replicas, _ = (await _replicas(admin, "handover"))[0]
        assert replicas == (2, 3) and leader == 2
        assert cluster.state.require_partition("handover", 0).leader_epoch > before
        dirs = await admin.describe_log_dirs([1, 2, 3])
        holding = {b for b, d in dirs.items() for ld in d.dirs.values() if tp in ld.replicas}
        assert holding == {2, 3}
        assert list(dirs[1].dirs) == ["/embedded/broker-1"]
        where = await admin.describe_replica_log_dirs(
            [TopicPartitionReplica("handover", 0, b) for b in (1, 2)]
        )
        assert where[TopicPartitionReplica("handover", 0, 1)].current_log_dir is None
        assert where[TopicPartitionReplica("handover", 0, 2)].current_log_dir == "/embedded/broker-2"
        # The replica broker 1 no longer holds cannot move between its dirs.
        moved = await admin.alter_replica_log_dirs(
            {TopicPartitionReplica("handover", 0, 1): "/embedded/broker-1"}
        )
        assert isinstance(moved[TopicPartitionReplica("handover", 0, 1)].error, E.ReplicaNotAvailableError)


@pytest.mark.asyncio
async def test_preferred_election_after_the_leader_came_back() -> None:
    async with EmbeddedCluster(brokers=3) as cluster, Admin(cluster.bootstrap) as admin:
        (
            await admin.create_topics([NewTopic("back", replica_assignment={0: [1, 2], 1: [2, 3]})])
        ).raise_errors()
        await cluster.stop_broker(1)
        assert (await _replicas(admin, "back"))[0][0] == 2
        tp0 = TopicPartition("back", 0)
        refused = await admin.elect_leaders(ElectionType.PREFERRED, [tp0])
        assert isinstance(refused[tp0].error, E.PreferredLeaderNotAvailableError)
        await cluster.start_broker(1)
        everything = await admin.elect_leaders(ElectionType.PREFERRED)
        assert set(everything) == {tp0} and everything[tp0].error is None  # the others needed none
        assert (await _replicas(admin, "back"))[0][0] == 1


def cli(bootstrap: str, *args: str) -> Result:
    return runner.invoke(app, list(args), env={"KAFKA_BOOTSTRAP": bootstrap})


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def test_cli_reassign_verify_elect_log_dirs_features_quorum(
    kafka_threaded_cluster_factory: Callable[..., Any], tmp_path: Path
) -> None:
    tc = kafka_threaded_cluster_factory(brokers=3)
    b = tc.bootstrap
    tc.call(lambda c: c.state.create_topic("clit", assignments={0: [1, 2], 1: [2, 3]}))
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "clit", "partition": 0, "replicas": [2, 1]}]})
    )
    out = ok(cli(b, "reassign", str(plan)))
    rollback = json.loads(out.splitlines()[2])
    assert rollback["partitions"] == [
        {"topic": "clit", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}
    ]
    assert "Reassignment of partition clit-0 is completed." in ok(cli(b, "reassign", "--verify", str(plan)))
    assert "No partition reassignments found." in ok(cli(b, "reassign", "--list"))
    cancel = cli(b, "reassign", "--cancel", str(plan))
    assert cancel.exit_code == 1 and "NoReassignmentInProgressError" in cancel.stdout
    elected = ok(cli(b, "elect-leaders", "--election-type", "preferred", "--topic", "clit", "--json"))
    assert json.loads(elected) == [
        {"topic": "clit", "partition": 0, "result": "elected"},
        {"topic": "clit", "partition": 1, "result": "not needed"},
    ]
    assert cli(b, "elect-leaders", "--election-type", "sideways", "--topic", "clit").exit_code == 2
    doc = json.loads(ok(cli(b, "log-dirs", "--broker-list", "1,3")))
    assert [d["broker"] for d in doc["brokers"]] == [1, 3]
    on1, on3 = ([p["partition"] for p in d["logDirs"][0]["partitions"]] for d in doc["brokers"])
    assert (on1, on3) == (["clit-0"], ["clit-1"])
    described = ok(cli(b, "features", "describe"))
    assert (
        "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\tFinalizedVersionLevel: 2"
        in (described)
    )
    assert "can be downgraded to 1" in ok(
        cli(b, "features", "downgrade", "--feature", "transaction.version=1", "--dry-run")
    )
    assert tc.call(lambda c: c.config.features["transaction.version"]) == 2
    refused = cli(b, "features", "upgrade", "--feature", "transaction.version=1")
    assert refused.exit_code == 1 and "INVALID_UPDATE_VERSION" in refused.stdout
    ok(cli(b, "features", "downgrade", "--feature", "transaction.version=1"))
    assert tc.call(lambda c: c.config.features["transaction.version"]) == 1
    status = json.loads(ok(cli(b, "quorum", "describe", "--status", "--json")))
    assert status["LeaderId"] == 1 and [v["id"] for v in status["CurrentVoters"]] == [1]
    assert [o["id"] for o in status["CurrentObservers"]] == [2, 3] and status["MaxFollowerLag"] == 0
    rows = json.loads(ok(cli(b, "quorum", "describe", "--replication", "--json")))
    assert [(r["node_id"], r["status"]) for r in rows] == [(1, "Leader"), (2, "Observer"), (3, "Observer")]
    assert cli(b, "quorum", "describe").exit_code == 2
