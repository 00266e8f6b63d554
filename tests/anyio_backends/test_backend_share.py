"""The ShareConsumer on asyncio and on trio: two members consume a topic once between
them, a released record is delivered again, commit answers per partition, close leaves
no task behind, and a crashed background task surfaces. (The async-contract matrix, on
both backends and both brokers, is tests/share/test_share_contract.py.)"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from aiokafka_lite.consume.share import AcknowledgeType, ShareConsumer, ShareRecord
from aiokafka_lite.consume.share.membership import ShareMembership
from aiokafka_lite.consume.share.session import ShareSession
from aiokafka_lite.core.errors import IllegalStateError, KafkaError
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.testing.threaded import ThreadedCluster
from anyio_backends.conftest import FAST, UnretrievedErrors, client_tasks_running
from anyio_backends.testlib import prepare_share_topic

pytestmark = pytest.mark.anyio


async def test_two_share_members_consume_every_record_once(
    anyio_backend: str, threaded_cluster: ThreadedCluster
) -> None:
    bootstrap = threaded_cluster.bootstrap
    topic, group = f"share-two-{anyio_backend}", f"share-g-two-{anyio_backend}"
    sent = await prepare_share_topic(bootstrap, topic, group, 3, 300)
    seen: list[bytes] = []
    unretrieved = UnretrievedErrors()

    iterating = anyio.CancelScope()

    async def member(via_iterator: bool) -> None:
        async with ShareConsumer(bootstrap, group_id=group, topics=topic, **FAST) as consumer:
            if via_iterator:
                with iterating:  # cancelled once the other member saw the last record
                    async for record in consumer:
                        seen.append(record.value)
                        if len(seen) >= len(sent):
                            break
            else:
                while len(seen) < len(sent):
                    seen.extend(r.value for r in await consumer.poll(timeout_ms=200))
            await consumer.commit()  # implicit mode: the last records are accepted
            iterating.cancel()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(member, True)
            tg.start_soon(member, False)
    assert sorted(seen) == sorted(sent)  # every record once across the two members
    assert client_tasks_running() == []
    assert unretrieved.check() == []

    # Everything was accepted: a later member gets nothing.
    async with ShareConsumer(bootstrap, group_id=group, topics=topic, **FAST) as late:
        assert await late.poll(timeout_ms=1500) == []
    assert client_tasks_running() == []


async def _poll_until(consumer: ShareConsumer, want: int) -> list[ShareRecord]:
    out: list[ShareRecord] = []
    with anyio.fail_after(30):
        while len(out) < want:
            out += await consumer.poll(timeout_ms=300)
    return out


async def test_released_record_is_delivered_again(
    anyio_backend: str, threaded_cluster: ThreadedCluster
) -> None:
    bootstrap = threaded_cluster.bootstrap
    topic, group = f"share-rel-{anyio_backend}", f"share-g-rel-{anyio_backend}"
    await prepare_share_topic(bootstrap, topic, group, 1, 10)
    unretrieved = UnretrievedErrors()
    async with ShareConsumer(
        bootstrap, group_id=group, topics=topic, acknowledgement_mode="explicit", **FAST
    ) as consumer:
        first = await _poll_until(consumer, 10)
        assert [(r.offset, r.delivery_count) for r in first] == [(i, 1) for i in range(10)]
        for r in first:
            consumer.acknowledge(r, AcknowledgeType.RELEASE if r.offset in (2, 7) else AcknowledgeType.ACCEPT)
        assert await consumer.commit() == {TP(topic, 0): None}
        again = await _poll_until(consumer, 2)
        assert [(r.offset, r.delivery_count) for r in again] == [(2, 2), (7, 2)]
        consumer.acknowledge(again[0])
        # again[1] left undecided: close releases it.
    assert consumer.closed
    assert client_tasks_running() == []
    async with ShareConsumer(
        bootstrap, group_id=group, topics=topic, acknowledgement_mode="explicit", **FAST
    ) as later:
        third = await _poll_until(later, 1)
        assert [(r.offset, r.delivery_count) for r in third] == [(7, 3)]
        later.acknowledge(third[0])
        assert await later.commit() == {TP(topic, 0): None}
    assert client_tasks_running() == []
    assert unretrieved.check() == []


async def test_close_while_polling_leaves_no_task(
    anyio_backend: str, threaded_cluster: ThreadedCluster
) -> None:
    """A poll waiting for records in another task ends when the consumer closes (a
    cancelled caller's scope does not leak the consumer's tasks either)."""
    bootstrap = threaded_cluster.bootstrap
    topic, group = f"share-idle-{anyio_backend}", f"share-g-idle-{anyio_backend}"
    await prepare_share_topic(bootstrap, topic, group, 2, 0)
    results: list[list[ShareRecord]] = []
    consumer = ShareConsumer(bootstrap, group_id=group, topics=topic, **FAST)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            await consumer.start()  # trio: its task group nests in this one, closed inside it

            async def waiting() -> None:
                results.append(await consumer.poll())

            tg.start_soon(waiting)
            with anyio.move_on_after(0.3):  # a cancelled poll of the host task
                await consumer.poll()
            await consumer.close()
    assert results == [[]]
    assert client_tasks_running() == []


async def test_close_from_another_task(anyio_backend: str, threaded_cluster: ThreadedCluster) -> None:
    """asyncio: any task may close the consumer. trio: its client's task group lives in the
    task that started it, so another task gets IllegalStateError and nothing is closed."""
    bootstrap = threaded_cluster.bootstrap
    topic, group = f"share-host-{anyio_backend}", f"share-g-host-{anyio_backend}"
    sent = await prepare_share_topic(bootstrap, topic, group, 1, 5)
    consumer = ShareConsumer(bootstrap, group_id=group, topics=topic, **FAST)
    await consumer.start()
    refused: list[IllegalStateError] = []

    async def closer() -> None:
        try:
            await consumer.close()
        except IllegalStateError as exc:
            refused.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(closer)
    if anyio_backend == "trio":
        assert refused and "task that started it" in str(refused[0])
        assert not consumer.closed
        got = await _poll_until(consumer, len(sent))  # still consuming
        assert sorted(r.value for r in got) == sorted(sent)
        await consumer.close()
    else:
        assert not refused
    assert consumer.closed
    assert client_tasks_running() == []


def _broken_heartbeat(self: ShareMembership, now: float) -> Any:
    raise RuntimeError("heartbeat bug")


def _broken_fetch(self: ShareSession, *args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("fetch bug")


@pytest.mark.parametrize(
    ("target", "attribute", "broken", "what"),
    [
        (
            ShareMembership,
            "heartbeat_request",
            _broken_heartbeat,
            "heartbeat task crashed: RuntimeError('heartbeat bug')",
        ),
        (ShareSession, "fetch_request", _broken_fetch, "crashed: RuntimeError('fetch bug')"),
    ],
    ids=["heartbeat", "session"],
)
async def test_a_crashed_background_task_is_raised_by_every_poll_and_shown_in_health(
    anyio_backend: str,
    threaded_cluster: ThreadedCluster,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    target: type,
    attribute: str,
    broken: Any,
    what: str,
) -> None:
    """A bug in a background task (not a Kafka error) must not leave poll() returning []
    forever: every poll and iteration step raises it, health() reports it, it is logged
    once, and close still works."""
    bootstrap = threaded_cluster.bootstrap
    topic, group = f"share-crash-{attribute}-{anyio_backend}", f"share-g-crash-{attribute}-{anyio_backend}"
    await prepare_share_topic(bootstrap, topic, group, 1, 5)
    monkeypatch.setattr(target, attribute, broken)
    caplog.set_level(logging.ERROR, logger="aiokafka_lite.consume.share.share_consumer")
    async with ShareConsumer(bootstrap, group_id=group, topics=topic, **FAST) as consumer:
        crash: KafkaError | None = None
        with anyio.fail_after(30):
            while crash is None:
                try:
                    assert await consumer.poll(timeout_ms=200) == []
                except KafkaError as exc:
                    crash = exc
        assert "share consumer" in str(crash) and what in str(crash)
        assert isinstance(crash.__cause__, RuntimeError)
        for _ in range(3):  # every call, not once
            with pytest.raises(KafkaError, match="crashed"):
                await consumer.poll(timeout_ms=0)
            with pytest.raises(KafkaError, match="crashed"):
                await consumer.__anext__()
        health = consumer.health()
        assert not health.ready
        assert any(what in reason for reason in health.reasons), health.reasons
        assert health.last_error is not None and what in health.last_error.message
    assert consumer.closed
    assert client_tasks_running() == []
    logged = [r for r in caplog.records if "crashed" in r.getMessage()]
    assert len(logged) == 1, [r.getMessage() for r in logged]
    assert logged[0].exc_info is not None and isinstance(logged[0].exc_info[1], RuntimeError)
