"""Delegation tokens (KIP-48) against the pass's broker: the embedded one, or with
``--kafka=apache`` the session's Apache Kafka. Both listen without SASL, where Kafka
refuses every token request (a token is only issued to a SASL-authenticated caller):
the typed error says so. Creating, renewing, expiring, describing and logging in with
tokens over SASL are in test_delegation_tokens_embedded.py and
tests/kafka4/test_credentials_apache.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from aiokafka_lite.admin import Admin
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.errors import DelegationTokenRequestNotAllowedError


@pytest.fixture
async def admin(kafka_cluster: EmbeddedCluster) -> AsyncIterator[Admin]:
    async with Admin(kafka_cluster.bootstrap) as a:
        yield a


async def test_token_requests_over_a_connection_without_sasl_are_not_allowed(admin: Admin) -> None:
    with pytest.raises(DelegationTokenRequestNotAllowedError):
        await admin.create_delegation_token()
    with pytest.raises(DelegationTokenRequestNotAllowedError):
        await admin.renew_delegation_token(b"\x00" * 64)
    with pytest.raises(DelegationTokenRequestNotAllowedError):
        await admin.expire_delegation_token(b"\x00" * 64)
    with pytest.raises(DelegationTokenRequestNotAllowedError):
        await admin.describe_delegation_token()
