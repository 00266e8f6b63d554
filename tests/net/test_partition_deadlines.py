"""Every call that takes a timeout returns or raises within it under a silent partition.

The clients are started and warmed up (group joined, offsets committed, connections to
every broker role open) while the network is fine; then the proxy in front of the one
broker drops everything without a reset or a close (``kafka_blackhole``), and each call
runs with a short timeout. It must end, with a result or a ``KafkaError``, within its
timeout plus ``SLACK_S``: a contract bound (the call kept its deadline), not a
performance measurement. ``request_timeout_ms`` stays at its default (30 s) on the
consumer and the admin client, so an inner wait bounded by it instead of by the
caller's deadline shows up as an overrun.

Runs on the embedded broker and on Apache Kafka (``--kafka=apache``); every call on
asyncio, a few also on trio (each test drives its own event loop with ``anyio.run``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

import anyio
import pytest

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.admin import Admin, NewTopic
from aiokafka_lite.core.errors import CommitFailedError, KafkaError, KafkaTimeoutError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.testing.proxy import ProxiedKafka

TIMEOUT_MS = 3000
SLACK_S = 5.0
# A call still running this long after its deadline is reported as hung (and cancelled).
HANG_S = 60.0
SESSION_TIMEOUT_MS = 6000
_names = itertools.count()


@dataclass
class Clients:
    producer: Producer
    consumer: Consumer
    admin: Admin
    topic: str
    group: str

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, 0)


async def _start_clients(kafka: ProxiedKafka) -> Clients:
    """Clients that have done everything once while the network is fine."""
    n = next(_names)
    topic, group = f"partitioned-{n}", f"partitioned-group-{n}"
    kafka.create_topic(topic, 1)
    producer = Producer(
        kafka.bootstrap,
        delivery_timeout_ms=TIMEOUT_MS,
        request_timeout_ms=TIMEOUT_MS - 1000,
        max_block_ms=TIMEOUT_MS,
        linger_ms=0,
    )
    consumer = Consumer(
        kafka.bootstrap,
        group_id=group,
        topics=topic,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        default_api_timeout_ms=TIMEOUT_MS,
        # The broker's minimum: heartbeats then time out after 6 s of partition, and the
        # member goes looking for its coordinator (a lookup other calls then share).
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=1000,
    )
    admin = Admin(kafka.bootstrap, default_timeout_ms=TIMEOUT_MS)
    # On trio each client's task group is entered at start() and left at close(), so
    # they close in the reverse order; the consumer, whose close() is a tested call,
    # starts last.
    await producer.start()
    await admin.start()
    await consumer.start()
    for i in range(3):
        await producer.send(topic, f"before-{i}".encode())
    received = 0
    with anyio.fail_after(60):
        while received < 3:
            batch = await consumer.getmany(timeout_ms=1000)
            received += sum(len(records) for records in batch.values())
    await consumer.commit()
    assert await consumer.committed(TopicPartition(topic, 0)) == 3
    await admin.describe_groups([group])
    await admin.describe_cluster()
    return Clients(producer, consumer, admin, topic, group)


async def _close_clients(clients: Clients) -> None:
    # No cancel scope around close(): on trio it leaves the task group that start()
    # entered, which must not happen inside a scope opened after it.
    await clients.consumer.close()
    await clients.admin.close()
    await clients.producer.close(timeout=1, flush=False)


async def _flush_one(c: Clients) -> None:
    await c.producer.enqueue(c.topic, b"during-flush")
    await c.producer.flush(timeout=TIMEOUT_MS / 1000)


async def _position_after_seek(c: Clients) -> int:
    c.consumer.seek_to_end(c.tp)  # the position must be looked up again: through the partition
    return await c.consumer.position(c.tp, timeout_ms=TIMEOUT_MS)


async def _close_producer_with_pending(c: Clients) -> None:
    await c.producer.enqueue(c.topic, b"pending-at-close")
    await c.producer.close(timeout=TIMEOUT_MS / 1000)


_S = TIMEOUT_MS / 1000
Call = Callable[[Clients], Awaitable[object]]
# name -> (the call, the timeout it was given in seconds)
CALLS: dict[str, tuple[Call, float]] = {
    "consumer.commit()": (lambda c: c.consumer.commit(), _S),
    "consumer.commit(offsets)": (lambda c: c.consumer.commit({c.tp: 1}), _S),
    "consumer.committed": (lambda c: c.consumer.committed(c.tp), _S),
    "consumer.position after seek_to_end": (_position_after_seek, _S),
    "consumer.end_offsets": (lambda c: c.consumer.end_offsets([c.tp], timeout_ms=TIMEOUT_MS), _S),
    "consumer.beginning_offsets": (lambda c: c.consumer.beginning_offsets([c.tp], timeout_ms=TIMEOUT_MS), _S),
    "consumer.offsets_for_times": (
        lambda c: c.consumer.offsets_for_times({c.tp: 0}, timeout_ms=TIMEOUT_MS),
        _S,
    ),
    "consumer.partitions_for_topic": (lambda c: c.consumer.partitions_for_topic("not-yet-known"), _S),
    "consumer.getmany": (lambda c: c.consumer.getmany(timeout_ms=TIMEOUT_MS), _S),
    "consumer.close": (lambda c: c.consumer.close(), _S),
    "producer.send": (lambda c: c.producer.send(c.topic, b"during"), _S),
    # As in Java: up to max_block_ms for the new topic's metadata, then the delivery timeout.
    "producer.send to a new topic": (lambda c: c.producer.send(f"{c.topic}-new", b"during"), 2 * _S),
    "producer.flush": (_flush_one, _S),
    "producer.close with a pending record": (_close_producer_with_pending, _S),
    "admin.create_topics": (
        lambda c: c.admin.create_topics([NewTopic(f"{c.topic}-created", 1)], timeout_ms=TIMEOUT_MS),
        _S,
    ),
    "admin.describe_topics": (lambda c: c.admin.describe_topics([c.topic], timeout_ms=TIMEOUT_MS), _S),
    "admin.describe_cluster": (lambda c: c.admin.describe_cluster(timeout_ms=TIMEOUT_MS), _S),
    "admin.describe_groups": (lambda c: c.admin.describe_groups([c.group], timeout_ms=TIMEOUT_MS), _S),
    "admin.list_group_offsets": (lambda c: c.admin.list_group_offsets(c.group, timeout_ms=TIMEOUT_MS), _S),
    "admin.list_offsets": (lambda c: c.admin.list_offsets({c.tp: "latest"}, timeout_ms=TIMEOUT_MS), _S),
    "admin.list_topics": (lambda c: c.admin.list_topics(timeout_ms=TIMEOUT_MS), _S),
    "admin.close": (lambda c: c.admin.close(), _S),
}
# The calls also run on trio: one per client and way of waiting.
TRIO_CALLS = (
    "consumer.commit()",
    "consumer.committed",
    "consumer.end_offsets",
    "consumer.getmany",
    "consumer.close",
    "producer.send",
    "producer.flush",
    "admin.describe_cluster",
)


@dataclass
class Outcome:
    name: str
    timeout_s: float
    elapsed_s: float
    result: str

    @property
    def kept_deadline(self) -> bool:
        return self.elapsed_s <= self.timeout_s + SLACK_S

    def __str__(self) -> str:
        return f"{self.name}: {self.elapsed_s:.1f} s for a {self.timeout_s:.0f} s timeout ({self.result})"


async def _timed(name: str, call: Call, timeout_s: float, clients: Clients) -> Outcome:
    start = time.monotonic()

    async def attempt() -> str:
        try:
            value = await call(clients)
        except KafkaError as e:
            return f"raised {type(e).__name__}: {e}"
        return f"returned {type(value).__name__}"

    result = "hung"
    if name.endswith("close"):
        # No hang guard: on trio close() leaves the client's task group, which no cancel
        # scope opened after start() may enclose.
        result = await attempt()
    else:
        with anyio.move_on_after(timeout_s + HANG_S):
            result = await attempt()
    return Outcome(name, timeout_s, time.monotonic() - start, result)


async def _coordinator_lost(consumer: Consumer) -> None:
    """Waits until the member has noticed that its coordinator is unreachable (its
    heartbeat timed out), which starts a coordinator lookup in the background."""
    coordinator = consumer._coordinator
    assert coordinator is not None
    with anyio.fail_after(SESSION_TIMEOUT_MS / 1000 * 5):
        while coordinator.membership.coordinator is not None:  # noqa: ASYNC110 - no event for it
            await anyio.sleep(0.05)


async def _under_partition(
    kafka: ProxiedKafka, names: list[str], *, after_coordinator_lost: bool = False
) -> list[Outcome]:
    clients = await _start_clients(kafka)
    try:
        kafka.proxy.blackhole()
        if after_coordinator_lost:
            await _coordinator_lost(clients.consumer)
        outcomes: list[Outcome] = []

        async def run(name: str) -> None:
            call, timeout_s = CALLS[name]
            outcomes.append(await _timed(name, call, timeout_s, clients))
            if not name.endswith("close"):
                # Again, now that the first call has given up on its connections: this
                # one reconnects (the proxy accepts, the broker never answers), looks up
                # the coordinator again and refreshes metadata, under the partition.
                outcomes.append(await _timed(f"{name}, called again", call, timeout_s, clients))

        if len(names) == 1:
            await run(names[0])
        else:
            async with anyio.create_task_group() as tg:
                for name in names:
                    tg.start_soon(run, name)
        return outcomes
    finally:
        kafka.proxy.restore()
        await _close_clients(clients)


_PARAMS = [pytest.param(name, "asyncio", id=f"{name}-asyncio") for name in CALLS] + [
    pytest.param(name, "trio", id=f"{name}-trio") for name in TRIO_CALLS
]


@pytest.mark.parametrize(("name", "backend"), _PARAMS)
def test_call_keeps_its_deadline_under_a_partition(
    kafka_blackhole: ProxiedKafka, name: str, backend: str
) -> None:
    outcomes = anyio.run(_under_partition, kafka_blackhole, [name], backend=backend)
    late = [str(o) for o in outcomes if not o.kept_deadline]
    assert not late, "\n".join(late)


GROUP_CALLS = [n for n in CALLS if n.startswith("consumer.") or "group" in n]


@pytest.mark.parametrize(
    ("name", "backend"),
    [pytest.param(n, "asyncio", id=f"{n}-asyncio") for n in GROUP_CALLS]
    + [pytest.param(n, "trio", id=f"{n}-trio") for n in ("consumer.commit()", "consumer.committed")],
)
def test_group_call_keeps_its_deadline_once_the_member_lost_its_coordinator(
    kafka_blackhole: ProxiedKafka, name: str, backend: str
) -> None:
    """The partition has lasted long enough for the member's heartbeat to time out: its
    background task is looking the coordinator up again, and the call finds that lookup
    running (issue 24: commit() with a 20 s timeout raised after 42.9 s)."""
    outcomes = anyio.run(
        partial(_under_partition, kafka_blackhole, [name], after_coordinator_lost=True), backend=backend
    )
    late = [str(o) for o in outcomes if not o.kept_deadline]
    assert not late, "\n".join(late)


# asyncio only for now: on trio this run ends in a TrioInternalError (calls made from
# child tasks of a task group on clients started by the parent), not yet understood.
@pytest.mark.parametrize("backend", ["asyncio"])
def test_concurrent_calls_sharing_lookups_keep_their_deadlines(
    kafka_blackhole: ProxiedKafka, backend: str
) -> None:
    """All calls at once on the same clients: later callers find a coordinator lookup,
    a metadata refresh or a connection attempt already running and wait on it; each must
    still end by its own deadline."""
    outcomes = anyio.run(
        _under_partition, kafka_blackhole, [n for n in CALLS if not n.endswith("close")], backend=backend
    )
    late = [str(o) for o in outcomes if not o.kept_deadline]
    assert not late, "\n".join(late)


async def _work_again_after_restore(kafka: ProxiedKafka) -> None:
    clients = await _start_clients(kafka)
    try:
        kafka.proxy.blackhole()
        for name in ("producer.send", "consumer.commit()", "consumer.committed"):
            call, timeout_s = CALLS[name]
            outcome = await _timed(name, call, timeout_s, clients)
            assert outcome.kept_deadline, str(outcome)
        kafka.proxy.restore()
        # The network is back: a send and a commit succeed (each call retries within its
        # own timeout; connections broken by the partition are replaced).
        with anyio.fail_after(60):
            await _eventually(lambda: clients.producer.send(clients.topic, b"after"))
            # The partition outlasted the session, so the broker evicted the member: the
            # first commit may be refused (CommitFailedError, as in Java) until polling
            # has rejoined the group.
            await _eventually(lambda: _rejoin_and_commit(clients.consumer, {clients.tp: 4}))
            assert await _eventually(lambda: clients.consumer.committed(clients.tp)) == 4
            await _eventually(lambda: clients.admin.describe_cluster(timeout_ms=TIMEOUT_MS))
    finally:
        await _close_clients(clients)


async def _rejoin_and_commit(consumer: Consumer, offsets: dict[TopicPartition, int]) -> None:
    try:
        await consumer.commit(offsets)
    except CommitFailedError:
        await consumer.getmany(timeout_ms=500)  # drives the rejoin
        raise KafkaTimeoutError("member not rejoined yet") from None


async def _eventually(call: Callable[[], Awaitable[object]]) -> object:
    """The call's result once it succeeds; a call timing out because a connection still
    carried the partition's stale requests is retried (the caller's fail_after bounds it)."""
    while True:
        try:
            return await call()
        except KafkaError as e:
            if not e.retriable:
                raise
            await anyio.sleep(0.1)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_clients_work_again_after_the_partition(kafka_blackhole: ProxiedKafka, backend: str) -> None:
    anyio.run(partial(_work_again_after_restore, kafka_blackhole), backend=backend)
