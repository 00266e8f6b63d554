"""A close that cannot finish says which step did not finish and what that means."""

from __future__ import annotations

import logging

import pytest
from fetch_testlib import fill, take

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume import Consumer
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.testing.proxy import ProxiedKafka
from aiokafka_lite.wire.messages import LeaveGroupRequest, OffsetCommitRequest

OPTS = {"fetch_max_wait_ms": 50, "heartbeat_interval_ms": 100, "session_timeout_ms": 6000}
TP = TopicPartition("c", 0)
# The KIP-848 protocol takes its session and heartbeat settings from the broker.
PROTOCOL_OPTS = {"classic": OPTS, "consumer": {"fetch_max_wait_ms": 50}}


def close_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "close" in r.getMessage()
    ]


@pytest.mark.kafka_embedded  # latency injection
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_commit_on_close_that_times_out_is_named_with_its_consequence(
    kafka_cluster: EmbeddedCluster, caplog: pytest.LogCaptureFixture, protocol: str
) -> None:
    kafka_cluster.create_topic("c", 1)
    await fill(kafka_cluster.bootstrap, {TP: 10})
    group = f"close-{protocol}"
    consumer = Consumer(
        kafka_cluster.bootstrap,
        topics="c",
        group_id=group,
        group_protocol=protocol,
        auto_offset_reset="earliest",
        auto_commit_interval_ms=600_000,  # only the commit on close
        default_api_timeout_ms=1500,
        **PROTOCOL_OPTS[protocol],
    )
    await consumer.start()
    try:
        assert [r.offset for r in await take(consumer, 7)] == list(range(7))
        kafka_cluster.add_latency(OffsetCommitRequest, 30)  # longer than the close may take
    finally:
        with caplog.at_level(logging.WARNING, logger="aiokafka_lite"):
            await consumer.close()
    kafka_cluster.clear_faults()
    (message,) = close_warnings(caplog)
    assert f"group {group}: close: committing the offsets of the records consumed (c-0@7)" in message
    assert "did not complete within the close timeout of 1500 ms" in message
    assert "NOT committed" in message and "delivered again" in message
    # And indeed: the group has no commit; a new member starts from the beginning.
    async with Consumer(
        kafka_cluster.bootstrap,
        group_id=group,
        group_protocol=protocol,
        auto_offset_reset="earliest",
        **PROTOCOL_OPTS[protocol],
    ) as fresh:
        assert await fresh.committed(TP) is None


@pytest.mark.kafka_embedded  # latency injection
async def test_leave_that_times_out_is_named_with_its_consequence(
    kafka_cluster: EmbeddedCluster, caplog: pytest.LogCaptureFixture
) -> None:
    kafka_cluster.create_topic("c", 1)
    await fill(kafka_cluster.bootstrap, {TP: 3})
    consumer = Consumer(
        kafka_cluster.bootstrap,
        topics="c",
        group_id="close-leave",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        default_api_timeout_ms=1500,
        **OPTS,
    )
    await consumer.start()
    try:
        assert len(await take(consumer, 3)) == 3
        kafka_cluster.add_latency(LeaveGroupRequest, 30)
    finally:
        with caplog.at_level(logging.WARNING, logger="aiokafka_lite"):
            await consumer.close()
    kafka_cluster.clear_faults()
    (message,) = close_warnings(caplog)
    assert "group close-leave: close: leaving the group did not complete within the close timeout" in message
    assert "removes this member only when its session times out" in message


async def test_close_during_a_silent_network_partition_names_the_commit(
    kafka_blackhole: ProxiedKafka, caplog: pytest.LogCaptureFixture
) -> None:
    """The issue's case: the network drops everything silently while the consumer closes."""
    kafka_blackhole.create_topic("c", 1)
    await fill(kafka_blackhole.bootstrap, {TP: 10})
    consumer = Consumer(
        kafka_blackhole.bootstrap,
        topics="c",
        group_id="close-partition",
        auto_offset_reset="earliest",
        auto_commit_interval_ms=600_000,
        default_api_timeout_ms=2000,
        **OPTS,
    )
    await consumer.start()
    try:
        assert [r.offset for r in await take(consumer, 4)] == list(range(4))
        kafka_blackhole.proxy.blackhole()
    finally:
        with caplog.at_level(logging.WARNING, logger="aiokafka_lite"):
            await consumer.close()
    kafka_blackhole.proxy.restore()
    (message,) = close_warnings(caplog)
    assert "group close-partition: close: committing the offsets of the records consumed (c-0@4)" in message
    assert "NOT committed" in message
