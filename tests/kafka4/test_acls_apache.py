"""ACLs against Apache Kafka with its ``StandardAuthorizer``, cross-checked with Kafka's
own ``kafka-acls`` tool (``org.apache.kafka.tools.AclCommand`` in the kafka-tools jar),
and the same enforcement scenario on Apache and on the embedded broker.

One SASL node (users admin, alice, bob) with ``authorizer.class.name`` set and
``super.users`` = the admin plus ``User:ANONYMOUS``: the launcher's replication and
controller listeners are PLAINTEXT, whose principal is ANONYMOUS, and the controller
authorizes the broker's own requests too (as a real cluster lists its inter-broker
principal there). Kafka applies an ACL change when the broker replays the controller's
record, a moment after CreateAcls answers: the tests wait until describe shows it.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.admin import (
    AccessControlEntry,
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
from aiokafka_lite.core.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from aiokafka_lite.testing.apache import ApacheCluster, _java, kafka_tools_classpath

Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
FAST: dict[str, Any] = {"retry_backoff_ms": 20, "retry_backoff_max_ms": 200, "reconnect_backoff_ms": 20}


def sasl(user: str) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": USERS[user],
        **FAST,
    }


def acl(
    rt: ResourceType, name: str, principal: str, op: AclOperation, perm: AclPermissionType = Perm.ALLOW,
    pt: PatternType = PT.LITERAL,
) -> AclBinding:  # fmt: skip
    return AclBinding(ResourcePattern(rt, name, pt), AccessControlEntry(principal, "*", op, perm))


@pytest.fixture(scope="module")
def apache(pytestconfig: pytest.Config) -> Iterator[ApacheCluster]:
    version = pytestconfig.getoption("--kafka-version", None)
    with ApacheCluster(
        1,
        version=str(version) if version else None,
        sasl_users=USERS,
        sasl_mechanisms=("PLAIN",),
        configs={"authorizer.class.name": AUTHORIZER, "super.users": "User:admin;User:ANONYMOUS"},
    ) as c:
        yield c


@pytest.fixture(scope="module")
def kafka_acls(apache: ApacheCluster, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., str]:
    """``kafka_acls(*args)``: Kafka's kafka-acls tool as the admin user; its stdout."""
    classpath = kafka_tools_classpath(apache.version)
    config = Path(tmp_path_factory.mktemp("acls")) / "admin.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{USERS["admin"]}";\n'
    )

    def run(*args: str) -> str:
        cmd = [_java(), "-Xmx256m", "-cp", classpath, "org.apache.kafka.tools.AclCommand"]
        cmd += ["--bootstrap-server", apache.bootstrap, "--command-config", str(config), *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    return run


@pytest.fixture
async def admin(apache: ApacheCluster) -> AsyncIterator[Admin]:
    async with Admin(apache.bootstrap, **sasl("admin")) as a:
        yield a


_LISTED = re.compile(
    r"ResourcePattern\(resourceType=(\w+), name=(.+?), patternType=(\w+)\)`:\s*\n((?:\s*\(principal=.*\n?)*)"
)
_ENTRY = re.compile(r"\(principal=(.+?), host=(.+?), operation=(\w+), permissionType=(\w+)\)")


def parse_listing(text: str) -> set[AclBinding]:
    """The bindings ``kafka-acls --list`` printed."""
    out: set[AclBinding] = set()
    for rt, name, pt, entries in _LISTED.findall(text):
        for principal, host, op, perm in _ENTRY.findall(entries):
            pattern = ResourcePattern(RT[rt], name, PT[pt])
            out.add(AclBinding(pattern, AccessControlEntry(principal, host, Op[op], Perm[perm])))
    return out


async def until(check: Callable[[], Awaitable[bool]], what: str, within_s: float = 30.0) -> None:
    """Wait until ``check()`` holds (Kafka applies ACL changes a moment after answering)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"not within {within_s} s: {what}")
        await asyncio.sleep(0.1)


async def described(
    admin: Admin, expected: set[AclBinding], acl_filter: AclBindingFilter | None = None
) -> None:
    async def check() -> bool:
        return set(await admin.describe_acls(acl_filter)) == expected

    await until(check, f"describe_acls == {expected}")


# ---------------------------------------------------------------------------- kafka-acls cross-check


async def test_our_acls_are_listed_by_kafka_acls_and_its_acls_described_by_us(
    admin: Admin, kafka_acls: Callable[..., str]
) -> None:
    topic = f"xcheck-{uuid.uuid4().hex[:6]}"
    ours = {
        acl(RT.TOPIC, topic, "User:alice", Op.READ),
        acl(RT.TOPIC, topic, "User:bob", Op.WRITE, Perm.DENY),
        acl(RT.TOPIC, topic + "-", "User:alice", Op.DESCRIBE, pt=PT.PREFIXED),
    }
    (await admin.create_acls(ours)).raise_errors()
    only_topic = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, topic, PT.ANY))
    await described(admin, {b for b in ours if b.pattern.name == topic}, only_topic)
    listed = parse_listing(kafka_acls("--list", "--topic", topic, "--resource-pattern-type", "any"))
    assert listed == {b for b in ours if b.pattern.name == topic}
    listed = parse_listing(
        kafka_acls("--list", "--topic", topic + "-", "--resource-pattern-type", "prefixed")
    )
    assert listed == {b for b in ours if b.pattern.pattern_type == PT.PREFIXED}

    # The tool's ACLs, described by us.
    group = f"g-{topic}"
    kafka_acls("--add", "--allow-principal", "User:bob", "--operation", "Read", "--group", group)
    kafka_acls(
        "--add", "--deny-principal", "User:alice", "--operation", "All", "--transactional-id", "tx-",
        "--resource-pattern-type", "prefixed",
    )  # fmt: skip
    theirs = {
        acl(RT.GROUP, group, "User:bob", Op.READ),
        acl(RT.TRANSACTIONAL_ID, "tx-", "User:alice", Op.ALL, Perm.DENY, PT.PREFIXED),
    }
    await described(admin, ours | theirs)

    # Deleted by us (one filter per kind), gone for the tool too.
    f_topic = AclBindingFilter(ResourcePatternFilter(RT.TOPIC))
    f_rest = AclBindingFilter(ResourcePatternFilter(RT.ANY))
    deleted = await admin.delete_acls([f_topic, f_rest])
    assert set(deleted[f_topic].deleted) == ours
    assert set(deleted[f_rest].deleted) == ours | theirs
    await described(admin, set())
    assert parse_listing(kafka_acls("--list")) == set()


# ---------------------------------------------------------------------------- enforcement, both brokers


async def enforcement_scenario(bootstrap: str, admin: Admin) -> None:
    """Alice and bob without, then with, the ACLs they need; typed errors meanwhile."""
    tag = uuid.uuid4().hex[:6]
    allowed, denied, group, txn = f"ok-{tag}", f"no-{tag}", f"grp-{tag}", f"txn-{tag}"
    (await admin.create_topics([NewTopic(allowed, 1, 1), NewTopic(denied, 1, 1)])).raise_errors()
    grants = {
        acl(RT.TOPIC, allowed, "User:alice", Op.WRITE),
        acl(RT.TOPIC, allowed, "User:bob", Op.READ),
    }
    (await admin.create_acls(grants)).raise_errors()
    await described(admin, grants)

    async with Admin(bootstrap, **sasl("alice")) as alice:
        with pytest.raises(ClusterAuthorizationFailedError):
            await alice.describe_acls()
        desc = await alice.describe_cluster(include_authorized_operations=True)
        assert desc.authorized_operations == frozenset()
    async with Producer(bootstrap, **sasl("alice")) as producer:
        await producer.send(allowed, b"v0", partition=0)
        with pytest.raises(TopicAuthorizationFailedError):
            await producer.send(denied, b"no", partition=0)
    with pytest.raises(TransactionalIdAuthorizationFailedError):
        async with Producer(bootstrap, transactional_id=txn, **sasl("alice")) as producer:
            await producer.begin_transaction()

    consumer = Consumer(
        bootstrap, topics=allowed, group_id=group, auto_offset_reset="earliest", **sasl("bob")
    )
    async with consumer:
        with pytest.raises(GroupAuthorizationFailedError):
            await asyncio.wait_for(consumer.getone(), 60)

    more = {acl(RT.GROUP, group, "User:bob", Op.READ), acl(RT.TRANSACTIONAL_ID, txn, "User:alice", Op.WRITE)}
    (await admin.create_acls(more)).raise_errors()
    await described(admin, grants | more)
    async with Producer(bootstrap, transactional_id=txn, **sasl("alice")) as producer:
        async with producer.transaction():
            await producer.send(allowed, b"v1", partition=0)
    async with Consumer(
        bootstrap, topics=allowed, group_id=group, auto_offset_reset="earliest", **sasl("bob")
    ) as consumer:
        values = [(await asyncio.wait_for(consumer.getone(), 60)).value for _ in range(2)]
        assert values == [b"v0", b"v1"]
        await consumer.commit()
    (await admin.delete_acls([AclBindingFilter()])).raise_errors()
    await described(admin, set())


async def test_enforcement_on_apache(apache: ApacheCluster, admin: Admin) -> None:
    await enforcement_scenario(apache.bootstrap, admin)


async def test_enforcement_on_the_embedded_broker() -> None:
    async with EmbeddedCluster(authorizer=True, super_users=["User:admin"], sasl_users=USERS) as cluster:
        async with Admin(cluster.bootstrap, **sasl("admin")) as admin:
            await enforcement_scenario(cluster.bootstrap, admin)
