"""ACLs on asyncio and on trio: the admin's ACL calls, and a producer and a group
member denied, then allowed, by an embedded broker with its authorizer on (in a thread,
so that trio clients reach it). The typed errors come once, without retry storms: the
denied member's poll raises as soon as the coordinator refuses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.admin import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    Admin,
    ResourcePattern,
    ResourceType,
)
from aiokafka_lite.core import errors as E
from aiokafka_lite.testing.threaded import ThreadedCluster
from anyio_backends.conftest import FAST

pytestmark = pytest.mark.anyio

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


def login(user: str) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": USERS[user],
        **FAST,
    }


def allow(rt: ResourceType, name: str, op: AclOperation) -> AclBinding:
    return AclBinding(ResourcePattern(rt, name), AccessControlEntry("User:alice", "*", op))


async def test_acls_deny_then_allow(kafka_threaded_cluster_factory: Callable[..., ThreadedCluster]) -> None:
    tc = kafka_threaded_cluster_factory(
        authorizer=True, super_users=["User:admin"], sasl_users=USERS, topics={"orders": 1, "audit": 1}
    )
    async with Admin(tc.bootstrap, **login("admin")) as admin:
        grants = [allow(ResourceType.TOPIC, "orders", AclOperation.WRITE)]
        (await admin.create_acls(grants)).raise_errors()
        assert await admin.describe_acls() == grants
    async with Producer(tc.bootstrap, **login("alice")) as producer:
        await producer.send("orders", b"v0", partition=0)
        with pytest.raises(E.TopicAuthorizationFailedError, match="audit"):
            await producer.send("audit", b"denied", partition=0)
    async with Admin(tc.bootstrap, **login("admin")) as admin:
        (await admin.create_acls([allow(ResourceType.TOPIC, "orders", AclOperation.READ)])).raise_errors()
    async with Consumer(
        tc.bootstrap, topics="orders", group_id="alices", auto_offset_reset="earliest", **login("alice")
    ) as consumer:
        with anyio.fail_after(30), pytest.raises(E.GroupAuthorizationFailedError, match="User:alice"):
            await consumer.getone()
    async with Admin(tc.bootstrap, **login("admin")) as admin:
        (await admin.create_acls([allow(ResourceType.GROUP, "alices", AclOperation.READ)])).raise_errors()
    async with Consumer(
        tc.bootstrap, topics="orders", group_id="alices", auto_offset_reset="earliest", **login("alice")
    ) as consumer:
        with anyio.fail_after(30):
            assert (await consumer.getone()).value == b"v0"
    async with Admin(tc.bootstrap, **login("admin")) as admin:
        deleted = await admin.delete_acls([AclBindingFilter()])
        assert len(deleted[AclBindingFilter()].deleted) == 3
