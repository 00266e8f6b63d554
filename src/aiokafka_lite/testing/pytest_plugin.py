"""pytest plugin (registered through the ``pytest11`` entry point).

Fixtures:

``kafka_bootstrap``
    Bootstrap servers (``"host:port,..."``) of a Kafka cluster for this test, chosen by
    option: ``--kafka=embedded`` (default; a fresh embedded cluster per test, running in
    a background thread so blocking clients work too), ``--kafka=container`` (one
    testcontainers ``KafkaContainer`` per session; needs Docker) or
    ``--kafka-bootstrap=HOST:PORT`` (any external cluster). When the test also uses
    ``kafka_cluster``, it is that cluster's bootstrap.
``kafka_cluster``
    A started ``EmbeddedCluster`` (1 broker) in the test's event loop, for tests that use
    its control API (fault injection, request inspection). Skips the test when the
    session does not use the embedded cluster. Startup costs a few milliseconds.
``kafka_cluster_factory``
    ``await kafka_cluster_factory(brokers=3, sasl_users={...}, ssl_context=...)``: custom
    cluster shapes (any ``EmbeddedCluster`` argument), closed at teardown. Skips like
    ``kafka_cluster``.
``kafka_threaded_cluster_factory``
    ``kafka_threaded_cluster_factory(**kwargs) -> ThreadedCluster``: an embedded cluster
    on a background thread, for tests with blocking clients that need the control API
    (``tc.call(lambda c: c.move_leader("t", 0))``). Skips like ``kafka_cluster``.

Marker ``@pytest.mark.kafka_embedded`` skips a test unless the session uses the
embedded cluster (for tests that need fault injection without the fixtures).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

# The broker is imported when a fixture needs it, so that merely having the plugin
# installed costs a test session nothing.
if TYPE_CHECKING:
    from aiokafka_lite.broker.cluster import EmbeddedCluster
    from aiokafka_lite.testing.threaded import ThreadedCluster

__all__ = [
    "kafka_bootstrap",
    "kafka_cluster",
    "kafka_cluster_factory",
    "kafka_mode",
    "kafka_threaded_cluster_factory",
]

DEFAULT_CONTAINER_IMAGE = "confluentinc/cp-kafka:7.6.0"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aiokafka_lite", "Kafka for integration tests")
    group.addoption(
        "--kafka",
        choices=("embedded", "container"),
        default="embedded",
        help="where the kafka_bootstrap fixture gets a cluster: the embedded broker (default) or a testcontainers Kafka",
    )
    group.addoption(
        "--kafka-bootstrap",
        default=None,
        metavar="HOST:PORT",
        help="use an external Kafka cluster at these bootstrap servers",
    )
    group.addoption(
        "--kafka-image",
        default=os.environ.get("AIOKAFKA_LITE_KAFKA_IMAGE", DEFAULT_CONTAINER_IMAGE),
        help=f"container image for --kafka=container (default {DEFAULT_CONTAINER_IMAGE})",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kafka_embedded: needs the embedded Kafka cluster (skipped with --kafka=container or --kafka-bootstrap)",
    )


def _mode(config: pytest.Config) -> str:
    if config.getoption("--kafka-bootstrap"):
        return "external"
    return str(config.getoption("--kafka"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("kafka_embedded") is not None and _mode(item.config) != "embedded":
        pytest.skip("needs the embedded Kafka cluster (fault injection / control API)")


def _require_embedded(config: pytest.Config) -> None:
    mode = _mode(config)
    if mode != "embedded":
        pytest.skip(f"needs the embedded Kafka cluster (this session uses {mode} Kafka)")


@pytest.fixture(scope="session")
def kafka_mode(pytestconfig: pytest.Config) -> str:
    """``"embedded"``, ``"container"`` or ``"external"``."""
    return _mode(pytestconfig)


@pytest.fixture(scope="session")
def _kafka_container_bootstrap(pytestconfig: pytest.Config) -> Iterator[str]:
    """One real Kafka (KRaft) container for the whole session."""
    try:
        from testcontainers.community.kafka import KafkaContainer
    except ImportError:  # older testcontainers layouts
        try:
            from testcontainers.kafka import KafkaContainer
        except ImportError:
            pytest.skip("--kafka=container needs the testcontainers package")
    image = str(pytestconfig.getoption("--kafka-image"))
    container = KafkaContainer(image=image)
    if hasattr(container, "with_kraft"):
        try:
            container = container.with_kraft()
        except Exception:
            pass  # image too old for KRaft: testcontainers falls back to ZooKeeper
    try:
        container.start()
    except Exception as e:  # no Docker daemon, image pull failure...
        pytest.skip(f"cannot start a Kafka container ({image}): {e}")
    try:
        yield str(container.get_bootstrap_server())
    finally:
        container.stop()


@pytest.fixture
def kafka_bootstrap(request: pytest.FixtureRequest) -> Iterator[str]:
    """Bootstrap servers of the Kafka cluster this test should use."""
    mode = _mode(request.config)
    if mode == "external":
        yield str(request.config.getoption("--kafka-bootstrap"))
        return
    if mode == "container":
        yield request.getfixturevalue("_kafka_container_bootstrap")
        return
    if "kafka_cluster" in request.fixturenames:
        cluster: EmbeddedCluster = request.getfixturevalue("kafka_cluster")
        yield cluster.bootstrap
        return
    from aiokafka_lite.testing.threaded import ThreadedCluster

    tc = ThreadedCluster(brokers=1)
    tc.start()
    try:
        yield tc.bootstrap
    finally:
        tc.close()


@pytest.fixture
async def kafka_cluster(pytestconfig: pytest.Config) -> AsyncIterator[EmbeddedCluster]:
    """A fresh one-broker embedded cluster in the test's event loop."""
    _require_embedded(pytestconfig)
    from aiokafka_lite.broker.cluster import EmbeddedCluster

    async with EmbeddedCluster(brokers=1) as cluster:
        yield cluster


ClusterFactory = Callable[..., Awaitable["EmbeddedCluster"]]


@pytest.fixture
async def kafka_cluster_factory(pytestconfig: pytest.Config) -> AsyncIterator[ClusterFactory]:
    """``await factory(**EmbeddedCluster kwargs)``: started clusters, closed at teardown."""
    _require_embedded(pytestconfig)
    from aiokafka_lite.broker.cluster import EmbeddedCluster

    clusters: list[EmbeddedCluster] = []

    async def factory(**kwargs: Any) -> EmbeddedCluster:
        cluster = EmbeddedCluster(**kwargs)
        await cluster.start()
        clusters.append(cluster)
        return cluster

    try:
        yield factory
    finally:
        for c in reversed(clusters):
            await c.close()


@pytest.fixture
def kafka_threaded_cluster_factory(pytestconfig: pytest.Config) -> Iterator[Callable[..., ThreadedCluster]]:
    """``factory(**EmbeddedCluster kwargs) -> ThreadedCluster`` (started), closed at teardown."""
    _require_embedded(pytestconfig)
    from aiokafka_lite.testing.threaded import ThreadedCluster

    started: list[ThreadedCluster] = []

    def factory(**kwargs: Any) -> ThreadedCluster:
        tc = ThreadedCluster(**kwargs)
        tc.start()
        started.append(tc)
        return tc

    try:
        yield factory
    finally:
        for tc in reversed(started):
            tc.close()
