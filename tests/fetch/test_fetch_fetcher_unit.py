"""Fetcher response handling without a broker: diverging epochs (KIP-320 via Fetch v12+),
stale responses, out-of-range while fetching ahead, non-retriable partition errors."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from aiokafka_lite.consume.consumer_config import ConsumerConfig
from aiokafka_lite.consume.fetch.fetcher import Fetcher
from aiokafka_lite.consume.fetch.session import FetchPlan, PartitionFetch
from aiokafka_lite.consume.subscription import SubscriptionState
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import ClientConfig, ClusterMetadata
from aiokafka_lite.wire.messages.fetch_response import FetchResponse
from aiokafka_lite.wire.records import encode_batch

TP = TopicPartition("t", 0)


class StubClient:
    def __init__(self) -> None:
        self.config = ClientConfig()
        self.cluster = ClusterMetadata()
        self.refreshes = 0
        self.closed = False
        self.errors: list[BaseException] = []

    def request_metadata_refresh(self) -> None:
        self.refreshes += 1

    def note_error(self, exc: BaseException) -> None:
        self.errors.append(exc)


def make(reset: str = "earliest") -> tuple[Fetcher, SubscriptionState, StubClient]:
    sub = SubscriptionState()
    client = StubClient()
    fetcher = Fetcher(client, sub, ConsumerConfig(auto_offset_reset=reset))  # type: ignore[arg-type]
    sub.assign_manually([TP])
    return fetcher, sub, client


def respond(fetcher: Fetcher, offset: int, pd: FetchResponse.PartitionData, gen: int | None = None) -> None:
    sent = PartitionFetch(offset, 1 << 20, 0, 0, -1, uuid.UUID(int=0))
    plan = FetchPlan(0, -1, True, {TP: sent}, [], {TP: sent})
    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[pd])])
    gens = {TP: fetcher._gen.get(TP, 0) if gen is None else gen}
    fetcher._process(1, plan, resp, gens, 0.0)


def data(base: int, n: int, **kw: Any) -> FetchResponse.PartitionData:
    records = encode_batch([(1, None, b"v%d" % (base + i), ()) for i in range(n)], base_offset=base)
    return FetchResponse.PartitionData(partition_index=0, high_watermark=base + n, records=records, **kw)


def diverging(end_offset: int, epoch: int) -> FetchResponse.PartitionData:
    return FetchResponse.PartitionData(
        partition_index=0,
        high_watermark=100,
        diverging_epoch=FetchResponse.EpochEndOffset(epoch=epoch, end_offset=end_offset),
    )


def test_data_is_buffered_and_fetch_position_advances() -> None:
    fetcher, sub, _ = make()
    sub.seek(TP, 0)
    fetcher._fetch_pos[TP] = (0, None)
    respond(fetcher, 0, data(0, 5))
    assert fetcher.buffer.has_data(TP) and fetcher._fetch_pos[TP][0] == 5
    assert sub.state(TP).high_watermark == 5
    assert fetcher.data_ready.is_set()


def test_stale_responses_are_ignored() -> None:
    fetcher, sub, _ = make()
    sub.seek(TP, 0)
    fetcher._fetch_pos[TP] = (0, None)
    gen = fetcher._gen.get(TP, 0)
    sub.seek(TP, 3)  # while the fetch was in flight
    fetcher._fetch_pos[TP] = (3, None)
    respond(fetcher, 0, data(0, 5), gen=gen)
    assert not fetcher.buffer.has_data(TP)


def test_diverging_epoch_below_position_resets_to_divergence() -> None:
    fetcher, sub, _ = make("earliest")
    sub.reset_position(TP, 10, 3)
    fetcher._fetch_pos[TP] = (10, 3)
    respond(fetcher, 10, diverging(end_offset=7, epoch=3))
    st = sub.state(TP)
    assert (st.position, st.position_epoch) == (7, 3)
    assert not fetcher.buffer.has_data(TP)


def test_diverging_epoch_with_reset_none_reports_truncation() -> None:
    fetcher, sub, _ = make("none")
    sub.reset_position(TP, 10, 3)
    fetcher._fetch_pos[TP] = (10, 3)
    respond(fetcher, 10, diverging(end_offset=7, epoch=3))
    err = fetcher.position_errors[TP]
    assert isinstance(err, E.LogTruncationError) and err.divergent_offsets == {TP: 7}
    assert sub.state(TP).position == 10 and not sub.is_fetchable(TP)
    sub.seek(TP, 7)  # the user decides: the error is gone, fetching resumes
    assert TP not in fetcher.position_errors and sub.is_fetchable(TP)


def test_diverging_epoch_past_consumed_position_only_refetches() -> None:
    fetcher, sub, _ = make("none")
    sub.reset_position(TP, 4, 3)
    fetcher._fetch_pos[TP] = (4, 3)
    respond(fetcher, 4, data(4, 6))  # fetched ahead: 4..9 buffered
    assert fetcher._fetch_pos[TP][0] == 10
    respond(fetcher, 10, diverging(end_offset=8, epoch=3))
    assert sub.state(TP).position == 4 and TP not in fetcher.position_errors
    assert not fetcher.buffer.has_data(TP) and TP not in fetcher._fetch_pos  # refetch from 4


def test_out_of_range_while_fetching_ahead_refetches_from_position() -> None:
    fetcher, sub, _ = make()
    sub.seek(TP, 0)
    fetcher._fetch_pos[TP] = (0, None)
    respond(fetcher, 0, data(0, 5))
    respond(fetcher, 5, FetchResponse.PartitionData(partition_index=0, error_code=1))
    assert sub.state(TP).position == 0  # not reset: the consumer has not reached the problem
    assert not fetcher.buffer.has_data(TP) and TP not in fetcher._fetch_pos
    fetcher._fetch_pos[TP] = (0, None)
    respond(fetcher, 0, FetchResponse.PartitionData(partition_index=0, error_code=1))
    assert sub.state(TP).position is None and sub.state(TP).reset_requested


@pytest.mark.parametrize("code", [6, 74, 3])
def test_retriable_partition_errors_back_off_and_refresh(code: int) -> None:
    fetcher, sub, _ = make()
    sub.seek(TP, 0)
    fetcher._fetch_pos[TP] = (0, None)
    fetcher._refresh_metadata_soon = lambda topics: setattr(fetcher, "_asked", set(topics))  # type: ignore[method-assign]
    respond(fetcher, 0, FetchResponse.PartitionData(partition_index=0, error_code=code))
    assert fetcher._asked == {"t"}  # type: ignore[attr-defined]
    assert fetcher._backoff_until[TP] > 0 and sub.state(TP).position == 0


def test_non_retriable_partition_error_reaches_the_user() -> None:
    fetcher, sub, _ = make()
    sub.seek(TP, 0)
    fetcher._fetch_pos[TP] = (0, None)
    respond(fetcher, 0, FetchResponse.PartitionData(partition_index=0, error_code=29))
    cf = fetcher.buffer.first(TP)
    assert cf is not None and isinstance(cf.error, E.TopicAuthorizationFailedError)
    assert TP in fetcher.halted
