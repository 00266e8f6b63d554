"""KIP-227 fetch sessions against a broker: incremental requests (recorded as the consumer
sends them, so the checks hold against Apache Kafka too), session eviction (embedded
broker only), and equality with sessionless fetching."""

from __future__ import annotations

import asyncio

import pytest
from fetch_testlib import Sent, fill, produce_raw, sent_requests, take

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume import Consumer, Record
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import Client
from aiokafka_lite.wire.messages import FetchRequest

TPS = [TopicPartition("t", p) for p in range(4)]
FAST = {"fetch_max_wait_ms": 50, "retry_backoff_ms": 20}


def fetches(rec: object) -> list[FetchRequest]:
    out = []
    for obs in rec.requests:  # type: ignore[attr-defined]
        assert isinstance(obs.request, FetchRequest)
        out.append(obs.request)
    return out


def requests(sent: list[Sent[FetchRequest]]) -> list[FetchRequest]:
    return [s.request for s in sent]


def listed(req: FetchRequest) -> int:
    return sum(len(t.partitions) for t in req.topics)


async def trickle(bootstrap: str, tp: TopicPartition, n: int) -> None:
    async with Client(bootstrap) as client:
        for i in range(n):
            await produce_raw(client, tp, [(None, b"v%d" % i)])
            await asyncio.sleep(0.01)


async def test_incremental_requests_are_sent(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 4)
    async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest", **FAST) as consumer:
        with sent_requests(consumer.client, FetchRequest) as sent:
            consumer.assign(TPS)
            producer = asyncio.create_task(trickle(kafka_cluster.bootstrap, TPS[0], 20))
            got = await take(consumer, 20)
            await producer
            assert [r.value for r in got] == [b"v%d" % i for i in range(20)]
            reqs = requests(sent)
            assert reqs[0].session_id == 0 and reqs[0].session_epoch == 0 and listed(reqs[0]) == 4
            incremental = [r for r in reqs if r.session_epoch > 0]
            assert len(incremental) >= 5
            sid = incremental[0].session_id
            assert sid != 0 and all(r.session_id == sid for r in incremental)
            epochs = [r.session_epoch for r in incremental]
            assert epochs == list(range(1, len(epochs) + 1))  # one epoch per request, no gaps
            # Idle partitions are not repeated: only partition 0 moves.
            assert all(listed(r) <= 1 for r in incremental)
            assert any(listed(r) == 1 for r in incremental)

            # Pausing removes a partition from the session (forgotten topics); resuming re-adds it.
            sent.clear()
            consumer.pause(TPS[2])
            await trickle(kafka_cluster.bootstrap, TPS[1], 1)
            assert (await take(consumer, 1))[0].partition == 1
            forgot = [r for r in requests(sent) if r.forgotten_topics_data]
            assert forgot and forgot[0].session_epoch > 0
            topic_id = consumer.client.cluster.topic_id("t")  # Fetch v13+ names topics by id
            assert topic_id is not None
            assert [(f.topic_id, f.partitions) for f in forgot[0].forgotten_topics_data] == [(topic_id, [2])]
            sent.clear()
            consumer.resume(TPS[2])
            await trickle(kafka_cluster.bootstrap, TPS[2], 1)
            assert (await take(consumer, 1))[0].partition == 2
            readded = [
                r for r in requests(sent) if any(p.partition == 2 for t in r.topics for p in t.partitions)
            ]
            assert readded and readded[0].session_epoch > 0
            assert consumer.fetcher is not None
            session = consumer.fetcher.sessions[1]
            assert session.incremental_requests >= 5 and session.resets == 0


@pytest.mark.kafka_embedded  # evicts the broker's session, injects an epoch error
async def test_session_eviction_falls_back_to_full_fetch(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 4)
    await fill(kafka_cluster.bootstrap, {tp: 5 for tp in TPS})
    caches = kafka_cluster.state.extensions["fetch_sessions"]
    with kafka_cluster.record_requests(FetchRequest) as rec:
        async with Consumer(kafka_cluster.bootstrap, auto_offset_reset="earliest", **FAST) as consumer:
            consumer.assign(TPS)
            got = await take(consumer, 20)
            assert consumer.fetcher is not None
            session = consumer.fetcher.sessions[1]
            for _ in range(500):
                if session.has_session:
                    break
                await asyncio.sleep(0.01)
            assert session.has_session
            # The broker forgets the session (cache eviction).
            caches[1].sessions.clear()
            rec.clear()
            await fill_more(kafka_cluster.bootstrap)
            got += await take(consumer, 8)
            reqs = fetches(rec)
            full_again = [r for r in reqs if r.session_epoch == 0 and r.session_id == 0]
            assert full_again and listed(full_again[0]) == 4
            assert session.resets >= 1
            # An epoch mismatch closes the old session and asks for a new one.
            rec.clear()
            old_id = session.session_id
            kafka_cluster.inject_error(FetchRequest, E.InvalidFetchSessionEpochError.code, count=1)
            await fill_more(kafka_cluster.bootstrap, start=7)
            got += await take(consumer, 8)
            reqs = fetches(rec)
            assert any(r.session_id == old_id and r.session_epoch == 0 for r in reqs)
            assert session.has_session and session.session_id != old_id
    by_tp: dict[int, list[int]] = {}
    for r in got:
        by_tp.setdefault(r.partition, []).append(r.offset)
    assert by_tp == {p: list(range(9)) for p in range(4)}  # no loss or duplicate across resets


async def fill_more(bootstrap: str, start: int = 5) -> None:
    async with Client(bootstrap) as client:
        for tp in TPS:
            await produce_raw(client, tp, [(None, b"m%d" % (start + i)) for i in range(2)])


async def consume_all(bootstrap: str, sessions: bool, n: int) -> tuple[list[Record], list[FetchRequest]]:
    """The first ``n`` records, and the Fetch requests it took to read them."""
    async with Consumer(
        bootstrap,
        auto_offset_reset="earliest",
        enable_fetch_sessions=sessions,
        max_partition_fetch_bytes=300,
        **FAST,
    ) as consumer:
        with sent_requests(consumer.client, FetchRequest) as sent:
            consumer.assign(TPS)
            return await take(consumer, n), requests(sent)


async def test_session_results_equal_sessionless(kafka_cluster: EmbeddedCluster) -> None:
    kafka_cluster.create_topic("t", 4)
    counts = {tp: 30 + 7 * tp.partition for tp in TPS}
    await fill(kafka_cluster.bootstrap, counts, batch=3)
    total = sum(counts.values())
    with_sessions, used = await consume_all(kafka_cluster.bootstrap, True, total)
    without, sessionless = await consume_all(kafka_cluster.bootstrap, False, total)
    assert any(r.session_epoch > 0 and listed(r) < 4 for r in used)
    assert sessionless and all(r.session_id == 0 and r.session_epoch == -1 for r in sessionless)

    def per_partition(recs: list[Record]) -> dict[int, list[tuple[int, bytes]]]:
        out: dict[int, list[tuple[int, bytes]]] = {}
        for r in recs:
            out.setdefault(r.partition, []).append((r.offset, r.value))
        return out

    assert per_partition(with_sessions) == per_partition(without)
    assert {p: len(v) for p, v in per_partition(without).items()} == {
        tp.partition: n for tp, n in counts.items()
    }
