"""Pure logic of the Spark data source (no Spark, no broker): offsets JSON, range
planning and splitting, rate limiting, option parsing."""

from __future__ import annotations

import itertools
import json
import pickle
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiokafka_lite.core.errors import ConfigError
from aiokafka_lite.core.structs import TopicPartition as TP
from aiokafka_lite.integrations.spark.datasource_options import parse_sink_options, parse_source_options
from aiokafka_lite.integrations.spark.offset_ranges import (
    EARLIEST,
    LATEST,
    OffsetRange,
    OffsetSpec,
    format_partition_json,
    from_offset_dict,
    limit_end_offsets,
    parse_partition_json,
    plan_ranges,
    split_ranges,
    to_offset_dict,
)

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}


# ---------------------------------------------------------------------------- offsets JSON


def test_partition_json_round_trip() -> None:
    text = '{"b": {"1": 7, "0": -2}, "a": {"3": 100}}'
    offsets = parse_partition_json(text, "startingOffsets")
    assert offsets == {TP("b", 1): 7, TP("b", 0): EARLIEST, TP("a", 3): 100}
    out = format_partition_json(offsets)
    assert out == '{"a":{"3":100},"b":{"0":-2,"1":7}}'
    assert parse_partition_json(out, "x") == offsets
    # The streaming offset form survives Spark's JSON checkpoint round trip.
    assert from_offset_dict(json.loads(json.dumps(to_offset_dict(offsets)))) == offsets


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("not json", "invalid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"t": [1]}', "must be an object"),
        ('{"t": {"x": 1}}', "not an integer"),
        ('{"t": {"-1": 1}}', "negative partition"),
        ('{"t": {"0": "5"}}', "must be an integer"),
        ('{"t": {"0": true}}', "must be an integer"),
        ('{"": {"0": 1}}', "non-empty"),
    ],
)
def test_partition_json_errors(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match="startingOffsets") as info:
        parse_partition_json(text, "startingOffsets")
    assert fragment in str(info.value)


# ---------------------------------------------------------------------------- ranges


def test_plan_ranges_sorted_and_drops_empty() -> None:
    start = {TP("t", 1): 5, TP("t", 0): 0, TP("t", 2): 9}
    end = {TP("t", 1): 10, TP("t", 0): 3, TP("t", 2): 9}
    assert plan_ranges(start, end) == [OffsetRange("t", 0, 0, 3), OffsetRange("t", 1, 5, 10)]


def test_plan_ranges_reversed() -> None:
    start = {TP("t", 0): 10, TP("t", 1): 0}
    end = {TP("t", 0): 4, TP("t", 1): 2}
    with pytest.raises(ConfigError, match="t-0"):
        plan_ranges(start, end)
    assert plan_ranges(start, end, on_reversed="skip") == [OffsetRange("t", 1, 0, 2)]


def test_plan_ranges_rejects_unresolved_and_missing_start() -> None:
    with pytest.raises(ConfigError, match="unresolved"):
        plan_ranges({TP("t", 0): EARLIEST}, {TP("t", 0): 5})
    with pytest.raises(ConfigError, match="no starting offset"):
        plan_ranges({}, {TP("t", 0): 5})


def test_split_by_max_records() -> None:
    pieces = split_ranges([OffsetRange("t", 0, 100, 110), OffsetRange("t", 1, 0, 3)], max_records=4)
    assert pieces == [
        OffsetRange("t", 0, 100, 104),
        OffsetRange("t", 0, 104, 107),
        OffsetRange("t", 0, 107, 110),
        OffsetRange("t", 1, 0, 3),
    ]


def test_split_by_min_partitions_proportional() -> None:
    pieces = split_ranges([OffsetRange("t", 0, 0, 90), OffsetRange("t", 1, 0, 10)], min_partitions=10)
    by_tp: dict[int, list[OffsetRange]] = {}
    for p in pieces:
        by_tp.setdefault(p.partition, []).append(p)
    assert len(by_tp[0]) == 9 and len(by_tp[1]) == 1
    assert len(pieces) >= 10


def test_split_never_makes_empty_pieces() -> None:
    assert split_ranges([OffsetRange("t", 0, 0, 2)], min_partitions=8) == [
        OffsetRange("t", 0, 0, 1),
        OffsetRange("t", 0, 1, 2),
    ]
    with pytest.raises(ConfigError):
        split_ranges([], max_records=0)


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=500), min_size=1, max_size=6),
    max_records=st.one_of(st.none(), st.integers(min_value=1, max_value=120)),
    min_parts=st.one_of(st.none(), st.integers(min_value=1, max_value=40)),
)
def test_split_covers_exactly(sizes: list[int], max_records: int | None, min_parts: int | None) -> None:
    ranges = [OffsetRange("t", i, 1000 * i, 1000 * i + n) for i, n in enumerate(sizes)]
    pieces = split_ranges(ranges, max_records=max_records, min_partitions=min_parts)
    for r in ranges:
        mine = [p for p in pieces if p.partition == r.partition]
        if r.size == 0:
            assert mine == []
            continue
        # contiguous, ordered, non-empty, covering [start, end) exactly
        assert mine[0].start == r.start and mine[-1].end == r.end
        assert all(a.end == b.start for a, b in itertools.pairwise(mine))
        assert all(p.size > 0 for p in mine)
        if max_records is not None:
            assert all(p.size <= max_records for p in mine)
        sizes_here = [p.size for p in mine]
        assert max(sizes_here) - min(sizes_here) <= 1
    if min_parts is not None:
        assert len(pieces) >= min(min_parts, sum(sizes))


# ---------------------------------------------------------------------------- rate limit


def test_limit_end_offsets_prorates_like_spark() -> None:
    # 30 offsets in three equal partitions at 8 per trigger: 8/3 each, rounded down.
    start = {TP("t", p): 0 for p in range(3)}
    latest = {TP("t", p): 10 for p in range(3)}
    assert limit_end_offsets(start, latest, 8) == {TP("t", p): 2 for p in range(3)}
    # backlogs 30, 10, 0 at 20: 15 and 5; an empty partition stays where it is
    start = {TP("t", 0): 0, TP("t", 1): 100, TP("t", 2): 50}
    latest = {TP("t", 0): 30, TP("t", 1): 110, TP("t", 2): 50}
    assert limit_end_offsets(start, latest, 20) == {TP("t", 0): 15, TP("t", 1): 105, TP("t", 2): 50}
    # a share below one offset is rounded up: small partitions are not starved
    start = {TP("t", 0): 0, TP("t", 1): 0}
    latest = {TP("t", 0): 1000, TP("t", 1): 1}
    assert limit_end_offsets(start, latest, 10) == {TP("t", 0): 9, TP("t", 1): 1}


def test_limit_end_offsets_under_budget_and_new_partitions() -> None:
    start = {TP("t", 0): 5}
    latest = {TP("t", 0): 8, TP("t", 1): 4}
    assert limit_end_offsets(start, latest, 100) == latest
    end = limit_end_offsets(start, latest, 5)
    assert end == {TP("t", 0): 7, TP("t", 1): 2}  # 5 * 3/7 -> 2, 5 * 4/7 -> 2


@given(
    backlog=st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=8),
    budget=st.integers(min_value=1, max_value=3000),
)
def test_limit_end_offsets_property(backlog: list[int], budget: int) -> None:
    start = {TP("t", i): 10 * i for i in range(len(backlog))}
    latest = {TP("t", i): 10 * i + n for i, n in enumerate(backlog)}
    end = limit_end_offsets(start, latest, budget)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in start)
    taken = sum(end[tp] - start[tp] for tp in start)
    if sum(backlog) <= budget:
        assert end == latest
    else:
        assert taken <= budget + len(backlog)  # at most one extra per partition (never starved)
        assert all(end[tp] > start[tp] for tp in start if latest[tp] > start[tp])


# ---------------------------------------------------------------------------- source options


def test_source_defaults_batch_and_stream() -> None:
    batch = parse_source_options({**BOOT, "subscribe": "a, b,a"}, streaming=False)
    assert batch.subscription.topics == ("a", "b")
    assert batch.starting.default == EARLIEST
    assert batch.ending is not None and batch.ending.default == LATEST
    assert batch.fail_on_data_loss and not batch.read_committed
    stream = parse_source_options({**BOOT, "subscribe": "a"}, streaming=True)
    assert stream.starting.default == LATEST and stream.ending is None


def test_source_options_are_case_insensitive_and_picklable() -> None:
    opts = parse_source_options(
        {
            "Bootstrap.Servers": "h:1",
            "SubscribePattern": "ev.*",
            "startingOffsets": '{"events": {"0": 5}}',
            "endingOffsets": "latest",
            "maxRecordsPerPartition": "1000",
            "minPartitions": "4",
            "isolation.level": "read_committed",
            "failOnDataLoss": "false",
            "kafka.fetch.max.bytes": "1048576",
            "kafka.client.id": "spark-job",
        },
        streaming=False,
    )
    assert opts.subscription.pattern == "ev.*" and opts.subscription.matches("events")
    assert not opts.subscription.matches("xevents")
    assert opts.starting.query(TP("events", 0)) == (False, 5)
    assert opts.starting.query(TP("events", 1)) == (False, EARLIEST)
    assert opts.max_records_per_partition == 1000 and opts.min_partitions == 4
    assert opts.read_committed and not opts.fail_on_data_loss
    assert opts.consumer["fetch_max_bytes"] == 1048576
    assert opts.kafka.client == {"client_id": "spark-job"}
    assert pickle.loads(pickle.dumps(opts)) == opts


def test_assign_and_timestamps() -> None:
    opts = parse_source_options(
        {
            **BOOT,
            "assign": '{"t": [1, 0], "u": [2]}',
            "startingOffsetsByTimestamp": '{"t": {"0": 1000}}',
            "startingOffsetsByTimestampStrategy": "latest",
            "endingTimestamp": "5000",
        },
        streaming=False,
    )
    assert opts.subscription.partitions == (TP("t", 0), TP("t", 1), TP("u", 2))
    assert opts.starting.query(TP("t", 0)) == (True, 1000)
    assert opts.starting.query(TP("t", 1)) == (False, EARLIEST)
    assert opts.starting.timestamp_fallback == "latest"
    assert opts.ending is not None and opts.ending.query(TP("u", 2)) == (True, 5000)
    # a global timestamp wins over everything else
    spec = OffsetSpec(EARLIEST, {TP("t", 0): 3}, 42, {TP("t", 0): 7})
    assert spec.query(TP("t", 0)) == (True, 42)


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"subscribe": "t"}, "bootstrap.servers"),
        ({**BOOT}, "exactly one of"),
        ({**BOOT, "subscribe": "t", "assign": '{"t": [0]}'}, "exactly one of"),
        ({**BOOT, "subscribe": " , "}, "comma-separated"),
        ({**BOOT, "subscribePattern": "("}, "invalid regular expression"),
        ({**BOOT, "assign": '{"t": [-1]}'}, "non-negative"),
        ({**BOOT, "assign": "{}"}, "JSON object"),
        ({**BOOT, "subscribe": "t", "startingOffsets": "latest"}, "not allowed in batch"),
        ({**BOOT, "subscribe": "t", "startingOffsets": '{"t": {"0": -1}}'}, "not allowed in batch"),
        ({**BOOT, "subscribe": "t", "endingOffsets": "earliest"}, "'earliest' (-2) is not allowed"),
        ({**BOOT, "subscribe": "t", "endingOffsets": '{"t": {"0": -3}}'}, "invalid offset"),
        ({**BOOT, "subscribe": "t", "startingTimestamp": "-5"}, "must be >= 0"),
        ({**BOOT, "subscribe": "t", "maxRecordsPerPartition": "0"}, "must be >= 1"),
        ({**BOOT, "subscribe": "t", "maxRecordsPerPartition": "lots"}, "expected an integer"),
        ({**BOOT, "subscribe": "t", "failOnDataLoss": "maybe"}, "true or false"),
        ({**BOOT, "subscribe": "t", "startingOfsets": "earliest"}, "did you mean 'startingoffsets'"),
        ({**BOOT, "subscribe": "t", "kafka.group.id": "g"}, "without a consumer group"),
        ({**BOOT, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "failOnDataLoss"),
        ({**BOOT, "subscribe": "t", "kafka.acks": "all"}, "unknown option 'kafka.acks'"),
        ({**BOOT, "subscribe": "t", "kafka.fetch.max.bytes": "-1"}, "fetch_max_bytes"),
        ({**BOOT, "subscribe": "t", "kafka.request.timeout.ms": "soon"}, "expected a number"),
        ({**BOOT, "subscribe": "t", "isolation.level": "serializable"}, "isolation_level"),
        ({**BOOT, "subscribe": "t", "includeHeaders": "false"}, "always present"),
        ({**BOOT, "subscribe": "t", "path": "/x"}, "no path"),
        (
            {**BOOT, "subscribe": "t", "kafka.ssl.truststore.location": "/ts.jks"},
            "only PEM",
        ),
    ],
)
def test_source_option_errors(options: dict[str, str], fragment: str) -> None:
    opts = dict(options)
    if "kafka.ssl.truststore.location" in opts:
        opts["kafka.ssl.truststore.type"] = "JKS"
    with pytest.raises(ConfigError) as info:
        parse_source_options(opts, streaming=False)
    assert fragment in str(info.value)


def test_stream_rejects_ending_options() -> None:
    with pytest.raises(ConfigError, match="batch queries only"):
        parse_source_options({**BOOT, "subscribe": "t", "endingOffsets": "latest"}, streaming=True)
    opts = parse_source_options(
        {**BOOT, "subscribe": "t", "startingOffsets": "latest", "maxOffsetsPerTrigger": "500"}, streaming=True
    )
    assert opts.max_offsets_per_trigger == 500


def test_security_options_map_to_client_settings() -> None:
    opts = parse_source_options(
        {
            "kafka.bootstrap.servers": "h:9093",
            "subscribe": "t",
            "kafka.security.protocol": "sasl_ssl",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                'username="alice" password="p w;\\"x";'
            ),
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": "/certs/ca.pem",
            "kafka.ssl.endpoint.identification.algorithm": "",
            "kafka.client.dns.lookup": "use_all_dns_ips",
        },
        streaming=False,
    )
    assert opts.kafka.bootstrap == "h:9093"
    assert opts.kafka.client == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "alice",
        "sasl_plain_password": 'p w;"x',
    }
    assert opts.kafka.ssl == {"cafile": "/certs/ca.pem", "check_hostname": False}
    assert "alice" not in repr(opts.kafka) and "p w" not in repr(opts.kafka)


def test_jaas_without_credentials_is_an_error() -> None:
    with pytest.raises(ConfigError, match="username and password"):
        parse_source_options(
            {
                **BOOT,
                "subscribe": "t",
                "kafka.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required;",
            },
            streaming=False,
        )


def test_sasl_without_credentials_fails_on_the_driver() -> None:
    with pytest.raises(ConfigError, match="sasl_plain_username"):
        parse_source_options(
            {**BOOT, "subscribe": "t", "kafka.security.protocol": "SASL_PLAINTEXT"}, streaming=False
        )


# ---------------------------------------------------------------------------- sink options


def test_sink_options() -> None:
    sink = parse_sink_options(
        {
            **BOOT,
            "topic": "out",
            "kafka.compression.type": "lz4",
            "kafka.linger.ms": "20",
            "kafka.acks": "all",
            "kafka.request.timeout.ms": "5000",
        }
    )
    assert sink.topic == "out"
    assert sink.producer["enable_idempotence"] is True
    assert sink.producer["compression"] == "lz4"
    assert sink.producer["linger_ms"] == 20.0
    assert sink.producer["acks"] == "all"
    assert sink.producer["request_timeout_ms"] == 5000.0
    assert sink.kafka.client["request_timeout_ms"] == 5000.0
    assert pickle.loads(pickle.dumps(sink)) == sink
    no_topic = parse_sink_options(BOOT)
    assert no_topic.topic is None


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({**BOOT, "topic": " "}, "must not be empty"),
        ({**BOOT, "kafka.value.serializer": "x"}, "cast key/value"),
        ({**BOOT, "kafka.acks": "2"}, "acks"),
        ({**BOOT, "kafka.acks": "1", "kafka.enable.idempotence": "true"}, "idempot"),
        ({**BOOT, "kafka.fetch.max.bytes": "5"}, "unknown option"),
        ({**BOOT, "subscribe": "t"}, "unknown option 'subscribe'"),
    ],
)
def test_sink_option_errors(options: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_sink_options(options)
    assert fragment in str(info.value).lower() or fragment in str(info.value)


def test_spark_query_options_are_ignored() -> None:
    # Spark adds these to a streaming query's source and sink options.
    parse_sink_options({**BOOT, "topic": "t", "checkpointLocation": "/ck", "queryName": "q"})
    parse_source_options({**BOOT, "subscribe": "t", "checkpointLocation": "/ck"}, streaming=True)


def test_sink_idempotence_can_be_turned_off() -> None:
    sink = parse_sink_options({**BOOT, "kafka.enable.idempotence": "false", "kafka.acks": "1"})
    assert sink.producer["enable_idempotence"] is False
    assert sink.producer["acks"] == 1


def test_planning_imports_without_pyspark_and_register_explains() -> None:
    code = (
        "import sys\n"
        "sys.modules['pyspark'] = None  # as if not installed\n"
        "import aiokafka_lite.integrations.spark.kafka_io, aiokafka_lite.integrations.spark.datasource_options, aiokafka_lite.integrations.spark.offset_ranges\n"
        "from aiokafka_lite.integrations.spark import register\n"
        "try:\n"
        "    register(object())\n"
        "except ImportError as exc:\n"
        "    print('IMPORT-ERROR', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "IMPORT-ERROR aiokafka_lite.integrations.spark needs pyspark>=4.0 with pyarrow" in out.stdout


def test_min_offsets_per_trigger_delays_like_spark() -> None:
    from aiokafka_lite.integrations.spark.offset_ranges import delay_batch

    # The first trigger (nothing ran yet) is never delayed.
    assert delay_batch(3, 10, now_ms=1_000_000, last_trigger_ms=0, max_delay_ms=60_000) == (False, 1_000_000)
    # Too few new offsets, the delay not over: skip, the last-trigger time stays.
    assert delay_batch(3, 10, now_ms=1_030_000, last_trigger_ms=1_000_000, max_delay_ms=60_000) == (
        True,
        1_000_000,
    )
    # Enough new offsets: run.
    assert delay_batch(10, 10, now_ms=1_030_000, last_trigger_ms=1_000_000, max_delay_ms=60_000) == (
        False,
        1_030_000,
    )
    # maxTriggerDelay over: run whatever there is.
    assert delay_batch(1, 10, now_ms=1_060_000, last_trigger_ms=1_000_000, max_delay_ms=60_000) == (
        False,
        1_060_000,
    )


def test_min_offsets_per_trigger_options() -> None:
    opts = parse_source_options({**BOOT, "subscribe": "t"}, streaming=True)
    assert opts.min_offsets_per_trigger is None and opts.max_trigger_delay_ms == 15 * 60 * 1000
    opts = parse_source_options(
        {**BOOT, "subscribe": "t", "minOffsetsPerTrigger": "5", "maxTriggerDelay": "30s"}, streaming=True
    )
    assert opts.min_offsets_per_trigger == 5 and opts.max_trigger_delay_ms == 30_000
    for text, ms in (("250", 250), ("2m", 120_000), ("1h", 3_600_000), ("10min", 600_000)):
        got = parse_source_options({**BOOT, "subscribe": "t", "maxTriggerDelay": text}, streaming=True)
        assert got.max_trigger_delay_ms == ms
    with pytest.raises(
        ConfigError, match="minOffsetsPerTrigger \\(10\\) must not exceed maxOffsetsPerTrigger \\(5\\)"
    ):
        parse_source_options(
            {**BOOT, "subscribe": "t", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
            streaming=True,
        )
    with pytest.raises(ConfigError, match="maxTriggerDelay: expected a duration"):
        parse_source_options({**BOOT, "subscribe": "t", "maxTriggerDelay": "soon"}, streaming=True)
