"""Share-group administration on the embedded broker where it has no Apache counterpart in
the differential suite: several brokers (each group answered by its coordinator only) and
a restart with a data directory."""

from __future__ import annotations

from pathlib import Path

from aiokafka_lite.admin import Admin
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.structs import TopicPartition


async def test_share_groups_listed_once_and_served_by_their_coordinator() -> None:
    async with EmbeddedCluster(brokers=3, topics={"jobs": 3}) as cluster, Admin(cluster.bootstrap) as admin:
        groups = [f"share-admin-{i}" for i in range(6)]
        for g in groups:
            altered = await admin.alter_share_group_offsets(
                g, {TopicPartition("jobs", i): 0 for i in range(3)}
            )
            altered.raise_errors()
        listed = [g.group_id for g in (await admin.list_share_groups()).groups]
        assert sorted(listed) == groups  # each once, from its coordinator
        coordinators = {g.group_id: g.coordinator for g in (await admin.list_share_groups()).groups}
        described = await admin.describe_share_groups(groups)
        assert {g: d.coordinator for g, d in described.items()} == coordinators
        assert len(set(coordinators.values())) > 1  # the groups are spread over the brokers
        offsets = await admin.list_share_group_offsets(groups[0])
        assert {tp: o.start_offset for tp, o in offsets.items()} == {
            TopicPartition("jobs", i): 0 for i in range(3)
        }


async def test_altered_share_group_survives_a_restart(tmp_path: Path) -> None:
    tp = TopicPartition("jobs", 0)
    async with EmbeddedCluster(brokers=1, data_dir=tmp_path, topics={"jobs": 1}) as cluster:
        async with Admin(cluster.bootstrap) as admin:
            (await admin.alter_share_group_offsets("restarted", {tp: 7})).raise_errors()
    async with EmbeddedCluster(brokers=1, data_dir=tmp_path) as cluster, Admin(cluster.bootstrap) as admin:
        described = (await admin.describe_share_groups(["restarted"]))["restarted"]
        assert (described.error, described.state) == (None, "Empty")
        assert "restarted" in {g.group_id for g in (await admin.list_share_groups()).groups}
        assert (await admin.list_share_group_offsets("restarted"))[tp].start_offset == 7
