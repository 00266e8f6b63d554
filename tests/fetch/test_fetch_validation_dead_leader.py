"""KIP-320 position validation when the cached leader is gone.

A consumer handed a partition with a committed offset (and its leader epoch) checks that
position at the partition's leader before fetching. When the leader it has cached died
after its last metadata refresh, and none of its other partitions gave it a reason to
refresh since, the check cannot connect: it must ask for metadata and check at the new
leader, not retry the dead broker until ``metadata_max_age_ms``. Seen against Apache
Kafka: a group member that took over a killed broker's partitions read none of them; its
one refresh had come before Kafka's controller fenced the broker (``kill_broker`` and
``fence_broker`` of the embedded cluster play that out)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from fetch_testlib import fill, take

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume import Consumer
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client

Factory = Callable[..., Awaitable[EmbeddedCluster]]
P0, P1 = TopicPartition("v", 0), TopicPartition("v", 1)
OPTIONS = {
    "auto_offset_reset": "earliest",
    "fetch_max_wait_ms": 50,
    "retry_backoff_ms": 20,
    "metadata_max_age_ms": 600_000,  # only errors may refresh it
}


@pytest.mark.kafka_embedded  # stops a broker
async def test_position_check_finds_the_new_leader_of_a_partition_whose_leader_died(
    kafka_cluster_factory: Factory,
) -> None:
    cluster = await kafka_cluster_factory(brokers=3)
    cluster.create_topic("v", 2, replication_factor=3)
    dying = cluster.state.require_partition("v", 0).leader_id
    live = next(b for b in cluster.brokers if b.node_id != dying)
    if cluster.state.require_partition("v", 1).leader_id == dying:
        cluster.move_leader("v", 1, live.node_id)
    await fill(cluster.bootstrap, {P0: 10, P1: 10})
    # The second consumer must have no connection to `dying` (a dropped connection
    # would make it refresh metadata anyway): a live bootstrap server and a group whose
    # coordinator lives elsewhere.
    async with Client(cluster.bootstrap) as client:
        group = ""
        for i in range(100):
            if await client.find_coordinator(f"g{i}") != dying:
                group = f"g{i}"
                break
    options = {**OPTIONS, "group_id": group}
    async with Consumer(cluster.bootstrap, **options) as first:
        first.assign([P0])
        assert [r.offset for r in await take(first, 5)] == [0, 1, 2, 3, 4]
        await first.commit()
    async with Consumer(live.address, **options) as second:
        second.assign([P1])
        assert len(await take(second, 10)) == 10
        assert not second.client.is_connected(dying)
        await cluster.kill_broker(dying)  # metadata still names it P0's leader
        second.assign([P0, P1])  # P0 from its committed offset 5, with that record's epoch
        await second.client.refresh_metadata(["v"])
        assert second.client.cluster.leader_for(P0) == dying  # what it will check against
        cluster.fence_broker(dying)  # P0 moves to a live broker, under a new epoch
        got = await take(second, 5, limit_s=30)
        assert [(r.partition, r.offset) for r in got] == [(0, o) for o in range(5, 10)]
        assert second.client.cluster.leader_for(P0) != dying
