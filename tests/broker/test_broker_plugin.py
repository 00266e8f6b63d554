"""The pytest plugin's fixtures (the plugin is loaded through its pytest11 entry point)."""

from __future__ import annotations

import pytest

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import MetadataRequest, MetadataResponse

pytest_plugins = ["pytester"]


def test_kafka_bootstrap_serves_blocking_clients(kafka_bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10)
    assert [b.id for b in md.brokers.values()] == [1]


async def test_kafka_bootstrap_is_kafka_cluster_when_both_used(
    kafka_cluster: EmbeddedCluster, kafka_bootstrap: str
) -> None:
    assert kafka_bootstrap == kafka_cluster.bootstrap
    kafka_cluster.create_topic("visible", 2)
    async with await RawClient.connect(kafka_bootstrap) as c:
        resp = await c.request(MetadataRequest(topics=None), 12)
        assert isinstance(resp, MetadataResponse)
        assert [t.name for t in resp.topics] == ["visible"]


@pytest.mark.kafka_embedded  # reads the cluster's topic state: embedded-only control API
async def test_factory_builds_custom_shapes(kafka_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    c3 = await kafka_cluster_factory(brokers=3, topics={"a": 6})
    assert len(c3.bootstrap.split(",")) == 3
    assert len(c3.topic("a").partitions) == 6


@pytest.mark.kafka_embedded  # move_leader: embedded-only control API
def test_threaded_factory(kafka_threaded_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    tc = kafka_threaded_cluster_factory(brokers=2, topics={"x": 2})
    assert tc.call(lambda c: c.move_leader("x", 0, 2)) == (2, 1)


def test_external_mode_skips_embedded_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        async def test_needs_control(kafka_cluster):
            pass

        @pytest.mark.kafka_embedded
        def test_marked():
            pass

        def test_bootstrap(kafka_bootstrap):
            assert kafka_bootstrap == "example.invalid:9092"
        """
    )
    result = pytester.runpytest(
        "--kafka-bootstrap=example.invalid:9092",
        "-p",
        "asyncio",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
    )
    result.assert_outcomes(passed=1, skipped=2)
