"""pytest plugin (registered through the ``pytest11`` entry point).

Fixtures:

``kafka_bootstrap``
    Bootstrap servers (``"host:port,..."``) of a Kafka cluster for this test, chosen by
    option: ``--kafka=embedded`` (default; a fresh embedded cluster per test, running in
    a background thread so blocking clients work too), ``--kafka=apache`` (a real Apache
    Kafka, see below), ``--kafka=container`` (one testcontainers ``KafkaContainer`` per
    session; needs Docker) or ``--kafka-bootstrap=HOST:PORT`` (any external cluster).
    When the test also uses ``kafka_cluster``, it is that cluster's bootstrap.
``kafka_cluster``
    A started one-broker cluster with a control API. Embedded (default): an
    ``EmbeddedCluster`` in the test's event loop, with fault injection and request
    inspection; startup costs a few milliseconds. ``--kafka=apache``: the session's
    ``ApacheCluster`` (``aiokafka_lite.testing.apache``), which has the part of that API
    a real cluster can honour (``bootstrap``, ``create_topic``, ``delete_topic``,
    ``high_watermark``, broker stop/kill/restart); every topic and group is deleted
    after each test. Other modes skip the test.
``kafka_cluster_factory``
    ``await kafka_cluster_factory(brokers=3, ...)``: custom cluster shapes, closed at
    teardown. Embedded: any ``EmbeddedCluster`` argument, and ``configs`` (Kafka broker
    settings, as on Apache). Apache: a fresh
    ``ApacheCluster`` with ``brokers``, ``auto_create_topics``, ``default_partitions``,
    ``topics``, ``configs`` (broker settings), ``sasl_users``/``sasl_mechanisms`` and
    ``tls=(certfile, keyfile)``; the last also works on the embedded cluster (there it
    becomes the ``ssl_context``), so a TLS test can run on both.
``kafka_threaded_cluster_factory``
    ``kafka_threaded_cluster_factory(**kwargs) -> ThreadedCluster``: a cluster for tests
    with blocking clients (``tc.bootstrap``, ``tc.call(lambda c: c.high_watermark(...))``,
    ``tc.run(lambda c: c.stop_broker(2))``). Embedded or Apache, like the factory above.
``kafka_blackhole``
    A one-broker cluster reachable only through a ``BlackholeProxy``
    (``aiokafka_lite.testing.proxy``): ``.bootstrap``, ``.proxy`` (``.blackhole()``,
    ``.restore()``, ``.reset_connections()``) and ``.create_topic(name, partitions=1)``.
    Embedded: a fresh broker per test. ``--kafka=apache``: one Apache Kafka node for the
    session behind its own proxy; after each test the network is restored and the
    test's topics and groups are deleted.
``apache_kafka``
    The session's one-node ``ApacheCluster``, whatever ``--kafka`` says: for tests that
    compare against the real broker in every run (the differential suite). Topics and
    groups are deleted after each test that used it.

Options: ``--kafka-version`` picks the Apache Kafka release (``latest``, ``4.0`` or a
full version; default: the newest pinned one). Kafka is fetched with Maven on first use
(Java 17+ and Maven needed; a missing one is a test error that says so, never a skip).

Marker ``@pytest.mark.kafka_embedded``: the test needs the embedded broker (fault
injection, request inspection, internal state). With ``--kafka=apache`` such tests,
and tests that use no Kafka fixture at all, are deselected, so the Apache pass runs
exactly the tests that talk to a broker through the fixtures. In other modes they skip.
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
    from aiokafka_lite.testing.apache import ApacheCluster
    from aiokafka_lite.testing.proxy import ProxiedKafka
    from aiokafka_lite.testing.threaded import ThreadedCluster

__all__ = [
    "apache_kafka",
    "kafka_blackhole",
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
        choices=("embedded", "apache", "container"),
        default="embedded",
        help="where the Kafka fixtures get a cluster: the embedded broker (default), Apache Kafka "
        "run from Maven Central's jars, or a testcontainers Kafka",
    )
    group.addoption(
        "--kafka-version",
        default=os.environ.get("AIOKAFKA_LITE_KAFKA_VERSION", "latest"),
        help="Apache Kafka release for --kafka=apache and the apache_kafka fixture: latest, 4.0 or a full version",
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


_KAFKA_FIXTURES = frozenset(
    {
        "kafka_bootstrap",
        "kafka_cluster",
        "kafka_cluster_factory",
        "kafka_threaded_cluster_factory",
        "kafka_blackhole",
        "apache_kafka",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With --kafka=apache, keep only the tests that reach a broker through the fixtures
    and do not need the embedded broker's control API."""
    if _mode(config) != "apache":
        return
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("kafka_embedded") is None and fixtures & _KAFKA_FIXTURES:
            keep.append(item)
        else:
            dropped.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("kafka_embedded") is not None and _mode(item.config) != "embedded":
        pytest.skip("needs the embedded Kafka cluster (fault injection / control API)")


def _require_embedded(config: pytest.Config) -> None:
    mode = _mode(config)
    if mode != "embedded":
        pytest.skip(f"needs the embedded Kafka cluster (this session uses {mode} Kafka)")


@pytest.fixture(scope="session")
def kafka_mode(pytestconfig: pytest.Config) -> str:
    """``"embedded"``, ``"apache"``, ``"container"`` or ``"external"``."""
    return _mode(pytestconfig)


@pytest.fixture(scope="session")
def _apache_kafka_session(pytestconfig: pytest.Config) -> Iterator[ApacheCluster]:
    """One Apache Kafka node for the whole session, started on first use."""
    from aiokafka_lite.testing.apache import ApacheCluster

    cluster = ApacheCluster(1, version=str(pytestconfig.getoption("--kafka-version")))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def apache_kafka(_apache_kafka_session: ApacheCluster) -> Iterator[ApacheCluster]:
    """The session's Apache Kafka; the test's topics and groups are deleted afterwards."""
    try:
        yield _apache_kafka_session
    finally:
        _apache_kafka_session.reset()


@pytest.fixture(scope="session")
def _apache_blackhole_session(pytestconfig: pytest.Config) -> Iterator[ProxiedKafka]:
    """One Apache Kafka node behind a BlackholeProxy for the session, started on first use."""
    from aiokafka_lite.testing.proxy import apache_behind_proxy

    with apache_behind_proxy(str(pytestconfig.getoption("--kafka-version"))) as kafka:
        yield kafka


@pytest.fixture
def kafka_blackhole(request: pytest.FixtureRequest) -> Iterator[ProxiedKafka]:
    """A one-broker cluster that clients reach only through a BlackholeProxy."""
    mode = _mode(request.config)
    if mode == "apache":
        kafka: ProxiedKafka = request.getfixturevalue("_apache_blackhole_session")
        kafka.reset()
        try:
            yield kafka
        finally:
            kafka.reset()
        return
    _require_embedded(request.config)
    from aiokafka_lite.testing.proxy import embedded_behind_proxy

    with embedded_behind_proxy() as kafka:
        yield kafka


@pytest.fixture(scope="session")
def _kafka_container_bootstrap(pytestconfig: pytest.Config) -> Iterator[str]:
    """One real Kafka (KRaft) container for the whole session."""
    try:
        from testcontainers.community.kafka import KafkaContainer
    except ImportError:  # older testcontainers layouts
        try:
            from testcontainers.kafka import KafkaContainer
        except ImportError as e:
            raise RuntimeError("--kafka=container needs the testcontainers package") from e
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
        # The user asked for this mode: a cluster that cannot start is an error, not a skip.
        raise RuntimeError(f"--kafka=container: cannot start a Kafka container ({image}): {e}") from e
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
    if mode == "apache":
        apache: ApacheCluster = request.getfixturevalue("apache_kafka")
        yield apache.bootstrap
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
async def kafka_cluster(request: pytest.FixtureRequest) -> AsyncIterator[EmbeddedCluster]:
    """A fresh one-broker embedded cluster in the test's event loop, or with
    ``--kafka=apache`` the session's Apache Kafka (typed as the embedded cluster so that
    tests keep their types; at run time it is an ``ApacheCluster``)."""
    if _mode(request.config) == "apache":
        apache = request.getfixturevalue("apache_kafka")
        # The handle offers EmbeddedCluster's portable subset and says so when asked for more.
        yield apache
        return
    _require_embedded(request.config)
    from aiokafka_lite.broker.cluster import EmbeddedCluster

    async with EmbeddedCluster(brokers=1) as cluster:
        yield cluster


ClusterFactory = Callable[..., Awaitable["EmbeddedCluster"]]


@pytest.fixture
async def kafka_cluster_factory(pytestconfig: pytest.Config) -> AsyncIterator[ClusterFactory]:
    """``await factory(**EmbeddedCluster kwargs)``: started clusters, closed at teardown."""
    if _mode(pytestconfig) == "apache":
        version = str(pytestconfig.getoption("--kafka-version"))
        started: list[ApacheCluster] = []

        async def apache_factory(**kwargs: Any) -> EmbeddedCluster:
            cluster = _apache_cluster(version, kwargs)
            started.append(cluster)
            await cluster.__aenter__()
            _create_initial_topics(cluster, kwargs)
            return cluster  # type: ignore[return-value]  # the portable subset, see kafka_cluster

        try:
            yield apache_factory
        finally:
            for ac in reversed(started):
                await ac.__aexit__(None, None, None)
        return
    _require_embedded(pytestconfig)
    from aiokafka_lite.broker.cluster import EmbeddedCluster

    clusters: list[EmbeddedCluster] = []

    async def factory(**kwargs: Any) -> EmbeddedCluster:
        cluster = EmbeddedCluster(**_embedded_args(kwargs))
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
    if _mode(pytestconfig) == "apache":
        version = str(pytestconfig.getoption("--kafka-version"))
        clusters: list[ApacheCluster] = []

        from aiokafka_lite.testing.apache import ThreadedApache

        def apache_factory(**kwargs: Any) -> ThreadedCluster:
            cluster = _apache_cluster(version, kwargs)
            clusters.append(cluster)
            cluster.start()
            _create_initial_topics(cluster, kwargs)
            return ThreadedApache(cluster)  # type: ignore[return-value]  # same call/run surface

        try:
            yield apache_factory
        finally:
            for ac in reversed(clusters):
                ac.close()
        return
    _require_embedded(pytestconfig)
    from aiokafka_lite.testing.threaded import ThreadedCluster

    started: list[ThreadedCluster] = []

    def factory(**kwargs: Any) -> ThreadedCluster:
        tc = ThreadedCluster(**_embedded_args(kwargs))
        tc.start()
        started.append(tc)
        return tc

    try:
        yield factory
    finally:
        for tc in reversed(started):
            tc.close()


# -- Apache Kafka in place of the embedded factories ------------------------------------

# EmbeddedCluster arguments that a real cluster can honour, and how.
_PORTABLE_CLUSTER_ARGS = frozenset(
    {
        "brokers",
        "auto_create_topics",
        "default_partitions",
        "topics",
        "configs",
        "tls",
        "sasl_users",
        "sasl_mechanisms",
    }
)


# Broker settings that BrokerConfig holds as typed fields (the rest go to its ``extra``).
_BROKER_CONFIG_FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "auto.create.topics.enable": ("auto_create_topics", lambda v: v.lower() == "true"),
    "num.partitions": ("default_partitions", int),
    "default.replication.factor": ("default_replication_factor", int),
    "message.max.bytes": ("message_max_bytes", int),
    "socket.request.max.bytes": ("max_request_size", int),
}


def _embedded_args(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The portable arguments on the embedded cluster: ``tls=(certfile, keyfile)`` becomes
    a server ``ssl_context`` and ``configs`` (Kafka broker settings) its ``BrokerConfig``."""
    out = dict(kwargs)
    if "tls" in out:
        import ssl

        cert, key = out.pop("tls")
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
        out["ssl_context"] = ctx
    if "configs" in out:
        import dataclasses

        from aiokafka_lite.broker import BrokerConfig

        base: BrokerConfig = out.pop("config", None) or BrokerConfig(
            auto_create_topics=out.pop("auto_create_topics", True),
            default_partitions=out.pop("default_partitions", 1),
        )
        typed: dict[str, Any] = {}
        extra = dict(base.extra)
        for key, value in dict(out.pop("configs") or {}).items():
            if key in _BROKER_CONFIG_FIELDS:
                name, parse = _BROKER_CONFIG_FIELDS[key]
                typed[name] = parse(str(value))
            else:
                extra[key] = str(value)
        out["config"] = dataclasses.replace(base, extra=extra, **typed)
    return out


def _apache_cluster(version: str, kwargs: dict[str, Any]) -> ApacheCluster:
    from aiokafka_lite.testing.apache import ApacheCluster, EmbeddedOnlyError

    unknown = sorted(set(kwargs) - _PORTABLE_CLUSTER_ARGS)
    if unknown:
        raise EmbeddedOnlyError(
            f"cluster arguments {unknown} exist only in the embedded broker; "
            "mark the test @pytest.mark.kafka_embedded"
        )
    configs = dict(kwargs.get("configs") or {})
    if "auto_create_topics" in kwargs:
        configs["auto.create.topics.enable"] = "true" if kwargs["auto_create_topics"] else "false"
    if "default_partitions" in kwargs:
        configs["num.partitions"] = str(kwargs["default_partitions"])
    security: dict[str, Any] = {k: kwargs[k] for k in ("tls", "sasl_users", "sasl_mechanisms") if k in kwargs}
    return ApacheCluster(int(kwargs.get("brokers", 1)), version=version, configs=configs, **security)


def _create_initial_topics(cluster: ApacheCluster, kwargs: dict[str, Any]) -> None:
    for name, partitions in dict(kwargs.get("topics") or {}).items():
        cluster.create_topic(name, partitions)
