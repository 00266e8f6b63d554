"""Reassignments, preferred leader election, log dirs, features and the quorum's
description on a 3-node Apache Kafka, each checked with Kafka's own tool
(``kafka-reassign-partitions --verify``, ``kafka-topics --describe``, ``kafka-log-dirs``,
``kafka-features describe``, ``kafka-metadata-quorum describe --status|--replication``;
their main classes are in the ``kafka-tools`` jar: ``testing.apache.kafka_tools_classpath``).

One cluster for the module, with ``auto.leader.rebalance.enable=false`` so that only our
election moves a leader back. Readings that move on their own (the metadata log's high
watermark, the features epoch, which follows it) are checked to lie between two of ours.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support.settle import settled
from click.testing import Result
from typer.testing import CliRunner

from aiokafka_lite import Producer
from aiokafka_lite.admin import Admin, ElectionType, NewTopic
from aiokafka_lite.cli.app import app
from aiokafka_lite.core.errors import KafkaError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.testing.apache import ApacheCluster, java_executable, kafka_tools_classpath

runner = CliRunner()


@pytest.fixture(scope="module")
def cluster(pytestconfig: pytest.Config) -> Iterator[ApacheCluster]:
    version = pytestconfig.getoption("--kafka-version", None)
    with ApacheCluster(
        3, version=str(version) if version else None, configs={"auto.leader.rebalance.enable": "false"}
    ) as c:
        yield c


@pytest.fixture(scope="module")
def tools(cluster: ApacheCluster) -> str:
    return kafka_tools_classpath(cluster.version)


def _run_tool(cluster: ApacheCluster, classpath: str, main: str, *args: str) -> str:
    cmd = [
        java_executable(),
        "-Xmx256m",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        classpath,
        main,
        "--bootstrap-server",
        cluster.bootstrap,
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return proc.stdout


def _run_cli(cluster: ApacheCluster, *args: str) -> str:
    result: Result = runner.invoke(app, list(args), env={"KAFKA_BOOTSTRAP": cluster.bootstrap})
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


async def _tool(cluster: ApacheCluster, classpath: str, main: str, *args: str) -> str:
    """Kafka's tool ``main`` (its stdout), off the event loop."""
    return await asyncio.to_thread(_run_tool, cluster, classpath, main, *args)


async def _cli(cluster: ApacheCluster, *args: str) -> str:
    """``aiokafka-lite ...`` in process (it runs its own event loop: on a thread)."""
    return await asyncio.to_thread(_run_cli, cluster, *args)


def _topic_lines(out: str) -> dict[int, dict[str, str]]:
    """``kafka-topics --describe``'s partition lines: partition -> field -> value."""
    parts = {}
    for line in out.splitlines():
        if not line.startswith("\t"):
            continue
        fields = dict(
            f.split(": ", 1) if ": " in f else (f.rstrip(":"), "") for f in line.strip().split("\t")
        )
        parts[int(fields["Partition"])] = fields
    return parts


async def test_reassignment_verified_by_kafka_reassign_partitions(
    cluster: ApacheCluster, tools: str, tmp_path: Path
) -> None:
    topic = "moved"
    async with Admin(cluster.bootstrap) as admin:
        (
            await admin.create_topics([NewTopic(topic, replica_assignment={0: [1, 2], 1: [2, 3]})])
        ).raise_errors()
        async with Producer(cluster.bootstrap) as producer:
            for i in range(50):
                await producer.send(topic, b"v" * 200, partition=i % 2)
        tp0 = TopicPartition(topic, 0)
        res = await admin.alter_partition_reassignments({tp0: [3, 1]})
        assert res[tp0].error is None
        # In flight while replica 3 copies the log, or already done: either way it ends.
        done = await settled(lambda: admin.list_partition_reassignments([tp0]), lambda r: not r, within_s=60)
        assert done == {}
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [3, 1]}]})
    )
    verified = await _tool(
        cluster, tools, "org.apache.kafka.tools.reassign.ReassignPartitionsCommand", "--verify",
        "--reassignment-json-file", str(plan),
    )  # fmt: skip
    assert f"Reassignment of partition {topic}-0 is completed." in verified
    described = _topic_lines(
        await _tool(cluster, tools, "org.apache.kafka.tools.TopicCommand", "--describe", "--topic", topic)
    )
    assert described[0]["Replicas"] == "3,1" and described[1]["Replicas"] == "2,3"
    assert "is completed" in await _cli(cluster, "reassign", "--verify", str(plan))
    assert "No partition reassignments found." in await _cli(cluster, "reassign", "--list")


async def test_preferred_election_after_leadership_moved(cluster: ApacheCluster, tools: str) -> None:
    topic = "elect"
    tp = TopicPartition(topic, 0)
    async with Admin(cluster.bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, replica_assignment={0: [1, 2]})])).raise_errors()

        async def leader_isr() -> tuple[int, tuple[int, ...]]:
            try:
                await admin.client.refresh_metadata([topic], timeout_ms=10_000)
                (p,) = (await admin.describe_topics([topic]))[topic].partitions
            except KafkaError as exc:  # a read through the node being stopped or started
                if not exc.retriable:
                    raise
                return -2, ()
            return p.leader, p.isr

        assert (await settled(leader_isr, lambda s: s[0] == 1 and 2 in s[1], within_s=60))[0] == 1
        await asyncio.to_thread(cluster.stop_node, 1)
        assert (await settled(leader_isr, lambda s: s[0] == 2, within_s=60))[0] == 2
        await asyncio.to_thread(cluster.start_node, 1)
        back = await settled(leader_isr, lambda s: 1 in s[1], within_s=120)
        assert back[0] == 2 and 1 in back[1]  # leadership does not move back by itself
        res = await admin.elect_leaders(ElectionType.PREFERRED, [tp])
        assert res[tp].error is None
        assert (await settled(leader_isr, lambda s: s[0] == 1, within_s=60))[0] == 1
    described = _topic_lines(
        await _tool(cluster, tools, "org.apache.kafka.tools.TopicCommand", "--describe", "--topic", topic)
    )
    assert described[0]["Leader"] == "1"


async def test_log_dirs_match_kafka_log_dirs(cluster: ApacheCluster, tools: str) -> None:
    topic = "dirs"
    async with Admin(cluster.bootstrap) as admin:
        (
            await admin.create_topics([NewTopic(topic, replica_assignment={0: [1, 2], 1: [3, 1]})])
        ).raise_errors()
        async with Producer(cluster.bootstrap, acks="all") as producer:
            for i in range(40):
                await producer.send(topic, b"d" * 300, partition=i % 2)

        async def ours() -> dict[tuple[int, str, str], tuple[int, int]]:
            dirs = await admin.describe_log_dirs([1, 2, 3])
            return {
                (b, path, f"{tp.topic}-{tp.partition}"): (info.size, info.offset_lag)
                for b, d in dirs.items()
                for path, ld in d.dirs.items()
                for tp, info in ld.replicas.items()
                if tp.topic == topic
            }

        # Followers fetch asynchronously: wait until every replica has the whole log.
        def caught_up(m: dict[tuple[int, str, str], tuple[int, int]]) -> bool:
            sizes: dict[str, set[int]] = {}
            for (_, _, part), (size, _) in m.items():
                sizes.setdefault(part, set()).add(size)
            return len(m) == 4 and all(len(s) == 1 and 0 not in s for s in sizes.values())

        mine = await settled(ours, caught_up, within_s=60)
        assert caught_up(mine), mine
    out = await _tool(
        cluster, tools, "org.apache.kafka.tools.LogDirsCommand", "--describe", "--broker-list", "1,2,3"
    )
    doc = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    theirs = {
        (b["broker"], d["logDir"], p["partition"]): (p["size"], p["offsetLag"])
        for b in doc["brokers"]
        for d in b["logDirs"]
        for p in d["partitions"]
        if p["partition"].startswith(f"{topic}-")
    }
    assert theirs == mine
    assert {k[0] for k in mine if k[2] == f"{topic}-1"} == {3, 1}
    cli_doc = json.loads(await _cli(cluster, "log-dirs", "--broker-list", "1,2,3", "--topic-list", topic))
    cli_view = {
        (b["broker"], d["logDir"], p["partition"]): (p["size"], p["offsetLag"])
        for b in cli_doc["brokers"]
        for d in b["logDirs"]
        for p in d["partitions"]
    }
    assert cli_view == mine


def _feature_lines(out: str) -> dict[str, dict[str, str]]:
    """``Feature: x  SupportedMinVersion: 0 ...`` lines (padded with spaces or tabs)."""
    rows = {}
    for line in out.splitlines():
        if line.startswith("Feature:"):
            fields = dict(re.findall(r"(\w+): (\S+)", line))
            rows[fields["Feature"]] = fields
    return rows


async def test_features_match_kafka_features(cluster: ApacheCluster, tools: str) -> None:
    async with Admin(cluster.bootstrap) as admin:
        before = await admin.describe_features()
        out = await _tool(cluster, tools, "org.apache.kafka.tools.FeatureCommand", "describe")
        after = await admin.describe_features()
    theirs = _feature_lines(out)
    assert set(theirs) == set(after.supported_features)
    for name, row in theirs.items():
        if name == "metadata.version":  # the tool prints release names (4.4-IV2), we the levels
            continue
        sup = after.supported_features[name]
        fin = after.finalized_features.get(name)
        assert (int(row["SupportedMinVersion"]), int(row["SupportedMaxVersion"])) == (
            sup.min_version,
            sup.max_version,
        )
        assert int(row["FinalizedVersionLevel"]) == (fin.max_version_level if fin else 0)
    assert before.finalized_features_epoch is not None and after.finalized_features_epoch is not None
    assert (
        before.finalized_features_epoch
        <= int(theirs["transaction.version"]["Epoch"])
        <= after.finalized_features_epoch
    )
    ours = _feature_lines(await _cli(cluster, "features", "describe"))
    for name in set(theirs) - {"metadata.version"}:
        assert {k: v for k, v in ours[name].items() if k != "Epoch"} == {
            k: v for k, v in theirs[name].items() if k != "Epoch"
        }
    dry = await _cli(cluster, "features", "downgrade", "--feature", "transaction.version=1", "--dry-run")
    assert "transaction.version can be downgraded to 1." in dry


async def test_quorum_describe_matches_kafka_metadata_quorum(cluster: ApacheCluster, tools: str) -> None:
    async with Admin(cluster.bootstrap) as admin:
        before = await admin.describe_metadata_quorum()
    status_out = await _tool(
        cluster, tools, "org.apache.kafka.tools.MetadataQuorumCommand", "describe", "--status"
    )
    replication_out = await _tool(
        cluster, tools, "org.apache.kafka.tools.MetadataQuorumCommand", "describe", "--replication"
    )
    ours = json.loads(await _cli(cluster, "quorum", "describe", "--status", "--json"))
    theirs = {
        k.strip(): v.strip()
        for k, _, v in (line.partition(":") for line in status_out.splitlines() if ":" in line)
    }
    assert theirs["ClusterId"] == ours["ClusterId"] == cluster.cluster_id
    assert int(theirs["LeaderId"]) == ours["LeaderId"] and int(theirs["LeaderEpoch"]) == ours["LeaderEpoch"]
    assert before.high_watermark <= int(theirs["HighWatermark"]) <= ours["HighWatermark"]
    assert [v["id"] for v in json.loads(theirs["CurrentVoters"])] == [v["id"] for v in ours["CurrentVoters"]]
    assert [v["endpoints"] for v in json.loads(theirs["CurrentVoters"])] == [
        v["endpoints"] for v in ours["CurrentVoters"]
    ]
    assert json.loads(theirs["CurrentObservers"]) == ours["CurrentObservers"] == []
    rows = [line.split() for line in replication_out.splitlines()[1:] if line.strip()]
    tool_rows = {int(r[0]): (r[1], r[-1]) for r in rows}
    cli_rows = json.loads(await _cli(cluster, "quorum", "describe", "--replication", "--json"))
    assert {r["node_id"]: (r["directory_id"], r["status"]) for r in cli_rows} == tool_rows
