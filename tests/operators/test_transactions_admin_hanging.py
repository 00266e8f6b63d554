"""Issue #30's hanging transaction on the pass's broker (embedded, or the session's Apache
Kafka with ``--kafka=apache``): a transactional producer SIGKILLed mid-transaction with a
10-minute timeout holds the partition's last stable offset; ``transactions find-hanging``
finds it, ``transactions abort --start-offset`` ends it, and a read_committed consumer
moves on. tests/kafka4/test_transactions_admin_apache.py runs the same scenario against
Kafka 4.4 and cross-checks every step with Kafka's own ``kafka-transactions`` tool.
"""

from __future__ import annotations

import asyncio
import uuid

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


def test_a_killed_producers_transaction_is_found_and_aborted(kafka_bootstrap: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic, tid = f"hang-{suffix}", f"hang-tx-{suffix}"
    asyncio.run(create_topic(kafka_bootstrap, topic))
    sigkill(start_hanging_producer(kafka_bootstrap, topic, tid))
    # After the producer died, a committed record lands behind the open transaction.
    after_offset = asyncio.run(produce_plain(kafka_bootstrap, topic, b"after"))

    producers = cli_json(
        kafka_bootstrap, "transactions", "describe-producers", "--topic", topic, "--partition", "0"
    )
    # The killed producer, and the (idempotent) one that wrote 'after', without a transaction.
    (producer,) = [p for p in producers if p["CurrentTransactionStartOffset"] is not None]
    assert len(producers) == 2
    start = producer["CurrentTransactionStartOffset"]
    # 'before' (1 record + its commit marker) precedes the open transaction.
    assert start == 2 and after_offset == 4
    # open-2's sequence: 1 when the commit of 'before' bumped the epoch (transactions V2,
    # sequences restart at 0), 2 without (V1: before=0, open-1=1, open-2=2).
    assert producer["LastSequence"] in (1, 2)
    assert producer["LatestCoordinatorEpoch"] is not None  # the commit marker of 'before'
    assert asyncio.run(committed_end(kafka_bootstrap, topic)) == start  # stuck at the open transaction

    (listed,) = [t for t in cli_json(kafka_bootstrap, "transactions", "list") if t["TransactionalId"] == tid]
    assert (listed["ProducerId"], listed["TransactionState"]) == (producer["ProducerId"], "Ongoing")
    (desc,) = cli_json(kafka_bootstrap, "transactions", "describe", "--transactional-id", tid)
    assert desc["TopicPartitions"] == [f"{topic}-0"]
    assert desc["TransactionTimeoutMs"] == 600_000
    assert desc["ProducerEpoch"] == producer["ProducerEpoch"]

    # With Kafka's default threshold (15 minutes) it is not hanging yet...
    out = ok(cli(kafka_bootstrap, "transactions", "find-hanging", "--topic", topic)).stdout
    assert "No hanging transactions found" in out
    # ...with a threshold below its age it is: the coordinator holds it open too long.
    (hanging,) = cli_json(
        kafka_bootstrap, "transactions", "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"
    )
    assert hanging["ProducerId"] == producer["ProducerId"]
    assert (hanging["StartOffset"], hanging["Reason"]) == (start, "open-too-long")

    # Abort as an operator does with Kafka's tool: by the transaction's start offset.
    out = ok(
        cli(
            kafka_bootstrap,
            "transactions",
            "abort",
            "--topic",
            topic,
            "--partition",
            "0",
            "--start-offset",
            str(start),
        )
    ).stdout
    assert f"producer {producer['ProducerId']}" in out
    # The abort marker follows 'after': the last stable offset is past everything.
    assert asyncio.run(committed_end(kafka_bootstrap, topic)) == after_offset + 2
    assert asyncio.run(read_committed(kafka_bootstrap, topic, 2)) == [b"before", b"after"]
    producers_after = cli_json(
        kafka_bootstrap, "transactions", "describe-producers", "--topic", topic, "--partition", "0"
    )
    assert [p["CurrentTransactionStartOffset"] for p in producers_after] == [None, None]
    assert (
        "No hanging transactions found"
        in ok(
            cli(
                kafka_bootstrap,
                "transactions",
                "find-hanging",
                "--topic",
                topic,
                "--max-transaction-timeout",
                "0",
            )
        ).stdout
    )

    # The coordinator still counts the transaction open (as in Kafka: the admin abort
    # bypasses it); fencing the id ends it there too, with a bumped epoch.
    (fenced,) = cli_json(kafka_bootstrap, "transactions", "fence", "--transactional-id", tid)
    assert fenced["ProducerId"] == producer["ProducerId"]
    assert fenced["ProducerEpoch"] > producer["ProducerEpoch"]
    (desc,) = cli_json(kafka_bootstrap, "transactions", "describe", "--transactional-id", tid)
    assert desc["TransactionState"] == "Empty" and desc["TopicPartitions"] == []


def test_abort_and_find_hanging_refuse_bad_arguments(kafka_bootstrap: str) -> None:
    topic = f"hang-args-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(kafka_bootstrap, topic))
    res = cli(kafka_bootstrap, "transactions", "abort", "--topic", topic, "--partition", "0")
    assert res.exit_code == 2 and "--start-offset" in res.stderr
    res = cli(kafka_bootstrap, "transactions", "find-hanging")
    assert res.exit_code == 2 and "--topic or --broker-id" in res.stderr
    # No open transaction starts there: said so, exit 1.
    res = cli(
        kafka_bootstrap, "transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "5"
    )
    assert res.exit_code == 1 and "could not find any open transaction starting at offset 5" in res.stderr
