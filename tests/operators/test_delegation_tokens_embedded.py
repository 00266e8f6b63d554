"""Delegation tokens (KIP-48) on the embedded broker with SASL: create, describe, renew,
expire, Kafka's checks (who may renew, token-authenticated connections may not ask for
tokens), and logging in with a token (``sasl_scram_token_auth``). The same calls against
Apache Kafka 4.4 are in tests/kafka4/test_credentials_apache.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite.admin import Admin
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.broker.credentials import credential_store
from aiokafka_lite.core.errors import (
    DelegationTokenExpiredError,
    DelegationTokenNotFoundError,
    DelegationTokenOwnerMismatchError,
    DelegationTokenRequestNotAllowedError,
    InvalidPrincipalTypeError,
    SaslAuthenticationFailedError,
)

pytestmark = pytest.mark.kafka_embedded
USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}


def _sasl(user: str, password: str, **extra: Any) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        **extra,
    }


async def test_create_describe_renew_expire_and_log_in_with_a_token(kafka_cluster_factory: Any) -> None:
    cluster: EmbeddedCluster = await kafka_cluster_factory(sasl_users=USERS)
    async with Admin(cluster.bootstrap, **_sasl("alice", USERS["alice"])) as alice:
        token = await alice.create_delegation_token(renewers=["User:bob"], max_lifetime_ms=3_600_000)
        info = token.token_info
        assert (info.owner, info.token_requester, info.renewers) == (
            "User:alice",
            "User:alice",
            ("User:bob",),
        )
        assert info.max_timestamp - info.issue_timestamp == 3_600_000
        assert info.expiry_timestamp == info.max_timestamp  # a 1 h lifetime caps the 1-day renewal
        assert [t.token_id for t in await alice.describe_delegation_token()] == [info.token_id]
        assert await alice.describe_delegation_token([]) == []

        # Logging in with the token: the connection's principal is the token's owner.
        token_login = _sasl(info.token_id, token.hmac_as_base64, sasl_scram_token_auth=True)
        async with Admin(cluster.bootstrap, **token_login) as via_token:
            assert (await via_token.describe_cluster()).brokers
            # ...but a token-authenticated connection may not ask for tokens at all.
            with pytest.raises(DelegationTokenRequestNotAllowedError):
                await via_token.describe_delegation_token()
            with pytest.raises(DelegationTokenRequestNotAllowedError):
                await via_token.create_delegation_token()
            with pytest.raises(DelegationTokenRequestNotAllowedError):
                await via_token.renew_delegation_token(token.hmac)

        async with Admin(cluster.bootstrap, **_sasl("bob", USERS["bob"])) as bob:
            assert [t.token_id for t in await bob.describe_delegation_token()] == [info.token_id]
            renewed = await bob.renew_delegation_token(token.hmac, 60_000)
            assert info.issue_timestamp < renewed <= info.issue_timestamp + 3_600_000
        async with Admin(cluster.bootstrap, **_sasl("carol", USERS["carol"])) as carol:
            assert await carol.describe_delegation_token() == []  # neither owner nor renewer
            with pytest.raises(DelegationTokenOwnerMismatchError):
                await carol.renew_delegation_token(token.hmac)
            with pytest.raises(DelegationTokenOwnerMismatchError):
                await carol.expire_delegation_token(token.hmac)

        with pytest.raises(DelegationTokenNotFoundError):
            await alice.renew_delegation_token(b"not-a-token-hmac")
        with pytest.raises(InvalidPrincipalTypeError):
            await alice.create_delegation_token(renewers=["Group:ops"])

        # Expiring with a negative period removes the token: its logins stop at once.
        await alice.expire_delegation_token(token.hmac, -1)
        assert await alice.describe_delegation_token() == []
        with pytest.raises(SaslAuthenticationFailedError):
            async with Admin(cluster.bootstrap, default_timeout_ms=5_000, **token_login):
                pass


async def test_an_expired_token_cannot_be_renewed_or_used(kafka_cluster_factory: Any) -> None:
    cluster: EmbeddedCluster = await kafka_cluster_factory(sasl_users=USERS)
    async with Admin(cluster.bootstrap, **_sasl("alice", USERS["alice"])) as alice:
        token = await alice.create_delegation_token()
        # Expired in the store's clock (no waiting): Kafka keeps it until its periodic check.
        credential_store(cluster.state).tokens[token.token_id].expiry_ms = 0
        with pytest.raises(DelegationTokenExpiredError):
            await alice.renew_delegation_token(token.hmac)
        assert [t.token_id for t in await alice.describe_delegation_token()] == [token.token_id]
        login = _sasl(token.token_id, token.hmac_as_base64, sasl_scram_token_auth=True)
        with pytest.raises(SaslAuthenticationFailedError):
            async with Admin(cluster.bootstrap, default_timeout_ms=5_000, **login):
                pass


async def test_a_plain_cluster_without_sasl_refuses_token_requests(kafka_cluster_factory: Any) -> None:
    cluster: EmbeddedCluster = await kafka_cluster_factory()
    async with Admin(cluster.bootstrap) as admin:
        with pytest.raises(DelegationTokenRequestNotAllowedError):
            await admin.create_delegation_token()
