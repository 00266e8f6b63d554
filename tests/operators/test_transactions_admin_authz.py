"""The transactions admin calls on an embedded cluster with an authorizer, as Kafka's
``KafkaApis`` checks them: ListTransactions and DescribeTransactions need DESCRIBE on the
transactional id (and show only the topics the principal may DESCRIBE), DescribeProducers
READ on the topic, WriteTxnMarkers (``abort_transaction``) CLUSTER_ACTION on the cluster."""

from __future__ import annotations

import pytest

from aiokafka_lite import Producer, TopicPartition
from aiokafka_lite.admin import (
    AbortTransactionSpec,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    Admin,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.acls import CLUSTER_NAME
from aiokafka_lite.core.errors import (
    ClusterAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)

pytestmark = pytest.mark.kafka_embedded

USERS = {"admin": "admin-secret", "ops": "ops-secret"}


def login(user: str) -> dict[str, str]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": user,
        "sasl_plain_password": USERS[user],
    }


def allow(resource: ResourceType, name: str, op: AclOperation) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource, name, PatternType.LITERAL),
        AccessControlEntry("User:ops", "*", op, AclPermissionType.ALLOW),
    )


async def test_describe_producers_needs_read_and_abort_needs_cluster_action() -> None:
    async with EmbeddedCluster(
        authorizer=True, super_users=["User:admin"], sasl_users=USERS, topics={"pay": 1}
    ) as cluster:
        tp = TopicPartition("pay", 0)
        producer = Producer(cluster.bootstrap, transactional_id="pay-tx", **login("admin"))
        await producer.start()
        try:
            await producer.begin_transaction()
            await producer.send("pay", b"open", partition=0)
            async with Admin(cluster.bootstrap, **login("ops")) as ops:
                # Transactional ids: listed and described only with DESCRIBE on them.
                assert (await ops.list_transactions()).transactions == []
                hidden = (await ops.describe_transactions(["pay-tx"]))["pay-tx"]
                assert isinstance(hidden.error, TransactionalIdAuthorizationFailedError)
                async with Admin(cluster.bootstrap, **login("admin")) as admin:
                    binding = allow(ResourceType.TRANSACTIONAL_ID, "pay-tx", AclOperation.DESCRIBE)
                    (await admin.create_acls([binding])).raise_errors()
                assert [t.transactional_id for t in (await ops.list_transactions()).transactions] == [
                    "pay-tx"
                ]
                described = (await ops.describe_transactions(["pay-tx"])).raise_errors()["pay-tx"]
                assert described.topic_partitions == frozenset()  # no DESCRIBE on the topic
                refused = (await ops.describe_producers([tp]))[tp]
                assert isinstance(refused.error, TopicAuthorizationFailedError)
                async with Admin(cluster.bootstrap, **login("admin")) as admin:
                    (
                        await admin.create_acls([allow(ResourceType.TOPIC, "pay", AclOperation.READ)])
                    ).raise_errors()
                (state,) = (await ops.describe_producers([tp])).raise_errors()[tp].producers
                assert state.current_transaction_start_offset == 0
                described = (await ops.describe_transactions(["pay-tx"])).raise_errors()["pay-tx"]
                assert described.topic_partitions == frozenset({tp})  # READ implies DESCRIBE
                spec = AbortTransactionSpec(tp, state.producer_id, state.producer_epoch, 0)
                with pytest.raises(ClusterAuthorizationFailedError):
                    await ops.abort_transaction(spec)
                async with Admin(cluster.bootstrap, **login("admin")) as admin:
                    binding = allow(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CLUSTER_ACTION)
                    (await admin.create_acls([binding])).raise_errors()
                await ops.abort_transaction(spec)
                (state,) = (await ops.describe_producers([tp])).raise_errors()[tp].producers
                assert state.current_transaction_start_offset is None
        finally:
            await producer.close()
