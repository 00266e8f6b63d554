"""The mirror between two clusters (two embedded clusters, or with --kafka=apache the
session's Apache Kafka as source and a fresh one as target)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _support.reading import read_topic
from mirror_testlib import (
    FAST_SOURCE,
    by_partition,
    committed,
    create_topics,
    produce,
    read_all,
    record_value,
    wait_for,
)

from aiokafka_lite import Admin, TopicPartition
from aiokafka_lite.admin import ConfigResource, ConfigResourceType
from aiokafka_lite.core import errors as E
from aiokafka_lite.integrations.mirror import Mirror, target_partition
from aiokafka_lite.wire.messages import EndTxnRequest, TxnOffsetCommitRequest


@contextlib.asynccontextmanager
async def running(mirror: Mirror) -> AsyncIterator[asyncio.Task[None]]:
    """``mirror`` started and running in a task; stopped (flush, commit) on exit."""
    async with mirror:
        task = asyncio.ensure_future(mirror.run())
        try:
            yield task
        finally:
            mirror.stop()
            await task


async def test_copies_included_topics_with_content_order_and_rename(clusters: tuple[Any, Any]) -> None:
    source, target = clusters
    await create_topics(
        source.bootstrap,
        {"orders.eu": 3, "orders.us": 2, "orders.tmp": 1, "billing": 1},
        configs={"orders.eu": {"retention.ms": "123456789", "cleanup.policy": "compact"}},
    )
    for topic, n in (("orders.eu", 3), ("orders.us", 2), ("orders.tmp", 1), ("billing", 1)):
        await produce(source.bootstrap, topic, n, 20)
    mirror = Mirror(
        source.bootstrap,
        target.bootstrap,
        include=r"orders\..*",
        exclude=r".*\.tmp",
        rename="{topic}.mirror",
        commit_interval_ms=200,
        refresh_interval_ms=500,
        source_options=FAST_SOURCE,
    )
    async with running(mirror):
        eu = await read_all(target.bootstrap, "orders.eu.mirror", 60)
        us = await read_all(target.bootstrap, "orders.us.mirror", 40)
        # A topic created while the mirror runs is picked up.
        await create_topics(source.bootstrap, {"orders.late": 2, "orders.late.tmp": 1})
        await produce(source.bootstrap, "orders.late", 2, 10)
        await produce(source.bootstrap, "orders.late.tmp", 1, 10)
        late = await read_all(target.bootstrap, "orders.late.mirror", 20)

    # Content, partition and order kept: partition p holds exactly its 20 records in order.
    for topic, records, n, count in (
        ("orders.eu", eu, 3, 20),
        ("orders.us", us, 2, 20),
        ("orders.late", late, 2, 10),
    ):
        assert len(records) == n * count
        assert by_partition(records) == {
            p: [record_value(topic, p, i) for i in range(count)] for p in range(n)
        }
    first = min((r for r in eu if r.partition == 1), key=lambda r: r.offset)
    assert first.key == b"k0"
    assert first.headers == (("n", b"0"), ("empty", None))
    # CreateTime kept (the test data is stamped an hour ago, ascending per record).
    stamps = [r.timestamp_ms for r in sorted((r for r in eu if r.partition == 1), key=lambda r: r.offset)]
    assert stamps == sorted(stamps) and stamps[-1] - stamps[0] == 19
    assert all(r.timestamp_type == 0 for r in eu)

    async with Admin(target.bootstrap) as admin:
        topics = set(await admin.list_topics())
        assert {"orders.eu.mirror", "orders.us.mirror", "orders.late.mirror"} <= topics
        assert not topics & {"billing", "billing.mirror", "orders.tmp.mirror", "orders.late.tmp.mirror"}
        described = (await admin.describe_topics(["orders.eu.mirror", "orders.us.mirror"])).raise_errors()
        assert len(described["orders.eu.mirror"].partitions) == 3
        assert len(described["orders.us.mirror"].partitions) == 2
        resource = ConfigResource(ConfigResourceType.TOPIC, "orders.eu.mirror")
        configs = (await admin.describe_configs([resource])).raise_errors()[resource]
        assert configs.value("retention.ms") == "123456789"
        assert configs.value("cleanup.policy") == "compact"
    stats = mirror.stats()
    assert stats.records == 60 + 40 + 20
    assert stats.topics_created == 3


async def test_at_least_once_commits_only_what_the_target_acknowledged(clusters: tuple[Any, Any]) -> None:
    source, target = clusters
    await create_topics(source.bootstrap, {"acks": 2})
    await produce(source.bootstrap, "acks", 2, 30)
    tps = [TopicPartition("acks", p) for p in range(2)]
    mirror = Mirror(
        source.bootstrap,
        target.bootstrap,
        include="acks",
        group_id="ack-mirror",
        commit_interval_ms=100,
        source_options=FAST_SOURCE,
        target_options={"delivery_timeout_ms": 300_000, "request_timeout_ms": 5000},
    )
    async with running(mirror) as task:

        async def state(read: int, position: int) -> bool:
            assert not task.done(), task
            parts = mirror.stats().partitions
            return len(parts) == 2 and all(p.read == read and p.position == position for p in parts.values())

        await wait_for(lambda: state(30, 30), "the first records acknowledged")
        await wait_for(
            lambda: _committed_is(source.bootstrap, "ack-mirror", tps, 30), "their offsets committed"
        )
        async with Admin(target.bootstrap) as admin:
            node = (await admin.describe_cluster()).brokers[0].node_id
        await target.stop_broker(node)
        await produce(source.bootstrap, "acks", 2, 20, start=30)
        # Read and handed to the producer, but the target is down: nothing is acknowledged,
        # so neither the mirror's position nor the source group's offsets move.
        await wait_for(lambda: state(50, 30), "the new records read while the target is down")
        for _ in range(5):
            await asyncio.sleep(0.2)
            assert await committed(source.bootstrap, "ack-mirror", tps) == dict.fromkeys(tps, 30)
            assert all(p.position == 30 for p in mirror.stats().partitions.values())
        await target.start_broker(node)
        await wait_for(
            lambda: state(50, 50), "the records acknowledged once the target is back", timeout_s=120
        )
        await wait_for(
            lambda: _committed_is(source.bootstrap, "ack-mirror", tps, 50), "their offsets committed"
        )
    records = await read_all(target.bootstrap, "acks", 100)
    assert by_partition(records) == {p: [record_value("acks", p, i) for i in range(50)] for p in range(2)}


async def _committed_is(bootstrap: str, group: str, tps: list[TopicPartition], offset: int) -> bool:
    return await committed(bootstrap, group, tps) == dict.fromkeys(tps, offset)


async def test_prefix_rename_into_an_existing_topic_with_other_partition_count(
    clusters: tuple[Any, Any],
) -> None:
    source, target = clusters
    await create_topics(source.bootstrap, {"clicks": 3})
    # The target topic exists already, with 2 partitions: records go by key hash.
    await create_topics(target.bootstrap, {"dc1.clicks": 2})
    await produce(source.bootstrap, "clicks", 3, 10)
    mirror = Mirror(
        source.bootstrap,
        target.bootstrap,
        include="clicks",
        prefix="dc1.",
        commit_interval_ms=100,
        source_options=FAST_SOURCE,
    )
    async with running(mirror):
        records = await read_all(target.bootstrap, "dc1.clicks", 30)
    assert len(records) == 30
    for r in records:
        assert r.partition == target_partition(r.key, 0, 3, 2)
    assert {r.value for r in records} == {record_value("clicks", p, i) for p in range(3) for i in range(10)}
    # Within a target partition, the records of each source partition keep their order.
    for values in by_partition(sorted(records, key=lambda r: r.offset)).values():
        for p in range(3):
            numbers = [int(v.rsplit(b"/", 1)[1]) for v in values if v.startswith(f"clicks/{p}/".encode())]
            assert numbers == sorted(numbers)
    assert mirror.stats().topics_created == 0


async def test_exactly_once_from_the_embedded_broker_to_apache_kafka_stores_positions_on_the_target(
    kafka_cluster_factory: Any, apache_kafka: Any
) -> None:
    """Embedded source, Apache Kafka target (with --kafka=apache: a second Apache Kafka
    as the source). The positions live in the target group, keyed by target topic and
    source partition, with the source topic as metadata."""
    source = await kafka_cluster_factory()
    target = apache_kafka
    await create_topics(source.bootstrap, {"ledger": 3})
    await produce(source.bootstrap, "ledger", 3, 40)
    mirror = Mirror(
        source.bootstrap,
        target.bootstrap,
        include="ledger",
        rename="{topic}.copy",
        group_id="eos-x",
        exactly_once=True,
        instance_id="x1",
        commit_interval_ms=100,
        source_options=FAST_SOURCE,
    )
    async with running(mirror):
        records = await read_all(target.bootstrap, "ledger.copy", 120, read_committed=True)
        await wait_for(
            lambda: _all_positions(mirror, 40), "every partition's position committed", timeout_s=30
        )
    assert by_partition(records) == {p: [record_value("ledger", p, i) for i in range(40)] for p in range(3)}
    assert mirror.stats().transactions >= 1
    async with Admin(target.bootstrap) as admin:
        stored = await admin.list_group_offsets("eos-x")
    positions = {tp: (o.offset, o.metadata) for tp, o in stored.items()}
    assert positions == {TopicPartition("ledger.copy", p): (40, "ledger") for p in range(3)}


async def _all_positions(mirror: Mirror, offset: int) -> bool:
    parts = mirror.stats().partitions
    return len(parts) == 3 and all(p.position == offset for p in parts.values())


async def test_cancelling_run_still_delivers_and_commits_what_was_read(clusters: tuple[Any, Any]) -> None:
    source, target = clusters
    await create_topics(source.bootstrap, {"cancel": 2})
    await produce(source.bootstrap, "cancel", 2, 30)
    tps = [TopicPartition("cancel", p) for p in range(2)]
    # No periodic commit: only the stop commits.
    mirror = Mirror(
        source.bootstrap,
        target.bootstrap,
        include="cancel",
        group_id="cancel-mirror",
        commit_interval_ms=600_000,
        source_options=FAST_SOURCE,
    )
    async with mirror:
        task = asyncio.ensure_future(mirror.run())

        async def all_read() -> bool:
            assert not task.done(), task
            parts = mirror.stats().partitions
            return len(parts) == 2 and all(p.read == 30 for p in parts.values())

        await wait_for(all_read, "every record handed to the target producer")
        assert await committed(source.bootstrap, "cancel-mirror", tps) == dict.fromkeys(tps, -1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await committed(source.bootstrap, "cancel-mirror", tps) == dict.fromkeys(tps, 30)
    records = await read_all(target.bootstrap, "cancel", 60)
    assert by_partition(records) == {p: [record_value("cancel", p, i) for i in range(30)] for p in range(2)}


@pytest.mark.kafka_embedded
async def test_exactly_once_a_failed_transaction_is_aborted_and_its_records_copied_again(
    clusters: tuple[Any, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="aiokafka_lite.integrations.mirror")
    source, target = clusters
    await create_topics(source.bootstrap, {"retry": 2})
    await produce(source.bootstrap, "retry", 2, 25)
    # The first position commit of a transaction fails (the target group "moved on"):
    # the transaction becomes abortable.
    target.inject_error(TxnOffsetCommitRequest, E.IllegalGenerationError.code, count=1)
    mirror = Mirror(
        source.bootstrap,
        target.bootstrap,
        include="retry",
        group_id="retry-mirror",
        exactly_once=True,
        instance_id="r1",
        commit_interval_ms=100,
        source_options=FAST_SOURCE,
    )
    async with running(mirror):
        committed_records = await read_all(target.bootstrap, "retry", 50, read_committed=True)
        await wait_for(lambda: _all_positions_of(mirror, 2, 25), "every position committed")
    # The mirror has stopped: read the log to its end, without waiting for a quiet spell.
    all_records = await read_topic(target.bootstrap, "retry", 2, "read_uncommitted")
    # Under read_committed every record once.
    assert by_partition(committed_records) == {
        p: [record_value("retry", p, i) for i in range(25)] for p in range(2)
    }
    # One transaction was aborted and its records copied again. How much of the aborted
    # copy is in the log depends on what the producer had sent before the offset commit
    # failed (abort fails the batches not sent yet, as Java's does; a loaded machine once
    # read exactly 50 records). So the abort is counted where it happens, in the mirror's log.
    aborts = [r for r in caplog.records if "aborting and copying its records again" in r.getMessage()]
    assert len(aborts) == 1
    assert len(all_records) >= 50
    assert mirror.stats().records == 50


async def _all_positions_of(mirror: Mirror, partitions: int, offset: int) -> bool:
    parts = mirror.stats().partitions
    return len(parts) == partitions and all(p.position == offset for p in parts.values())


@pytest.mark.kafka_embedded
async def test_exactly_once_rebalance_while_a_transaction_commits(clusters: tuple[Any, Any]) -> None:
    """The group runs rebalance callbacks in its own task: a second instance joining
    while the first is committing a (slow) transaction must not make them interleave."""
    source, target = clusters
    await create_topics(source.bootstrap, {"slow": 4})
    await produce(source.bootstrap, "slow", 4, 50)
    target.add_latency(EndTxnRequest, 0.3)  # every commit takes a while: a rebalance lands in one

    def instance(name: str) -> Mirror:
        return Mirror(
            source.bootstrap,
            target.bootstrap,
            include="slow",
            group_id="slow-mirror",
            exactly_once=True,
            instance_id=name,
            commit_interval_ms=50,
            source_options=FAST_SOURCE,
        )

    first, second = instance("a"), instance("b")
    async with running(first) as first_task:
        await wait_for(lambda: _positions_known(first, 4), "the first instance copying")
        await produce(source.bootstrap, "slow", 4, 50, start=50)
        async with running(second) as second_task:

            async def split() -> bool:
                assert not first_task.done(), first_task
                assert not second_task.done(), second_task
                return len(first.stats().partitions) == 2 and len(second.stats().partitions) == 2

            await wait_for(split, "the partitions split between the instances")
            records = await read_all(target.bootstrap, "slow", 400, read_committed=True)
    assert by_partition(records) == {p: [record_value("slow", p, i) for i in range(100)] for p in range(4)}


async def _positions_known(mirror: Mirror, partitions: int) -> bool:
    parts = mirror.stats().partitions
    return len(parts) == partitions and all(p.position is not None for p in parts.values())
