"""OAUTHBEARER with OIDC (KIP-768, KIP-1139) on the embedded broker, asyncio and trio.

The identity provider is ``tests/_support/oidc_provider.py`` on loopback; the broker checks
tokens against its JWKS (``broker.oidc.JwksTokenValidator``: signature, exp, issuer,
audience, ``sub`` as the principal) and, with ``connections_max_reauth_ms``, makes the
clients re-authenticate (KIP-368) before their tokens expire.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import sniffio
from _support.oidc_provider import OidcProvider, SigningKey, rsa_private_pem
from anyio_backends.conftest import FAST

from aiokafka_lite import Admin, Consumer, Producer
from aiokafka_lite.broker.oidc import JwksTokenValidator
from aiokafka_lite.core import errors as E
from aiokafka_lite.net import Client
from aiokafka_lite.testing.threaded import ThreadedCluster

pytestmark = pytest.mark.anyio

SECRET = "svc-secret-do-not-log"


@pytest.fixture(scope="module")
def provider() -> Iterator[OidcProvider]:
    with OidcProvider(clients={"svc": SECRET, "other": "other-secret"}) as idp:
        yield idp


@pytest.fixture(scope="module")
def validator(provider: OidcProvider) -> JwksTokenValidator:
    return JwksTokenValidator(
        provider.jwks_url,
        expected_audience=provider.audience,
        expected_issuer=provider.issuer,
        min_refresh_interval_seconds=0,
    )


@pytest.fixture(scope="module")
def cluster(validator: JwksTokenValidator) -> Iterator[ThreadedCluster]:
    with ThreadedCluster(oauthbearer_validator=validator, default_partitions=1) as tc:
        yield tc


def oidc(provider: OidcProvider, **extra: Any) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauthbearer_token_endpoint_url": provider.token_url,
        "sasl_oauthbearer_client_credentials_client_id": "svc",
        "sasl_oauthbearer_client_credentials_client_secret": SECRET,
        "sasl_oauthbearer_scope": "kafka",
        **FAST,
        **extra,
    }


def principals(cluster: ThreadedCluster) -> set[str | None]:
    return cluster.call(lambda c: {conn.principal for b in c.brokers for conn in b.connections})


async def round_trip(bootstrap: str, topic: str, options: dict[str, Any]) -> None:
    async with Producer(bootstrap, **options) as producer:
        for i in range(3):
            await producer.send(topic, b"v%d" % i, partition=0)
    seen: list[bytes] = []
    async with Consumer(
        bootstrap, topics=topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **options
    ) as consumer:
        with anyio.fail_after(60):
            async for record in consumer:
                seen.append(record.value or b"")
                if len(seen) == 3:
                    break
        await consumer.commit()
    assert seen == [b"v0", b"v1", b"v2"]
    async with Admin(bootstrap, **options) as admin:
        assert topic in await admin.list_topics()
        described = await admin.describe_cluster()
        assert described.brokers


async def test_client_credentials_producer_group_consumer_admin(
    provider: OidcProvider, cluster: ThreadedCluster, anyio_backend: str
) -> None:
    assert sniffio.current_async_library() == anyio_backend
    before = provider.token_requests
    await round_trip(cluster.bootstrap, f"oidc-cc-{anyio_backend}", oidc(provider))
    # One token per client (producer, consumer, admin), shared by its connections.
    assert 3 <= provider.token_requests - before <= 6
    assert "client_credentials" in provider.grants


async def test_the_token_subject_is_the_principal(provider: OidcProvider, cluster: ThreadedCluster) -> None:
    async with Client(cluster.bootstrap, **oidc(provider)):
        assert "svc" in principals(cluster)


async def test_jwt_bearer_grant_with_a_private_key(
    provider: OidcProvider, cluster: ThreadedCluster, tmp_path: Path, anyio_backend: str
) -> None:
    key = SigningKey.generate("client-key")
    provider.assertion_keys["svc-issuer"] = key.jwk()
    pem = tmp_path / "client.pem"
    pem.write_bytes(rsa_private_pem(key.private, passphrase="pem-pass"))
    options = oidc(
        provider,
        sasl_oauthbearer_client_credentials_client_id=None,
        sasl_oauthbearer_client_credentials_client_secret=None,
        sasl_oauthbearer_assertion_private_key_file=str(pem),
        sasl_oauthbearer_assertion_private_key_passphrase="pem-pass",
        sasl_oauthbearer_assertion_claim_iss="svc-issuer",
        sasl_oauthbearer_assertion_claim_sub="jwt-svc",
        sasl_oauthbearer_assertion_claim_aud=provider.token_url,
        sasl_oauthbearer_assertion_claim_jti_include=True,
    )
    await round_trip(cluster.bootstrap, f"oidc-jwt-{anyio_backend}", options)
    assert "urn:ietf:params:oauth:grant-type:jwt-bearer" in provider.grants
    async with Client(cluster.bootstrap, **options):
        assert "jwt-svc" in principals(cluster)


async def test_refresh_and_reauthentication_on_live_connections(anyio_backend: str) -> None:
    """Tokens live 3 s; the broker's session ends with the token (KIP-368), so the
    producer must fetch new tokens and re-authenticate its connection, without
    reconnecting, while it keeps producing."""
    with OidcProvider(clients={"svc": SECRET}, token_lifetime_s=3) as idp:
        validator = JwksTokenValidator(idp.jwks_url, expected_audience=idp.audience, clock_skew_seconds=0)
        with ThreadedCluster(oauthbearer_validator=validator, connections_max_reauth_ms=60_000) as tc:
            opts = oidc(idp, sasl_login_refresh_min_period_seconds=0, sasl_login_refresh_buffer_seconds=0)
            connects: list[object] = []

            class Connects:
                def on_broker_connect(self, *args: object) -> None:
                    connects.append(args)

            async with Producer(tc.bootstrap, **opts) as producer:
                await producer.send("reauth", b"first", partition=0)
                producer.client.add_hooks(Connects())
                first = idp.token_requests
                sent = 0
                with anyio.fail_after(60):
                    while idp.token_requests < first + 3:
                        await producer.send("reauth", b"x", partition=0)
                        sent += 1
                        await anyio.sleep(0.05)
                await producer.send("reauth", b"last", partition=0)
            assert sent > 3
            # Re-authenticated in band: no new connection to the broker was needed.
            assert connects == []


async def test_key_rotation_at_the_provider(
    provider: OidcProvider, validator: JwksTokenValidator, cluster: ThreadedCluster, anyio_backend: str
) -> None:
    old = provider.current_key
    fetches = validator.fetches
    new = provider.rotate()
    try:
        async with Producer(cluster.bootstrap, **oidc(provider)) as producer:
            await producer.send(f"rotated-{anyio_backend}", b"signed by the new key", partition=0)
        # The broker did not know the new kid: it fetched the JWKS again.
        assert validator.fetches > fetches
        # A token still signed by the old key is accepted while the JWKS publishes it...
        old_token = provider.mint("svc", key=old)
        async with Client(cluster.bootstrap, **token_options(old_token)):
            pass
        provider.retire(old.kid)
        validator._fetched_at = float("-inf")  # as after jwks refresh_seconds
        # ... and refused once the provider has retired it.
        with pytest.raises(E.SaslAuthenticationFailedError, match="no key with kid"):
            async with Client(cluster.bootstrap, **token_options(old_token)):
                pass
    finally:
        assert provider.current_key is new


def token_options(token: str) -> dict[str, Any]:
    async def fixed() -> str:
        return token

    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": fixed,
        **FAST,
    }


# ---------------------------------------------------------------------- bad credentials


async def test_wrong_client_secret_fails_at_once_without_the_secret(
    provider: OidcProvider, cluster: ThreadedCluster, anyio_backend: str
) -> None:
    wrong = "wrong-secret-never-shown"
    before = provider.token_requests
    started = time.monotonic()
    client = Client(
        cluster.bootstrap, **oidc(provider, sasl_oauthbearer_client_credentials_client_secret=wrong)
    )
    with anyio.fail_after(10), pytest.raises(E.OAuthBearerTokenError) as info:
        await client.start()
    await client.close()
    message = str(info.value)
    assert "OAUTHBEARER/OIDC" in message and "401" in message and "client id or secret" in message
    assert wrong not in message and wrong not in repr(client.config) and wrong not in repr(info.value)
    # A 4xx is not retried: no storm of token requests.
    assert provider.token_requests - before <= 2
    assert time.monotonic() - started < 10


async def test_unreachable_token_endpoint_fails_after_the_retry_budget(cluster: ThreadedCluster) -> None:
    with OidcProvider() as gone:
        url = gone.token_url
    options = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauthbearer_token_endpoint_url": url,
        "sasl_oauthbearer_client_credentials_client_id": "svc",
        "sasl_oauthbearer_client_credentials_client_secret": SECRET,
        # A budget of 3 s against backoffs of 50, 100, 200, ... ms: the sleeps alone allow
        # at most ~6 requests, and a request would have to hang for most of the budget
        # (not a refused connect, even on a loaded machine) to leave room for only one.
        "sasl_login_retry_backoff_ms": 50,
        "sasl_login_retry_backoff_max_ms": 3000,
        **FAST,
    }
    client = Client(cluster.bootstrap, **options)
    with anyio.fail_after(20), pytest.raises(E.OAuthBearerTokenError, match="unreachable"):
        await client.start()
    await client.close()
    retriever: Any = client.config.oauth_token_provider
    assert 2 <= retriever.requests <= 8  # retried with backoff, then gave up


async def test_a_failing_identity_provider_is_retried(
    provider: OidcProvider, cluster: ThreadedCluster
) -> None:
    provider.fail_next = [503, 502]
    async with Client(cluster.bootstrap, **oidc(provider)) as client:
        retriever: Any = client.config.oauth_token_provider
        assert retriever.requests == 3


@pytest.mark.parametrize(
    ("mint", "cause"),
    [
        ({"audience": "not-kafka"}, "unexpected audience"),
        ({"issuer": "https://evil.test"}, "unexpected issuer"),
        ({"lifetime_s": -120}, "expired"),
        ({"key": SigningKey.generate("unpublished")}, "no key with kid 'unpublished'"),
    ],
)
async def test_the_broker_rejects_a_bad_token_with_a_typed_error(
    provider: OidcProvider, cluster: ThreadedCluster, mint: dict[str, Any], cause: str
) -> None:
    token = provider.mint("svc", **mint)
    client = Client(cluster.bootstrap, **token_options(token))
    with anyio.fail_after(10), pytest.raises(E.SaslAuthenticationFailedError) as info:
        await client.start()
    await client.close()
    assert "OAUTHBEARER" in str(info.value) and cause in str(info.value)
    assert token not in str(info.value)


async def test_an_already_expired_token_from_the_endpoint_is_refused_by_the_client(
    cluster: ThreadedCluster,
) -> None:
    with OidcProvider(clients={"svc": SECRET}, token_lifetime_s=-30) as idp:
        client = Client(cluster.bootstrap, **oidc(idp))
        with anyio.fail_after(10), pytest.raises(E.OAuthBearerTokenError, match="already expired"):
            await client.start()
        await client.close()
