"""Set-up shared by the two-backend suites: topics filled through the client itself, a
share group that starts at the earliest, and the check that a group's later member finds
nothing left after the others committed."""

from __future__ import annotations

from typing import Any

import anyio

from aiokafka_lite import Admin, Consumer, NewTopic, Producer
from aiokafka_lite.admin.types import ConfigResource
from anyio_backends.conftest import FAST


async def create_topic(admin: Admin, topic: str, partitions: int) -> None:
    (await admin.create_topics([NewTopic(topic, partitions=partitions, replication_factor=1)])).raise_errors()


async def produce_values(bootstrap: str, topic: str, count: int) -> set[bytes]:
    """Writes ``count`` distinct values (``<topic>-<i>``) and returns them."""
    values = {f"{topic}-{i}".encode() for i in range(count)}
    async with Producer(bootstrap, linger_ms=2, **FAST) as producer:
        for v in sorted(values):
            await producer.enqueue(topic, v)
        await producer.flush()
    return values


async def fill_topic(bootstrap: str, topic: str, partitions: int, count: int) -> set[bytes]:
    """A new topic holding ``count`` records; returns their values."""
    async with Admin(bootstrap, **FAST) as admin:
        await create_topic(admin, topic, partitions)
    return await produce_values(bootstrap, topic, count)


async def prepare_share_topic(
    bootstrap: str, topic: str, group: str, partitions: int, count: int
) -> set[bytes]:
    """A topic holding ``count`` records and a share group that starts at the earliest."""
    async with Admin(bootstrap, **FAST) as admin:
        await create_topic(admin, topic, partitions)
        results = await admin.incremental_alter_configs(
            {ConfigResource.group(group): {"share.auto.offset.reset": "earliest"}}
        )
        assert all(r.error is None for r in results.values()), results
    return await produce_values(bootstrap, topic, count)


async def assert_late_member_finds_nothing_left(
    bootstrap: str, group: str, topic: str, **settings: Any
) -> None:
    """A new member of the group starts from the committed offsets: nothing left to read."""
    async with Consumer(bootstrap, group_id=group, topics=topic, **settings, **FAST) as late:
        with anyio.fail_after(30):
            while not late.assignment():
                assert await late.getmany(timeout_ms=200) == {}
        for tp in late.assignment():
            assert await late.committed(tp) == await late.position(tp)
        assert await late.getmany(timeout_ms=300) == {}
