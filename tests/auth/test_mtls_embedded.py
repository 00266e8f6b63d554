"""Mutual TLS on the embedded broker, on asyncio and trio: the principal the broker sees
(Kafka's ``CN=...,OU=...,O=...`` form), a certificate chain, an encrypted key unlocked
by a password string or callable, certificate renewal picked up by new connections of a
running client, and the typed errors for a wrong password, a key of another pair, a
certificate the broker's CA did not sign, no certificate at all, and TLS spoken to a
plaintext port."""

from __future__ import annotations

import os
import shutil
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support.pki import CertFiles, Pki

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.admin import Admin, NewTopic
from aiokafka_lite.core import errors as E
from aiokafka_lite.net import Client
from aiokafka_lite.net.security import ReloadingSslContext, create_ssl_context
from aiokafka_lite.testing.threaded import ThreadedCluster
from aiokafka_lite.wire.messages import MetadataRequest

BACKENDS = ["asyncio", "trio"]
FAST: dict[str, Any] = {"retry_backoff_ms": 5, "retry_backoff_max_ms": 50, "reconnect_backoff_ms": 5}
PASSWORD = "key-pass-phrase"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def cluster(pki: Pki) -> Iterator[ThreadedCluster]:
    """One embedded broker whose listener requires a client certificate from the root CA."""
    server = pki.server()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.root.cert))
    ctx.load_cert_chain(str(server.cert), str(server.key))
    ctx.verify_mode = ssl.CERT_REQUIRED
    with ThreadedCluster(brokers=1, ssl_context=ctx, default_partitions=1) as tc:
        yield tc


@pytest.fixture(scope="module")
def plaintext_cluster() -> Iterator[ThreadedCluster]:
    with ThreadedCluster(brokers=1) as tc:
        yield tc


def _principals(cluster: ThreadedCluster) -> set[str | None]:
    return cluster.call(lambda c: {conn.principal for b in c.brokers for conn in b.connections})


def _latest_principal(cluster: ThreadedCluster, prefix: str) -> str | None:
    """The principal of the newest open connection whose principal starts with ``prefix``."""

    def newest(c: Any) -> str | None:
        conns = [
            conn for b in c.brokers for conn in b.connections if (conn.principal or "").startswith(prefix)
        ]
        conns.sort(key=lambda conn: int(conn.id.rsplit("-c", 1)[1]))
        return conns[-1].principal if conns else None

    return cluster.call(newest)


def _drop_connections(cluster: ThreadedCluster) -> None:
    def drop(c: Any) -> None:
        for b in c.brokers:
            for conn in list(b.connections):
                conn.abort()

    cluster.call(drop)


def _mtls(pki: Pki, files: CertFiles, **extra: Any) -> dict[str, Any]:
    return {
        "security_protocol": "SSL",
        "ssl_cafile": str(pki.root.cert),
        "ssl_certfile": str(files.cert),
        "ssl_keyfile": str(files.key),
        **FAST,
        **extra,
    }


async def _start_error(bootstrap: str, **options: Any) -> BaseException:
    client = Client(bootstrap, request_timeout_ms=10_000, **options)
    try:
        with anyio.fail_after(30):
            with pytest.raises(E.KafkaError) as info:
                await client.start()
    finally:
        await client.close()
    err: BaseException = info.value
    return err.__cause__ if isinstance(err, E.NoBrokersAvailableError) and err.__cause__ else err


@pytest.mark.parametrize("backend", BACKENDS)
def test_principal_round_trip_and_admin(backend: str, pki: Pki, cluster: ThreadedCluster) -> None:
    alice = pki.client(f"alice-{backend}", ou="payments")
    options = _mtls(pki, alice)
    topic = f"mtls-{backend}"

    async def scenario() -> None:
        async with Admin(cluster.bootstrap, **options) as admin:
            await admin.create_topics([NewTopic(topic, 1)])
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
            # Kafka's default principal builder: the subject in RFC 2253 order.
            assert f"CN=alice-{backend},OU=payments,O=Test" in _principals(cluster)
        assert seen == [b"v0", b"v1", b"v2"]

    anyio.run(scenario, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_encrypted_key_with_password_string_and_callable(
    backend: str, pki: Pki, cluster: ThreadedCluster
) -> None:
    bob = pki.client(f"bob-{backend}", password=PASSWORD)
    calls: list[int] = []

    def password() -> str:
        calls.append(1)
        return PASSWORD

    async def scenario() -> None:
        for pw in (PASSWORD, password):
            async with Client(cluster.bootstrap, **_mtls(pki, bob, ssl_password=pw)) as client:
                await client.send(MetadataRequest(topics=[]))
                assert _latest_principal(cluster, "CN=bob") == f"CN=bob-{backend},OU=clients,O=Test"
        assert calls  # the callable was asked when the key was loaded
        # One file holding the chain and the encrypted key (no ssl_keyfile).
        combined = pki.dir / f"bob-{backend}-combined.pem"
        combined.write_text(bob.cert.read_text() + bob.key.read_text())
        options = _mtls(pki, bob, ssl_password=PASSWORD)
        options["ssl_certfile"] = str(combined)
        del options["ssl_keyfile"]
        async with Client(cluster.bootstrap, **options) as client:
            await client.send(MetadataRequest(topics=[]))
            assert _latest_principal(cluster, "CN=bob") == f"CN=bob-{backend},OU=clients,O=Test"

    anyio.run(scenario, backend=backend)


def test_bad_key_files_are_typed_config_errors(pki: Pki) -> None:
    carol = pki.client("carol", password=PASSWORD)
    dave = pki.client("dave")
    with pytest.raises(E.SslCredentialsError, match="wrong ssl_password") as wrong:
        Client("127.0.0.1:1", **_mtls(pki, carol, ssl_password="not-the-password"))
    assert "not-the-password" not in str(wrong.value)
    with pytest.raises(E.SslCredentialsError, match="is encrypted: set ssl_password"):
        Client("127.0.0.1:1", **_mtls(pki, carol))
    with pytest.raises(E.SslCredentialsError, match="does not belong to the certificate"):
        Client(
            "127.0.0.1:1", **_mtls(pki, CertFiles(carol.cert, dave.key, carol.subject), ssl_password=PASSWORD)
        )
    with pytest.raises(E.SslCredentialsError, match="no such file"):
        Client("127.0.0.1:1", **_mtls(pki, CertFiles(pki.dir / "missing.pem", dave.key, "")))
    with pytest.raises(E.SslCredentialsError, match="callable failed"):
        Client("127.0.0.1:1", **_mtls(pki, carol, ssl_password=lambda: 1 / 0))
    with pytest.raises(E.ConfigError, match="either ssl_context"):
        Client("127.0.0.1:1", ssl_context=create_ssl_context(), ssl_certfile=str(dave.cert))
    assert isinstance(E.SslCredentialsError("x"), E.ConfigError)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rejected_certificates_are_typed_authentication_errors(
    backend: str, pki: Pki, cluster: ThreadedCluster, plaintext_cluster: ThreadedCluster
) -> None:
    mallory = pki.rogue_client(f"mallory-{backend}")
    erin = pki.client(f"erin-{backend}")

    async def scenario() -> None:
        # asyncio's TLS server (the embedded broker) rejects a TLS 1.3 client certificate
        # by closing the connection without the alert Apache Kafka sends (there the
        # error is SslAuthenticationError: tests/kafka4/test_mtls_apache.py), so the
        # client can only say what this most likely is.
        for files in (mallory, None):
            options = (
                _mtls(pki, files) if files else {"security_protocol": "SSL", "ssl_cafile": str(pki.root.cert)}
            )
            rejected = await _start_error(cluster.bootstrap, **{**FAST, **options})
            assert isinstance(rejected, E.KafkaConnectionError), repr(rejected)
            assert "mTLS" in str(rejected) and "rejected ours" in str(rejected), rejected

        untrusted_broker = await _start_error(
            cluster.bootstrap,
            security_protocol="SSL",
            ssl_certfile=str(erin.cert),
            ssl_keyfile=str(erin.key),
            **FAST,
        )
        assert isinstance(untrusted_broker, E.KafkaConnectionError), repr(untrusted_broker)
        assert "certificate verify failed" in str(untrusted_broker), untrusted_broker

        plaintext = await _start_error(plaintext_cluster.bootstrap, **_mtls(pki, erin))
        assert isinstance(plaintext, E.SecurityProtocolMismatchError), repr(plaintext)

    anyio.run(scenario, backend=backend)


async def _send_on_a_new_connection(client: Client) -> None:
    """A request after the broker dropped the connection: the first attempts fail on the
    dead connection, then the client opens a new one."""
    with anyio.fail_after(30):
        while True:
            try:
                await client.send(MetadataRequest(topics=[]))
                return
            except E.KafkaConnectionError:
                await anyio.sleep(0.01)


def _replace(src: CertFiles, dst: CertFiles) -> None:
    """Renew in place as an agent does: write a temporary file, rename it over the old one."""
    for a, b in ((src.cert, dst.cert), (src.key, dst.key)):
        tmp = b.with_suffix(".tmp")
        shutil.copyfile(a, tmp)
        os.replace(tmp, b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_renewed_certificate_is_used_by_new_connections(
    backend: str, pki: Pki, cluster: ThreadedCluster, tmp_path: Path
) -> None:
    v1 = pki.client(f"frank-{backend}-v1", name=f"frank-{backend}-v1")
    v2 = pki.client(f"frank-{backend}-v2", name=f"frank-{backend}-v2")
    other = pki.client(f"grace-{backend}")
    live = CertFiles(tmp_path / "client.pem", tmp_path / "client.key", v1.subject)
    shutil.copyfile(v1.cert, live.cert)
    shutil.copyfile(v1.key, live.key)
    old = f"CN=frank-{backend}-v1,OU=clients,O=Test"
    new = f"CN=frank-{backend}-v2,OU=clients,O=Test"
    mine = f"CN=frank-{backend}"

    async def scenario() -> None:
        async with Client(cluster.bootstrap, **_mtls(pki, live)) as client:
            await client.send(MetadataRequest(topics=[]))
            assert _latest_principal(cluster, mine) == old

            # Half-renewed (the new certificate, the old key): the pair does not match, so
            # new connections keep the previous, still valid, certificate.
            shutil.copyfile(v2.cert, live.cert.with_suffix(".tmp"))
            os.replace(live.cert.with_suffix(".tmp"), live.cert)
            _drop_connections(cluster)
            await _send_on_a_new_connection(client)
            assert _latest_principal(cluster, mine) == old

            _replace(v2, live)  # the key follows
            _drop_connections(cluster)
            await _send_on_a_new_connection(client)
            assert _latest_principal(cluster, mine) == new

        # An explicit reload of a ReloadingSslContext, as ssl_context=.
        reloading = ReloadingSslContext(
            cafile=str(pki.root.cert), certfile=str(live.cert), keyfile=str(live.key)
        )
        async with Client(
            cluster.bootstrap, security_protocol="SSL", ssl_context=reloading, **FAST
        ) as client:
            await client.send(MetadataRequest(topics=[]))
            _replace(other, live)
            reloading.reload()
            _drop_connections(cluster)
            await _send_on_a_new_connection(client)
            assert _latest_principal(cluster, "CN=grace") == f"CN=grace-{backend},OU=clients,O=Test"

    anyio.run(scenario, backend=backend)


@pytest.fixture(scope="module")
def acl_cluster(pki: Pki) -> Iterator[ThreadedCluster]:
    """mTLS with the authorizer on: the admin certificate's principal is a super user."""
    server = pki.server("acl-server")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.root.cert))
    ctx.load_cert_chain(str(server.cert), str(server.key))
    ctx.verify_mode = ssl.CERT_REQUIRED
    with ThreadedCluster(
        brokers=1,
        ssl_context=ctx,
        authorizer=True,
        super_users=["User:CN=acl-admin,OU=ops,O=Test"],
        default_partitions=1,
    ) as tc:
        yield tc


@pytest.mark.parametrize("backend", BACKENDS)
def test_acls_name_the_certificate_principal(backend: str, pki: Pki, acl_cluster: ThreadedCluster) -> None:
    from aiokafka_lite.admin import (
        AccessControlEntry,
        AclBinding,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourcePattern,
        ResourceType,
    )

    admin_files = pki.client("acl-admin", ou="ops")
    writer = pki.client(f"writer-{backend}")
    other = pki.client(f"other-{backend}")
    topic = f"acl-mtls-{backend}"
    principal = f"User:CN=writer-{backend},OU=clients,O=Test"

    async def scenario() -> None:
        async with Admin(acl_cluster.bootstrap, **_mtls(pki, admin_files)) as admin:
            await admin.create_topics([NewTopic(topic, 1)])
            binding = AclBinding(
                ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                AccessControlEntry(principal, "*", AclOperation.WRITE, AclPermissionType.ALLOW),
            )
            (await admin.create_acls([binding])).raise_errors()
        async with Producer(acl_cluster.bootstrap, **_mtls(pki, writer)) as producer:
            await producer.send(topic, b"allowed", partition=0)
        async with Producer(
            acl_cluster.bootstrap, **_mtls(pki, other), request_timeout_ms=10_000
        ) as producer:
            with anyio.fail_after(30), pytest.raises(E.KafkaError) as denied:
                await producer.send(topic, b"denied", partition=0)
            # A valid certificate whose principal no ACL names.
            assert isinstance(denied.value, E.TopicAuthorizationFailedError), repr(denied.value)

    anyio.run(scenario, backend=backend)
