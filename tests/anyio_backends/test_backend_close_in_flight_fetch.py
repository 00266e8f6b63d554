"""Consumer.close() abandons the fetch the broker is holding, on asyncio and on trio.

A long-poll fetch (here ``fetch_max_wait_ms`` of 10 minutes on a partition with nothing
new) occupies its connection: Kafka answers a connection's requests in order, so any
request close() sent on it (the fetch-session close) would be answered only after the
held fetch. close() must put nothing behind it, and abandoning it loses nothing: records
fetched but not returned are not delivered, commits cover only what was returned, and
the next member of the group starts right after the last returned record.
"""

from __future__ import annotations

import threading

import anyio
import anyio.to_thread
import pytest

from aiokafka_lite import Admin, Consumer, Producer
from aiokafka_lite.broker.faults import ObservedRequest
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.testing.threaded import ThreadedCluster
from aiokafka_lite.wire.messages import FetchRequest
from anyio_backends.conftest import FAST
from anyio_backends.testlib import create_topic

pytestmark = pytest.mark.anyio

HELD_MS = 600_000  # far beyond the test's own deadline: close must not wait for it


class HeldFetchWatch:
    """Broker side: sets ``held`` once a fetch at ``offset`` of ``tp`` arrives (the broker
    then holds it, nothing being there to return)."""

    def __init__(self, tp: TP, offset: int) -> None:
        self.tp, self.offset = tp, offset
        self.held = threading.Event()

    def __call__(self, obs: ObservedRequest) -> None:
        req = obs.request
        if not isinstance(req, FetchRequest):
            return
        for topic in req.topics:
            if topic.topic not in ("", self.tp.topic):  # "": Fetch v13+ names topics by id
                continue
            for part in topic.partitions:
                if part.partition == self.tp.partition and part.fetch_offset >= self.offset:
                    self.held.set()


class WrittenRequests:
    """Client side: the API keys of the requests written to each broker."""

    def __init__(self) -> None:
        self.written: list[tuple[int, int]] = []

    def on_request_written(
        self, node_id: int, api_key: int, api_version: int, bytes_written: int, error: BaseException | None
    ) -> None:
        self.written.append((node_id, api_key))


async def test_close_abandons_held_fetch_and_loses_nothing(
    anyio_backend: str, threaded_cluster: ThreadedCluster
) -> None:
    bootstrap = threaded_cluster.bootstrap
    topic = f"close-held-{anyio_backend}"
    group = f"close-held-{anyio_backend}"
    ends = (5, 20)
    async with Admin(bootstrap, **FAST) as admin:
        await create_topic(admin, topic, 2)
    async with Producer(bootstrap, **FAST) as producer:
        for partition, count in enumerate(ends):
            for i in range(count):
                await producer.enqueue(topic, b"%d" % i, partition=partition)
    p0, p1 = TP(topic, 0), TP(topic, 1)
    watch = HeldFetchWatch(p0, ends[0])
    threaded_cluster.call(lambda c: c.observe(watch))
    requests = WrittenRequests()
    try:
        with anyio.fail_after(60):
            consumer = Consumer(
                bootstrap,
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                fetch_max_wait_ms=HELD_MS,
                **FAST,
            )
            await consumer.start()
            consumer.assign([p0, p1])
            # Finds the group coordinator now: FindCoordinator travels on the fetch
            # connection, where a held fetch would delay the commit below.
            assert await consumer.committed(p0) is None
            returned: dict[TP, list[int]] = {p0: [], p1: []}
            # 3 records of p1 (the rest stays fetched but not returned), then all of p0:
            # its next fetch, at its end, is held by the broker. (In this order: a fetch
            # held before p1's data arrived would hold p1 back too.)
            while len(returned[p1]) < 3:
                batch = await consumer.getmany(p1, timeout_ms=1000, max_records=3 - len(returned[p1]))
                returned[p1] += [r.offset for r in batch.get(p1, [])]
            while len(returned[p0]) < ends[0]:
                batch = await consumer.getmany(p0, timeout_ms=1000)
                returned[p0] += [r.offset for r in batch.get(p0, [])]
            await consumer.commit()
            assert await anyio.to_thread.run_sync(watch.held.wait, 50.0)
            consumer.client.add_hooks(requests)
            await consumer.close()
    finally:
        threaded_cluster.call(lambda c: c.unobserve(watch))
    assert returned == {p0: list(range(ends[0])), p1: [0, 1, 2]}
    # Nothing was queued behind the held fetch: any fetch written by close() would have
    # been answered only when the broker released the held one.
    assert [w for w in requests.written if w[1] == FetchRequest.API_KEY] == []

    with anyio.fail_after(60):
        async with Consumer(bootstrap, group_id=group, enable_auto_commit=False, **FAST) as again:
            assert await again.committed(p0) == ends[0]
            assert await again.committed(p1) == 3
            again.assign([p1])
            rest: list[int] = []
            while len(rest) < ends[1] - 3:
                batch = await again.getmany(timeout_ms=1000)
                rest += [r.offset for r in batch.get(p1, [])]
    assert rest == list(range(3, ends[1]))
