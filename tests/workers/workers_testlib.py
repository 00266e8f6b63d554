"""Fakes and helpers for the worker-pool failure tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from aiokafka_lite.core.structs import TopicPartition as TP


class Rec(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()


class FakeCoordinator:
    def __init__(self) -> None:
        self.listeners: list[object] = []

    def add_listener(self, listener: object) -> None:
        self.listeners.append(listener)

    def remove_listener(self, listener: object) -> None:
        self.listeners.remove(listener)


class FakeConsumer:
    """Hands out scripted records per partition, honours pause, records commits."""

    def __init__(self, partitions: int, per_partition: int, *, batch: int = 7) -> None:
        self.coordinator = FakeCoordinator()
        self.pending = {
            TP("t", p): [Rec("t", p, o, b"k%d" % o, b"v%d" % o, (("h", b"x"),)) for o in range(per_partition)]
            for p in range(partitions)
        }
        self.records = {tp: list(recs) for tp, recs in self.pending.items()}
        self.assigned = set(self.pending)
        self.paused: set[TP] = set()
        self.committed: dict[TP, int] = {}
        self.batch = batch

    async def getmany(
        self, *parts: TP, timeout_ms: float = 0, max_records: int | None = None
    ) -> dict[TP, list[Rec]]:
        out: dict[TP, list[Rec]] = {}
        for tp in sorted(self.assigned - self.paused):
            recs = self.pending[tp][: self.batch]
            if recs:
                out[tp] = recs
                del self.pending[tp][: self.batch]
        await asyncio.sleep(timeout_ms / 1000 if not out else 0)
        return out

    async def commit(self, offsets: Any = None) -> None:
        for tp, o in offsets.items():
            assert o >= self.committed.get(tp, 0), "commits must never go backwards"
            self.committed[tp] = o

    def seek(self, tp: TP, offset: int) -> None:
        """Records from ``offset`` on are handed out again (the pool rewinds when it stops)."""
        self.pending[tp] = [r for r in self.records[tp] if r.offset >= offset]

    def pause(self, *tps: TP) -> None:
        self.paused.update(tps)

    def resume(self, *tps: TP) -> None:
        self.paused.difference_update(tps)

    def assignment(self) -> set[TP]:
        return set(self.assigned)


class FakeProducer:
    """Records dead letters; ``gate`` (when set) holds each send until it is opened."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any, Any, list[tuple[str, bytes | None]]]] = []
        self.gate: asyncio.Event | None = None
        self.fail: Exception | None = None

    async def send(self, topic: str, value: Any = None, key: Any = None, *, headers: Any = None) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        self.sent.append((topic, value, key, list(headers)))


async def eventually(cond: Callable[[], bool], limit: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
