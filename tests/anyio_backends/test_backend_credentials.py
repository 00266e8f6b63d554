"""SCRAM users, client quotas and delegation tokens on asyncio and on trio: the admin
calls against an embedded broker with SASL (in a thread, so that trio clients reach it),
a user created and then refused once deleted, and a login with a delegation token."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from aiokafka_lite.admin import (
    Admin,
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from aiokafka_lite.core import errors as E
from aiokafka_lite.testing.threaded import ThreadedCluster
from anyio_backends.conftest import FAST

pytestmark = pytest.mark.anyio


def login(user: str, password: str, **extra: Any) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        **FAST,
        **extra,
    }


async def test_scram_users_quotas_and_tokens(
    kafka_threaded_cluster_factory: Callable[..., ThreadedCluster],
) -> None:
    tc = kafka_threaded_cluster_factory(sasl_users={"admin": "admin-secret"})
    async with Admin(tc.bootstrap, **login("admin", "admin-secret")) as admin:
        upsert = UserScramCredentialUpsertion(
            "erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), "erin-secret"
        )
        (await admin.alter_user_scram_credentials([upsert])).raise_errors()
        described = await admin.describe_user_scram_credentials(["erin"])
        assert described["erin"].credential_infos == (
            ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
        )

        async with Admin(tc.bootstrap, **login("erin", "erin-secret")) as erin:
            token = await erin.create_delegation_token()
        async with Admin(
            tc.bootstrap, **login(token.token_id, token.hmac_as_base64, sasl_scram_token_auth=True)
        ) as via_token:
            assert (await via_token.describe_cluster()).brokers

        delete = UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_512)
        (await admin.alter_user_scram_credentials([delete])).raise_errors()
        with pytest.raises(E.SaslAuthenticationFailedError):
            async with Admin(tc.bootstrap, **login("erin", "erin-secret")):
                pass

        entity = ClientQuotaEntity({"client-id": "trio-app"})
        op = ClientQuotaAlteration.Op("consumer_byte_rate", 2048)
        (await admin.alter_client_quotas([ClientQuotaAlteration(entity, [op])])).raise_errors()
        flt = ClientQuotaFilter.contains_only([ClientQuotaFilterComponent.of_entity("client-id", "trio-app")])
        assert await admin.describe_client_quotas(flt) == {entity: {"consumer_byte_rate": 2048.0}}
