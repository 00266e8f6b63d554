"""``aiokafka-lite transactions list|describe|describe-producers|abort|find-hanging|fence``:
transactions and producers (KIP-664), like Kafka's ``kafka-transactions.sh``.

The commands, options and table columns are those of Kafka's tool (TransactionalId,
ProducerId, ... as it prints them); ``--json`` prints the same rows as JSON objects.

* ``abort --topic T --partition P --start-offset O`` finds the producer whose open
  transaction starts at ``O`` on the partition (DescribeProducers) and aborts it with
  its producer id, epoch and coordinator epoch (0 when it has none), as Kafka's tool
  does; ``--producer-id/--producer-epoch/--coordinator-epoch`` give them directly.
* ``find-hanging`` searches ``--topic`` (one ``--partition`` or all) or every partition
  with a replica on ``--broker-id``. ``--max-transaction-timeout`` is in minutes as in
  Kafka's tool (default 15, the broker's ``transaction.max.timeout.ms``), but ours
  takes fractions (``0.05`` = 3 s) where Kafka's takes whole minutes. Besides what
  Kafka's tool reports (a producer no coordinator knows, or whose transaction does not
  include the partition), ours also reports a transaction its coordinator has held open
  longer than that threshold (reason ``open-too-long``): a producer that died with a
  long transaction timeout, found before the coordinator times it out.
  ``admin/transactions.py`` (``find_hanging_transactions``) has the rules.
* ``fence --transactional-id ID`` fences the id's producer (``Admin.fence_producers``);
  Kafka's tool has no such command (its nearest is ``forceTerminateTransaction``, KIP-939).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from aiokafka_lite.admin import Admin
from aiokafka_lite.admin.transactions import (
    DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    AbortTransactionSpec,
    find_hanging_transactions,
)
from aiokafka_lite.cli._common import (
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    ClientOptions,
    JsonOutput,
    Timeout,
    fail,
    print_json,
    run_async,
    stdout_console,
)
from aiokafka_lite.cli._format import table
from aiokafka_lite.cli.topics import make_admin
from aiokafka_lite.core.structs import TopicPartition

app = typer.Typer(
    help="Transactions and producers (like kafka-transactions.sh): list, describe, "
    "describe-producers, abort, find-hanging, fence.",
    no_args_is_help=True,
)

Topic = Annotated[str, typer.Option("--topic", help="Topic name.")]
Partition = Annotated[int, typer.Option("--partition", help="Partition number.", min=0)]


def _print(rows: list[dict[str, Any]], columns: tuple[str, ...], as_json: bool) -> None:
    if as_json:
        print_json(rows)
        return
    stdout_console().print(table(columns, ([r[c] for c in columns] for r in rows)))


@app.command("list")
def list_transactions(
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    state: Annotated[
        list[str] | None,
        typer.Option("--state", help="Only transactions in this state (Ongoing, Empty...). Repeatable."),
    ] = None,
    producer_id: Annotated[
        list[int] | None, typer.Option("--producer-id", help="Only this producer id. Repeatable.")
    ] = None,
    duration_filter: Annotated[
        int,
        typer.Option(
            "--duration-filter",
            help="Only transactions running longer than this many ms (< 0: all), Kafka 3.8+.",
        ),
    ] = -1,
    pattern: Annotated[
        str | None,
        typer.Option("--transactional-id-pattern", help="Only ids matching this regex, Kafka 4.1+."),
    ] = None,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """List transactions known to the transaction coordinators."""

    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            result = await admin.list_transactions(
                states=state,
                producer_ids=producer_id,
                duration_filter_ms=duration_filter if duration_filter >= 0 else None,
                transactional_id_pattern=pattern,
            )
        if result.errors:
            raise next(iter(result.errors.values()))
        return [
            {
                "TransactionalId": t.transactional_id,
                "Coordinator": t.coordinator_id,
                "ProducerId": t.producer_id,
                "TransactionState": t.state.value,
            }
            for t in result.transactions
        ]

    _print(run_async(go()), ("TransactionalId", "Coordinator", "ProducerId", "TransactionState"), as_json)


@app.command("describe")
def describe_transaction(
    transactional_id: Annotated[str, typer.Option("--transactional-id", help="Transactional id.")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Describe the state of a transactional id at its coordinator."""

    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            d = (await admin.describe_transactions([transactional_id])).raise_errors()[transactional_id]
        start = d.transaction_start_time_ms
        return [
            {
                "CoordinatorId": d.coordinator_id,
                "TransactionalId": d.transactional_id,
                "ProducerId": d.producer_id,
                "ProducerEpoch": d.producer_epoch,
                "TransactionState": d.state.value,
                "TransactionTimeoutMs": d.transaction_timeout_ms,
                "CurrentTransactionStartTimeMs": start,
                "TransactionDurationMs": None if start is None else int(time.time() * 1000) - start,
                "TopicPartitions": [f"{tp.topic}-{tp.partition}" for tp in sorted(d.topic_partitions)],
            }
        ]

    columns = (
        "CoordinatorId",
        "TransactionalId",
        "ProducerId",
        "ProducerEpoch",
        "TransactionState",
        "TransactionTimeoutMs",
        "CurrentTransactionStartTimeMs",
        "TransactionDurationMs",
        "TopicPartitions",
    )
    _print(run_async(go()), columns, as_json)


_PRODUCER_COLUMNS = (
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
)


@app.command("describe-producers")
def describe_producers(
    topic: Topic,
    partition: Partition,
    broker_id: Annotated[
        int | None, typer.Option("--broker-id", help="Describe the replica on this broker.")
    ] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Describe the active producers of a topic partition."""
    tp = TopicPartition(topic, partition)

    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            st = (await admin.describe_producers([tp], broker_id=broker_id)).raise_errors()[tp]
        return [
            {
                "ProducerId": p.producer_id,
                "ProducerEpoch": p.producer_epoch,
                "LatestCoordinatorEpoch": p.coordinator_epoch,
                "LastSequence": p.last_sequence,
                "LastTimestamp": p.last_timestamp,
                "CurrentTransactionStartOffset": p.current_transaction_start_offset,
            }
            for p in st.producers
        ]

    _print(run_async(go()), _PRODUCER_COLUMNS, as_json)


@app.command("abort")
def abort_transaction(
    topic: Topic,
    partition: Partition,
    start_offset: Annotated[
        int | None, typer.Option("--start-offset", help="Start offset of the transaction to abort.")
    ] = None,
    producer_id: Annotated[int | None, typer.Option("--producer-id", help="Producer id.")] = None,
    producer_epoch: Annotated[int | None, typer.Option("--producer-epoch", help="Producer epoch.")] = None,
    coordinator_epoch: Annotated[
        int | None, typer.Option("--coordinator-epoch", help="Coordinator epoch.")
    ] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Abort a hanging transaction on one partition (needs ClusterAction)."""
    tp = TopicPartition(topic, partition)
    direct = (producer_id, producer_epoch, coordinator_epoch)
    if start_offset is None and None in direct:
        fail("give --start-offset, or all of --producer-id, --producer-epoch and --coordinator-epoch", 2)
    if start_offset is not None and any(v is not None for v in direct):
        fail("give either --start-offset or --producer-id/--producer-epoch/--coordinator-epoch, not both", 2)

    async def go() -> AbortTransactionSpec:
        async with make_admin(bootstrap, option, timeout) as admin:
            if start_offset is not None:
                spec = await _spec_at(admin, tp, start_offset)
            else:
                assert (
                    producer_id is not None and producer_epoch is not None and coordinator_epoch is not None
                )
                spec = AbortTransactionSpec(tp, producer_id, producer_epoch, coordinator_epoch)
            await admin.abort_transaction(spec)
            return spec

    spec = run_async(go())
    typer.echo(
        f"aborted the transaction of producer {spec.producer_id} (epoch {spec.producer_epoch}) "
        f"on {topic}-{partition}"
    )


async def _spec_at(admin: Admin, tp: TopicPartition, start_offset: int) -> AbortTransactionSpec:
    st = (await admin.describe_producers([tp])).raise_errors()[tp]
    for p in st.producers:
        if p.current_transaction_start_offset == start_offset:
            return AbortTransactionSpec(tp, p.producer_id, p.producer_epoch, p.coordinator_epoch or 0)
    fail(
        f"could not find any open transaction starting at offset {start_offset} on {tp.topic}-{tp.partition}"
    )


@app.command("find-hanging")
def find_hanging(
    broker_id: Annotated[
        int | None, typer.Option("--broker-id", help="Search the partitions with a replica on this broker.")
    ] = None,
    topic: Annotated[str | None, typer.Option("--topic", help="Search this topic's partitions.")] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", help="Only this partition (needs --topic).", min=0)
    ] = None,
    max_transaction_timeout: Annotated[
        float,
        typer.Option(
            "--max-transaction-timeout",
            help="Minutes a transaction may stay open (fractions allowed; default 15).",
            min=0,
        ),
    ] = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS / 60_000,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Find open transactions that look hung (see the module docstring)."""
    if topic is None and broker_id is None:
        fail("find-hanging needs --topic or --broker-id to limit the scope of the search", 2)
    if partition is not None and topic is None:
        fail("--partition needs --topic", 2)

    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            tps = await _partitions_to_search(admin, broker_id, topic, partition)
            now = int(time.time() * 1000)
            hanging = await find_hanging_transactions(
                admin.requests,
                tps,
                max_transaction_timeout_ms=max_transaction_timeout * 60_000,
                broker_id=broker_id,
                now_ms=now,
            )
        return [
            {
                "Topic": h.topic_partition.topic,
                "Partition": h.topic_partition.partition,
                "ProducerId": h.producer.producer_id,
                "ProducerEpoch": h.producer.producer_epoch,
                "CoordinatorEpoch": h.producer.coordinator_epoch,
                "StartOffset": h.producer.current_transaction_start_offset,
                "LastTimestamp": h.producer.last_timestamp,
                "Duration(min)": (now - h.producer.last_timestamp) // 60_000,
                "Reason": h.reason,
                "TransactionalId": h.transactional_id,
            }
            for h in hanging
        ]

    rows = run_async(go())
    if not rows and not as_json:
        typer.echo("No hanging transactions found")
        return
    columns = (
        "Topic",
        "Partition",
        "ProducerId",
        "ProducerEpoch",
        "CoordinatorEpoch",
        "StartOffset",
        "LastTimestamp",
        "Duration(min)",
        "Reason",
    )
    _print(rows, columns, as_json)


async def _partitions_to_search(
    admin: Admin, broker_id: int | None, topic: str | None, partition: int | None
) -> list[TopicPartition]:
    if topic is not None and partition is not None:
        return [TopicPartition(topic, partition)]
    names = [topic] if topic is not None else list(await admin.list_topics())
    described = (await admin.describe_topics(names)).raise_errors() if names else {}
    return [
        TopicPartition(name, p.partition)
        for name, d in sorted(described.items())
        for p in d.partitions
        if broker_id is None or broker_id in p.replicas
    ]


@app.command("fence")
def fence_producers(
    transactional_id: Annotated[
        list[str], typer.Option("--transactional-id", help="Transactional id to fence. Repeatable.")
    ],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Fence the producers of transactional ids (bump their epoch; an open transaction is aborted)."""

    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            fenced = (await admin.fence_producers(transactional_id)).raise_errors()
        return [
            {"TransactionalId": t, "ProducerId": r.producer_id, "ProducerEpoch": r.producer_epoch}
            for t, r in fenced.items()
        ]

    _print(run_async(go()), ("TransactionalId", "ProducerId", "ProducerEpoch"), as_json)
