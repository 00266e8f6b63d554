"""The connection layer and the Admin client on asyncio and on trio (same API, same errors)."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from aiokafka_lite import Admin, NewTopic
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.concurrency import current
from aiokafka_lite.net import Client
from aiokafka_lite.testing.threaded import ThreadedCluster
from aiokafka_lite.wire.messages import MetadataRequest
from anyio_backends.conftest import FAST, UnretrievedErrors, client_tasks_running

pytestmark = pytest.mark.anyio


async def test_backend_is_the_running_library(anyio_backend: str) -> None:
    assert current().name == anyio_backend


async def test_client_requests_and_metadata(anyio_backend: str, threaded_cluster: ThreadedCluster) -> None:
    async with Client(threaded_cluster.bootstrap, **FAST) as client:
        assert client.cluster.brokers
        node = client.least_loaded_node()
        conn = await client.connection(node)
        version = conn.version_for(MetadataRequest.API_KEY)
        # Pipelined requests on one connection, answered in order.
        async with anyio.create_task_group() as tg:
            answers: list[object] = []

            async def one() -> None:
                answers.append(await conn.send(MetadataRequest(topics=None), version))

            for _ in range(20):
                tg.start_soon(one)
        assert len(answers) == 20
        assert all(type(a).__name__ == "MetadataResponse" for a in answers)
        assert client_tasks_running()  # the metadata upkeep (and on trio the connection's I/O)
    assert client.closed
    assert conn.closed
    assert client_tasks_running() == []


async def test_no_broker_is_a_typed_error(anyio_backend: str) -> None:
    client = Client("127.0.0.1:1", request_timeout_ms=500, **FAST)
    with pytest.raises(E.KafkaError):
        await client.start()
    await client.close()


async def test_admin_topics_round_trip(anyio_backend: str, threaded_cluster: ThreadedCluster) -> None:
    name = f"adm-{anyio_backend}"
    async with Admin(threaded_cluster.bootstrap, **FAST) as admin:
        created = await admin.create_topics([NewTopic(name, partitions=4, replication_factor=1)])
        assert created.ok
        assert name in await admin.list_topics()
        again = await admin.create_topics([NewTopic(name, partitions=4, replication_factor=1)])
        assert isinstance(again.errors[name], E.TopicAlreadyExistsError)
        described = (await admin.describe_topics([name])).raise_errors()
        assert len(described[name].partitions) == 4
        (await admin.delete_topics([name])).raise_errors()
        assert name not in await admin.list_topics()


async def test_close_with_requests_in_flight(anyio_backend: str, threaded_cluster: ThreadedCluster) -> None:
    """Closing while requests wait for answers fails them with ClosedError (or a
    connection error) and leaves no task of the client running."""
    unretrieved = UnretrievedErrors()
    errors: list[BaseException] = []
    answered = 0

    async def one(conn: object, version: int) -> None:
        nonlocal answered
        try:
            await conn.send(MetadataRequest(topics=None), version)  # type: ignore[attr-defined]
            answered += 1
        except E.KafkaError as exc:
            errors.append(exc)

    # The callers' task group encloses the client's lifetime (structured on trio).
    async with anyio.create_task_group() as tg:
        client = Client(threaded_cluster.bootstrap, **FAST)
        await client.start()
        conn = await client.connection(client.least_loaded_node())
        version = conn.version_for(MetadataRequest.API_KEY)
        for _ in range(50):
            tg.start_soon(one, conn, version)
        await anyio.lowlevel.checkpoint()
        await client.close()
    assert answered + len(errors) == 50
    assert errors  # some were still waiting for their answer
    assert client_tasks_running() == []
    assert unretrieved.check() == []
    assert conn.closed
    assert all(isinstance(e, E.ClosedError | E.KafkaConnectionError) for e in errors)
    assert client._owner is None


async def test_caller_cancelled_while_waiting_keeps_stream_in_sync(
    anyio_backend: str, threaded_cluster: ThreadedCluster
) -> None:
    async with Client(threaded_cluster.bootstrap, **FAST) as client:
        conn = await client.connection(client.least_loaded_node())
        version = conn.version_for(MetadataRequest.API_KEY)
        with anyio.CancelScope() as scope:
            scope.cancel()
            await conn.send(MetadataRequest(topics=None), version)
        # The connection still answers the next request correctly.
        resp = await conn.send(MetadataRequest(topics=None), version)
        assert type(resp).__name__ == "MetadataResponse"
        assert conn.ready


async def test_close_from_another_task(anyio_backend: str, threaded_cluster: ThreadedCluster) -> None:
    """asyncio: any task may close a client. trio: its task group lives in the task that
    started it, so another task gets IllegalStateError and the client stays usable."""
    client = Client(threaded_cluster.bootstrap, **FAST)
    await client.start()
    refused: list[E.IllegalStateError] = []

    async def closer() -> None:
        try:
            await client.close()
        except E.IllegalStateError as exc:
            refused.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(closer)
    if anyio_backend == "trio":
        assert refused and "task that started it" in str(refused[0])
        assert not client.closed
        await client.refresh_metadata()  # still works
        await client.close()
    else:
        assert not refused
    assert client.closed
    assert client_tasks_running() == []
