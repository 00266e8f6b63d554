"""KIP-714 client metrics push to Apache Kafka: a broker-side metrics reporter receives our
producer's and consumer's metrics.

The reporter (``java/RecordingTelemetryReporter.java``, a ``MetricsReporter`` that is also a
``ClientTelemetryExporterProvider`` and a ``ClientTelemetry``) is compiled with javac against
the release's jars once per session into a temporary directory, put on the broker's classpath
(``ApacheCluster(extra_classpath=...)``) and named in ``metric.reporters``; it appends each
payload the broker hands it (already decompressed by the broker) to a file. A
client-metrics subscription with a short interval is set with the Admin API
(IncrementalAlterConfigs on a CLIENT_METRICS resource), as ``kafka-client-metrics.sh`` does.
"""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.admin import Admin
from aiokafka_lite.admin.types import ConfigResource, ConfigResourceType
from aiokafka_lite.testing.apache import ApacheCluster, kafka_classpath

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "net"))
from otlp_reader import decode_metrics

JAVA_SOURCE = Path(__file__).parent / "java" / "RecordingTelemetryReporter.java"


def _javac() -> str:
    import shutil

    from aiokafka_lite.testing.apache import _java

    javac = Path(_java()).with_name("javac")
    return str(javac) if javac.exists() else (shutil.which("javac") or "javac")


@pytest.fixture(scope="module")
def reporter_classes(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    version = pytestconfig.getoption("--kafka-version", None)
    out = tmp_path_factory.mktemp("telemetry-reporter")
    jars = kafka_classpath(str(version) if version else None)
    source = out / JAVA_SOURCE.name
    text = JAVA_SOURCE.read_text()
    (clients_jar,) = jars.glob("kafka-clients-*.jar")
    with zipfile.ZipFile(clients_jar) as z:
        if "org/apache/kafka/server/telemetry/ClientTelemetryExporterProvider.class" not in z.namelist():
            text = "\n".join(line for line in text.splitlines() if "// 4.4+" not in line)
    source.write_text(text)
    subprocess.run(
        [
            _javac(),
            "-Xlint:-removal",
            "-d",
            str(out),
            "-cp",
            f"{jars}/*",
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture(scope="module")
def cluster(
    pytestconfig: pytest.Config, reporter_classes: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ApacheCluster, Path]]:
    version = pytestconfig.getoption("--kafka-version", None)
    pushes = tmp_path_factory.mktemp("pushes") / "pushes.txt"
    configs = {
        "metric.reporters": "RecordingTelemetryReporter",
        "aiokafka.test.telemetry.file": str(pushes),
    }
    with ApacheCluster(
        1, version=str(version) if version else None, configs=configs, extra_classpath=[reporter_classes]
    ) as c:
        yield c, pushes


def read_pushes(path: Path) -> list[tuple[uuid.UUID, bool, bytes]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        instance, terminating, _content_type, data = line.split(" ")
        out.append((uuid.UUID(_java_uuid(instance)), terminating == "true", base64.b64decode(data)))
    return out


def _java_uuid(text: str) -> str:
    """Kafka's ``Uuid.toString`` is url-safe base64 of the 16 bytes."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return str(uuid.UUID(bytes=raw))


async def wait_for(cond: object, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def test_reporter_receives_our_producer_and_consumer_metrics(
    cluster: tuple[ApacheCluster, Path],
) -> None:
    kc, pushes = cluster
    async with Admin(bootstrap_servers=kc.bootstrap) as admin:
        resource = ConfigResource(ConfigResourceType.CLIENT_METRICS, "aiokafka-lite-test")
        results = await admin.incremental_alter_configs(
            {
                resource: {
                    "metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer.",
                    "interval.ms": "500",
                }
            }
        )
        results.raise_errors()
    async with Producer(bootstrap_servers=kc.bootstrap, client_id="tm-producer") as producer:
        for i in range(5):
            await producer.send("tm", b"v%d" % i)
        rep = producer._telemetry
        assert rep is not None
        await wait_for(lambda: rep.client_instance_id.int != 0, "a subscription")
        instance = rep.client_instance_id
        await wait_for(
            lambda: any(p[0] == instance for p in read_pushes(pushes)),
            "a push from the producer at the reporter",
        )
    mine = [p for p in read_pushes(pushes) if p[0] == instance]
    assert mine[-1][1], "the close pushed a terminating push"
    names: set[str] = set()
    sent = 0.0
    for _, _, data in mine:
        resource_attrs, metrics = decode_metrics(data)
        assert resource_attrs["client_id"] == "tm-producer"
        names |= set(metrics)
        m = metrics.get("org.apache.kafka.producer.record.send.total")
        if m is not None:
            assert m["temporality"] == 1  # Kafka's broker asks for delta temporality
            sent += sum(pt[1] for pt in m["points"])
    assert "org.apache.kafka.producer.node.request.latency.avg" in names
    assert "org.apache.kafka.producer.connection.creation.total" in names
    assert sent == 5
    assert not any(n.startswith("org.apache.kafka.consumer.") for n in names)

    async with Consumer(
        bootstrap_servers=kc.bootstrap, client_id="tm-consumer", group_id="tm-g", auto_offset_reset="earliest"
    ) as consumer:
        consumer.subscribe(["tm"])
        seen = 0
        while seen < 5:
            batch = await consumer.getmany(timeout_ms=1000)
            seen += sum(len(v) for v in batch.values())
        crep = consumer._telemetry
        assert crep is not None
        await wait_for(lambda: crep.client_instance_id.int != 0, "a consumer subscription")
        cinstance = crep.client_instance_id
    cmine = [p for p in read_pushes(pushes) if p[0] == cinstance]
    assert cmine and cmine[-1][1]
    consumed = 0.0
    for _, _, data in cmine:
        m = decode_metrics(data)[1].get("org.apache.kafka.consumer.fetch.manager.records.consumed.total")
        if m is not None:
            consumed += sum(pt[1] for pt in m["points"])
    assert consumed == 5
