"""A group that does not exist, as Kafka 4's Java Admin reports it: describing or deleting
it fails for that group with GROUP_ID_NOT_FOUND (``GroupIdNotFoundException`` from the
group's future there; here the group's result carries ``GroupIdNotFoundError`` and
``raise_errors()`` raises it), and it has no committed offsets (an empty result, no
error). On the embedded broker and, with ``--kafka=apache``, on Apache Kafka. The share
group calls need a broker with share groups (not Kafka 4.0: there
test_admin_share_groups.py checks the answer to them)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from admin_testlib import has_share_groups

from aiokafka_lite import Admin
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.errors import GroupIdNotFoundError

DESCRIBE_AND_DELETE: dict[str, Callable[[Admin, str], Awaitable[Any]]] = {
    # describeConsumerGroups: ConsumerGroupDescribe says GROUP_ID_NOT_FOUND, the classic
    # DescribeGroups asked next says it too (v6, Kafka 4).
    "describe_consumer_groups": lambda admin, g: admin.describe_consumer_groups([g]),
    "describe_groups": lambda admin, g: admin.describe_groups([g]),
    "describe_share_groups": lambda admin, g: admin.describe_share_groups([g]),
    "delete_groups": lambda admin, g: admin.delete_groups([g]),
    "delete_share_groups": lambda admin, g: admin.delete_share_groups([g]),
}


@pytest.mark.parametrize("call", sorted(DESCRIBE_AND_DELETE))
async def test_describing_or_deleting_an_unknown_group_fails_for_it(
    kafka_cluster: EmbeddedCluster, call: str
) -> None:
    group = f"never-joined-{uuid.uuid4().hex[:8]}"
    async with Admin(kafka_cluster.bootstrap) as admin:
        if "share" in call and not await has_share_groups(admin):
            pytest.skip("this broker has no share groups (Kafka 4.0)")
        results = await DESCRIBE_AND_DELETE[call](admin, group)
    assert list(results) == [group]
    assert isinstance(results[group].error, GroupIdNotFoundError), results[group]
    assert not results.ok and list(results.errors) == [group]
    with pytest.raises(GroupIdNotFoundError) as raised:
        results.raise_errors()
    assert raised.value is results[group].error
    assert f"failed item: {group}" in (raised.value.__notes__ or [])


async def test_an_unknown_group_has_no_committed_offsets(kafka_cluster: EmbeddedCluster) -> None:
    group = f"never-joined-{uuid.uuid4().hex[:8]}"
    async with Admin(kafka_cluster.bootstrap) as admin:
        assert dict(await admin.list_group_offsets(group)) == {}
        if await has_share_groups(admin):
            assert dict(await admin.list_share_group_offsets(group)) == {}
