"""Helpers for the mirror tests: a source and a target cluster on either broker
(``--kafka``), producing test data, reading a topic back at an isolation level."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import pytest

from aiokafka_lite import Admin, Consumer, NewTopic, Producer, Record, TopicPartition
from aiokafka_lite.admin import OffsetSpec
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.broker.state import BrokerConfig

ClusterFactory = Callable[..., Awaitable[EmbeddedCluster]]

# Apache Kafka refuses sessions under group.min.session.timeout.ms (6 s by default); the
# embedded clusters here lower it so that a crashed instance's partitions move quickly.
APACHE_MIN_SESSION_MS = 6000
EMBEDDED_SESSION_MS = 1500

# Fast group and metadata timers for every mirror in these tests.
FAST_SOURCE = {"heartbeat_interval_ms": 200}


async def two_clusters(request: pytest.FixtureRequest, factory: ClusterFactory) -> tuple[Any, Any]:
    """``(source, target)`` (for the ``clusters`` fixture). Embedded: two fresh clusters.
    Apache Kafka: the session's node as the source and a fresh one-node cluster as the
    target."""
    if request.getfixturevalue("kafka_mode") == "apache":
        source = request.getfixturevalue("apache_kafka")
        target = await factory()
        return source, target
    config = BrokerConfig(extra={"group.min.session.timeout.ms": "100"})
    return await factory(config=config), await factory(config=config)


def session_ms(cluster: object) -> int:
    return EMBEDDED_SESSION_MS if isinstance(cluster, EmbeddedCluster) else APACHE_MIN_SESSION_MS


async def create_topics(
    bootstrap: str, topics: dict[str, int], configs: dict[str, dict[str, str]] | None = None
) -> None:
    async with Admin(bootstrap) as admin:
        results = await admin.create_topics(
            [NewTopic(name, n, -1, (configs or {}).get(name, {})) for name, n in topics.items()]
        )
        results.raise_errors()


def record_value(topic: str, partition: int, i: int) -> bytes:
    return f"{topic}/{partition}/{i}".encode()


async def produce(
    bootstrap: str, topic: str, partitions: int, per_partition: int, *, start: int = 0, **options: Any
) -> None:
    """``per_partition`` records in each partition, numbered from ``start``: key ``k<i>``,
    value ``topic/partition/i``, a header, and a timestamp in the past (so that a copy
    that stamped its own time would be seen)."""
    base_ts = int(time.time() * 1000) - 3_600_000
    async with Producer(bootstrap, linger_ms=2, **options) as producer:
        futures = []
        for p in range(partitions):
            for i in range(start, start + per_partition):
                futures.append(
                    await producer.enqueue(
                        topic,
                        record_value(topic, p, i),
                        f"k{i}".encode(),
                        partition=p,
                        timestamp_ms=base_ts + i,
                        headers=[("n", str(i).encode()), ("empty", None)],
                    )
                )
        await producer.wait_all(futures)


async def end_offsets(bootstrap: str, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    async with Admin(bootstrap) as admin:
        res = (await admin.list_offsets(dict.fromkeys(tps, OffsetSpec.LATEST))).raise_errors()
        return {tp: r.offset for tp, r in res.items()}


async def read_all(
    bootstrap: str, topic: str, expected: int, *, read_committed: bool = False, timeout_s: float = 60
) -> list[Record]:
    """Every record of ``topic`` until ``expected`` arrived and the topic is quiet; fails
    (with what arrived) if fewer arrive within ``timeout_s``."""

    async def exists() -> bool:
        async with Admin(bootstrap) as admin:
            return (await admin.describe_topics([topic]))[topic].error is None

    await wait_for(exists, f"topic {topic!r} on the target", timeout_s)
    out: list[Record] = []
    async with Consumer(
        bootstrap,
        topics=[topic],
        auto_offset_reset="earliest",
        isolation_level="read_committed" if read_committed else "read_uncommitted",
        allow_auto_topic_creation=False,
    ) as consumer:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        quiet_until: float | None = None
        while True:
            batch = await consumer.getmany(timeout_ms=200)
            for recs in batch.values():
                out.extend(recs)
            now = loop.time()
            if len(out) >= expected:
                # A little longer, so that duplicates beyond ``expected`` are seen too.
                quiet_until = quiet_until if quiet_until is not None and not batch else now + 1.0
                if now >= quiet_until:
                    return out
            if now > deadline:
                raise AssertionError(f"{topic}: {len(out)} of {expected} records arrived within {timeout_s}s")


async def wait_for(condition: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 60) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not await condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def by_partition(records: list[Record]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(r.value)
    return out


async def committed(bootstrap: str, group: str, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """The group's committed offsets (-1 where none)."""
    async with Admin(bootstrap) as admin:
        found = await admin.list_group_offsets(group, tps)
        return {tp: (found[tp].offset if tp in found and found[tp].error is None else -1) for tp in tps}


class SourceWriter:
    """Keeps producing numbered records to every partition of a topic in the background
    (``start()``/``stop()``), so that a mirror killed "mid-stream" really is."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, *, per_round: int = 20) -> None:
        self.bootstrap, self.topic, self.partitions, self.per_round = bootstrap, topic, partitions, per_round
        self.written = 0  # per partition
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())
        SourceWriter.running.append(self)

    async def _run(self) -> None:
        async with Producer(self.bootstrap, linger_ms=1) as producer:
            while not self._stop.is_set():
                futures = [
                    await producer.enqueue(
                        self.topic, record_value(self.topic, p, i), f"k{i}".encode(), partition=p
                    )
                    for i in range(self.written, self.written + self.per_round)
                    for p in range(self.partitions)
                ]
                await producer.wait_all(futures)
                self.written += self.per_round
                await asyncio.sleep(0.02)

    async def stop(self) -> int:
        """Stops (idempotent); returns how many records each partition got."""
        self._stop.set()
        assert self._task is not None
        await self._task
        return self.written

    running: ClassVar[list[SourceWriter]] = []

    @classmethod
    async def stop_leftovers(cls) -> None:
        """Writers a failed test left running (they would keep the event loop busy)."""
        for w in cls.running:
            if w._task is not None and not w._task.done():
                w._stop.set()
                w._task.cancel()
                with contextlib.suppress(BaseException):
                    await w._task
        cls.running.clear()

    def expected(self) -> dict[int, list[bytes]]:
        return {
            p: [record_value(self.topic, p, i) for i in range(self.written)] for p in range(self.partitions)
        }


class MirrorProcess:
    """``aiokafka-lite mirror`` in a subprocess (stderr to a file, so it never blocks).
    Processes still running when a test ends are killed (``kill_leftovers``): a mirror
    left in the group would keep the shared cluster's group from being deleted."""

    running: ClassVar[list[MirrorProcess]] = []

    def __init__(self, source: str, target: str, *args: str, log_dir: Any) -> None:
        self.argv = ["-m", "aiokafka_lite.cli", "mirror", "--source", source, "--target", target, *args]
        self.log_path = log_dir / f"mirror-{id(self)}.log"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> MirrorProcess:
        import sys

        self._log = self.log_path.open("wb")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, *self.argv, stdout=self._log, stderr=self._log
        )
        MirrorProcess.running.append(self)
        return self

    @classmethod
    async def kill_leftovers(cls) -> None:
        for mp in cls.running:
            if mp.proc is not None and mp.proc.returncode is None:
                mp.proc.kill()
                await mp.proc.wait()
            mp._log.close()
        cls.running.clear()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def wait(self, timeout_s: float = 60) -> int:
        assert self.proc is not None
        try:
            async with asyncio.timeout(timeout_s):
                code = await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise AssertionError(
                f"the mirror process did not exit within {timeout_s}s:\n{self.log()}"
            ) from None
        finally:
            if self.proc.returncode is not None:
                self._log.close()
        return code

    async def interrupt(self) -> int:
        """Ctrl-C; returns the exit code."""
        import signal

        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        return await self.wait()

    async def kill(self) -> None:
        """A crash: SIGKILL, no chance to flush, commit or leave the group."""
        assert self.proc is not None
        self.proc.kill()
        await self.wait()
