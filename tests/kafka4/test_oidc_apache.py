"""OAUTHBEARER with OIDC (KIP-768) against Apache Kafka's own validator, with librdkafka
as the referee.

One Apache Kafka node whose client listener is SASL_PLAINTEXT/OAUTHBEARER with
``OAuthBearerValidatorCallbackHandler``: JWTs are checked against the JWKS of the test's
identity provider (``tests/_support/oidc_provider.py`` on loopback), with the expected
audience and issuer, the provider's URLs allowed by the
``org.apache.kafka.sasl.oauthbearer.allowed.urls`` JVM property, and
``connections.max.reauth.ms`` so that sessions end with the token (KIP-368). Our producer,
group consumer and Admin authenticate on asyncio and trio (``anyio.run`` per backend);
confluent-kafka (librdkafka, ``sasl.oauthbearer.method=oidc``) configured with the same
client id, secret and token endpoint authenticates on the same broker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from _support.oidc_provider import OidcProvider, SigningKey

from aiokafka_lite import Admin, Consumer, Producer
from aiokafka_lite.core import errors as E
from aiokafka_lite.net import Client
from aiokafka_lite.testing.apache import ApacheCluster

SECRET = "svc-secret-for-apache"
BACKENDS = ["asyncio", "trio"]
FAST: dict[str, Any] = {"retry_backoff_ms": 20, "retry_backoff_max_ms": 200, "reconnect_backoff_ms": 20}


@pytest.fixture(scope="module")
def provider() -> Iterator[OidcProvider]:
    with OidcProvider(clients={"svc": SECRET}) as idp:
        yield idp


@pytest.fixture(scope="module")
def kafka(pytestconfig: pytest.Config, provider: OidcProvider) -> Iterator[ApacheCluster]:
    version = pytestconfig.getoption("--kafka-version", None)
    validator = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
    oidc = {
        "sasl.oauthbearer.jwks.endpoint.url": provider.jwks_url,
        "sasl.oauthbearer.expected.audience": provider.audience,
        "sasl.oauthbearer.expected.issuer": provider.issuer,
        # Re-read the JWKS every 2 s, so a key the provider publishes is known soon.
        "sasl.oauthbearer.jwks.endpoint.refresh.ms": "2000",
    }
    configs = {
        "listener.name.client.oauthbearer.sasl.server.callback.handler.class": validator,
        **oidc,
        **{f"listener.name.client.oauthbearer.{k}": v for k, v in oidc.items()},
        "connections.max.reauth.ms": "60000",
    }
    with ApacheCluster(
        version=str(version) if version else None,
        sasl_users={},
        sasl_mechanisms=("OAUTHBEARER",),
        configs=configs,
        jvm_system_properties={
            "org.apache.kafka.sasl.oauthbearer.allowed.urls": f"{provider.jwks_url},{provider.token_url}"
        },
    ) as cluster:
        yield cluster


def oidc_options(provider: OidcProvider, **extra: Any) -> dict[str, Any]:
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


def token_options(token: str) -> dict[str, Any]:
    async def fixed() -> str:
        return token

    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": fixed,
        **FAST,
    }


def run(backend: str, fn: Callable[[], Any]) -> None:
    anyio.run(fn, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_producer_group_consumer_and_admin_authenticate(
    kafka: ApacheCluster, provider: OidcProvider, backend: str
) -> None:
    topic = f"oidc-{backend}"
    kafka.create_topic(topic, 1)
    options = oidc_options(provider)

    async def main() -> None:
        async with Producer(kafka.bootstrap, **options) as producer:
            for i in range(3):
                await producer.send(topic, b"v%d" % i, partition=0)
        seen: list[bytes] = []
        async with Consumer(
            kafka.bootstrap, topics=topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **options
        ) as consumer:
            with anyio.fail_after(60):
                async for record in consumer:
                    seen.append(record.value or b"")
                    if len(seen) == 3:
                        break
            await consumer.commit()
        assert seen == [b"v0", b"v1", b"v2"]
        async with Admin(kafka.bootstrap, **options) as admin:
            assert topic in await admin.list_topics()

    before = provider.token_requests
    run(backend, main)
    assert provider.token_requests > before


def test_librdkafka_oidc_authenticates_on_the_same_broker(
    kafka: ApacheCluster, provider: OidcProvider
) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = "oidc-librdkafka"
    kafka.create_topic(topic, 1)
    conf = {
        "bootstrap.servers": kafka.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "svc",
        "sasl.oauthbearer.client.secret": SECRET,
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.token.endpoint.url": provider.token_url,
    }
    delivered: list[Any] = []
    producer = confluent_kafka.Producer(conf)
    producer.produce(topic, b"from librdkafka", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None]

    # And our consumer reads what librdkafka wrote, through the same broker and provider.
    async def read() -> bytes:
        async with Consumer(
            kafka.bootstrap, topics=topic, auto_offset_reset="earliest", **oidc_options(provider)
        ) as consumer:
            with anyio.fail_after(60):
                async for record in consumer:
                    return record.value or b""
        raise AssertionError("no record")

    assert anyio.run(read) == b"from librdkafka"

    # librdkafka with a wrong secret does not get in either (the IdP refuses it).
    errors: list[Any] = []
    bad = confluent_kafka.Producer(
        {**conf, "sasl.oauthbearer.client.secret": "wrong", "error_cb": lambda e: errors.append(e)}
    )
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        bad.poll(0.2)
    assert errors, "librdkafka reported no error for a wrong client secret"


def test_reauthentication_on_live_connections(kafka: ApacheCluster, provider: OidcProvider) -> None:
    """Tokens live 4 s: the broker's session ends with the token (KIP-368) and our
    producer fetches new ones and re-authenticates without reconnecting."""
    topic = "oidc-reauth"
    kafka.create_topic(topic, 1)
    options = oidc_options(
        provider, sasl_login_refresh_min_period_seconds=0, sasl_login_refresh_buffer_seconds=0
    )
    connects: list[object] = []

    class Connects:
        def on_broker_connect(self, *args: object) -> None:
            connects.append(args)

    async def main() -> None:
        async with Producer(kafka.bootstrap, **options) as producer:
            await producer.send(topic, b"first", partition=0)
            producer.client.add_hooks(Connects())
            first = provider.token_requests
            with anyio.fail_after(90):
                while provider.token_requests < first + 2:
                    await producer.send(topic, b"x", partition=0)
                    await anyio.sleep(0.1)
            await producer.send(topic, b"last", partition=0)

    saved = provider.token_lifetime_s
    provider.token_lifetime_s = 4
    try:
        run("asyncio", main)
    finally:
        provider.token_lifetime_s = saved
    assert connects == []


@pytest.mark.parametrize(
    ("mint", "cause"),
    [
        ({"audience": "not-kafka"}, "audience"),
        ({"lifetime_s": -600}, "expired"),
        ({"key": SigningKey.generate("unpublished")}, "JWKS"),
    ],
    ids=["wrong-audience", "expired", "unknown-kid"],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_tokens_are_rejected_with_a_typed_error(
    kafka: ApacheCluster, provider: OidcProvider, mint: dict[str, Any], cause: str, backend: str
) -> None:
    token = provider.mint("svc", **mint)

    async def main() -> None:
        client = Client(kafka.bootstrap, **token_options(token))
        try:
            with anyio.fail_after(20), pytest.raises(E.SaslAuthenticationFailedError) as info:
                await client.start()
        finally:
            await client.close()
        # Kafka answers only {"status":"invalid_token"}, whatever the cause (its log says
        # which); our message adds the mechanism and the likely causes.
        assert "OAUTHBEARER" in str(info.value) and "invalid_token" in str(info.value)
        assert cause in str(info.value)
        assert token not in str(info.value)

    run(backend, main)


def test_a_rotated_key_is_picked_up(kafka: ApacheCluster, provider: OidcProvider) -> None:
    old = provider.current_key
    new = provider.rotate()  # published in the JWKS and signing from now on
    fetched = provider.jwks_requests

    # Wait until the broker has re-read the JWKS (it does every 2 s here).
    deadline = time.monotonic() + 30
    while provider.jwks_requests <= fetched and time.monotonic() < deadline:
        time.sleep(0.1)
    assert provider.jwks_requests > fetched, "the broker never re-read the JWKS"

    async def main() -> None:
        async with Client(kafka.bootstrap, **token_options(provider.mint("svc", key=new))):
            pass
        # A token of the old key is still good while the JWKS publishes it.
        async with Client(kafka.bootstrap, **token_options(provider.mint("svc", key=old))):
            pass

    run("asyncio", main)
    # The client fetching from the endpoint gets tokens of the new key.
    with_new: list[str] = []

    async def fetch() -> None:
        async with Client(kafka.bootstrap, **oidc_options(provider)) as client:
            retriever: Any = client.config.oauth_token_provider
            with_new.append(retriever.current.value)

    run("trio", fetch)
    from aiokafka_lite.net.oidc import jwt_header

    assert jwt_header(with_new[0])["kid"] == new.kid


def test_the_embedded_broker_answers_like_kafka(kafka: ApacheCluster, provider: OidcProvider) -> None:
    """Differential: the same tokens to Kafka's validator and to the embedded broker's
    ``JwksTokenValidator`` (same JWKS, audience, issuer and connections.max.reauth.ms):
    the same error code for each bad token, and for a good one a KIP-368 session that
    ends no later than the token."""
    from aiokafka_lite.broker.oidc import JwksTokenValidator
    from aiokafka_lite.testing.threaded import ThreadedCluster

    tokens = {
        "good": provider.mint("svc", lifetime_s=30),
        "wrong-audience": provider.mint("svc", audience="not-kafka"),
        "wrong-issuer": provider.mint("svc", issuer="https://other.test"),
        "expired": provider.mint("svc", lifetime_s=-600),
        "unknown-kid": provider.mint("svc", key=SigningKey.generate("nobody-knows")),
    }

    async def observe(bootstrap: str) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for name, token in tokens.items():
            client = Client(bootstrap, **token_options(token))
            try:
                await client.start()
                conn = await client.connection(client.least_loaded_node())
                seen[name] = ("ok", 0 < conn.session_lifetime_ms <= 30_000)
            except E.BrokerResponseError as exc:
                seen[name] = ("error", exc.code)
            finally:
                await client.close()
        return seen

    validator = JwksTokenValidator(
        provider.jwks_url, expected_audience=provider.audience, expected_issuer=provider.issuer
    )
    with ThreadedCluster(oauthbearer_validator=validator, connections_max_reauth_ms=60_000) as embedded:
        ours = anyio.run(observe, embedded.bootstrap)
    theirs = anyio.run(observe, kafka.bootstrap)
    assert theirs == {
        "good": ("ok", True),
        **{name: ("error", E.SaslAuthenticationFailedError.code) for name in tokens if name != "good"},
    }
    assert ours == theirs
