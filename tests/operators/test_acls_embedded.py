"""ACLs on the embedded broker with its authorizer on (``EmbeddedCluster(authorizer=True)``):
the ACL calls (create, describe with each pattern type, delete reporting what each filter
deleted), StandardAuthorizer's decisions (literal/prefixed/wildcard, DENY over ALLOW,
implied operations, super users, allow_everyone_if_no_acl_found) and their enforcement
on producers, consumer groups, transactions, metadata and the ACL calls themselves,
each failing with Kafka's typed error. The same cross-checks against Apache Kafka 4.4
are in tests/kafka4/test_acls_apache.py."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiokafka_lite import Consumer, Producer
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
from aiokafka_lite.broker.authorizer import Authorizer
from aiokafka_lite.core.errors import (
    ClusterAuthorizationFailedError,
    ConfigError,
    GroupAuthorizationFailedError,
    InvalidRequestError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from aiokafka_lite.wire.messages import OffsetFetchRequest, OffsetFetchResponse

pytestmark = pytest.mark.kafka_embedded

Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
FAST: dict[str, Any] = {"retry_backoff_ms": 5, "retry_backoff_max_ms": 50, "reconnect_backoff_ms": 5}


def sasl(user: str) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": user,
        "sasl_plain_password": USERS[user],
        **FAST,
    }


def acl(
    rt: ResourceType, name: str, principal: str, op: AclOperation, perm: AclPermissionType = Perm.ALLOW,
    pt: PatternType = PT.LITERAL, host: str = "*",
) -> AclBinding:  # fmt: skip
    return AclBinding(ResourcePattern(rt, name, pt), AccessControlEntry(principal, host, op, perm))


@pytest.fixture
async def cluster() -> AsyncIterator[EmbeddedCluster]:
    async with EmbeddedCluster(
        authorizer=True, super_users=["User:admin"], sasl_users=USERS, topics={"orders": 2, "payments": 1}
    ) as c:
        yield c


@pytest.fixture
async def admin(cluster: EmbeddedCluster) -> AsyncIterator[Admin]:
    async with Admin(cluster.bootstrap, **sasl("admin")) as a:
        yield a


# ---------------------------------------------------------------------------- the ACL calls


async def test_create_describe_and_delete_with_filters(admin: Admin) -> None:
    literal = acl(RT.TOPIC, "orders", "User:alice", Op.READ)
    prefixed = acl(RT.TOPIC, "ord", "User:alice", Op.WRITE, pt=PT.PREFIXED)
    wildcard = acl(RT.TOPIC, "*", "User:bob", Op.DESCRIBE)
    group = acl(RT.GROUP, "g1", "User:alice", Op.READ)
    deny = acl(RT.TOPIC, "orders", "User:bob", Op.READ, Perm.DENY)
    created = await admin.create_acls([literal, prefixed, wildcard, group, deny, literal])
    assert list(created) == [literal, prefixed, wildcard, group, deny] and created.ok

    assert set(await admin.describe_acls()) == {literal, prefixed, wildcard, group, deny}
    topic_filter = ResourcePatternFilter(RT.TOPIC, "orders", PT.LITERAL)
    assert set(await admin.describe_acls(AclBindingFilter(topic_filter))) == {literal, deny}
    # MATCH: every binding that applies to the topic "orders" (literal, prefix, wildcard).
    match = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "orders", PT.MATCH))
    assert set(await admin.describe_acls(match)) == {literal, prefixed, wildcard, deny}
    # ANY: exact name, any pattern type.
    any_type = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "ord", PT.ANY))
    assert await admin.describe_acls(any_type) == [prefixed]
    by_principal = AclBindingFilter(entry_filter=AccessControlEntryFilter(principal="User:bob"))
    assert set(await admin.describe_acls(by_principal)) == {wildcard, deny}
    denies = AclBindingFilter(entry_filter=AccessControlEntryFilter(permission_type=Perm.DENY))
    assert await admin.describe_acls(denies) == [deny]

    f_alice = AclBindingFilter(entry_filter=AccessControlEntryFilter(principal="User:alice"))
    f_group = AclBindingFilter(ResourcePatternFilter(RT.GROUP))
    f_none = acl(RT.TOPIC, "nothing", "User:x", Op.ALL).to_filter()
    deleted = await admin.delete_acls([f_alice, f_group, f_none])
    assert list(deleted) == [f_alice, f_group, f_none] and deleted.ok
    assert set(deleted[f_alice].deleted) == {literal, prefixed, group}
    assert deleted[f_group].deleted == (group,)  # matched by both filters: listed under both
    assert deleted[f_none].deleted == ()
    assert set(await admin.describe_acls()) == {wildcard, deny}


async def test_bindings_kafka_refuses_fail_per_item(admin: Admin) -> None:
    good = acl(RT.CLUSTER, "kafka-cluster", "User:alice", Op.DESCRIBE)
    wrong_cluster_name = acl(RT.CLUSTER, "my-cluster", "User:alice", Op.DESCRIBE)
    no_principal_type = acl(RT.TOPIC, "t", "alice", Op.READ)
    empty_name = acl(RT.TOPIC, "", "User:alice", Op.READ)
    res = await admin.create_acls([good, wrong_cluster_name, no_principal_type, empty_name])
    assert res[good].error is None
    for bad in (wrong_cluster_name, no_principal_type, empty_name):
        assert isinstance(res[bad].error, InvalidRequestError), bad
    assert await admin.describe_acls() == [good]


async def test_acl_calls_need_alter_or_describe_on_the_cluster(
    cluster: EmbeddedCluster, admin: Admin
) -> None:
    binding = acl(RT.TOPIC, "orders", "User:bob", Op.READ)
    async with Admin(cluster.bootstrap, **sasl("alice")) as alice:
        with pytest.raises(ClusterAuthorizationFailedError, match="User:alice"):
            await alice.describe_acls()
        res = await alice.create_acls([binding])
        assert isinstance(res[binding].error, ClusterAuthorizationFailedError)
        (
            await admin.create_acls([acl(RT.CLUSTER, "kafka-cluster", "User:alice", Op.DESCRIBE)])
        ).raise_errors()
        assert len(await alice.describe_acls()) == 1  # DESCRIBE is enough to describe
        res = await alice.create_acls([binding])  # ... but not to create
        assert isinstance(res[binding].error, ClusterAuthorizationFailedError)
        gone = await alice.delete_acls([AclBindingFilter()])
        assert isinstance(gone[AclBindingFilter()].error, ClusterAuthorizationFailedError)
        (await admin.create_acls([acl(RT.CLUSTER, "kafka-cluster", "User:alice", Op.ALTER)])).raise_errors()
        assert (await alice.create_acls([binding])).ok
        desc = await alice.describe_cluster(include_authorized_operations=True)
        assert desc.authorized_operations == {Op.DESCRIBE, Op.ALTER}
    desc = await admin.describe_cluster(include_authorized_operations=True)
    assert desc.authorized_operations is not None and Op.CLUSTER_ACTION in desc.authorized_operations


# ---------------------------------------------------------------------------- decisions (sans I/O)


def test_authorizer_decisions_follow_standard_authorizer() -> None:
    auth = Authorizer(super_users=["User:root"])
    a = "User:alice"

    def may(op: AclOperation, name: str, principal: str = a, host: str = "10.0.0.1") -> bool:
        return auth.authorize(principal, host, op, RT.TOPIC, name)

    assert not may(Op.READ, "t")  # no ACL at all: denied (allow.everyone.if.no.acl.found=false)
    assert may(Op.READ, "t", "User:root")  # super user
    auth.create(acl(RT.TOPIC, "sales-", a, Op.READ, pt=PT.PREFIXED))
    assert may(Op.READ, "sales-eu") and not may(Op.READ, "sale") and not may(Op.WRITE, "sales-eu")
    assert may(Op.DESCRIBE, "sales-eu")  # implied by READ
    assert not may(Op.READ, "sales-eu", "User:bob")
    auth.create(acl(RT.TOPIC, "*", "User:*", Op.WRITE))
    assert may(Op.WRITE, "anything", "User:bob") and may(Op.DESCRIBE, "anything", "User:bob")
    auth.create(acl(RT.TOPIC, "sales-secret", a, Op.ALL, Perm.DENY))
    assert not may(Op.READ, "sales-secret") and not may(Op.DESCRIBE, "sales-secret")  # DENY beats ALLOW
    auth.create(acl(RT.TOPIC, "cfg", a, Op.ALTER_CONFIGS))
    assert may(Op.DESCRIBE_CONFIGS, "cfg") and not may(Op.ALTER, "cfg")
    auth.create(acl(RT.TOPIC, "hosted", a, Op.READ, host="10.0.0.2"))
    assert not may(Op.READ, "hosted") and may(Op.READ, "hosted", host="10.0.0.2")
    # A resource with ACLs for others only is still denied to everyone else ...
    everyone = Authorizer(allow_everyone_if_no_acl_found=True)
    everyone.create(acl(RT.TOPIC, "owned", "User:bob", Op.READ))
    assert not everyone.authorize(a, "h", Op.READ, RT.TOPIC, "owned")
    # ... and allowed where no ACL applies, with allow_everyone_if_no_acl_found.
    assert everyone.authorize(a, "h", Op.READ, RT.TOPIC, "free")


def test_embedded_cluster_refuses_authorizer_options_without_an_authorizer() -> None:
    with pytest.raises(ConfigError, match="authorizer=True"):
        EmbeddedCluster(super_users=["User:admin"])


# ---------------------------------------------------------------------------- enforcement


async def test_producer_needs_write_and_transactional_producer_write_on_its_id(
    cluster: EmbeddedCluster, admin: Admin
) -> None:
    # WRITE on one topic: the idempotent producer gets its id, and may write there only.
    (await admin.create_acls([acl(RT.TOPIC, "orders", "User:alice", Op.WRITE)])).raise_errors()
    async with Producer(cluster.bootstrap, **sasl("alice")) as producer:
        md = await producer.send("orders", b"ok", partition=0)
        assert md.offset == 0
        with pytest.raises(TopicAuthorizationFailedError, match="payments"):
            await producer.send("payments", b"no")
    txn = f"txn-{uuid.uuid4().hex[:6]}"
    with pytest.raises(TransactionalIdAuthorizationFailedError):
        async with Producer(cluster.bootstrap, transactional_id=txn, **sasl("alice")) as producer:
            await producer.begin_transaction()
    (await admin.create_acls([acl(RT.TRANSACTIONAL_ID, txn, "User:alice", Op.WRITE)])).raise_errors()
    async with Producer(cluster.bootstrap, transactional_id=txn, **sasl("alice")) as producer:
        async with producer.transaction():
            await producer.send("orders", b"in-txn", partition=0)


async def test_consumer_group_member_needs_read_on_group_and_topic(
    cluster: EmbeddedCluster, admin: Admin
) -> None:
    async with Producer(cluster.bootstrap, **sasl("admin")) as producer:
        await producer.send("orders", b"r0", partition=0)
    (await admin.create_acls([acl(RT.TOPIC, "orders", "User:bob", Op.READ)])).raise_errors()
    consumer = Consumer(
        cluster.bootstrap, topics="orders", group_id="bobs", auto_offset_reset="earliest", **sasl("bob")
    )
    async with consumer:
        with pytest.raises(GroupAuthorizationFailedError, match="User:bob"):
            await asyncio.wait_for(consumer.getone(), 30)
    (await admin.create_acls([acl(RT.GROUP, "bobs", "User:bob", Op.READ)])).raise_errors()
    async with Consumer(
        cluster.bootstrap, topics="orders", group_id="bobs", auto_offset_reset="earliest", **sasl("bob")
    ) as consumer:
        rec = await asyncio.wait_for(consumer.getone(), 30)
        assert rec.value == b"r0"
        await consumer.commit()
    # The topic without READ: the group alone is not enough.
    async with Consumer(
        cluster.bootstrap, topics="payments", group_id="bobs", auto_offset_reset="earliest", **sasl("bob")
    ) as consumer:
        with pytest.raises(TopicAuthorizationFailedError, match="payments"):
            await asyncio.wait_for(consumer.getone(), 30)


async def test_metadata_hides_and_refuses_topics_without_describe(
    cluster: EmbeddedCluster, admin: Admin
) -> None:
    (
        await admin.create_acls([acl(RT.TOPIC, "ord", "User:alice", Op.DESCRIBE, pt=PT.PREFIXED)])
    ).raise_errors()
    async with Admin(cluster.bootstrap, **sasl("alice")) as alice:
        assert list(await alice.list_topics()) == ["orders"]
        desc = await alice.describe_topics(["orders", "payments"], include_authorized_operations=True)
        assert desc["orders"].error is None and len(desc["orders"].partitions) == 2
        assert desc["orders"].authorized_operations == {Op.DESCRIBE}
        assert isinstance(desc["payments"].error, TopicAuthorizationFailedError)
        # Topic creation needs CREATE (on the cluster or the topic).
        res = await alice.create_topics([NewTopic("ord-new", 1, 1), NewTopic("other", 1, 1)])
        assert isinstance(res["ord-new"].error, TopicAuthorizationFailedError)
        (
            await admin.create_acls([acl(RT.TOPIC, "ord", "User:alice", Op.CREATE, pt=PT.PREFIXED)])
        ).raise_errors()
        res = await alice.create_topics([NewTopic("ord-new", 1, 1), NewTopic("other", 1, 1)])
        assert res["ord-new"].error is None
        assert isinstance(res["other"].error, TopicAuthorizationFailedError)
        deleted = await alice.delete_topics(["ord-new"])
        assert isinstance(deleted["ord-new"].error, TopicAuthorizationFailedError)  # DELETE not granted
        # Auto-creation through metadata needs CREATE too: alice may create "ord-auto".
        (await admin.create_acls([acl(RT.TOPIC, "ord-auto", "User:alice", Op.WRITE)])).raise_errors()
        async with Producer(cluster.bootstrap, **sasl("alice")) as producer:
            md = await producer.send("ord-auto", b"x")
            assert md.topic == "ord-auto"
        # Describe with authorized operations: what alice may do on "orders".
        ops = await alice.describe_cluster(include_authorized_operations=True)
        assert ops.authorized_operations == frozenset()


async def test_super_user_and_everyone_if_no_acl_found() -> None:
    async with EmbeddedCluster(
        authorizer=True,
        allow_everyone_if_no_acl_found=True,
        sasl_users=USERS,
        topics={"open": 1, "closed": 1},
    ) as c:
        async with Admin(c.bootstrap, **sasl("admin")) as admin:
            # No ACL on the cluster: everyone may create ACLs.
            (await admin.create_acls([acl(RT.TOPIC, "closed", "User:admin", Op.ALL)])).raise_errors()
        async with Producer(c.bootstrap, **sasl("bob")) as producer:
            await producer.send("open", b"free")
            with pytest.raises(TopicAuthorizationFailedError):
                await producer.send("closed", b"owned by admin")


async def test_offset_fetch_of_several_groups_answers_each_group(
    cluster: EmbeddedCluster, admin: Admin
) -> None:
    (await admin.create_acls([acl(RT.GROUP, "mine", "User:alice", Op.DESCRIBE)])).raise_errors()
    request = OffsetFetchRequest(
        groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g, topics=None) for g in ("mine", "theirs")
        ]
    )
    async with Admin(cluster.bootstrap, **sasl("alice")) as alice:
        resp = await alice.request(lambda v: request, timeout_ms=10_000)
    assert isinstance(resp, OffsetFetchResponse)
    assert sorted((g.group_id, g.error_code) for g in resp.groups) == [
        ("mine", 0),
        ("theirs", GroupAuthorizationFailedError.code),
    ]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_a_denied_member_of_either_group_protocol_raises_at_once(
    cluster: EmbeddedCluster, admin: Admin, protocol: str
) -> None:
    (await admin.create_acls([acl(RT.TOPIC, "orders", "User:bob", Op.READ)])).raise_errors()
    group = f"denied-{protocol}"
    async with Consumer(
        cluster.bootstrap, topics="orders", group_id=group, group_protocol=protocol, **sasl("bob")
    ) as consumer:
        with pytest.raises(GroupAuthorizationFailedError):
            await asyncio.wait_for(consumer.getone(), 30)
        # It stays failed: later polls raise again, and the member sends no more group
        # requests (no retry storm).
        with cluster.record_requests(10, 11, 14, 68) as rec:  # FindCoordinator, Join, Sync, CG heartbeat
            for _ in range(3):
                with pytest.raises(GroupAuthorizationFailedError):
                    await consumer.getmany(timeout_ms=200)
        assert rec.requests == []
