"""The Kafka side of the Spark data source, without Spark: planning offset ranges on the
driver, reading exact ranges in tasks, writing rows; against the embedded broker or,
with --kafka=apache, Apache Kafka."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

import confluent_kafka
import pytest
from spark_testlib import create_topic, delete_records, produce, read_all, values

from aiokafka_lite.consume import Consumer
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.integrations.spark import kafka_io
from aiokafka_lite.integrations.spark.datasource_options import parse_sink_options, parse_source_options
from aiokafka_lite.integrations.spark.offset_ranges import OffsetRange, from_offset_dict


def source(bootstrap: str, streaming: bool = False, **options: str) -> Any:
    return parse_source_options({"bootstrap.servers": bootstrap, **options}, streaming=streaming)


def read(opts: Any, r: OffsetRange) -> list[Any]:
    return [rec for chunk in kafka_io.read_range(opts, r) for rec in chunk]


# ---------------------------------------------------------------------------- planning


def test_plan_subscribe_earliest_latest(kafka_bootstrap: str) -> None:
    create_topic(kafka_bootstrap, "a", 3)
    create_topic(kafka_bootstrap, "b", 1)
    produce(kafka_bootstrap, "a", values({0: 5, 1: 0, 2: 7}))
    produce(kafka_bootstrap, "b", values({0: 2}))
    ranges = kafka_io.plan_batch(source(kafka_bootstrap, subscribe="a,b"))
    assert ranges == [OffsetRange("a", 0, 0, 5), OffsetRange("a", 2, 0, 7), OffsetRange("b", 0, 0, 2)]
    # Planning again gives the same ranges (nothing new was written).
    assert kafka_io.plan_batch(source(kafka_bootstrap, subscribe="a,b")) == ranges


def test_plan_specific_offsets_pattern_assign_and_split(kafka_bootstrap: str) -> None:
    create_topic(kafka_bootstrap, "ev-1", 2)
    create_topic(kafka_bootstrap, "ev-2", 1)
    create_topic(kafka_bootstrap, "other", 1)
    produce(kafka_bootstrap, "ev-1", values({0: 10, 1: 10}))
    produce(kafka_bootstrap, "ev-2", values({0: 4}))
    produce(kafka_bootstrap, "other", values({0: 4}))
    ranges = kafka_io.plan_batch(
        source(
            kafka_bootstrap,
            subscribePattern="ev-.*",
            startingOffsets='{"ev-1": {"0": 3, "1": -2}}',
            endingOffsets='{"ev-1": {"1": 6}, "ev-2": {"0": -1}}',
            maxRecordsPerPartition="4",
        )
    )
    assert ranges == [
        OffsetRange("ev-1", 0, 3, 7),
        OffsetRange("ev-1", 0, 7, 10),
        OffsetRange("ev-1", 1, 0, 3),
        OffsetRange("ev-1", 1, 3, 6),
        OffsetRange("ev-2", 0, 0, 4),
    ]
    assigned = kafka_io.plan_batch(source(kafka_bootstrap, assign='{"ev-1": [1]}'))
    assert assigned == [OffsetRange("ev-1", 1, 0, 10)]


def test_plan_errors(kafka_bootstrap: str) -> None:
    create_topic(kafka_bootstrap, "t", 2)
    produce(kafka_bootstrap, "t", values({0: 3}))
    with pytest.raises(E.UnknownTopicOrPartitionError, match="nope"):
        kafka_io.plan_batch(source(kafka_bootstrap, subscribe="t,nope"))
    with pytest.raises(E.UnknownTopicOrPartitionError, match="no partition 5"):
        kafka_io.plan_batch(source(kafka_bootstrap, assign='{"t": [5]}'))
    with pytest.raises(E.ConfigError, match="outside the subscription"):
        kafka_io.plan_batch(source(kafka_bootstrap, subscribe="t", startingOffsets='{"u": {"0": 1}}'))
    with pytest.raises(E.ConfigError, match="before starting offset"):
        kafka_io.plan_batch(source(kafka_bootstrap, subscribe="t", startingOffsets='{"t": {"0": 3, "1": 9}}'))
    # Looking topics up did not create them.
    with pytest.raises(E.UnknownTopicOrPartitionError):
        kafka_io.plan_batch(source(kafka_bootstrap, subscribe="nope"))


def test_plan_by_timestamp(kafka_bootstrap: str) -> None:
    create_topic(kafka_bootstrap, "ts", 1)
    base = 1_700_000_000_000
    produce(kafka_bootstrap, "ts", [(0, None, f"v{i}".encode(), None, base + 1000 * i) for i in range(10)])
    ranges = kafka_io.plan_batch(
        source(
            kafka_bootstrap,
            subscribe="ts",
            startingTimestamp=str(base + 2500),
            endingTimestamp=str(base + 6000),
        )
    )
    assert ranges == [OffsetRange("ts", 0, 3, 6)]
    by_partition = kafka_io.plan_batch(
        source(
            kafka_bootstrap, subscribe="ts", startingOffsetsByTimestamp=f'{{"ts": {{"0": {base + 8000}}}}}'
        )
    )
    assert by_partition == [OffsetRange("ts", 0, 8, 10)]
    too_new = str(base + 60_000)
    with pytest.raises(E.OffsetOutOfRangeError, match="Strategy=latest"):
        kafka_io.plan_batch(source(kafka_bootstrap, subscribe="ts", startingTimestamp=too_new))
    assert (
        kafka_io.plan_batch(
            source(
                kafka_bootstrap,
                subscribe="ts",
                startingTimestamp=too_new,
                startingOffsetsByTimestampStrategy="latest",
            )
        )
        == []
    )


# ---------------------------------------------------------------------------- reading


def test_read_range_is_exact_and_repeatable(kafka_bootstrap: str) -> None:
    create_topic(kafka_bootstrap, "r", 2)
    rows = [
        (
            0,
            f"k{i}".encode(),
            f"v{i}".encode(),
            [("n", str(i).encode()), ("none", None)] if i % 3 == 0 else None,
            None,
        )
        for i in range(300)
    ]
    produce(kafka_bootstrap, "r", rows)
    produce(kafka_bootstrap, "r", values({1: 50}))
    opts = source(kafka_bootstrap, subscribe="r")
    got = read(opts, OffsetRange("r", 0, 37, 241))
    assert [r.offset for r in got] == list(range(37, 241))
    assert [r.value for r in got] == [f"v{i}".encode() for i in range(37, 241)]
    assert all(r.topic == "r" and r.partition == 0 for r in got)
    assert list(got[2].headers) == [("n", b"39"), ("none", None)] and not got[0].headers
    assert read(opts, OffsetRange("r", 0, 37, 241)) == got  # a re-run task reads the same records
    # Split pieces read back to back give the whole range, once.
    pieces = [OffsetRange("r", 0, 0, 100), OffsetRange("r", 0, 100, 200), OffsetRange("r", 0, 200, 300)]
    whole = [rec for p in pieces for rec in read(opts, p)]
    assert [r.offset for r in whole] == list(range(300))
    assert read(opts, OffsetRange("r", 1, 49, 50))[0].value == b"v-1-49"
    assert read(opts, OffsetRange("r", 1, 5, 5)) == []


def test_read_range_leaves_nothing_running(kafka_bootstrap: str) -> None:
    create_topic(kafka_bootstrap, "clean", 1)
    produce(kafka_bootstrap, "clean", values({0: 100}))
    opts = source(kafka_bootstrap, subscribe="clean")

    def io_threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "aiokafka-lite-spark-io"]

    for stop_early in (True, False):
        gen = kafka_io.read_range(opts, OffsetRange("clean", 0, 0, 100))
        first = next(gen)
        assert first[0].offset == 0
        live = [o for o in gc.get_objects() if isinstance(o, Consumer) and not o.closed]
        assert len(live) == 1 and len(io_threads()) == 1
        if stop_early:
            gen.close()  # Spark stops reading early (e.g. limit())
        else:
            assert sum(len(c) for c in gen) + len(first) == 100
        # The consumer is closed, the loop thread joined: nothing left running.
        assert live[0].closed
        assert io_threads() == []
        del live, gen


def test_read_deleted_records_fail_on_data_loss(kafka_bootstrap: str) -> None:
    create_topic(kafka_bootstrap, "gone", 1)
    produce(kafka_bootstrap, "gone", values({0: 20}))
    delete_records(kafka_bootstrap, TP("gone", 0), 8)
    strict = source(kafka_bootstrap, subscribe="gone", **{"kafkaConsumer.pollTimeoutMs": "5000"})
    with pytest.raises(E.OffsetOutOfRangeError, match="failOnDataLoss=false"):
        read(strict, OffsetRange("gone", 0, 0, 20))
    lenient = source(kafka_bootstrap, subscribe="gone", failOnDataLoss="false")
    assert [r.offset for r in read(lenient, OffsetRange("gone", 0, 0, 20))] == list(range(8, 20))
    assert read(lenient, OffsetRange("gone", 0, 2, 6)) == []  # the whole range is gone
    # Planning sees the new log start.
    assert kafka_io.plan_batch(strict) == [OffsetRange("gone", 0, 8, 20)]


def test_read_no_progress_times_out(kafka_bootstrap: str) -> None:
    create_topic(kafka_bootstrap, "short", 1)
    produce(kafka_bootstrap, "short", values({0: 3}))
    opts = source(kafka_bootstrap, subscribe="short", **{"kafkaConsumer.pollTimeoutMs": "600"})
    start = time.monotonic()
    with pytest.raises(E.KafkaTimeoutError, match="pollTimeoutMs"):
        read(opts, OffsetRange("short", 0, 0, 10))  # offsets 3..9 never arrive
    assert time.monotonic() - start < 30


@pytest.mark.interop
def test_read_committed_ranges(kafka_bootstrap: str) -> None:
    create_topic(kafka_bootstrap, "tx", 1)

    def transactions() -> None:
        p = confluent_kafka.Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": "spark-tx"})
        p.init_transactions(30)
        for n, commit in enumerate([True, False, True]):
            p.begin_transaction()
            for i in range(5):
                p.produce("tx", value=f"t{n}-{i}".encode())
            p.flush(30)  # the aborted records must reach the log too
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)

    transactions()
    committed = [f"t{n}-{i}".encode() for n in (0, 2) for i in range(5)]
    opts = source(kafka_bootstrap, subscribe="tx", **{"isolation.level": "read_committed"})
    deadline = time.monotonic() + 20
    ranges = kafka_io.plan_batch(opts)
    while ranges[0].end < 18 and time.monotonic() < deadline:  # markers are written asynchronously
        time.sleep(0.1)
        ranges = kafka_io.plan_batch(opts)
    assert ranges == [OffsetRange("tx", 0, 0, 18)]  # 15 records and 3 markers, nothing open
    assert [r.value for r in read(opts, ranges[0])] == committed
    # Chunks that end on a marker or inside the aborted transaction still finish.
    pieces = [OffsetRange("tx", 0, 0, 6), OffsetRange("tx", 0, 6, 12), OffsetRange("tx", 0, 12, 18)]
    per_piece = [[r.value for r in read(opts, p)] for p in pieces]
    assert per_piece == [committed[:5], [], committed[5:]]
    uncommitted = source(kafka_bootstrap, subscribe="tx")
    assert len(read(uncommitted, kafka_io.plan_batch(uncommitted)[0])) == 15


# ---------------------------------------------------------------------------- streaming helpers


def test_streaming_offsets(kafka_bootstrap: str) -> None:
    create_topic(kafka_bootstrap, "s1", 2)
    produce(kafka_bootstrap, "s1", values({0: 4, 1: 2}))
    opts = source(kafka_bootstrap, streaming=True, subscribePattern="s[0-9]")
    assert kafka_io.initial_offsets(opts) == {TP("s1", 0): 4, TP("s1", 1): 2}
    earliest = source(kafka_bootstrap, streaming=True, subscribe="s1,s2", startingOffsets="earliest")
    assert kafka_io.initial_offsets(earliest) == {TP("s1", 0): 0, TP("s1", 1): 0}  # s2 does not exist yet
    create_topic(kafka_bootstrap, "s2", 1)
    produce(kafka_bootstrap, "s2", values({0: 3}))
    delete_records(kafka_bootstrap, TP("s2", 0), 1)
    assert kafka_io.latest_offsets(opts) == {TP("s1", 0): 4, TP("s1", 1): 2, TP("s2", 0): 3}
    assert kafka_io.earliest_offsets(opts, [TP("s2", 0)]) == {TP("s2", 0): 1}
    assert from_offset_dict({"s2": {"0": 3}}) == {TP("s2", 0): 3}


# ---------------------------------------------------------------------------- writing


def test_write_rows_then_read_back(kafka_bootstrap: str) -> None:
    create_topic(kafka_bootstrap, "w", 3)
    sink = parse_sink_options({"bootstrap.servers": kafka_bootstrap, "topic": "w", "kafka.linger.ms": "1"})
    rows: list[kafka_io.OutRow] = []
    for i in range(2000):
        topic = "w2" if i % 10 == 0 else "w"
        part = i % 3 if topic == "w" else None
        hdrs = [("i", str(i).encode())] if i % 7 == 0 else None
        rows.append((topic, f"v{i}".encode(), f"k{i}".encode() if i % 2 else None, part, hdrs))
    result = kafka_io.write_rows(sink, rows)
    assert result.records == 2000
    assert result.counts == {("w", 0): 600, ("w", 1): 600, ("w", 2): 600, ("w2", 0): 200}
    got = read_all(kafka_bootstrap, [TP("w", 0), TP("w", 1), TP("w", 2), TP("w2", 0)], 2000)
    assert len(got) == 2000
    by_value = {r.value: r for r in got}
    for i in (0, 7, 14, 1999):
        r = by_value[f"v{i}".encode()]
        assert r.key == (f"k{i}".encode() if i % 2 else None)
        assert list(r.headers) == ([("i", str(i).encode())] if i % 7 == 0 else [])
        assert (r.topic, r.partition if r.topic == "w" else 0) == (("w2", 0) if i % 10 == 0 else ("w", i % 3))
    # Order within a partition is the row order.
    p0 = [int(r.value[1:]) for r in got if r.topic == "w" and r.partition == 0]
    assert p0 == sorted(p0)
    total = kafka_io.merge_results([result, None, result])
    assert total.records == 4000


def test_write_error_surfaces(kafka_bootstrap: str) -> None:
    create_topic(kafka_bootstrap, "one", 1)
    sink = parse_sink_options({"bootstrap.servers": kafka_bootstrap, "kafka.max.block.ms": "500"})
    with pytest.raises(E.UnknownTopicOrPartitionError, match="partition 4"):
        kafka_io.write_rows(sink, [("one", b"a", None, 0, None), ("one", b"b", None, 4, None)])
    with pytest.raises(E.InvalidTopicError, match="bad topic name!"):
        kafka_io.write_rows(sink, [("bad topic name!", b"a", None, None, None)])


# ---------------------------------------------------------------------------- security


@pytest.mark.kafka_embedded  # a SASL listener with these users
def test_sasl_options_reach_the_client(kafka_threaded_cluster_factory: Any) -> None:
    tc = kafka_threaded_cluster_factory(topics={"sec": 2}, sasl_users={"alice": "s3cret"})
    jaas = (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cret";'
    )
    security = {
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.jaas.config": jaas,
    }
    sink = parse_sink_options({"bootstrap.servers": tc.bootstrap, "topic": "sec", **security})
    rows: list[kafka_io.OutRow] = [("sec", f"v{i}".encode(), None, i % 2, None) for i in range(10)]
    assert kafka_io.write_rows(sink, rows).counts == {("sec", 0): 5, ("sec", 1): 5}
    opts = source(tc.bootstrap, subscribe="sec", **security)
    ranges = kafka_io.plan_batch(opts)
    assert ranges == [OffsetRange("sec", 0, 0, 5), OffsetRange("sec", 1, 0, 5)]
    assert sorted(r.value for rng in ranges for r in read(opts, rng)) == sorted(v for _, v, _, _, _ in rows)
    wrong = source(
        tc.bootstrap,
        subscribe="sec",
        **{**security, "kafka.sasl.jaas.config": jaas.replace("s3cret", "nope")},
    )
    with pytest.raises(E.AuthenticationError):
        kafka_io.plan_batch(wrong)


def test_unreachable_cluster_is_a_typed_error() -> None:
    opts = parse_source_options({"bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}, streaming=False)
    with pytest.raises(E.NoBrokersAvailableError, match=r"127\.0\.0\.1:1"):
        kafka_io.plan_batch(opts)
    sink = parse_sink_options({"bootstrap.servers": "127.0.0.1:1", "topic": "t"})
    with pytest.raises(E.NoBrokersAvailableError):
        kafka_io.write_rows(sink, [("t", b"v", None, None, None)])
