"""SASL (PLAIN, SCRAM-SHA-256/512; handshake v0 and v1) and TLS listeners."""

from __future__ import annotations

import shutil
import ssl
import struct
import subprocess
from pathlib import Path

import pytest

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.errors import (
    KafkaConnectionError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from aiokafka_lite.net.sasl import PlainMechanism, ScramMechanism
from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    MetadataResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

USERS = {"alice": "alice-secret", "bob": "b0b"}


async def authenticate(c: RawClient, mech: PlainMechanism | ScramMechanism) -> SaslAuthenticateResponse:
    hs = await c.request(SaslHandshakeRequest(mechanism=mech.name), 1)
    assert isinstance(hs, SaslHandshakeResponse) and hs.error_code == 0
    out: bytes | None = mech.initial_response()
    while out is not None:
        resp = await c.request(SaslAuthenticateRequest(auth_bytes=out), 2)
        assert isinstance(resp, SaslAuthenticateResponse)
        if resp.error_code:
            return resp
        out = mech.step(bytes(resp.auth_bytes))
    assert mech.complete
    return resp


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_sasl_authenticate_v1(kafka_cluster_factory, mechanism: str) -> None:  # type: ignore[no-untyped-def]
    cluster = await kafka_cluster_factory(sasl_users=USERS)

    def mech(user: str, pw: str) -> PlainMechanism | ScramMechanism:
        if mechanism == "PLAIN":
            return PlainMechanism(user, pw)
        return ScramMechanism(user, pw, hash=mechanism.removeprefix("SCRAM-"))  # type: ignore[arg-type]

    async with await RawClient.connect(cluster.bootstrap) as c:
        resp = await authenticate(c, mech("alice", "alice-secret"))
        assert resp.error_code == 0
        md = await c.request(MetadataRequest(topics=None), 12)
        assert isinstance(md, MetadataResponse)
    async with await RawClient.connect(cluster.bootstrap) as c:
        resp = await authenticate(c, mech("alice", "wrong"))
        assert resp.error_code == SaslAuthenticationFailedError.code
        assert "wrong" not in (resp.error_message or "")
        assert await c.is_closed_by_peer()


async def test_requests_before_authentication_close_the_connection(kafka_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    cluster = await kafka_cluster_factory(sasl_users=USERS)
    async with await RawClient.connect(cluster.bootstrap) as c:
        assert (
            await c.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        ).error_code == 0  # type: ignore[attr-defined]
        hs = await c.request(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert isinstance(hs, SaslHandshakeResponse)
        assert hs.error_code == UnsupportedSaslMechanismError.code
        assert set(hs.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        await c.send(MetadataRequest(topics=None), 12)
        with pytest.raises(KafkaConnectionError):
            await c.read_frame()


async def test_sasl_handshake_v0_raw_tokens(kafka_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    cluster = await kafka_cluster_factory(sasl_users=USERS)
    async with await RawClient.connect(cluster.bootstrap) as c:
        hs = await c.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 0)
        assert hs.error_code == 0  # type: ignore[attr-defined]
        mech = ScramMechanism("bob", "b0b", hash="SHA-256")
        out: bytes | None = mech.initial_response()
        while out is not None:
            await c.send_raw(struct.pack(">i", len(out)) + out)
            challenge = await c.read_frame()  # raw size-prefixed token, no Kafka header
            out = mech.step(challenge)
        assert mech.complete
        md = await c.request(MetadataRequest(topics=None), 12)
        assert isinstance(md, MetadataResponse)


def test_real_clients_authenticate(kafka_threaded_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient

    tc = kafka_threaded_cluster_factory(sasl_users=USERS, topics={"secured": 2})
    for mech in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        md = AdminClient(
            {
                "bootstrap.servers": tc.bootstrap,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mech,
                "sasl.username": "alice",
                "sasl.password": "alice-secret",
            }
        ).list_topics(timeout=10)
        assert "secured" in md.topics
        admin = KafkaAdminClient(
            bootstrap_servers=tc.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mech,
            sasl_plain_username="bob",
            sasl_plain_password="b0b",
        )
        try:
            assert "secured" in admin.list_topics()
        finally:
            admin.close()


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:  # required: the TLS tests would otherwise vanish
        pytest.fail("openssl is needed to make a test certificate: apt-get install openssl", pytrace=False)
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def _server_ctx(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


async def test_tls_listener(kafka_cluster_factory, tls_files: tuple[Path, Path]) -> None:  # type: ignore[no-untyped-def]
    cert, key = tls_files
    cluster: EmbeddedCluster = await kafka_cluster_factory(
        ssl_context=_server_ctx(cert, key), sasl_users=USERS
    )
    client_ctx = ssl.create_default_context(cafile=str(cert))
    async with await RawClient.connect(cluster.bootstrap, ssl_context=client_ctx) as c:
        assert (await authenticate(c, PlainMechanism("alice", "alice-secret"))).error_code == 0
        md = await c.request(MetadataRequest(topics=None), 12)
        assert isinstance(md, MetadataResponse)


def test_tls_with_confluent(kafka_threaded_cluster_factory, tls_files: tuple[Path, Path]) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    cert, key = tls_files
    tc = kafka_threaded_cluster_factory(ssl_context=_server_ctx(cert, key), topics={"tls": 1})
    md = AdminClient(
        {"bootstrap.servers": tc.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(cert)}
    ).list_topics(timeout=10)
    assert "tls" in md.topics
