"""Topics the consumer cannot wait for: an invalid name or a topic it may not access
raises from getmany/``async for``/getone (the Java consumer raises InvalidTopicException
and TopicAuthorizationException from poll); a topic that does not exist is waited for,
with a warning. Runs on the embedded broker and, with ``--kafka=apache``, on Apache Kafka.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume import Consumer
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce import Producer
from aiokafka_lite.wire.messages import MetadataRequest

Factory = Callable[..., Awaitable[EmbeddedCluster]]
INVALID_NAMES = ["bad name!", "x" * 250, "..", "topic/with/slashes"]


async def _first_error(consumer: Consumer, how: str) -> BaseException:
    """What one poll of ``how`` raises; bounded, so that waiting forever fails the test."""
    with pytest.raises(E.KafkaError) as info:
        async with asyncio.timeout(30):
            if how == "getmany":
                while True:  # before the fix: {} forever
                    await consumer.getmany(timeout_ms=1000)
            elif how == "getone":
                await consumer.getone()
            else:
                async for _ in consumer:
                    pass
    return info.value


@pytest.mark.parametrize("group_id", [None, "invalid-topic-group"])
@pytest.mark.parametrize("how", ["getmany", "async for", "getone"])
@pytest.mark.parametrize("name", INVALID_NAMES)
async def test_subscribing_to_an_invalid_topic_name_raises(
    kafka_bootstrap: str, name: str, how: str, group_id: str | None
) -> None:
    async with Consumer(kafka_bootstrap, topics=name, group_id=group_id) as consumer:
        err = await _first_error(consumer, how)
        assert isinstance(err, E.InvalidTopicError)
        assert f"topic {name!r}: not a valid topic name" in str(err)
        # Every poll raises it again until the subscription changes (as Java's poll).
        with pytest.raises(E.InvalidTopicError):
            await consumer.getmany(timeout_ms=1000)


async def test_invalid_name_among_valid_topics_and_resubscribing(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("good", 1)
    async with Producer(kafka_cluster.bootstrap) as producer:
        await producer.send("good", b"v", partition=0)
    async with Consumer(
        kafka_cluster.bootstrap, topics=["good", "bad name!"], auto_offset_reset="earliest"
    ) as c:
        err = await _first_error(c, "getmany")
        assert isinstance(err, E.InvalidTopicError)
        assert "topic 'bad name!'" in str(err) and "'good'" not in str(err)
        c.subscribe("good")
        records: list[Any] = []
        async with asyncio.timeout(30):
            while not records:
                records = [r for rs in (await c.getmany(timeout_ms=1000)).values() for r in rs]
        assert [(r.topic, r.value) for r in records] == [("good", b"v")]


async def test_manual_assignment_of_an_invalid_topic_raises(kafka_bootstrap: str) -> None:
    async with Consumer(kafka_bootstrap) as consumer:
        consumer.assign([TopicPartition("bad name!", 0)])
        err = await _first_error(consumer, "getmany")
        assert isinstance(err, E.InvalidTopicError)
        assert "'bad name!'" in str(err)


@pytest.mark.parametrize("name", INVALID_NAMES[:2])
async def test_producing_to_an_invalid_topic_name_fails_fast(kafka_bootstrap: str, name: str) -> None:
    async with Producer(kafka_bootstrap, max_block_ms=60000) as producer:
        with pytest.raises(E.InvalidTopicError, match="not a valid topic name"):
            async with asyncio.timeout(30):  # well before max_block_ms
                await producer.send(name, b"x")


async def test_missing_topic_is_waited_for_with_a_warning(
    kafka_cluster_factory: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    # Without auto-creation an unknown topic is not an error for a consumer (Java keeps
    # polling and logs UNKNOWN_TOPIC_OR_PARTITION): it may be created later.
    cluster = await kafka_cluster_factory(auto_create_topics=False)
    caplog.set_level(logging.WARNING, logger="aiokafka_lite.consume.consumer")
    async with Consumer(cluster.bootstrap, topics="later", auto_offset_reset="earliest") as consumer:
        for _ in range(3):
            assert await consumer.getmany(timeout_ms=200) == {}
        warnings = [r.getMessage() for r in caplog.records if "'later'" in r.getMessage()]
        assert len(warnings) == 1  # said once, not at every metadata refresh
        assert "do not exist (UNKNOWN_TOPIC_OR_PARTITION)" in warnings[0]
        cluster.create_topic("later", 1)
        async with Producer(cluster.bootstrap) as producer:
            await producer.send("later", b"finally", partition=0)
        got: list[Any] = []
        async with asyncio.timeout(30):
            while not got:
                got = [r.value for rs in (await consumer.getmany(timeout_ms=1000)).values() for r in rs]
        assert got == [b"finally"]


@pytest.mark.kafka_embedded
@pytest.mark.parametrize("group_id", [None, "denied-group"])
async def test_topic_authorization_failure_raises(
    kafka_cluster: EmbeddedCluster, group_id: str | None
) -> None:
    kafka_cluster.create_topic("secret", 1)
    # Every metadata answer now says TOPIC_AUTHORIZATION_FAILED for the topics it names.
    kafka_cluster.inject_error(MetadataRequest, E.TopicAuthorizationFailedError.code, count=None)
    async with Consumer(kafka_cluster.bootstrap, topics="secret", group_id=group_id) as consumer:
        err = await _first_error(consumer, "getmany")
    assert isinstance(err, E.TopicAuthorizationFailedError)
    assert "topic 'secret': not authorized" in str(err)
