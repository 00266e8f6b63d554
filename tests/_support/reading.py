"""Reading a topic to its end: the records up to the end offsets seen at the start, so a
test knows it has seen everything without waiting for the topic to go quiet."""

from __future__ import annotations

import asyncio

from aiokafka_lite import Consumer, Record, TopicPartition


async def read_topic(
    bootstrap: str, topic: str, partitions: int, isolation: str, *, limit_s: float = 30.0
) -> list[Record]:
    """Every record visible at ``isolation`` up to the end offsets seen at the start
    (the last stable offset for read_committed), in partition/offset order."""
    async with Consumer(bootstrap, isolation_level=isolation, auto_offset_reset="earliest") as c:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        end = await c.end_offsets(tps)
        out: list[Record] = []
        async with asyncio.timeout(limit_s):
            while True:
                positions = {tp: await c.position(tp) for tp in tps}
                if all(positions[tp] >= end[tp] for tp in tps):
                    break
                for recs in (await c.getmany(timeout_ms=100)).values():
                    out.extend(recs)
        return sorted(out, key=lambda r: (r.partition, r.offset))
