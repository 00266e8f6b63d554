"""ACL calls against the pass's broker, which has no authorizer: the embedded one, or
with ``--kafka=apache`` the session's Apache Kafka (no ``authorizer.class.name``).
Kafka answers every ACL call with SECURITY_DISABLED there, and reports every CLUSTER
operation as authorized; the calls with an authorizer are in test_acls_embedded.py and
tests/kafka4/test_acls_apache.py. Also what ``Admin`` refuses before sending."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from aiokafka_lite.admin import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Admin,
    NewTopic,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.errors import ConfigError, SecurityDisabledError

Op = AclOperation
BINDING = AclBinding(
    ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL),
    AccessControlEntry("User:alice", "*", Op.READ, AclPermissionType.ALLOW),
)


@pytest.fixture
async def admin(kafka_cluster: EmbeddedCluster) -> AsyncIterator[Admin]:
    async with Admin(kafka_cluster.bootstrap) as a:
        yield a


async def test_create_acls_fails_per_binding_with_security_disabled(admin: Admin) -> None:
    res = await admin.create_acls([BINDING])
    assert list(res) == [BINDING]
    err = res[BINDING].error
    assert isinstance(err, SecurityDisabledError)
    assert "authorizer" in str(err).lower()


async def test_describe_acls_raises_security_disabled(admin: Admin) -> None:
    with pytest.raises(SecurityDisabledError, match="authorizer"):
        await admin.describe_acls(AclBindingFilter())


async def test_delete_acls_fails_per_filter_with_security_disabled(admin: Admin) -> None:
    f = BINDING.to_filter()
    res = await admin.delete_acls([f, AclBindingFilter()])
    assert list(res) == [f, AclBindingFilter()]
    assert all(isinstance(r.error, SecurityDisabledError) and r.deleted == () for r in res.values())


async def test_without_an_authorizer_every_cluster_operation_is_authorized(admin: Admin) -> None:
    plain = await admin.describe_cluster()
    assert plain.authorized_operations is None
    desc = await admin.describe_cluster(include_authorized_operations=True)
    assert desc.authorized_operations == {
        Op.ALTER,
        Op.ALTER_CONFIGS,
        Op.CLUSTER_ACTION,
        Op.CREATE,
        Op.DESCRIBE,
        Op.DESCRIBE_CONFIGS,
        Op.IDEMPOTENT_WRITE,
    }


async def test_without_an_authorizer_every_topic_operation_is_authorized(admin: Admin) -> None:
    name = f"acl-ops-{uuid.uuid4().hex[:8]}"
    (await admin.create_topics([NewTopic(name, 1, 1)])).raise_errors()
    plain = (await admin.describe_topics([name]))[name]
    assert plain.error is None and plain.authorized_operations is None
    desc = (await admin.describe_topics([name], include_authorized_operations=True))[name]
    assert desc.authorized_operations == {
        Op.READ,
        Op.WRITE,
        Op.CREATE,
        Op.DELETE,
        Op.ALTER,
        Op.DESCRIBE,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    }
    await admin.delete_topics([name])


@pytest.mark.parametrize(
    "binding",
    [
        AclBinding(ResourcePattern(ResourceType.ANY, "t"), AccessControlEntry("User:a")),
        AclBinding(ResourcePattern(ResourceType.TOPIC, "t", PatternType.MATCH), AccessControlEntry("User:a")),
        AclBinding(ResourcePattern(ResourceType.TOPIC, "t"), AccessControlEntry("User:a", "*", Op.ANY)),
        AclBinding(
            ResourcePattern(ResourceType.TOPIC, "t"),
            AccessControlEntry("User:a", "*", Op.READ, AclPermissionType.ANY),
        ),
    ],
)
async def test_bindings_that_cannot_exist_are_refused_before_sending(
    admin: Admin, binding: AclBinding
) -> None:
    with pytest.raises(ConfigError, match="ACL binding"):
        await admin.create_acls([binding])


async def test_filters_with_unknown_parts_are_refused_before_sending(admin: Admin) -> None:
    unknown = AclBindingFilter(ResourcePatternFilter(ResourceType.UNKNOWN), AccessControlEntryFilter())
    with pytest.raises(ConfigError, match="UNKNOWN"):
        await admin.describe_acls(unknown)
    with pytest.raises(ConfigError, match="UNKNOWN"):
        await admin.delete_acls([unknown])
