"""The mirror between two clusters (two embedded clusters, or with --kafka=apache the
session's Apache Kafka as source and a fresh one as target)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from mirror_testlib import (
    FAST_SOURCE,
    by_partition,
    create_topics,
    produce,
    read_all,
    record_value,
)

from aiokafka_lite import Admin
from aiokafka_lite.admin import ConfigResource, ConfigResourceType
from aiokafka_lite.mirror import Mirror


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
