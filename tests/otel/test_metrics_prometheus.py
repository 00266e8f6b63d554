"""Prometheus text exposition: valid per the text format (0.0.4), values equal to metrics()."""

from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass, field

from aiokafka_lite import Admin, Consumer, Producer
from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.core.client_metrics import HistogramValue, MetricFamily, MetricSpec, Point
from aiokafka_lite.integrations.prometheus import (
    CONTENT_TYPE,
    prometheus_name,
    render_families,
    render_prometheus,
)

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
_VALUE = r"[-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|Inf|NaN)"
_HELP = re.compile(rf"^# HELP ({_NAME}) (.*)$")
_TYPE = re.compile(rf"^# TYPE ({_NAME}) (counter|gauge|histogram|summary|untyped)$")
_SAMPLE = re.compile(rf"^({_NAME})(\{{.*\}})? ({_VALUE})$")
_PAIR = re.compile(rf'({_LABEL})="((?:[^"\\\n]|\\\\|\\"|\\n)*)"')


@dataclass
class Family:
    name: str
    type: str
    help: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}[m.group(1)], value)


def _labels(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    body = text[1:-1]
    out: dict[str, str] = {}
    pos = 0
    while pos < len(body):
        m = _PAIR.match(body, pos)
        assert m is not None, f"bad label set {text!r} at {pos}"
        assert m.group(1) not in out, f"label {m.group(1)} twice in {text!r}"
        out[m.group(1)] = _unescape(m.group(2))
        pos = m.end()
        if pos < len(body):
            assert body[pos] == ",", f"expected ',' in {text!r}"
            pos += 1
    return out


def parse(text: str) -> dict[str, Family]:
    """A strict reading of the text format: HELP then TYPE before a family's samples, each
    family in one block, sample names of the family (histograms: _bucket/_sum/_count),
    no duplicate series, histogram buckets cumulative and ending in +Inf equal to _count."""
    assert text.endswith("\n")
    families: dict[str, Family] = {}
    current: Family | None = None
    pending_help: tuple[str, str] | None = None
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for line in text[:-1].split("\n"):
        if m := _HELP.match(line):
            assert m.group(1) not in families, f"family {m.group(1)} appears twice"
            pending_help = (m.group(1), m.group(2))
            continue
        if m := _TYPE.match(line):
            assert pending_help is not None and pending_help[0] == m.group(1), line
            current = families[m.group(1)] = Family(m.group(1), m.group(2), pending_help[1])
            pending_help = None
            continue
        assert not line.startswith("#"), f"unexpected comment {line!r}"
        m = _SAMPLE.match(line)
        assert m is not None, f"not a sample line: {line!r}"
        assert current is not None
        name, labels, value = m.group(1), _labels(m.group(2)), m.group(3)
        allowed = (
            {current.name + s for s in ("_bucket", "_sum", "_count")}
            if current.type == "histogram"
            else {current.name}
        )
        assert name in allowed, f"sample {name} inside family {current.name}"
        key = (name, tuple(sorted(labels.items())))
        assert key not in seen, f"duplicate series {key}"
        seen.add(key)
        number = float(value.replace("Inf", "inf"))
        if current.type == "counter":
            assert name.endswith("_total") and number >= 0
        current.samples.append((name, labels, number))
    for fam in families.values():
        assert fam.samples, f"family {fam.name} without samples"
        if fam.type == "histogram":
            _check_histogram(fam)
    return families


def _check_histogram(fam: Family) -> None:
    series: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
    counts: dict[tuple[tuple[str, str], ...], float] = {}
    for name, labels, value in fam.samples:
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        if name.endswith("_bucket"):
            series.setdefault(rest, []).append((float(labels["le"].replace("Inf", "inf")), value))
        elif name.endswith("_count"):
            counts[rest] = value
    assert series.keys() == counts.keys()
    for rest, buckets in series.items():
        bounds = [b for b, _ in buckets]
        assert bounds == sorted(bounds) and math.isinf(bounds[-1])
        values = [v for _, v in buckets]
        assert values == sorted(values), "buckets must be cumulative"
        assert values[-1] == counts[rest]


def value(fams: dict[str, Family], name: str, **labels: str) -> float:
    """Sum of the samples called ``name`` (histogram parts included) with these labels."""
    found = [
        v
        for fam in fams.values()
        for n, ls, v in fam.samples
        if n == name and all(ls.get(k) == x for k, x in labels.items())
    ]
    assert found, f"no sample {name} {labels}"
    return sum(found)


def test_names_follow_the_opentelemetry_to_prometheus_conversion() -> None:
    assert prometheus_name("messaging.client.sent.messages", "{message}", "counter") == (
        "messaging_client_sent_messages_total"
    )
    assert prometheus_name("messaging.client.operation.duration", "s", "histogram") == (
        "messaging_client_operation_duration_seconds"
    )
    assert (
        prometheus_name("aiokafka_lite.network.io", "By", "counter") == "aiokafka_lite_network_io_bytes_total"
    )
    assert prometheus_name("aiokafka_lite.consumer.lag", "{message}", "gauge") == "aiokafka_lite_consumer_lag"
    assert CONTENT_TYPE.startswith("text/plain; version=0.0.4")


def test_label_values_and_help_are_escaped() -> None:
    spec = MetricSpec("x.odd", "gauge", "s", 'line one\nback\\slash "quoted"')
    hist = MetricSpec("x.hist", "histogram", "By", "sizes")
    text = render_families(
        [
            MetricFamily(spec, [Point((("a.b", 'q"uote\\back\nnl'), ("c", "")), 1.5)]),
            MetricFamily(hist, [Point((("k", "v"),), HistogramValue((1.0, 10.0), [2, 0, 3], 5, 40.5))]),
            MetricFamily(MetricSpec("x.empty", "counter", "", "no points"), []),
        ]
    )
    fams = parse(text)
    assert set(fams) == {"x_odd_seconds", "x_hist_bytes"}
    assert "\\n" in text.splitlines()[0] and "\n" not in fams["x_odd_seconds"].help.replace("\\n", "")
    ((_, labels, v),) = fams["x_odd_seconds"].samples
    assert labels == {"a_b": 'q"uote\\back\nnl', "c": ""} and v == 1.5
    buckets = [(ls["le"], v) for n, ls, v in fams["x_hist_bytes"].samples if n.endswith("_bucket")]
    assert buckets == [("1", 2), ("10", 2), ("+Inf", 5)]
    assert value(fams, "x_hist_bytes_sum") == 40.5


async def test_exposition_parses_and_matches_the_clients_metrics(kafka_cluster: EmbeddedCluster) -> None:
    topic = f"prom-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(topic, 3)
    async with (
        Producer(kafka_cluster.bootstrap, linger_ms=2, client_id="prom-p", compression="gzip") as producer,
        Consumer(
            kafka_cluster.bootstrap,
            topics=topic,
            group_id=f"g-{topic}",
            auto_offset_reset="earliest",
            client_id="prom-c",
        ) as consumer,
        Admin(kafka_cluster.bootstrap, client_id="prom-a") as admin,
    ):
        for i in range(30):
            await producer.enqueue(topic, b"payload-%d" % i, key=b"%d" % (i % 7))
        await producer.flush()
        got = 0
        async for _ in consumer:
            got += 1
            if got == 20:
                break
        await admin.describe_topics([topic])
        text = render_prometheus(producer, consumer, admin)
        pm, cm, am = producer.metrics(), consumer.metrics(), admin.metrics()

    fams = parse(text)
    assert fams["messaging_client_sent_messages_total"].type == "counter"
    assert value(fams, "messaging_client_sent_messages_total", messaging_destination_name=topic) == 30
    assert pm["records_sent"] == 30
    assert value(fams, "messaging_client_consumed_messages_total", messaging_client_id="prom-c") == 20
    assert cm["records_consumed"] == 20
    assert value(fams, "aiokafka_lite_producer_sent_bytes_total") == pm["bytes_sent"]
    assert value(fams, "aiokafka_lite_consumer_fetched_bytes_total") == cm["bytes_fetched"]
    lag = value(fams, "aiokafka_lite_consumer_lag", messaging_destination_name=topic)
    assert lag == sum(p["lag"] for p in cm["partitions"] if p["lag"] is not None) == 10
    for who, m in (("prom-p", pm), ("prom-c", cm), ("prom-a", am)):
        brokers = m["client"]["brokers"]
        sent = value(
            fams,
            "aiokafka_lite_network_io_bytes_total",
            messaging_client_id=who,
            network_io_direction="transmit",
        )
        assert sent == sum(b["bytes_sent"] for b in brokers.values()) > 0
        requests = value(fams, "aiokafka_lite_requests_total", messaging_client_id=who)
        assert requests == sum(b["requests"] for b in brokers.values())
    # Histograms: the batch sizes the producer counted, request latency per API.
    batches = pm["batch_size_bytes"]
    assert (
        value(fams, "aiokafka_lite_producer_batch_size_bytes_count") == batches["count"] == pm["batches_sent"]
    )
    assert value(fams, "aiokafka_lite_producer_batch_size_bytes_sum") == batches["sum"]
    assert fams["aiokafka_lite_request_duration_seconds"].type == "histogram"
    assert (
        value(
            fams,
            "aiokafka_lite_request_duration_seconds_count",
            kafka_api_name="Metadata",
            messaging_client_id="prom-a",
        )
        > 0
    )
    sends = value(fams, "messaging_client_operation_duration_seconds_count", messaging_operation_name="send")
    assert sends == sum(
        b["latency_by_api"][0]["count"] for b in pm["client"]["brokers"].values() if 0 in b["latency_by_api"]
    )
