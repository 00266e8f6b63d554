"""Issue #30's hanging transactions on an Apache Kafka 4.4 of its own, every step
cross-checked with Kafka's own ``kafka-transactions`` tool
(``org.apache.kafka.tools.TransactionsCommand``, from the ``kafka-tools`` jar).

Two kinds of hanging transaction:

* a transactional producer (another process) SIGKILLed mid-transaction with a
  10-minute timeout: the coordinator still holds it open with the partition, so
  Kafka's ``find-hanging`` does not report it (the coordinator will abort it when its
  timeout passes), while ours reports it as ``open-too-long`` under a threshold below
  its age; ``aiokafka-lite transactions abort --start-offset`` ends it and Kafka's
  ``describe-producers`` sees it closed; a read_committed consumer moves on;
* a transaction the coordinator does not know on the partition (a producer wrote
  transactional records without AddPartitionsToTxn; the broker accepts that only with
  ``transaction.partition.verification.enable=false``, KIP-890's check off, which
  this cluster sets): the kind Kafka's tool reports. Both tools report the same row;
  Kafka's ``abort`` ends it and ours then finds nothing.

confluent-kafka's AdminClient (librdkafka 2.x) has none of these calls, so Kafka's tool
is the only reference here.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
from _support.hanging_txn import (
    cli,
    cli_json,
    committed_end,
    create_topic,
    ok,
    produce_plain,
    read_committed,
    sigkill,
    start_hanging_producer,
)

from aiokafka_lite.testing.apache import ApacheCluster, _java, kafka_tools_classpath
from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import (
    FindCoordinatorRequest,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from aiokafka_lite.wire.records import encode_batch


@pytest.fixture(scope="module")
def cluster(pytestconfig: pytest.Config) -> Iterator[ApacheCluster]:
    version = pytestconfig.getoption("--kafka-version", None)
    configs = {"transaction.partition.verification.enable": "false"}
    with ApacheCluster(1, version=str(version) if version else None, configs=configs) as c:
        yield c


@pytest.fixture(scope="module")
def tools(cluster: ApacheCluster) -> str:
    return kafka_tools_classpath(cluster.version)


def kafka_tool(cluster: ApacheCluster, classpath: str, *args: str) -> list[dict[str, str]]:
    """Kafka's ``kafka-transactions.sh`` with ``args``: its table as one dict a row."""
    cmd = [
        _java(),
        "-Xmx256m",
        "-cp",
        classpath,
        "org.apache.kafka.tools.TransactionsCommand",
        "--bootstrap-server",
        cluster.bootstrap,
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if not lines or lines[0].split()[0] not in {"TransactionalId", "CoordinatorId", "ProducerId", "Topic"}:
        return []  # e.g. "No hanging transactions found"
    # A padded table: each column starts where its header does (a cell may be empty).
    header, *rows = lines
    names = header.split()
    starts: list[int] = []
    for n in names:
        starts.append(header.index(n, starts[-1] + 1 if starts else 0))
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    return [{n: row[a:b].strip() for n, (a, b) in zip(names, bounds, strict=True)} for row in rows]


def _text(value: object, column: str = "") -> str:
    """Our JSON value as Kafka's tool prints it: an absent value as -1 (``None`` for the
    start offset of no open transaction), lists joined with commas."""
    if value is None:
        return "None" if column == "CurrentTransactionStartOffset" else "-1"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def _same(ours: dict[str, object], kafkas: dict[str, str], columns: list[str]) -> None:
    assert {c: _text(ours[c], c) for c in columns} == {c: kafkas[c] for c in columns}


def test_a_killed_producer_as_both_tools_see_it(cluster: ApacheCluster, tools: str) -> None:
    boot = cluster.bootstrap
    suffix = uuid.uuid4().hex[:8]
    topic, tid = f"hang-{suffix}", f"hang-tx-{suffix}"
    asyncio.run(create_topic(boot, topic))
    sigkill(start_hanging_producer(boot, topic, tid))
    after_offset = asyncio.run(produce_plain(boot, topic, b"after"))

    # list
    (ours_listed,) = [t for t in cli_json(boot, "transactions", "list") if t["TransactionalId"] == tid]
    (kafka_listed,) = [t for t in kafka_tool(cluster, tools, "list") if t["TransactionalId"] == tid]
    _same(ours_listed, kafka_listed, ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"])
    assert kafka_listed["TransactionState"] == "Ongoing"

    # describe (the duration moves on between the two calls)
    (ours_desc,) = cli_json(boot, "transactions", "describe", "--transactional-id", tid)
    (kafka_desc,) = kafka_tool(cluster, tools, "describe", "--transactional-id", tid)
    _same(
        ours_desc,
        kafka_desc,
        [
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TopicPartitions",
        ],
    )
    assert kafka_desc["TopicPartitions"] == f"{topic}-0" and kafka_desc["TransactionTimeoutMs"] == "600000"

    # describe-producers: the killed producer and the idempotent one that wrote 'after'
    where = ["--topic", topic, "--partition", "0"]
    ours_producers = cli_json(boot, "transactions", "describe-producers", *where)
    kafka_producers = kafka_tool(cluster, tools, "describe-producers", *where)
    columns = [
        "ProducerId",
        "ProducerEpoch",
        "LatestCoordinatorEpoch",
        "LastSequence",
        "LastTimestamp",
        "CurrentTransactionStartOffset",
    ]
    assert sorted(tuple(_text(p[c], c) for c in columns) for p in ours_producers) == sorted(
        tuple(p[c] for c in columns) for p in kafka_producers
    )
    (killed,) = [p for p in ours_producers if p["CurrentTransactionStartOffset"] is not None]
    start = killed["CurrentTransactionStartOffset"]
    assert killed["ProducerId"] == ours_listed["ProducerId"] and start == 2
    assert asyncio.run(committed_end(boot, topic)) == start

    # find-hanging with a zero threshold: Kafka's tool reports nothing (the coordinator
    # holds the transaction with the partition); ours reports it open too long.
    hanging = ["find-hanging", "--topic", topic, "--max-transaction-timeout", "0"]
    assert kafka_tool(cluster, tools, *hanging) == []
    (ours_hanging,) = cli_json(boot, "transactions", *hanging)
    assert (ours_hanging["ProducerId"], ours_hanging["StartOffset"]) == (killed["ProducerId"], start)
    assert ours_hanging["Reason"] == "open-too-long"
    assert (
        "No hanging transactions found"
        in ok(cli(boot, "transactions", "find-hanging", "--topic", topic)).stdout
    )

    # Our abort, seen by Kafka's describe-producers; read_committed moves on.
    ok(cli(boot, "transactions", "abort", *where, "--start-offset", str(start)))
    (closed,) = [
        p
        for p in kafka_tool(cluster, tools, "describe-producers", *where)
        if p["ProducerId"] == str(killed["ProducerId"])
    ]
    assert closed["CurrentTransactionStartOffset"] == "None"
    assert asyncio.run(committed_end(boot, topic)) == after_offset + 2
    assert asyncio.run(read_committed(boot, topic, 2)) == [b"before", b"after"]

    # Fence the id so the coordinator's open transaction ends too; both tools agree.
    (fenced,) = cli_json(boot, "transactions", "fence", "--transactional-id", tid)
    (kafka_desc,) = kafka_tool(cluster, tools, "describe", "--transactional-id", tid)
    assert (kafka_desc["ProducerId"], kafka_desc["ProducerEpoch"]) == (
        str(fenced["ProducerId"]),
        str(fenced["ProducerEpoch"]),
    )
    assert kafka_desc["TransactionState"] == "Empty"


async def _write_outside_the_transaction(boot: str, topic: str, tid: str) -> tuple[int, int]:
    """Transactional records on partition 0 the coordinator never heard of (no
    AddPartitionsToTxn): the producer id/epoch used."""
    c = await RawClient.connect(boot, client_id="hanging")
    try:
        await c.request(FindCoordinatorRequest(key=tid, key_type=1), 3)
        while True:
            init = await c.request(
                InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60_000), 4
            )
            assert isinstance(init, InitProducerIdResponse)
            if init.error_code not in (14, 15, 51):  # still loading / not available / concurrent
                break
            await asyncio.sleep(0.1)
        assert init.error_code == 0, init
        data = encode_batch(
            [(int(time.time() * 1000), b"k", b"lost", ())],
            is_transactional=True,
            producer_id=init.producer_id,
            producer_epoch=init.producer_epoch,
            base_sequence=0,
        )
        resp = await c.request(
            ProduceRequest(
                transactional_id=tid,
                acks=-1,
                timeout_ms=30_000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name=topic,
                        partition_data=[ProduceRequest.PartitionProduceData(index=0, records=data)],
                    )
                ],
            ),
            11,  # the version-1 protocol: no implicit AddPartitionsToTxn (that is Produce v12+)
        )
        assert isinstance(resp, ProduceResponse)
        assert resp.responses[0].partition_responses[0].error_code == 0, resp
        return init.producer_id, init.producer_epoch
    finally:
        await c.close()


def test_a_transaction_the_coordinator_does_not_know_as_both_tools_see_it(
    cluster: ApacheCluster, tools: str
) -> None:
    boot = cluster.bootstrap
    suffix = uuid.uuid4().hex[:8]
    topic, tid = f"lost-{suffix}", f"lost-tx-{suffix}"
    asyncio.run(create_topic(boot, topic))
    pid, epoch = asyncio.run(_write_outside_the_transaction(boot, topic, tid))
    assert asyncio.run(committed_end(boot, topic)) == 0  # stuck at the transaction's first record

    hanging = ["find-hanging", "--topic", topic, "--max-transaction-timeout", "0"]
    (kafka_row,) = kafka_tool(cluster, tools, *hanging)
    (ours_row,) = cli_json(boot, "transactions", *hanging)
    assert ours_row["Reason"] == "partition-not-in-transaction" and ours_row["TransactionalId"] == tid
    _same(
        ours_row,
        kafka_row,
        [
            "Topic",
            "Partition",
            "ProducerId",
            "ProducerEpoch",
            "CoordinatorEpoch",
            "StartOffset",
            "LastTimestamp",
        ],
    )
    assert (kafka_row["ProducerId"], kafka_row["ProducerEpoch"]) == (str(pid), str(epoch))
    # By broker too (every partition with a replica on node 1, ours and Kafka's).
    by_broker = ["find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"]
    assert [r for r in kafka_tool(cluster, tools, *by_broker) if r["Topic"] == topic] == [kafka_row]
    assert [r["Topic"] for r in cli_json(boot, "transactions", *by_broker) if r["Topic"] == topic] == [topic]

    # Kafka's tool aborts it; ours then finds nothing and read_committed passes it.
    kafka_tool(cluster, tools, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    assert cli_json(boot, "transactions", *hanging) == []
    assert asyncio.run(committed_end(boot, topic)) == 2
