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

``schema_registry_url``
    The URL of a Confluent-compatible schema registry for this test. Given
    ``--schema-registry-url=URL`` (a real registry, e.g. Confluent's or Apicurio's
    ``/apis/ccompat/v7``), that URL in every mode. Otherwise a fresh
    ``EmbeddedSchemaRegistry`` per test (``[schemas]`` extra), run on its own loop in a
    thread so that asyncio, trio and blocking clients all reach it; with ``--kafka=apache``
    (or container/external) it runs beside the real Kafka, because a registry is a separate
    HTTP service Kafka does not ship: the records on the broker are the same bytes whichever
    registry handed out the schema ids.
``kafka_cluster`` and ``kafka_cluster_factory`` are async: use them from a test run by
pytest-asyncio (``@pytest.mark.asyncio``, strict or auto mode, no configuration needed)
or by anyio's plugin (``@pytest.mark.anyio``). The embedded broker runs on asyncio only:
on trio they fail saying so; ``kafka_bootstrap`` and ``kafka_threaded_cluster_factory``
work on any backend. ``--kafka=container`` with no Docker daemon reachable is a usage
error that says so, before any test runs.

Options: ``--kafka-version`` picks the Apache Kafka release (``latest``, ``4.0`` or a
full version; default: the newest pinned one). Kafka is fetched with Maven on first use
(Java 17+ and Maven needed; a missing one is a test error that says so, never a skip).

Marker ``@pytest.mark.kafka_embedded``: the test needs the embedded broker (fault
injection, request inspection, internal state). With ``--kafka=apache`` such tests,
and tests that use no Kafka fixture at all, are deselected, so the Apache pass runs
exactly the tests that talk to a broker through the fixtures. In other modes they skip.
"""

from __future__ import annotations

import contextlib
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
    "schema_registry_url",
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
        "--schema-registry-url",
        default=os.environ.get("AIOKAFKA_LITE_SCHEMA_REGISTRY_URL"),
        metavar="URL",
        help="schema registry for the schema_registry_url fixture (default: an embedded registry per test)",
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
    and do not need the embedded broker's control API. With --kafka=container, check
    first that Docker answers when a test needs Kafka."""
    mode = _mode(config)
    if mode == "container" and any(_KAFKA_FIXTURES & set(getattr(i, "fixturenames", ())) for i in items):
        _require_docker_daemon()
    if mode != "apache":
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


# -- async fixtures under pytest-asyncio (any mode) and anyio's plugin --------------------
#
# An async fixture must run in the event loop of the test that uses it, and the plugin
# that runs the test decides which loop that is. pytest-asyncio in strict mode (its
# default) runs only fixtures declared with pytest_asyncio.fixture, and runs those on its
# own loop even for an anyio test; anyio's plugin runs plain async fixtures in the loop of
# a test that takes ``anyio_backend``. So each async fixture has one variant per runner,
# and the public fixture (sync) picks the variant of the test's runner.


def _pytest_asyncio_fixture(func: Callable[..., Any]) -> Any:
    """A fixture that pytest-asyncio runs in the test's loop (function scope, the
    default loop of a ``@pytest.mark.asyncio`` test) in strict and auto mode alike."""
    try:
        import pytest_asyncio
    except ImportError:  # never requested then: see _in_test_loop
        return pytest.fixture(func)
    return pytest_asyncio.fixture(func, loop_scope="function")


def _in_test_loop(request: pytest.FixtureRequest, fixture: str) -> str:
    """The variant of the async ``fixture`` that runs in the requesting test's loop."""
    if "anyio_backend" in request.fixturenames:
        backend = request.getfixturevalue("anyio_backend_name")
        if backend != "asyncio":
            pytest.fail(
                f"{fixture}: the embedded Kafka broker runs on asyncio only, and this test runs on "
                f"{backend}. Use kafka_bootstrap or kafka_threaded_cluster_factory (a cluster on a "
                "thread of its own, for any backend), or run the test on anyio's asyncio backend.",
                pytrace=False,
            )
        return f"_{fixture}_on_anyio"
    if request.node.get_closest_marker("asyncio") is not None:
        return f"_{fixture}_on_pytest_asyncio"
    pytest.fail(
        f"{fixture} is an async fixture: request it from an async test run by pytest-asyncio "
        "(@pytest.mark.asyncio) or by anyio (@pytest.mark.anyio). For a synchronous test, use "
        "kafka_bootstrap or kafka_threaded_cluster_factory.",
        pytrace=False,
    )


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


def _require_docker_daemon() -> None:
    """A usage error that names the cause when --kafka=container cannot reach Docker (with
    the Docker client testcontainers itself would use), rather than a client error per test."""
    try:
        from testcontainers.core.docker_client import DockerClient
    except ImportError as e:
        raise pytest.UsageError(
            f"--kafka=container needs the testcontainers package ({e}): pip install testcontainers, "
            "or use --kafka=embedded / --kafka=apache"
        ) from e
    try:
        DockerClient().client.ping()
    except Exception as e:  # docker.errors.DockerException, requests' errors: all mean the same here
        where = (
            f"DOCKER_HOST={os.environ['DOCKER_HOST']}" if os.environ.get("DOCKER_HOST") else "default socket"
        )
        raise pytest.UsageError(
            f"--kafka=container: no Docker daemon reachable ({where}: {e}): start Docker, "
            "or use --kafka=embedded / --kafka=apache"
        ) from e


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
def schema_registry_url(pytestconfig: pytest.Config) -> Iterator[str]:
    """A schema registry's URL for this test (see the module docstring)."""
    given = pytestconfig.getoption("--schema-registry-url")
    if given:
        yield str(given)
        return
    from aiokafka_lite.integrations.schema_registry.embedded import EmbeddedSchemaRegistry

    with EmbeddedSchemaRegistry.in_thread() as registry:
        yield registry.url


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest) -> EmbeddedCluster:
    """A fresh one-broker embedded cluster in the test's event loop, or with
    ``--kafka=apache`` the session's Apache Kafka (typed as the embedded cluster so that
    tests keep their types; at run time it is an ``ApacheCluster``)."""
    if _mode(request.config) == "apache":
        # The handle offers EmbeddedCluster's portable subset and says so when asked for more.
        apache: EmbeddedCluster = request.getfixturevalue("apache_kafka")
        return apache
    _require_embedded(request.config)
    cluster: EmbeddedCluster = request.getfixturevalue(_in_test_loop(request, "kafka_cluster"))
    return cluster


@contextlib.asynccontextmanager
async def _embedded_cluster() -> AsyncIterator[EmbeddedCluster]:
    from aiokafka_lite.broker.cluster import EmbeddedCluster

    async with EmbeddedCluster(brokers=1) as cluster:
        yield cluster


@_pytest_asyncio_fixture
async def _kafka_cluster_on_pytest_asyncio() -> AsyncIterator[EmbeddedCluster]:
    async with _embedded_cluster() as cluster:
        yield cluster


@pytest.fixture
async def _kafka_cluster_on_anyio() -> AsyncIterator[EmbeddedCluster]:
    async with _embedded_cluster() as cluster:
        yield cluster


ClusterFactory = Callable[..., Awaitable["EmbeddedCluster"]]


@pytest.fixture
def kafka_cluster_factory(request: pytest.FixtureRequest) -> ClusterFactory:
    """``await factory(**EmbeddedCluster kwargs)``: started clusters, closed at teardown."""
    if _mode(request.config) != "apache":
        _require_embedded(request.config)
    factory: ClusterFactory = request.getfixturevalue(_in_test_loop(request, "kafka_cluster_factory"))
    return factory


@_pytest_asyncio_fixture
async def _kafka_cluster_factory_on_pytest_asyncio(
    pytestconfig: pytest.Config,
) -> AsyncIterator[ClusterFactory]:
    async with _cluster_factory(pytestconfig) as factory:
        yield factory


@pytest.fixture
async def _kafka_cluster_factory_on_anyio(pytestconfig: pytest.Config) -> AsyncIterator[ClusterFactory]:
    async with _cluster_factory(pytestconfig) as factory:
        yield factory


@contextlib.asynccontextmanager
async def _cluster_factory(pytestconfig: pytest.Config) -> AsyncIterator[ClusterFactory]:
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
