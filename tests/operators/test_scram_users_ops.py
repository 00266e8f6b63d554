"""SCRAM credentials (``describe_user_scram_credentials`` /
``alter_user_scram_credentials``, KIP-554) against the pass's broker: the embedded one,
or with ``--kafka=apache`` the session's Apache Kafka (no SASL listener there: the
logins with these credentials are in test_scram_users_embedded.py and
tests/kafka4/test_credentials_apache.py). Kafka applies alterations in its controller
and the broker's metadata catches up a moment later, so reads wait for the answer.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from _support.settle import settled

from aiokafka_lite.admin import (
    Admin,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.errors import (
    DuplicateResourceError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


@pytest.fixture
async def admin(kafka_cluster: EmbeddedCluster) -> AsyncIterator[Admin]:
    async with Admin(kafka_cluster.bootstrap) as a:
        yield a


def _user() -> str:
    return f"scram-{uuid.uuid4().hex[:8]}"


async def test_upsert_describe_and_delete_credentials(admin: Admin) -> None:
    user = _user()
    # Kafka takes one alteration per user and request: one request per mechanism.
    res = await admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, ScramCredentialInfo(SHA256, 8192), "pw-256")]
    )
    assert list(res) == [user] and res.ok
    upsert_512 = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(SHA512, 4096), "pw-512", salt=b"fixed"
    )
    (await admin.alter_user_scram_credentials([upsert_512])).raise_errors()

    def has_both(d: object) -> bool:
        desc = getattr(d, "get", lambda _u: None)(user)
        return desc is not None and desc.error is None and len(desc.credential_infos) == 2

    got = await settled(lambda: admin.describe_user_scram_credentials([user]), has_both)
    assert set(got[user].credential_infos) == {
        ScramCredentialInfo(SHA256, 8192),
        ScramCredentialInfo(SHA512, 4096),
    }
    # No users named: every user with a credential, ours among them.
    assert user in await admin.describe_user_scram_credentials()

    (await admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, SHA256)])).raise_errors()
    got = await settled(
        lambda: admin.describe_user_scram_credentials([user]), lambda d: len(d[user].credential_infos) == 1
    )
    assert got[user].credential_infos == (ScramCredentialInfo(SHA512, 4096),)

    (await admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, SHA512)])).raise_errors()
    got = await settled(
        lambda: admin.describe_user_scram_credentials([user]), lambda d: d[user].error is not None
    )
    assert isinstance(got[user].error, ResourceNotFoundError)


async def test_bad_alterations_fail_per_user_with_kafkas_errors(admin: Admin) -> None:
    ok_user, few, many, dup, twice, missing = (_user() for _ in range(6))
    res = await admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(ok_user, ScramCredentialInfo(SHA256, 4096), "fine"),
            UserScramCredentialUpsertion(few, ScramCredentialInfo(SHA256, 4095), "x"),
            UserScramCredentialUpsertion(many, ScramCredentialInfo(SHA512, 16385), "x"),
            UserScramCredentialUpsertion(dup, ScramCredentialInfo(SHA256, 4096), "x"),
            UserScramCredentialDeletion(dup, SHA256),
            UserScramCredentialDeletion(missing, SHA512),
            UserScramCredentialUpsertion(twice, ScramCredentialInfo(SHA256, 4096), "x"),
            UserScramCredentialUpsertion(twice, ScramCredentialInfo(SHA512, 4096), "x"),
        ]
    )
    assert res[ok_user].error is None
    assert isinstance(res[few].error, UnacceptableCredentialError)
    assert isinstance(res[many].error, UnacceptableCredentialError)
    # Deletions are judged first: dup's failed deletion is its answer.
    assert isinstance(res[dup].error, ResourceNotFoundError)
    # A second alteration of a user, even of another mechanism, is a duplicate.
    assert isinstance(res[twice].error, DuplicateResourceError)
    assert isinstance(res[missing].error, ResourceNotFoundError)
    # The refused users got nothing; the good one did.
    got = await settled(
        lambda: admin.describe_user_scram_credentials([ok_user, few, dup, twice]),
        lambda d: d[ok_user].error is None,
    )
    assert got[ok_user].credential_infos == (ScramCredentialInfo(SHA256, 4096),)
    assert isinstance(got[few].error, ResourceNotFoundError)
    assert isinstance(got[dup].error, ResourceNotFoundError)
    assert isinstance(got[twice].error, ResourceNotFoundError)
    (await admin.alter_user_scram_credentials([UserScramCredentialDeletion(ok_user, SHA256)])).raise_errors()


async def test_describing_unknown_users_fails_per_user(admin: Admin) -> None:
    a, b = _user(), _user()
    got = await admin.describe_user_scram_credentials([a, b])
    assert set(got) == {a, b}
    assert all(isinstance(d.error, ResourceNotFoundError) for d in got.values())
