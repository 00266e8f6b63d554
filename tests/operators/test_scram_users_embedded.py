"""SCRAM users created and deleted through the admin on the embedded broker with SASL:
the broker's SCRAM logins read the same credential store as AlterUserScramCredentials
writes, so a new user logs in at once (both mechanisms, the iterations it was given) and
a deleted one is refused at once. The same against Apache Kafka 4.4 (where it takes a
metadata propagation) is in tests/kafka4/test_credentials_apache.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite.admin import (
    Admin,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.errors import SaslAuthenticationFailedError

pytestmark = pytest.mark.kafka_embedded


def _sasl(user: str, password: str, mechanism: str) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        "default_timeout_ms": 5_000,
    }


async def _logs_in(cluster: EmbeddedCluster, user: str, password: str, mechanism: str) -> bool:
    try:
        async with Admin(cluster.bootstrap, **_sasl(user, password, mechanism)) as a:
            await a.describe_cluster()
        return True
    except SaslAuthenticationFailedError:
        return False


async def test_created_users_log_in_at_once_and_deleted_ones_cannot(kafka_cluster_factory: Any) -> None:
    cluster: EmbeddedCluster = await kafka_cluster_factory(sasl_users={"admin": "admin-secret"})
    async with Admin(cluster.bootstrap, **_sasl("admin", "admin-secret", "SCRAM-SHA-512")) as admin:
        seeded = await admin.describe_user_scram_credentials(["admin"])
        assert set(seeded["admin"].credential_infos) == {
            ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
            ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
        }
        assert not await _logs_in(cluster, "dave", "dave-secret", "SCRAM-SHA-256")
        upsert = UserScramCredentialUpsertion(
            "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10_000), "dave-secret"
        )
        (await admin.alter_user_scram_credentials([upsert])).raise_errors()
        assert await _logs_in(cluster, "dave", "dave-secret", "SCRAM-SHA-256")
        assert not await _logs_in(cluster, "dave", "wrong", "SCRAM-SHA-256")
        # Only the mechanism that was set.
        assert not await _logs_in(cluster, "dave", "dave-secret", "SCRAM-SHA-512")

        # A new password replaces the old one.
        again = UserScramCredentialUpsertion(
            "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "new-secret"
        )
        (await admin.alter_user_scram_credentials([again])).raise_errors()
        assert await _logs_in(cluster, "dave", "new-secret", "SCRAM-SHA-256")
        assert not await _logs_in(cluster, "dave", "dave-secret", "SCRAM-SHA-256")

        delete = UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)
        (await admin.alter_user_scram_credentials([delete])).raise_errors()
        assert not await _logs_in(cluster, "dave", "new-secret", "SCRAM-SHA-256")
