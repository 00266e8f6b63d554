"""The Apache Kafka launcher (aiokafka_lite.testing.apache) and the plugin's Apache mode.

These start real Kafka processes: one node through the session fixture, and one
three-node cluster for the stop/kill/restart lifecycle that fault tests build on.
"""

from __future__ import annotations

import asyncio
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.admin.client import Admin
from aiokafka_lite.testing import apache
from aiokafka_lite.testing.apache import ApacheCluster, ApacheKafkaError, EmbeddedOnlyError

pytest_plugins = ["pytester"]


def test_versions_are_pinned() -> None:
    assert apache.resolve_version(None) == apache.DEFAULT_KAFKA_VERSION
    assert apache.resolve_version("latest") == apache.KAFKA_VERSIONS["latest"]
    assert apache.resolve_version("4.0").startswith("4.0.")
    assert apache.resolve_version("4.1.1") == "4.1.1"


def test_missing_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(ApacheKafkaError, match="needs Java 17"):
        apache._java()


def test_missing_maven_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIOKAFKA_LITE_KAFKA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("AIOKAFKA_LITE_MVN", raising=False)
    with pytest.raises(ApacheKafkaError, match="needs Maven"):
        apache.kafka_classpath("4.4.0")


def test_unknown_version_names_the_artifact(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIOKAFKA_LITE_KAFKA_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ApacheKafkaError, match=r"kafka_2\.13:0\.0\.1-no-such-release"):
        apache.kafka_classpath("0.0.1-no-such-release")
    assert not (tmp_path / "cache" / "0.0.1-no-such-release" / ".complete").exists()


async def test_one_node_round_trip_and_reset(apache_kafka: ApacheCluster) -> None:
    apache_kafka.create_topic("launcher-rt", 3)
    async with Producer(apache_kafka.bootstrap, acks="all") as producer:
        for i in range(9):
            await producer.send("launcher-rt", b"v%d" % i, partition=i % 3)
    assert [apache_kafka.high_watermark("launcher-rt", p) for p in range(3)] == [3, 3, 3]
    async with Consumer(apache_kafka.bootstrap, topics="launcher-rt", auto_offset_reset="earliest") as c:
        seen: list[bytes] = []
        async with asyncio.timeout(30):
            async for record in c:
                seen.append(record.value or b"")
                if len(seen) == 9:
                    break
    assert sorted(seen) == sorted(b"v%d" % i for i in range(9))

    apache_kafka.reset()
    async with Admin(apache_kafka.bootstrap) as admin:
        assert "launcher-rt" not in await admin.list_topics()
    apache_kafka.create_topic("launcher-rt", 1)  # the name is free again
    assert apache_kafka.high_watermark("launcher-rt", 0) == 0


def test_embedded_only_control_says_so(apache_kafka: ApacheCluster) -> None:
    with pytest.raises(EmbeddedOnlyError, match="kafka_embedded"):
        apache_kafka.inject_error  # noqa: B018 - the attribute access is what is tested
    assert not hasattr(apache_kafka, "record_requests")


async def test_three_nodes_survive_a_killed_broker_and_take_it_back() -> None:
    async with ApacheCluster(3) as kafka:
        assert len(kafka.bootstrap_servers) == 3
        kafka.create_topic("launcher-ha", 3, replication_factor=3, configs={"min.insync.replicas": "2"})

        async def produce(n: int, tag: bytes) -> None:
            async with Producer(kafka.bootstrap, acks="all", enable_idempotence=True) as producer:
                futs = [
                    await producer.enqueue("launcher-ha", tag + b"%d" % i, partition=i % 3) for i in range(n)
                ]
                await producer.flush()
                for f in futs:
                    await f

        await produce(30, b"a")
        data_dir = kafka.node(2).data_dir
        await kafka.kill_broker(2)
        assert not kafka.node(2).running
        assert len(kafka.bootstrap_servers) == 2
        await produce(30, b"b")  # two in-sync replicas are left: acks=all still succeeds
        assert sum(kafka.high_watermark("launcher-ha", p) for p in range(3)) == 60

        port = kafka.node(2).port
        await kafka.start_broker(2)
        assert kafka.node(2).running and kafka.node(2).port == port
        assert data_dir.exists()
        async with Admin(kafka.bootstrap) as admin:
            assert {b.node_id for b in (await admin.describe_cluster()).brokers} == {1, 2, 3}
        await kafka.stop_broker(1)  # controlled shutdown, then the cluster still serves
        await produce(3, b"c")
        assert sum(kafka.high_watermark("launcher-ha", p) for p in range(3)) == 63
    assert all(not n.running for n in kafka.nodes)


def test_apache_mode_selects_only_portable_broker_tests(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_inner=textwrap.dedent(
            """
            import pytest

            def test_unit():
                pass

            def test_portable(kafka_bootstrap):
                pass

            async def test_portable_cluster(kafka_cluster):
                pass

            @pytest.mark.kafka_embedded
            async def test_needs_faults(kafka_cluster):
                pass
            """
        )
    )
    result = pytester.runpytest("--kafka=apache", "--collect-only", "-q", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        ["*test_portable*", "*test_portable_cluster*", "*2/4 tests collected (2 deselected)*"]
    )
    assert "test_unit" not in result.stdout.str()
    assert "test_needs_faults" not in result.stdout.str()
    embedded = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    embedded.stdout.fnmatch_lines(["*4 tests collected*"])


def test_fetch_command_prints_the_cached_jars() -> None:
    # Cached already by the session (the fixture above or CI's set-up step): no download.
    lib = apache.kafka_classpath(None)
    assert any(p.name.startswith("kafka_2.13-") for p in lib.iterdir())
    assert os.access(lib, os.R_OK)


def test_cluster_ids_never_look_like_options(monkeypatch: pytest.MonkeyPatch) -> None:
    # One id in 64 would start with "-" (base64url), and the storage tool would then
    # fail with "argument --cluster-id/-t: expected one argument".
    import uuid

    ids = iter([uuid.UUID(bytes=b"\xfb" + bytes(15)), uuid.UUID(bytes=b"\x04" + bytes(15))])
    monkeypatch.setattr(apache.uuid, "uuid4", lambda: next(ids))
    cid = apache._random_cluster_id()
    assert not cid.startswith("-") and len(cid) == 22


def test_an_interrupted_run_leaves_no_kafka_behind(tmp_path: Path) -> None:
    # A process that starts Kafka and exits without closing it (as after Ctrl-C or a
    # session-ending timeout): the at-exit cleanup kills the JVM.
    import subprocess
    import sys

    script = tmp_path / "leave.py"
    script.write_text(
        "from aiokafka_lite.testing.apache import ApacheCluster\n"
        "c = ApacheCluster(1)\n"
        "c.start()\n"
        "print(c.nodes[0].pid, flush=True)\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=180, check=True
    )
    pid = int(proc.stdout.split()[-1])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return  # gone, as it should be
    os.kill(pid, 9)
    raise AssertionError(f"Kafka process {pid} outlived the interpreter that started it")


async def test_factory_configs_shape_the_embedded_broker_too(
    kafka_cluster_factory: Any, kafka_mode: str
) -> None:
    # The same broker settings on either kind of cluster: here a small message.max.bytes
    # (a typed BrokerConfig field on the embedded broker) and an auto-creation switch.
    from aiokafka_lite.core import errors as E

    kc = await kafka_cluster_factory(
        configs={"message.max.bytes": "2000", "auto.create.topics.enable": "false"}
    )
    kc.create_topic("small", 1)
    async with Producer(
        kc.bootstrap, acks="all", compression=None, linger_ms=0, max_block_ms=2000
    ) as producer:
        assert (await producer.send("small", b"x" * 100, partition=0)).offset == 0
        with pytest.raises(E.MessageSizeTooLargeError):
            await producer.send("small", b"x" * 5000, partition=0)
        # With auto-creation off, the producer's metadata requests do not create the topic.
        with pytest.raises(E.KafkaError):
            await producer.send("never-created", b"x", partition=0)
    async with Admin(kc.bootstrap) as admin:
        assert "never-created" not in await admin.list_topics()
