"""``aiokafka-lite consume``: print records, one value per line by default."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, BinaryIO

import typer

from aiokafka_lite.admin import Admin
from aiokafka_lite.cli._common import (
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    ClientOptions,
    err_console,
    fail,
    parse_client_options,
    parse_timestamp,
    run_async,
)
from aiokafka_lite.cli._format import DEFAULT_FORMAT, FormatError, compile_format, record_to_json
from aiokafka_lite.cli._schemas import SchemaTextError, ValueDecoder, value_decoder
from aiokafka_lite.consume import Consumer, ConsumerConfig, Record
from aiokafka_lite.core.errors import ConfigError, UnknownTopicOrPartitionError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net import ClientConfig

#: How long one getmany waits; bounds how late --exit and --idle-timeout notice.
POLL_MS = 200
MAX_RECORDS_PER_POLL = 2000


@dataclass(frozen=True, slots=True)
class _Start:
    """Where a consumer without a group starts: one of the four, or the end by default."""

    beginning: bool = False
    offset: int | None = None  # >= 0: that offset; < 0: this many before the end
    timestamp_ms: int | None = None


async def _assign(
    consumer: Consumer, admin: Admin, topic: str, partitions: list[int] | None, start: _Start
) -> None:
    """Manual assignment and start positions. Offset lookups go through ``admin`` (its own
    connection), so they never wait behind the consumer's fetch long polls."""
    available = [p.partition for p in (await admin.describe_topics([topic])).raise_errors()[topic].partitions]
    if partitions:
        missing = sorted(set(partitions) - set(available))
        if missing:
            raise UnknownTopicOrPartitionError(
                f"{topic} has no partition(s) {', '.join(map(str, missing))} (it has {len(available)})"
            )
        chosen = sorted(set(partitions))
    else:
        chosen = sorted(available)
    tps = [TopicPartition(topic, p) for p in chosen]
    seeks: dict[TopicPartition, int] = {}
    if start.timestamp_ms is not None:
        found = (await admin.list_offsets(dict.fromkeys(tps, start.timestamp_ms))).raise_errors()
        # -1: nothing at or after the timestamp; start at the end (new records only).
        seeks = {tp: r.offset for tp, r in found.items() if r.offset >= 0}
    elif start.offset is not None and start.offset >= 0:
        seeks = dict.fromkeys(tps, start.offset)  # beyond the end: auto_offset_reset decides
    elif start.offset is not None:
        begin = (await admin.list_offsets(dict.fromkeys(tps, "earliest"))).raise_errors()
        end = (await admin.list_offsets(dict.fromkeys(tps, "latest"))).raise_errors()
        seeks = {tp: max(begin[tp].offset, end[tp].offset + start.offset) for tp in tps}
    consumer.assign(tps)
    for tp in tps:
        if tp in seeks:
            consumer.seek(tp, seeks[tp])
        elif start.beginning:
            consumer.seek_to_beginning(tp)  # lazy: resolved by the fetcher
        else:
            consumer.seek_to_end(tp)


async def _at_end(consumer: Consumer, admin: Admin, ends: dict[TopicPartition, int], committed: bool) -> bool:
    """True when every assigned partition's position reached its end offset (looked up once)."""
    assigned = consumer.assignment()
    if not assigned:
        return False  # a group member before its first assignment
    new = [tp for tp in assigned if tp not in ends]
    if new:
        found = await admin.list_offsets(
            dict.fromkeys(new, "latest"),
            isolation_level="read_committed" if committed else "read_uncommitted",
        )
        ends.update((tp, r.offset) for tp, r in found.raise_errors().items())
    for tp in assigned:
        if await consumer.position(tp) < ends[tp]:
            return False
    return True


def _json_line(record: Record) -> bytes:
    return record_to_json(record).encode() + b"\n"


def _silence_stdout() -> None:
    """After a broken pipe (``consume ... | head``): send the rest of stdout nowhere, so the
    interpreter's final flush does not fail too."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


async def _consume(
    consumer: Consumer,
    admin: Admin,
    topic: str,
    partitions: list[int] | None,
    start: _Start,
    render: Callable[[Record], bytes],
    out: BinaryIO,
    count: int | None,
    exit_at_end: bool,
    idle_timeout: float | None,
    grouped: bool,
    schema_registry: str | None = None,
) -> int:
    if schema_registry is None:
        return await _consume_records(
            consumer, admin, topic, partitions, start, render, out, count, exit_at_end, idle_timeout, grouped
        )
    async with value_decoder(schema_registry) as decoder:
        return await _consume_records(
            consumer,
            admin,
            topic,
            partitions,
            start,
            render,
            out,
            count,
            exit_at_end,
            idle_timeout,
            grouped,
            decoder,
        )


async def _consume_records(
    consumer: Consumer,
    admin: Admin,
    topic: str,
    partitions: list[int] | None,
    start: _Start,
    render: Callable[[Record], bytes],
    out: BinaryIO,
    count: int | None,
    exit_at_end: bool,
    idle_timeout: float | None,
    grouped: bool,
    decoder: ValueDecoder | None = None,
) -> int:
    seen = 0
    ends: dict[TopicPartition, int] = {}
    async with admin, consumer:
        # Fail fast with a clear error for a missing topic (metadata never creates it here).
        (await admin.describe_topics([topic])).raise_errors()
        if not grouped:
            await _assign(consumer, admin, topic, partitions, start)
        loop = asyncio.get_running_loop()
        last_data = loop.time()
        while count is None or seen < count:
            room = MAX_RECORDS_PER_POLL if count is None else min(MAX_RECORDS_PER_POLL, count - seen)
            batch = await consumer.getmany(timeout_ms=POLL_MS, max_records=room)
            if batch:
                last_data = loop.time()
                records = [r for recs in batch.values() for r in recs]
                if decoder is not None:
                    # Decoded before anything is printed or committed: a record that cannot be
                    # decoded stops the command before its batch counts as consumed.
                    records = [r._replace(value=await decoder.decode(r.value)) for r in records]
                chunks = [render(r) for r in records]
                seen += len(chunks)
                try:
                    out.write(b"".join(chunks))
                    out.flush()
                except BrokenPipeError:
                    _silence_stdout()
                    break
            elif idle_timeout is not None and loop.time() - last_data >= idle_timeout:
                break
            if exit_at_end and await _at_end(consumer, admin, ends, consumer.config.read_committed):
                break
        if grouped:
            await consumer.commit()  # what was printed counts as consumed
    return seen


def consume(
    topic: Annotated[str, typer.Argument(help="Topic to consume.")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    from_beginning: Annotated[
        bool,
        typer.Option(
            "--from-beginning",
            help="Start at the earliest offset (with --group: only where the group has no commit).",
        ),
    ] = False,
    from_end: Annotated[
        bool, typer.Option("--from-end", help="Start at the end: only new records (the default).")
    ] = False,
    offset: Annotated[
        int | None,
        typer.Option(
            "--offset",
            "-o",
            help="Start at this offset in every partition; negative: that many before the end.",
        ),
    ] = None,
    timestamp: Annotated[
        str | None,
        typer.Option(
            "--timestamp",
            "-t",
            help="Start at the first record at or after this time (milliseconds, or ISO-8601 "
            "such as 2024-05-01T12:00:00Z; UTC unless an offset is given).",
        ),
    ] = None,
    group: Annotated[
        str | None,
        typer.Option(
            "--group", "-g", help="Consume as a member of this consumer group (commits what it prints)."
        ),
    ] = None,
    partition: Annotated[
        list[int] | None,
        typer.Option(
            "--partition", "-p", help="Consume only this partition (repeatable; not with --group).", min=0
        ),
    ] = None,
    count: Annotated[int | None, typer.Option("--count", "-c", help="Stop after N records.", min=1)] = None,
    exit_at_end: Annotated[
        bool, typer.Option("--exit", "-e", help="Stop once every partition is read up to its end.")
    ] = False,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            help="kcat-like output format: %s value, %k key, %t topic, %p partition, %o offset, "
            "%T timestamp, %h headers, %S/%K value/key size, %% percent; \\n \\t escapes. "
            "Default '%s\\n': one value per line.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per record and line.")] = False,
    idle_timeout: Annotated[
        float | None,
        typer.Option("--idle-timeout", help="Stop after this many seconds without a record.", min=0),
    ] = None,
    read_committed: Annotated[
        bool, typer.Option("--read-committed", help="Skip aborted transactional records.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary line on stderr.")] = False,
    schema_registry: Annotated[
        str | None,
        typer.Option(
            "--schema-registry",
            metavar="URL",
            help="Decode each value (Avro or JSON Schema, Confluent wire format) by its schema id "
            "with this registry and print it as JSON.",
        ),
    ] = None,
    option: ClientOptions = None,
) -> None:
    """Consume records and print them: one value per line by default, or --format / --json."""
    starts = [from_beginning, from_end, offset is not None, timestamp is not None]
    if sum(starts) > 1:
        raise typer.BadParameter("use only one of --from-beginning, --from-end, --offset, --timestamp")
    if group is not None and (offset is not None or timestamp is not None or partition):
        raise typer.BadParameter("--offset, --timestamp and --partition need manual assignment: drop --group")
    if as_json and fmt is not None:
        raise typer.BadParameter("use either --format or --json")
    render: Callable[[Record], bytes]
    if as_json:
        render = _json_line
    else:
        try:
            render = compile_format(fmt if fmt is not None else DEFAULT_FORMAT)
        except FormatError as exc:
            raise typer.BadParameter(str(exc), param_hint="--format") from None
    start = _Start(
        beginning=from_beginning,
        offset=offset,
        timestamp_ms=parse_timestamp(timestamp) if timestamp is not None else None,
    )
    options: dict[str, Any] = {
        "auto_offset_reset": "earliest" if from_beginning else "latest",
        "allow_auto_topic_creation": False,
        "isolation_level": "read_committed" if read_committed else "read_uncommitted",
    }
    options.update(parse_client_options(option, ConsumerConfig, ClientConfig))
    try:
        if group is not None:
            consumer = Consumer(bootstrap, topics=topic, group_id=group, **options)
        else:
            consumer = Consumer(bootstrap, **options)
        client_options = {k: v for k, v in options.items() if k in ClientConfig.option_names()}
        admin = Admin(bootstrap, **client_options)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="-X") from None
    try:
        seen = run_async(
            _consume(
                consumer,
                admin,
                topic,
                partition,
                start,
                render,
                sys.stdout.buffer,
                count,
                exit_at_end,
                idle_timeout,
                group is not None,
                schema_registry,
            )
        )
    except SchemaTextError as exc:
        fail(str(exc))
    if not quiet:
        err_console().print(f"consumed {seen:,} records from {topic}")
