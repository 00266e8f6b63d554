"""Mutual TLS against Apache Kafka, on asyncio and trio: the principal the broker builds
from our client certificate is the one an ACL names.

One Kafka node whose client listener is SSL with ``ssl.client.auth=required`` (PEM
truststore: the test root CA) and the StandardAuthorizer; ``User:ANONYMOUS`` (the
plaintext INTERNAL and CONTROLLER listeners) is a super user. Kafka's own kafka-acls tool
(org.apache.kafka.tools.AclCommand) gives ``User:CN=alice,OU=clients,O=Test`` every
operation on topics, groups and the cluster. alice's certificate comes with its
intermediate CA in the chain file and an encrypted key. A producer, a consumer in a
group and the Admin client work with it; bob's certificate (valid, no ACL) gets
authorization errors; a certificate from a CA the broker does not trust fails the
handshake with ``SslAuthenticationError``; a client whose files are renewed from bob's
to alice's mid-run is authorized on its next connection. confluent-kafka configured
the same way (ssl.certificate.location, ssl.key.location, ssl.key.password,
ssl.ca.location) is the referee.
"""

from __future__ import annotations

import os
import shutil
import subprocess
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
from aiokafka_lite.testing.apache import ApacheCluster, _java, kafka_tools_classpath
from aiokafka_lite.wire.messages import MetadataRequest

BACKENDS = ["asyncio", "trio"]
FAST: dict[str, Any] = {"retry_backoff_ms": 20, "retry_backoff_max_ms": 200, "reconnect_backoff_ms": 20}
PASSWORD = "alice-key-pass"
TOPIC_AUTHORIZATION_FAILED = 29


class Setup:
    def __init__(self, pki: Pki, cluster: ApacheCluster, alice: CertFiles, bob: CertFiles) -> None:
        self.pki, self.cluster, self.alice, self.bob = pki, cluster, alice, bob

    def options(self, files: CertFiles, **extra: Any) -> dict[str, Any]:
        return {
            "security_protocol": "SSL",
            "ssl_cafile": str(self.pki.root.cert),
            "ssl_certfile": str(files.cert),
            "ssl_keyfile": str(files.key),
            **({"ssl_password": PASSWORD} if files is self.alice else {}),
            **FAST,
            **extra,
        }


@pytest.fixture(scope="module")
def setup(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    version = pytestconfig.getoption("--kafka-version", None)
    pki = Pki(tmp_path_factory.mktemp("pki"))
    server = pki.server()
    alice = pki.client("alice", password=PASSWORD)
    bob = pki.client("bob")
    with ApacheCluster(
        1,
        version=str(version) if version else None,
        tls=(server.cert, server.key),
        configs={
            "listener.name.client.ssl.client.auth": "required",
            "listener.name.client.ssl.truststore.type": "PEM",
            "listener.name.client.ssl.truststore.location": str(pki.root.cert),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        },
    ) as cluster:
        principal = f"User:{Pki.principal(alice)}"
        cmd = [_java(), "-Xmx256m", "-cp", kafka_tools_classpath(cluster.version)]
        cmd += ["org.apache.kafka.tools.AclCommand", "--bootstrap-server", cluster.nodes[0].internal_address]
        cmd += ["--add", "--allow-principal", principal, "--operation", "All"]
        cmd += ["--topic", "*", "--group", "*", "--cluster"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert principal in proc.stdout, proc.stdout
        yield Setup(pki, cluster, alice, bob)


def _authorization_failure(exc: BaseException | None) -> bool:
    seen = 0
    while exc is not None and seen < 6:
        if isinstance(exc, E.TopicAuthorizationFailedError):
            return True
        if any(_authorization_failure(e) for e in getattr(exc, "errors", None) or []):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


@pytest.mark.parametrize("backend", BACKENDS)
def test_acl_principal_producer_group_consumer_admin(backend: str, setup: Setup) -> None:
    topic = f"mtls-{backend}"
    bootstrap = setup.cluster.bootstrap
    alice = setup.options(setup.alice)

    async def ours() -> None:
        async with Admin(bootstrap, **alice) as admin:
            await admin.create_topics([NewTopic(topic, 1, 1)])
        async with Producer(bootstrap, **alice) as producer:
            for i in range(3):
                await producer.send(topic, b"ours-%d" % i, partition=0)

    anyio.run(ours, backend=backend)

    # The referee, with alice's files, writes three more.
    from confluent_kafka import Producer as CkProducer

    ck = CkProducer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(setup.pki.root.cert),
            "ssl.certificate.location": str(setup.alice.cert),
            "ssl.key.location": str(setup.alice.key),
            "ssl.key.password": PASSWORD,
        }
    )
    for i in range(3):
        ck.produce(topic, b"ck-%d" % i, partition=0)
    assert ck.flush(60) == 0

    async def consume() -> None:
        seen: list[bytes] = []
        async with Consumer(
            bootstrap, topics=topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **alice
        ) as consumer:
            with anyio.fail_after(60):
                async for record in consumer:
                    seen.append(record.value or b"")
                    if len(seen) == 6:
                        break
            await consumer.commit()
        assert seen == [b"ours-0", b"ours-1", b"ours-2", b"ck-0", b"ck-1", b"ck-2"]

        # bob: a certificate the broker accepts, a principal without ACLs.
        async with Producer(bootstrap, **setup.options(setup.bob), request_timeout_ms=10_000) as producer:
            with pytest.raises(E.KafkaError) as denied:
                with anyio.fail_after(30):
                    await producer.send(topic, b"bob", partition=0)
            assert _authorization_failure(denied.value), repr(denied.value)

    anyio.run(consume, backend=backend)

    # confluent-kafka with bob's files is refused the same way.
    errors: list[Any] = []
    ck_bob = CkProducer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(setup.pki.root.cert),
            "ssl.certificate.location": str(setup.bob.cert),
            "ssl.key.location": str(setup.bob.key),
            "message.timeout.ms": 20000,
        }
    )
    ck_bob.produce(topic, b"bob", partition=0, on_delivery=lambda err, msg: errors.append(err))
    ck_bob.flush(60)
    assert len(errors) == 1 and errors[0] is not None, errors
    assert errors[0].code() == TOPIC_AUTHORIZATION_FAILED or "AUTHORIZATION" in errors[0].name(), errors[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_untrusted_client_certificate_fails_the_handshake(backend: str, setup: Setup) -> None:
    mallory = setup.pki.rogue_client(f"mallory-{backend}")

    async def scenario() -> None:
        client = Client(setup.cluster.bootstrap, request_timeout_ms=10_000, **setup.options(mallory))
        try:
            with anyio.fail_after(30), pytest.raises(E.KafkaError) as info:
                await client.start()
        finally:
            await client.close()
        err: BaseException = info.value
        if isinstance(err, E.NoBrokersAvailableError) and err.__cause__ is not None:
            err = err.__cause__
        if backend == "trio" and not isinstance(err, E.SslAuthenticationError):
            # anyio's TLS stream sometimes ends the stream (EndOfStream) instead of
            # raising the broker's alert when the broker closes right after sending it;
            # the client then names the likely cause in a connection error.
            assert isinstance(err, E.KafkaConnectionError), repr(err)
            assert "mTLS" in str(err) and "rejected ours" in str(err), err
            return
        assert isinstance(err, E.SslAuthenticationError), repr(err)
        assert "mTLS" in str(err) and "rejected the client certificate" in str(err), err

    anyio.run(scenario, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_certificate_renewed_mid_run_is_used_by_new_connections(
    backend: str, setup: Setup, tmp_path: Path
) -> None:
    topic = f"mtls-{backend}"  # made by the first test; alice may describe it, bob may not
    live = CertFiles(tmp_path / "client.pem", tmp_path / "client.key", setup.bob.subject)
    shutil.copyfile(setup.bob.cert, live.cert)
    shutil.copyfile(setup.bob.key, live.key)
    options = setup.options(live, ssl_password=PASSWORD)  # asked for only by alice's key

    async def topic_error(client: Client) -> int:
        resp: Any = await client.send(
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
            )
        )
        return int(resp.topics[0].error_code)

    async def scenario() -> None:
        async with Client(setup.cluster.bootstrap, **options) as client:
            assert await topic_error(client) == TOPIC_AUTHORIZATION_FAILED  # bob
            for src, dst in ((setup.alice.cert, live.cert), (setup.alice.key, live.key)):
                shutil.copyfile(src, dst.with_suffix(".tmp"))
                os.replace(dst.with_suffix(".tmp"), dst)
            assert await topic_error(client) == TOPIC_AUTHORIZATION_FAILED  # the open connection stays bob's
            # A lost connection (a broker restart, an idle timeout): the client reconnects.
            for node in client._nodes.values():
                for _lane, conn in node.open_conns():
                    conn.close()
            with anyio.fail_after(30):
                while True:
                    try:
                        error = await topic_error(client)
                        break
                    except E.KafkaConnectionError:
                        await anyio.sleep(0.02)
            assert error == 0  # alice's certificate on the new connection

    anyio.run(scenario, backend=backend)
