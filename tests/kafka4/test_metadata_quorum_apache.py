"""The KRaft quorum admin against ``kafka-metadata-quorum.sh`` on a 3-node Apache Kafka
cluster formatted with a dynamic quorum (KIP-853, ``ApacheCluster(dynamic_quorum=True)``).

``describe_metadata_quorum`` is compared with what Kafka's own tool
(``org.apache.kafka.tools.MetadataQuorumCommand``, ``describe --status`` and ``describe
--replication``) prints; the tool's readings are taken between two of ours, so every
offset and timestamp it prints must lie between them. ``remove_raft_voter`` and
``add_raft_voter`` then take a voter out (it stays an observer) and back in, and the
controller's refusals come back as typed errors.

The tool lives in the ``kafka-tools`` jar, which the launcher's classpath does not hold:
Maven fetches it once into the launcher's cache. ``--kafka-version`` picks the release
(default: the newest pinned one; dynamic quorums need 3.9+, so 4.0 works too).
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from aiokafka_lite.admin import Admin, QuorumInfo, RaftVoterEndpoint
from aiokafka_lite.admin.quorum import parse_directory_id
from aiokafka_lite.core.errors import (
    ControllerIdNotRegisteredError,
    DuplicateVoterError,
    InconsistentClusterIdError,
    InvalidRequestError,
    UnsupportedVersionError,
    VoterNotFoundError,
)
from aiokafka_lite.testing.apache import ApacheCluster, java_executable, kafka_tools_classpath
from aiokafka_lite.wire.messages import UnregisterControllerRequest

ZERO = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def cluster(pytestconfig: pytest.Config) -> Iterator[ApacheCluster]:
    version = pytestconfig.getoption("--kafka-version", None)
    with ApacheCluster(3, version=str(version) if version else None, dynamic_quorum=True) as c:
        yield c


@pytest.fixture(scope="module")
def tools_classpath(cluster: ApacheCluster) -> str:
    """The launcher's Kafka jars plus ``kafka-tools`` of the same release."""
    return kafka_tools_classpath(cluster.version)


def _tool(cluster: ApacheCluster, classpath: str, *args: str) -> str:
    cmd = [
        java_executable(),
        "-Xmx256m",
        "-cp",
        classpath,
        "org.apache.kafka.tools.MetadataQuorumCommand",
        "--bootstrap-server",
        cluster.bootstrap,
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return proc.stdout


def _status(out: str) -> dict[str, str]:
    fields = {}
    for line in out.splitlines():
        key, sep, value = line.partition(":")
        if sep and key and not key.startswith(" "):
            fields[key.strip()] = value.strip()
    return fields


def _replication(out: str) -> dict[int, dict[str, str]]:
    lines = [line for line in out.splitlines() if line.strip()]
    header = [h.strip() for h in lines[0].split("\t") if h.strip()]
    assert header[:2] == ["NodeId", "DirectoryId"], lines[0]
    rows = {}
    for line in lines[1:]:
        cells = [c.strip() for c in line.split("\t")]
        row = dict(zip(header, cells, strict=False))
        rows[int(row["NodeId"])] = row
    return rows


def _kafka_text(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


async def _describe(cluster: ApacheCluster) -> QuorumInfo:
    async with Admin(cluster.bootstrap) as admin:
        return await admin.describe_metadata_quorum()


async def test_describe_agrees_with_kafka_metadata_quorum_status(
    cluster: ApacheCluster, tools_classpath: str
) -> None:
    before = await _describe(cluster)
    status = _status(await asyncio.to_thread(_tool, cluster, tools_classpath, "describe", "--status"))
    after = await _describe(cluster)

    assert status["ClusterId"] == cluster.cluster_id
    assert int(status["LeaderId"]) == before.leader_id == after.leader_id
    assert int(status["LeaderEpoch"]) == before.leader_epoch == after.leader_epoch
    assert before.high_watermark <= int(status["HighWatermark"]) <= after.high_watermark
    # Voters: ids, directory ids (the tool prints Kafka's text form) and endpoints.
    tool_voters = {v["id"]: v for v in json.loads(status["CurrentVoters"])}
    assert sorted(tool_voters) == sorted(v.replica_id for v in after.voters) == [1, 2, 3]
    for v in after.voters:
        node = cluster.node(v.replica_id)
        assert v.replica_directory_id == node.directory_id != ZERO
        assert tool_voters[v.replica_id]["directoryId"] == _kafka_text(v.replica_directory_id)
        ours = [str(ep) for ep in after.nodes[v.replica_id].endpoints]
        assert tool_voters[v.replica_id]["endpoints"] == ours
        assert ours == [f"CONTROLLER://{node.host}:{node.controller_port}"]
    assert json.loads(status["CurrentObservers"]) == [] and after.observers == ()


async def test_describe_agrees_with_kafka_metadata_quorum_replication(
    cluster: ApacheCluster, tools_classpath: str
) -> None:
    before = await _describe(cluster)
    out = await asyncio.to_thread(_tool, cluster, tools_classpath, "describe", "--replication")
    after = await _describe(cluster)
    rows = _replication(out)
    assert before.leader_id == after.leader_id
    first = {r.replica_id: r for r in before.voters + before.observers}
    last = {r.replica_id: r for r in after.voters + after.observers}
    assert sorted(rows) == sorted(first) == sorted(last)
    for node_id, row in rows.items():
        status = "Leader" if node_id == after.leader_id else "Follower"
        assert row["Status"] == status
        assert parse_directory_id(row["DirectoryId"]) == last[node_id].replica_directory_id
        assert first[node_id].log_end_offset <= int(row["LogEndOffset"]) <= last[node_id].log_end_offset
        fetched = int(row["LastFetchTimestamp"])
        assert first[node_id].last_fetch_timestamp is not None
        assert last[node_id].last_fetch_timestamp is not None
        assert first[node_id].last_fetch_timestamp <= fetched <= last[node_id].last_fetch_timestamp


async def _wait_for(
    cluster: ApacheCluster, pred: str, check: Callable[[QuorumInfo], bool], within_s: float = 60.0
) -> QuorumInfo:
    """Describe until ``check(info)`` holds (the quorum's view converges)."""
    deadline = time.monotonic() + within_s
    while True:
        info = await _describe(cluster)
        if check(info):
            return info
        assert time.monotonic() < deadline, f"{pred} never held; last: {info}"
        await asyncio.sleep(0.2)


async def test_remove_a_voter_then_add_it_back(cluster: ApacheCluster, tools_classpath: str) -> None:
    info = await _describe(cluster)
    voter = next(v.replica_id for v in info.voters if v.replica_id != info.leader_id)
    node = cluster.node(voter)
    assert node.directory_id is not None
    async with Admin(cluster.bootstrap) as admin:
        # Kafka's text form of the directory id, as the tool prints it, is accepted.
        await admin.remove_raft_voter(voter, _kafka_text(node.directory_id))
        removed = await _wait_for(
            cluster,
            f"node {voter} an observer",
            lambda i: voter in {o.replica_id for o in i.observers},
        )
        assert voter not in {v.replica_id for v in removed.voters}
        assert voter not in removed.nodes
        rows = _replication(
            await asyncio.to_thread(_tool, cluster, tools_classpath, "describe", "--replication")
        )
        assert rows[voter]["Status"] == "Observer"

        # Removing it again: no such voter.
        with pytest.raises(VoterNotFoundError):
            await admin.remove_raft_voter(voter, node.directory_id)

        endpoint = RaftVoterEndpoint("CONTROLLER", node.host, node.controller_port)
        with pytest.raises(InconsistentClusterIdError):
            await admin.add_raft_voter(voter, node.directory_id, [endpoint], cluster_id="not-this-cluster")
        await admin.add_raft_voter(voter, node.directory_id, [endpoint], cluster_id=cluster.cluster_id)
        added = await _wait_for(
            cluster, f"node {voter} a voter again", lambda i: voter in {v.replica_id for v in i.voters}
        )
        assert added.nodes[voter].endpoints == (endpoint,)
        status = _status(await asyncio.to_thread(_tool, cluster, tools_classpath, "describe", "--status"))
        assert sorted(v["id"] for v in json.loads(status["CurrentVoters"])) == [1, 2, 3]

        with pytest.raises(DuplicateVoterError):
            await admin.add_raft_voter(voter, node.directory_id, [endpoint])
        # A voter is a (node id, directory id) pair: another directory id is not it.
        with pytest.raises(VoterNotFoundError):
            await admin.remove_raft_voter(voter, uuid.uuid4())


async def test_unregister_a_controller_that_left_the_quorum(cluster: ApacheCluster) -> None:
    # Last in the module: it shuts a node down for good.
    async with Admin(cluster.bootstrap) as admin:
        info = await admin.describe_metadata_quorum()
        try:
            await admin.client.negotiated_version(None, UnregisterControllerRequest.API_KEY)
        except UnsupportedVersionError:  # before Kafka 4.4
            with pytest.raises(UnsupportedVersionError, match=r"needs Kafka 4\.4\+"):
                await admin.unregister_controller(info.leader_id)
            return
        with pytest.raises(InvalidRequestError, match="active"):
            await admin.unregister_controller(info.leader_id)
        voter = next(v.replica_id for v in info.voters if v.replica_id != info.leader_id)
        node = cluster.node(voter)
        assert node.directory_id is not None
        await admin.remove_raft_voter(voter, node.directory_id)
        await asyncio.to_thread(node.stop)
        await admin.unregister_controller(voter)
        # The registration is gone: a second call finds none.
        with pytest.raises(ControllerIdNotRegisteredError):
            await admin.unregister_controller(voter)
