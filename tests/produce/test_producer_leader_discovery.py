"""KIP-951 in the producer: a produce response naming the partition's new leader sends
the batch there at once, without waiting for a metadata refresh."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.produce import Producer

_PRODUCE = 0
_METADATA = 3


@dataclass
class _Log:
    """Requests written and responses read, in order: ``(event, node, api_key)``."""

    events: list[tuple[str, int, int]] = field(default_factory=list)

    def on_request_written(self, node_id: int, api_key: int, v: int, n: int, error: object) -> None:
        if error is None:
            self.events.append(("sent", node_id, api_key))

    def on_response_read(self, node_id: int, api_key: int, v: int, n: int, s: float, error: object) -> None:
        self.events.append(("read", node_id, api_key))


def _after_refused_produce(events: list[tuple[str, int, int]], old: int) -> list[tuple[str, int, int]]:
    """The events after the produce response of ``old`` (the refused one; the last)."""
    last = max(i for i, e in enumerate(events) if e == ("read", old, _PRODUCE))
    return events[last + 1 :]


@pytest.mark.kafka_embedded
@pytest.mark.parametrize("idempotent", [True, False])
async def test_batch_goes_to_the_leader_named_in_the_response(
    kafka_cluster_factory: Callable[..., Awaitable[EmbeddedCluster]], idempotent: bool
) -> None:
    kafka_cluster = await kafka_cluster_factory(brokers=3)
    kafka_cluster.create_topic("kip951", 1, replication_factor=3)
    log = _Log()
    async with Producer(
        kafka_cluster.bootstrap,
        enable_idempotence=idempotent,
        acks="all",
        metadata_max_age_ms=600_000,
        retry_backoff_ms=5_000,  # a retry that waited for its backoff would show
        retry_backoff_max_ms=5_000,
    ) as producer:
        first = await producer.send("kip951", b"a")
        tp = TopicPartition("kip951", 0)
        old = producer.client.cluster.leader_for(tp)
        old_epoch = producer.client.cluster.leader_epoch(tp)
        assert old is not None
        new, new_epoch = kafka_cluster.move_leader("kip951", 0)
        assert new != old and new_epoch > old_epoch
        producer.client.add_hooks(log)
        second = await producer.send("kip951", b"b")
        assert (first.offset, second.offset) == (0, 1)
        assert producer._sender.batches_moved_by_leader_hint == 1
        assert producer.client.cluster.leader_for(tp) == new
        assert producer.client.cluster.leader_epoch(tp) == new_epoch
        after = _after_refused_produce(log.events, old)
        to_new = after.index(("sent", new, _PRODUCE))
        # No metadata answer came in between: the response itself named the leader.
        assert ("read", new, _METADATA) not in after[:to_new]
        assert not any(e[0] == "read" and e[2] == _METADATA for e in after[:to_new])


@pytest.mark.kafka_embedded
async def test_without_leader_hints_the_batch_waits_for_metadata(
    kafka_cluster_factory: Callable[..., Awaitable[EmbeddedCluster]],
) -> None:
    """The comparison path (``use_leader_hints = False``, as clients before KIP-951):
    delivery still succeeds, but only after a metadata response named the leader."""
    kafka_cluster = await kafka_cluster_factory(brokers=3)
    kafka_cluster.create_topic("kip951-off", 1, replication_factor=3)
    log = _Log()
    async with Producer(
        kafka_cluster.bootstrap, acks="all", metadata_max_age_ms=600_000, retry_backoff_ms=20
    ) as producer:
        producer._sender.use_leader_hints = False
        await producer.send("kip951-off", b"a")
        tp = TopicPartition("kip951-off", 0)
        old = producer.client.cluster.leader_for(tp)
        assert old is not None
        new, _ = kafka_cluster.move_leader("kip951-off", 0)
        producer.client.add_hooks(log)
        assert (await producer.send("kip951-off", b"b")).offset == 1
        assert producer._sender.batches_moved_by_leader_hint == 0
        after = _after_refused_produce(log.events, old)
        to_new = after.index(("sent", new, _PRODUCE))
        assert any(e[0] == "read" and e[2] == _METADATA for e in after[:to_new])


@pytest.mark.kafka_embedded
async def test_stale_leader_hint_is_ignored(
    kafka_cluster_factory: Callable[..., Awaitable[EmbeddedCluster]],
) -> None:
    """A hint whose epoch is not newer than the cached one changes nothing (as Java)."""
    from aiokafka_lite.net.metadata import LeaderHint

    kafka_cluster = await kafka_cluster_factory(brokers=3)
    kafka_cluster.create_topic("kip951-stale", 1, replication_factor=3)
    async with Producer(kafka_cluster.bootstrap) as producer:
        await producer.send("kip951-stale", b"a")
        tp = TopicPartition("kip951-stale", 0)
        cluster = producer.client.cluster
        leader, epoch = cluster.leader_for(tp), cluster.leader_epoch(tp)
        assert leader is not None
        other = next(b for b in cluster.brokers if b != leader)
        assert producer.client.apply_leader_hints({tp: LeaderHint(other, epoch)}) == set()
        assert producer.client.cluster is cluster
        assert producer.client.apply_leader_hints({tp: LeaderHint(other, epoch + 1)}) == {tp}
        assert producer.client.cluster.leader_for(tp) == other
        assert producer.client.cluster.partition(tp).replicas == cluster.partition(tp).replicas  # type: ignore[union-attr]
