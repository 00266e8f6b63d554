"""SASL driving, re-authentication (KIP-368), OAUTHBEARER token provider, secret hygiene."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from netfakes import FakeCluster, FakeSasl, eventually

from aiokafka_lite.core import errors as E
from aiokafka_lite.net import Client, ClientConfig, create_ssl_context
from aiokafka_lite.wire.messages import FindCoordinatorRequest

SECRET = "correct-horse-battery-staple"


def _client(cluster: FakeCluster, **options: Any) -> Client:
    return Client(
        cluster.bootstrap, opener=cluster.opener, retry_backoff_ms=5, reconnect_backoff_ms=5, **options
    )


async def test_plain_authentication_and_reauthentication_before_expiry() -> None:
    cluster = FakeCluster(1)
    sasl = FakeSasl(users={"alice": SECRET}, lifetime_ms=200)
    sasl.install(cluster)
    opts = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_plain_username": "alice",
        "sasl_plain_password": SECRET,
    }
    async with _client(cluster, **opts) as client:
        assert sasl.auths == ["alice"]
        sent = 0
        async with asyncio.timeout(10):
            while len(sasl.auths) < 3:  # keep traffic flowing across re-authentications
                resp: Any = await client.send(FindCoordinatorRequest(key="k"), node_id=0, version=3)
                assert resp.node_id == 0
                sent += 1
                await asyncio.sleep(0.005)
        # Each session lasts 200 ms; re-authentication happens before expiry, in band.
        assert cluster.connects[0] == 1  # on the same connection
        assert sent > 3


async def test_wrong_password_is_an_authentication_error_without_the_secret() -> None:
    cluster = FakeCluster(1)
    FakeSasl(users={"alice": "other"}).install(cluster)
    client = _client(
        cluster, security_protocol="SASL_PLAINTEXT", sasl_plain_username="alice", sasl_plain_password=SECRET
    )
    with pytest.raises(E.AuthenticationError) as ei:
        await client.start()
    assert isinstance(ei.value, E.SaslAuthenticationFailedError)
    assert SECRET not in str(ei.value) and SECRET not in repr(client) and SECRET not in repr(client.config)
    await client.close()


async def test_unsupported_mechanism_lists_enabled_ones() -> None:
    cluster = FakeCluster(1)
    FakeSasl(users={"u": "p"}).install(cluster)
    client = _client(
        cluster,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="u",
        sasl_plain_password="p",
    )
    with pytest.raises(E.UnsupportedSaslMechanismError, match="PLAIN"):
        await client.start()
    await client.close()


async def test_oauthbearer_calls_the_token_provider_for_every_authentication() -> None:
    cluster = FakeCluster(1)
    sasl = FakeSasl(tokens={"tok-1", "tok-2", "tok-3", "tok-4", "tok-5"}, lifetime_ms=150)
    sasl.install(cluster)
    issued: list[str] = []

    async def provider() -> str:
        await asyncio.sleep(0)
        issued.append(f"tok-{len(issued) + 1}")
        return issued[-1]

    async with _client(
        cluster,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=provider,
    ) as client:
        await eventually(lambda: len(issued) >= 2)
        await client.send(FindCoordinatorRequest(key="k"), node_id=0, version=3)
    assert len(issued) >= 2 and sasl.handshakes.count("OAUTHBEARER") == len(issued)


async def test_secrets_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    cluster = FakeCluster(2)
    sasl = FakeSasl(users={"alice": SECRET}, lifetime_ms=100)
    sasl.install(cluster)
    with caplog.at_level(logging.DEBUG, logger="aiokafka_lite"):
        async with _client(
            cluster,
            security_protocol="SASL_PLAINTEXT",
            sasl_plain_username="alice",
            sasl_plain_password=SECRET,
        ) as client:
            await client.send(FindCoordinatorRequest(key="k"), node_id=1, version=3)
            cluster.brokers[1].drop_connections()
            await asyncio.sleep(0.2)
        bad = _client(
            cluster,
            security_protocol="SASL_PLAINTEXT",
            sasl_plain_username="alice",
            sasl_plain_password="nope-" + SECRET,
        )
        with pytest.raises(E.AuthenticationError):
            await bad.start()
        await bad.close()
    assert caplog.records  # we did log (connects, disconnects, auth)
    assert all(SECRET not in r.getMessage() and SECRET not in str(r.args) for r in caplog.records)


def test_create_ssl_context() -> None:
    import ssl

    ctx = create_ssl_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    loose = create_ssl_context(verify=False)
    assert loose.verify_mode == ssl.CERT_NONE and not loose.check_hostname
    cfg = ClientConfig(security_protocol="SSL", ssl_context=ctx)
    assert cfg.uses_ssl and not cfg.uses_sasl


async def test_client_level_hooks() -> None:
    cluster = FakeCluster(1)
    seen: list[tuple[int, int]] = []

    class Hook:
        def on_response_read(self, node: int, key: int, ver: int, n: int, lat: float, err: object) -> None:
            seen.append((node, key))

    client = _client(cluster)
    client.add_hooks(Hook())
    with pytest.raises(TypeError):
        client.add_hooks(object())
    async with client:
        await client.find_coordinator("g")
    assert seen[:2] == [(-1, 18), (-1, 3)]  # bootstrap connection: negative node id
    assert (0, 10) in seen  # adopted as node 0 once metadata named it
