"""``aiokafka-lite offsets``: earliest and latest offsets per partition."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import typer
from rich.table import Table

from aiokafka_lite.cli._common import (
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    ClientOptions,
    JsonOutput,
    Timeout,
    parse_timestamp,
    print_json,
    run_async,
    stdout_console,
)
from aiokafka_lite.cli.topics import make_admin
from aiokafka_lite.core.structs import TopicPartition


def offsets(
    topics: Annotated[list[str], typer.Argument(help="Topics to show.")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    timestamp: Annotated[
        str | None,
        typer.Option(
            "--timestamp",
            "-t",
            help="Also show, per partition, the first offset at or after this time "
            "(milliseconds, or ISO-8601 such as 2024-05-01T12:00:00Z).",
        ),
    ] = None,
    read_committed: Annotated[
        bool,
        typer.Option("--read-committed", help="Latest = last stable offset (ignores open transactions)."),
    ] = False,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Show the earliest and latest offset (and the record count between them) per partition."""
    ts = parse_timestamp(timestamp) if timestamp is not None else None

    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            described = (await admin.describe_topics(topics)).raise_errors()
            tps = [TopicPartition(t, p.partition) for t in topics for p in described[t].partitions]
            iso: Literal["read_committed", "read_uncommitted"] = (
                "read_committed" if read_committed else "read_uncommitted"
            )
            earliest = (await admin.list_offsets(dict.fromkeys(tps, "earliest"))).raise_errors()
            latest = (
                await admin.list_offsets(dict.fromkeys(tps, "latest"), isolation_level=iso)
            ).raise_errors()
            at = (await admin.list_offsets(dict.fromkeys(tps, ts))).raise_errors() if ts is not None else None
        rows = []
        for tp in tps:
            row: dict[str, Any] = {
                "topic": tp.topic,
                "partition": tp.partition,
                "earliest": earliest[tp].offset,
                "latest": latest[tp].offset,
                "records": latest[tp].offset - earliest[tp].offset,
            }
            if at is not None:
                # -1: no record at or after the timestamp (a consumer would start at the end).
                row["at_timestamp"] = at[tp].offset
            rows.append(row)
        return rows

    rows = run_async(go())
    if as_json:
        print_json(rows)
        return
    columns = ["topic", "partition", "earliest", "latest", "records"] + (
        ["at_timestamp"] if ts is not None else []
    )
    table = Table(*columns, box=None, header_style="bold")
    for r in rows:
        table.add_row(*(str(r[c]) for c in columns))
    stdout_console().print(table)
