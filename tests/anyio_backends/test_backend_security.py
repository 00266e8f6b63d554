"""TLS and SASL on asyncio and on trio: the same listeners, the same round trip, the
same typed errors for an untrusted certificate, a wrong password and plaintext spoken
to a TLS port (on trio the connections run on anyio's TLS streams)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.core import errors as E
from aiokafka_lite.net import Client, create_ssl_context
from aiokafka_lite.testing.threaded import ThreadedCluster
from anyio_backends.conftest import FAST, client_tasks_running

pytestmark = pytest.mark.anyio

USERS = {"alice": "alice-secret"}


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made with openssl."""
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


async def _round_trip(bootstrap: str, topic: str, **options: Any) -> None:
    async with Producer(bootstrap, **FAST, **options) as producer:
        for i in range(3):
            await producer.send(topic, b"v%d" % i, partition=0)
    seen: list[bytes] = []
    async with Consumer(
        bootstrap, topics=topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **FAST, **options
    ) as consumer:
        with anyio.fail_after(60):
            async for record in consumer:
                seen.append(record.value or b"")
                if len(seen) == 3:
                    break
        await consumer.commit()
    assert seen == [b"v0", b"v1", b"v2"]
    assert client_tasks_running() == []


async def _start_error(bootstrap: str, **options: Any) -> E.KafkaError:
    client = Client(bootstrap, request_timeout_ms=10_000, **FAST, **options)
    try:
        with pytest.raises(E.KafkaError) as info:
            with anyio.fail_after(30):
                await client.start()
    finally:
        await client.close()
    return info.value


async def test_tls_round_trip_and_typed_errors(
    anyio_backend: str,
    kafka_threaded_cluster_factory: Callable[..., ThreadedCluster],
    tls_files: tuple[Path, Path],
) -> None:
    cert, key = tls_files
    cluster = kafka_threaded_cluster_factory(brokers=1, tls=(cert, key))
    topic = f"tls-{anyio_backend}"
    await _round_trip(
        cluster.bootstrap, topic, security_protocol="SSL", ssl_context=create_ssl_context(cafile=str(cert))
    )

    untrusted = await _start_error(
        cluster.bootstrap, security_protocol="SSL", ssl_context=create_ssl_context()
    )
    assert isinstance(untrusted, E.NoBrokersAvailableError)
    assert "certificate" in str(untrusted).lower(), untrusted

    plaintext = await _start_error(cluster.bootstrap)
    assert isinstance(plaintext, E.NoBrokersAvailableError)
    assert "TLS listener" in str(plaintext) and "security_protocol" in str(plaintext), plaintext


async def test_sasl_over_tls_and_a_wrong_password(
    anyio_backend: str,
    kafka_threaded_cluster_factory: Callable[..., ThreadedCluster],
    tls_files: tuple[Path, Path],
) -> None:
    cert, key = tls_files
    cluster = kafka_threaded_cluster_factory(brokers=1, tls=(cert, key), sasl_users=USERS)
    secured: dict[str, Any] = {
        "security_protocol": "SASL_SSL",
        "ssl_context": create_ssl_context(cafile=str(cert)),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
    }
    await _round_trip(
        cluster.bootstrap, f"sasl-{anyio_backend}", sasl_plain_password="alice-secret", **secured
    )

    wrong = await _start_error(cluster.bootstrap, sasl_plain_password="wrong-password", **secured)
    cause = wrong if isinstance(wrong, E.AuthenticationError) else wrong.__cause__
    assert isinstance(cause, E.AuthenticationError), repr(wrong)
    assert "wrong-password" not in str(wrong) and "wrong-password" not in repr(wrong)
