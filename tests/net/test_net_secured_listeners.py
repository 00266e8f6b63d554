"""TLS and SASL listeners, on the embedded broker and (with ``--kafka=apache``) on Apache
Kafka: the factory's ``tls=(cert, key)`` and ``sasl_users`` shape either kind of cluster.

On Apache Kafka these check our SASL (PLAIN, SCRAM-SHA-256/512) and TLS against Kafka's
own authenticators, which the embedded broker only imitates.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.core import errors as E
from aiokafka_lite.net import Client, create_ssl_context

FAST = {"reconnect_backoff_ms": 5, "retry_backoff_ms": 5, "request_timeout_ms": 10000}
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


async def _round_trip(bootstrap: str, topic: str, **options: Any) -> None:
    """Produce three records and consume them back through a group, all secured."""
    async with Producer(bootstrap, **options) as producer:
        for i in range(3):
            await producer.send(topic, b"v%d" % i, partition=0)
    async with Consumer(
        bootstrap, topics=topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **options
    ) as consumer:
        seen: list[bytes] = []
        async with asyncio.timeout(60):
            async for record in consumer:
                seen.append(record.value or b"")
                if len(seen) == 3:
                    break
        await consumer.commit()
    assert seen == [b"v0", b"v1", b"v2"]


async def _start_error(bootstrap: str, **options: Any) -> E.KafkaError:
    client = Client(bootstrap, **FAST, **options)
    try:
        with pytest.raises(E.KafkaError) as info:
            await asyncio.wait_for(client.start(), 30)
    finally:
        await client.close()
    return info.value


async def test_sasl_mechanisms_authenticate_and_wrong_passwords_do_not(kafka_cluster_factory: Any) -> None:
    kc = await kafka_cluster_factory(brokers=1, sasl_users=USERS)
    kc.create_topic("sasl-rt", 1)
    for i, mechanism in enumerate(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]):
        user = "alice" if i % 2 == 0 else "bob"
        await _round_trip(
            kc.bootstrap,
            "sasl-rt" if i == 0 else f"sasl-rt-{i}",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism,
            sasl_plain_username=user,
            sasl_plain_password=USERS[user],
        )
        err = await _start_error(
            kc.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism,
            sasl_plain_username=user,
            sasl_plain_password="wrong-password",
        )
        assert isinstance(err, E.AuthenticationError) or isinstance(err.__cause__, E.AuthenticationError), err
        assert "wrong-password" not in str(err) and "wrong-password" not in repr(err)


async def test_tls_listener_trusted_untrusted_and_plaintext(
    kafka_cluster_factory: Any, tls_files: tuple[Path, Path]
) -> None:
    cert, key = tls_files
    kc = await kafka_cluster_factory(brokers=1, tls=(cert, key))
    kc.create_topic("tls-rt", 1)
    trusted = create_ssl_context(cafile=str(cert))
    await _round_trip(kc.bootstrap, "tls-rt", security_protocol="SSL", ssl_context=trusted)

    untrusting = await _start_error(kc.bootstrap, security_protocol="SSL", ssl_context=create_ssl_context())
    assert isinstance(untrusting, E.NoBrokersAvailableError)
    assert "certificate" in str(untrusting).lower() or "tls" in str(untrusting).lower(), untrusting

    # Apache Kafka answers plaintext with a TLS alert (SecurityProtocolMismatchError); the
    # embedded broker hangs up, which the error still explains.
    plaintext = await _start_error(kc.bootstrap)
    assert isinstance(plaintext, E.NoBrokersAvailableError)
    assert isinstance(plaintext.__cause__, E.KafkaConnectionError), repr(plaintext.__cause__)
    assert "TLS listener" in str(plaintext) and "security_protocol" in str(plaintext), plaintext


async def test_sasl_over_tls(kafka_cluster_factory: Any, tls_files: tuple[Path, Path]) -> None:
    cert, key = tls_files
    kc = await kafka_cluster_factory(brokers=1, tls=(cert, key), sasl_users=USERS)
    kc.create_topic("sasl-ssl-rt", 1)
    await _round_trip(
        kc.bootstrap,
        "sasl-ssl-rt",
        security_protocol="SASL_SSL",
        ssl_context=create_ssl_context(cafile=str(cert)),
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
    )
