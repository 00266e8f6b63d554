"""Amazon MSK IAM over OAUTHBEARER (``integrations.aws_msk``) on the embedded broker.

The token comes from AWS's real ``aws-msk-iam-sasl-signer-python``; only the AWS side is
stubbed: credentials come from a static botocore provider (no STS, no instance metadata).
The broker checks tokens as MSK does, as far as it can here: the embedded broker's
OAUTHBEARER validator hook decodes the presigned URL, checks its shape (host, action,
algorithm, region, expiry) and recomputes the SigV4 signature with the secret key of the
stub credentials; the access key id is the principal.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, quote, urlparse

import anyio
import pytest
from anyio_backends.conftest import FAST
from botocore.credentials import CredentialProvider, Credentials

from aiokafka_lite import Admin, Consumer, Producer
from aiokafka_lite.broker.sasl import ValidatedToken
from aiokafka_lite.core import errors as E
from aiokafka_lite.integrations.aws_msk import MskIamTokenProvider, describe_msk_token
from aiokafka_lite.net import Client
from aiokafka_lite.testing.threaded import ThreadedCluster

pytestmark = pytest.mark.anyio

REGION = "eu-west-1"
ACCESS_KEY = "AKIDSTUBEXAMPLE"
SECRET_KEY = "stub/secret+key/for+tests/only/EXAMPLEKEY"


class StaticCredentials(CredentialProvider):  # type: ignore[misc]
    """The stubbed AWS side: fixed credentials, no network."""

    METHOD = "static-test"

    def load(self) -> Credentials:
        return Credentials(ACCESS_KEY, SECRET_KEY, "stub-session-token")


def sigv4_validator(secret_key: str = SECRET_KEY, region: str = REGION) -> Any:
    def validate(token: str, extensions: Mapping[str, str]) -> ValidatedToken | None:
        try:
            url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        except ValueError:
            return None
        parsed = urlparse(url)
        params = parse_qsl(parsed.query, keep_blank_values=True)
        values = dict(params)
        if (
            parsed.hostname != f"kafka.{region}.amazonaws.com"
            or values.get("Action") != "kafka-cluster:Connect"
            or values.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256"
        ):
            from aiokafka_lite.core.errors import AuthenticationError

            raise AuthenticationError("not an MSK IAM token for this region")
        signed = sorted((k, v) for k, v in params if k not in ("X-Amz-Signature", "User-Agent"))
        query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in signed)
        empty = hashlib.sha256(b"").hexdigest()
        canonical = "\n".join(["GET", parsed.path or "/", query, f"host:{parsed.hostname}\n", "host", empty])
        scope = values["X-Amz-Credential"].split("/", 1)[1]
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", values["X-Amz-Date"], scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        key = ("AWS4" + secret_key).encode()
        for part in scope.split("/"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, values.get("X-Amz-Signature", "")):
            from aiokafka_lite.core.errors import AuthenticationError

            raise AuthenticationError("SigV4 signature does not match")
        signed_at = datetime.strptime(values["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        expires_at = signed_at.timestamp() + int(values["X-Amz-Expires"])
        if expires_at <= time.time():
            return None
        return ValidatedToken(values["X-Amz-Credential"].split("/")[0], expires_at)

    return validate


@pytest.fixture(scope="module")
def cluster() -> Iterator[ThreadedCluster]:
    with ThreadedCluster(oauthbearer_validator=sigv4_validator(), default_partitions=1) as tc:
        yield tc


def msk(provider: MskIamTokenProvider) -> dict[str, Any]:
    # On MSK: security_protocol="SASL_SSL" (port 9098); the embedded broker here is plaintext.
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": provider,
        **FAST,
    }


def test_the_real_signer_makes_an_msk_shaped_token() -> None:
    provider = MskIamTokenProvider(REGION, credentials_provider=StaticCredentials())
    token = anyio.run(provider)
    shape = describe_msk_token(token)
    assert shape["host"] == f"kafka.{REGION}.amazonaws.com"
    assert shape["Action"] == "kafka-cluster:Connect"
    assert (
        shape["X-Amz-Credential"].startswith(f"{ACCESS_KEY}/")
        and f"/{REGION}/kafka-cluster/" in (shape["X-Amz-Credential"])
    )
    assert shape["X-Amz-Expires"] == "900"
    assert 800 < provider.expires_at - time.time() <= 900
    assert SECRET_KEY not in repr(provider) and SECRET_KEY not in token


async def test_producer_group_consumer_and_admin_with_msk_iam(
    cluster: ThreadedCluster, anyio_backend: str
) -> None:
    provider = MskIamTokenProvider(REGION, credentials_provider=StaticCredentials())
    options = msk(provider)
    topic = f"msk-{anyio_backend}"
    async with Producer(cluster.bootstrap, **options) as producer:
        for i in range(3):
            await producer.send(topic, b"v%d" % i, partition=0)
    seen: list[bytes] = []
    async with Consumer(
        cluster.bootstrap, topics=topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **options
    ) as consumer:
        with anyio.fail_after(60):
            async for record in consumer:
                seen.append(record.value or b"")
                if len(seen) == 3:
                    break
        await consumer.commit()
    assert seen == [b"v0", b"v1", b"v2"]
    async with Admin(cluster.bootstrap, **options) as admin:
        assert topic in await admin.list_topics()
    # One signature served every connection of the three clients.
    assert provider.signed == 1
    principals = cluster.call(lambda c: {conn.principal for b in c.brokers for conn in b.connections})
    assert principals <= {ACCESS_KEY, None}


async def test_tokens_are_refreshed_before_expiry_and_live_connections_reauthenticate(
    anyio_backend: str,
) -> None:
    """The stub signer says each token expires 3 s after signing: the provider signs again
    at 80-85 % of that, and with connections.max.reauth.ms the producer's connection
    re-authenticates with the new tokens, without reconnecting."""
    from aws_msk_iam_sasl_signer import MSKAuthTokenProvider

    def short_lived() -> tuple[str, int]:
        token, _ = MSKAuthTokenProvider.generate_auth_token_from_credentials_provider(
            REGION, StaticCredentials()
        )
        return token, int((time.time() + 3) * 1000)

    provider = MskIamTokenProvider(REGION, signer=short_lived)
    connects: list[object] = []

    class Connects:
        def on_broker_connect(self, *args: object) -> None:
            connects.append(args)

    with ThreadedCluster(oauthbearer_validator=sigv4_validator(), connections_max_reauth_ms=1500) as tc:
        async with Producer(tc.bootstrap, **msk(provider)) as producer:
            await producer.send("msk-reauth", b"first", partition=0)
            producer.client.add_hooks(Connects())
            with anyio.fail_after(60):
                while provider.signed < 3:
                    await producer.send("msk-reauth", b"x", partition=0)
                    await anyio.sleep(0.05)
            await producer.send("msk-reauth", b"last", partition=0)
    assert connects == []


async def test_a_signer_failure_is_a_typed_error_without_a_signing_storm(
    cluster: ThreadedCluster, anyio_backend: str
) -> None:
    from botocore.exceptions import NoCredentialsError

    calls = 0

    def no_credentials() -> tuple[str, int]:
        nonlocal calls
        calls += 1
        raise NoCredentialsError()

    provider = MskIamTokenProvider(REGION, signer=no_credentials, retry_backoff_ms=5000)
    for _ in range(3):
        client = Client(cluster.bootstrap, **msk(provider))
        with anyio.fail_after(10), pytest.raises(E.OAuthBearerTokenError) as info:
            await client.start()
        await client.close()
        assert "AWS MSK IAM" in str(info.value) and "Unable to locate credentials" in str(info.value)
    assert calls == 1  # the two later clients got the same error within the backoff


async def test_a_token_signed_with_other_credentials_is_rejected(anyio_backend: str) -> None:
    provider = MskIamTokenProvider(REGION, credentials_provider=StaticCredentials())
    with ThreadedCluster(oauthbearer_validator=sigv4_validator(secret_key="the-real-secret")) as tc:
        client = Client(tc.bootstrap, **msk(provider))
        with anyio.fail_after(10), pytest.raises(E.SaslAuthenticationFailedError, match="signature"):
            await client.start()
        await client.close()


def test_wrong_region_options_are_config_errors() -> None:
    with pytest.raises(E.ConfigError):
        MskIamTokenProvider("")
    with pytest.raises(E.ConfigError, match="at most one"):
        MskIamTokenProvider(REGION, profile="p", role_arn="arn:aws:iam::1:role/r")
