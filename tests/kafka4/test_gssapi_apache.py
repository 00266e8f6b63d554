"""SASL GSSAPI (Kerberos) against Apache Kafka and a real MIT KDC, on asyncio and trio.

The suite starts its own realm (``_support.kdc.Kdc``: krb5kdc on a loopback port), a
broker principal ``kafka/127.0.0.1`` with its keytab, and a one-node Kafka whose client
listener is SASL_PLAINTEXT with GSSAPI (Krb5LoginModule with the keytab, the realm's
krb5.conf as ``java.security.krb5.conf``). A producer, a consumer in a group and the Admin
client authenticate with a keytab; a ticket cache (kinit) works too. kcat (librdkafka
with Cyrus SASL's GSSAPI plugin, Debian's package) is the referee: it reads what we
wrote and writes what we read. (The confluent-kafka wheel's librdkafka is built without
GSSAPI: "No provider for SASL mechanism GSSAPI".) A keytab whose key was rotated, an
expired ticket, an unknown principal and a KDC that is down fail fast with
``KerberosError`` naming the cause.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support.kdc import Kdc

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.admin import Admin, NewTopic
from aiokafka_lite.core import errors as E
from aiokafka_lite.net import Client
from aiokafka_lite.net.gssapi import gssapi_available
from aiokafka_lite.testing.apache import ApacheCluster

pytestmark = pytest.mark.skipif(
    not (Kdc.available() and gssapi_available()),
    reason="needs MIT Kerberos (krb5-kdc, krb5-admin-server, krb5-user) and the gssapi package: scripts/test.sh installs them",
)

BACKENDS = ["asyncio", "trio"]
FAST: dict[str, Any] = {"retry_backoff_ms": 5, "retry_backoff_max_ms": 50, "reconnect_backoff_ms": 5}
HOST = "127.0.0.1"


class Realm:
    def __init__(self, kdc: Kdc, cluster: ApacheCluster, client_keytab: Path) -> None:
        self.kdc = kdc
        self.cluster = cluster
        self.client_keytab = client_keytab
        self.client = kdc.principal("alice")

    def options(self, **extra: Any) -> dict[str, Any]:
        return {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "GSSAPI",
            "sasl_kerberos_keytab": str(self.client_keytab),
            "sasl_kerberos_principal": self.client,
            **FAST,
            **extra,
        }


@pytest.fixture(scope="module")
def realm(pytestconfig: pytest.Config) -> Iterator[Realm]:
    version = pytestconfig.getoption("--kafka-version", None)
    with Kdc() as kdc:
        broker = kdc.add_principal(f"kafka/{HOST}")
        broker_keytab = kdc.keytab(broker)
        kdc.add_principal("alice")
        client_keytab = kdc.keytab("alice")
        jaas = (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
            f'keyTab="{broker_keytab}" principal="{broker}";'
        )
        saved = os.environ.get("KRB5_CONFIG")
        os.environ["KRB5_CONFIG"] = str(kdc.krb5_config)  # the Kerberos library of this process
        try:
            with ApacheCluster(
                brokers=1,
                version=str(version) if version else None,
                host=HOST,
                sasl_users={},
                sasl_mechanisms=("GSSAPI",),
                configs={
                    "sasl.kerberos.service.name": "kafka",
                    # KIP-368: sessions end after 3 s; clients re-authenticate in band
                    "connections.max.reauth.ms": "3000",
                    "listener.name.client.gssapi.sasl.jaas.config": jaas,
                },
                jvm_system_properties={"java.security.krb5.conf": str(kdc.krb5_config)},
            ) as cluster:
                yield Realm(kdc, cluster, client_keytab)
        finally:
            if saved is None:
                os.environ.pop("KRB5_CONFIG", None)
            else:
                os.environ["KRB5_CONFIG"] = saved


async def _start_error(bootstrap: str, **options: Any) -> BaseException:
    client = Client(bootstrap, request_timeout_ms=15_000, **options)
    try:
        with anyio.fail_after(30):  # a hang guard: the failures below come in well under a second
            with pytest.raises(E.KafkaError) as info:
                await client.start()
    finally:
        await client.close()
    err: BaseException = info.value
    return err.__cause__ if isinstance(err, E.NoBrokersAvailableError) and err.__cause__ else err


def _kcat(realm: Realm, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """kcat with GSSAPI: librdkafka runs kinit with the keytab into a private cache."""
    env = {
        **os.environ,
        "KRB5_CONFIG": str(realm.kdc.krb5_config),
        "KRB5CCNAME": f"FILE:{realm.kdc.dir}/kcat-ccache",
    }
    cmd = [
        shutil.which("kcat") or "kcat",
        "-b",
        realm.cluster.bootstrap,
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanisms=GSSAPI",
        "-X",
        "sasl.kerberos.service.name=kafka",
        "-X",
        f"sasl.kerberos.keytab={realm.client_keytab}",
        "-X",
        f"sasl.kerberos.principal={realm.client}",
        *args,
    ]
    return subprocess.run(cmd, input=stdin, env=env, capture_output=True, timeout=120)


@pytest.mark.parametrize("backend", BACKENDS)
def test_producer_group_consumer_admin_and_kcat_agree(backend: str, realm: Realm) -> None:
    options = realm.options()
    ours, theirs = f"krb-ours-{backend}", f"krb-kcat-{backend}"
    bootstrap = realm.cluster.bootstrap

    async def produce_and_admin() -> None:
        async with Admin(bootstrap, **options) as admin:
            await admin.create_topics([NewTopic(ours, 1, 1), NewTopic(theirs, 1, 1)])
            described = await admin.describe_cluster()
            assert [b.node_id for b in described.brokers] == [1]
        async with Producer(bootstrap, **options) as producer:
            for i in range(3):
                await producer.send(ours, b"ours-%d" % i, partition=0)

    anyio.run(produce_and_admin, backend=backend)

    # The referee reads what we wrote, and writes what we then read in a group.
    read = _kcat(realm, "-C", "-t", ours, "-o", "beginning", "-c", "3", "-e", "-q")
    assert read.returncode == 0, read.stderr.decode()
    assert read.stdout.decode().split() == ["ours-0", "ours-1", "ours-2"]
    wrote = _kcat(realm, "-P", "-t", theirs, "-p", "0", stdin=b"kcat-0\nkcat-1\nkcat-2\n")
    assert wrote.returncode == 0, wrote.stderr.decode()

    async def consume() -> None:
        seen: list[bytes] = []
        async with Consumer(
            bootstrap, topics=theirs, group_id=f"g-{theirs}", auto_offset_reset="earliest", **options
        ) as consumer:
            with anyio.fail_after(60):
                async for record in consumer:
                    seen.append(record.value or b"")
                    if len(seen) == 3:
                        break
            await consumer.commit()
        assert seen == [b"kcat-0", b"kcat-1", b"kcat-2"]

    anyio.run(consume, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ticket_cache_then_expired_ticket(
    backend: str, realm: Realm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ccache = tmp_path / "ccache"
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    cache_options = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI", **FAST}

    async def with_ticket() -> None:
        async with Admin(realm.cluster.bootstrap, **cache_options) as admin:
            assert (await admin.describe_cluster()).brokers

    async def with_expired_ticket() -> None:
        err = await _start_error(realm.cluster.bootstrap, **cache_options)
        assert isinstance(err, E.KerberosError), repr(err)
        assert "GSSAPI" in str(err) and "expired" in str(err), err

    realm.kdc.kinit("alice", realm.client_keytab, ccache)
    anyio.run(with_ticket, backend=backend)
    realm.kdc.kinit("alice", realm.client_keytab, ccache, lifetime="2s")
    deadline = time.monotonic() + 60
    while realm.kdc.ticket_valid(ccache):  # wait until the short ticket has expired
        assert time.monotonic() < deadline, "the 2 s ticket never expired"
        time.sleep(0.2)
    anyio.run(with_expired_ticket, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_keytab_unknown_principal_and_kdc_down(backend: str, realm: Realm, tmp_path: Path) -> None:
    kdc = realm.kdc
    user = f"rotated-{backend}"
    kdc.add_principal(user)
    stale = kdc.keytab(user, tmp_path / "stale.keytab")
    kdc.keytab(user, tmp_path / "current.keytab")  # new keys: the first keytab is stale now
    ghost = f"ghost-{backend}"
    kdc.add_principal(ghost)
    ghost_keytab = kdc.keytab(ghost, tmp_path / "ghost.keytab")
    kdc.delete_principal(ghost)

    async def scenario() -> None:
        bootstrap = realm.cluster.bootstrap
        wrong = await _start_error(
            bootstrap,
            **realm.options(sasl_kerberos_keytab=str(stale), sasl_kerberos_principal=kdc.principal(user)),
        )
        assert isinstance(wrong, E.KerberosError), repr(wrong)
        assert "keytab" in str(wrong) and "current key" in str(wrong), wrong

        unknown = await _start_error(
            bootstrap,
            **realm.options(
                sasl_kerberos_keytab=str(ghost_keytab), sasl_kerberos_principal=kdc.principal(ghost)
            ),
        )
        assert isinstance(unknown, E.KerberosError), repr(unknown)
        assert "does not know" in str(unknown), unknown

        wrong_service = await _start_error(
            bootstrap, **realm.options(sasl_kerberos_service_name="kafka-other")
        )
        assert isinstance(wrong_service, E.KerberosError), repr(wrong_service)
        assert "service principal" in str(wrong_service), wrong_service

    anyio.run(scenario, backend=backend)

    # A KDC that is down (a krb5.conf naming a closed port), in a process of its own so
    # this one's configuration stays.
    dead = kdc.write_krb5_conf(tmp_path / "dead-krb5.conf", 1)
    script = (
        "import anyio, sys\n"
        "from aiokafka_lite.net import Client\n"
        "from aiokafka_lite.core import errors as E\n"
        "async def main():\n"
        f"    c = Client({realm.cluster.bootstrap!r}, request_timeout_ms=15000, **{realm.options()!r})\n"
        "    try:\n"
        "        await c.start()\n"
        "    except E.KafkaError as e:\n"
        "        err = e.__cause__ if isinstance(e, E.NoBrokersAvailableError) and e.__cause__ else e\n"
        "        print(type(err).__name__, err)\n"
        "    finally:\n"
        "        await c.close()\n"
        f"anyio.run(main, backend={backend!r})\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "KRB5_CONFIG": str(dead)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout.startswith("KerberosError"), proc.stdout + proc.stderr
    assert "no KDC of the realm answers" in proc.stdout, proc.stdout


@pytest.mark.parametrize("backend", BACKENDS)
def test_reauthentication_on_the_live_connection(
    backend: str, realm: Realm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KIP-368 with GSSAPI: the broker's sessions last connections.max.reauth.ms (3 s);
    the client gets a new service ticket context and re-authenticates on the same
    connection, without reconnecting, while requests keep flowing."""
    from aiokafka_lite.net.gssapi import GssapiMechanism
    from aiokafka_lite.wire.messages import MetadataRequest

    logins: list[int] = []
    prepare = GssapiMechanism.prepare

    def counting(self: GssapiMechanism) -> None:
        prepare(self)
        logins.append(1)

    monkeypatch.setattr(GssapiMechanism, "prepare", counting)

    async def scenario() -> None:
        async with Client(realm.cluster.bootstrap, **realm.options()) as client:
            await client.send(MetadataRequest(topics=[]), node_id=1)
            (conn,) = [c for _, c in client._nodes[1].open_conns()]
            assert conn.session_lifetime_ms > 0
            first = len(logins)
            with anyio.fail_after(60):
                while len(logins) < first + 2:  # two re-authentications
                    await client.send(MetadataRequest(topics=[]), node_id=1)
                    await anyio.sleep(0.1)
            assert [c for _, c in client._nodes[1].open_conns()] == [conn] and conn.ready

    anyio.run(scenario, backend=backend)
