"""``aiokafka-lite groups list|describe``: consumer groups, members, assignment and lag."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from aiokafka_lite.admin import Admin
from aiokafka_lite.cli._common import (
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    ClientOptions,
    JsonOutput,
    Timeout,
    print_json,
    run_async,
    stdout_console,
)
from aiokafka_lite.cli._format import print_sections, table
from aiokafka_lite.cli.topics import make_admin
from aiokafka_lite.core.errors import GroupIdNotFoundError
from aiokafka_lite.core.structs import TopicPartition

app = typer.Typer(help="List consumer groups; describe members, assignment and lag.", no_args_is_help=True)


@app.command("list")
def list_groups(
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    state: Annotated[
        list[str] | None,
        typer.Option("--state", help="Only groups in this state (e.g. Stable, Empty). Repeatable."),
    ] = None,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """List consumer groups."""

    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            result = await admin.list_groups(states=state)
        if result.errors and not result.groups:
            raise next(iter(result.errors.values()))
        return [
            {
                "group": g.group_id,
                "state": g.state,
                "type": g.type,
                "protocol_type": g.protocol_type,
                "coordinator": g.coordinator,
            }
            for g in sorted(result.groups, key=lambda g: g.group_id)
        ]

    rows = run_async(go())
    if as_json:
        print_json(rows)
        return
    stdout_console().print(
        table(
            ("group", "state", "type", "protocol type", "coordinator"),
            ([r["group"], r["state"], r["type"], r["protocol_type"], r["coordinator"]] for r in rows),
        )
    )


async def _describe(admin: Admin, group_id: str, description: Any) -> dict[str, Any]:
    owners: dict[TopicPartition, str] = {}
    members = []
    for m in description.members:
        for tp in m.assignment:
            owners[tp] = m.member_id
        members.append(
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "assignment": [f"{tp.topic}-{tp.partition}" for tp in sorted(m.assignment)],
            }
        )
    committed = await admin.list_group_offsets(group_id)
    tps = sorted(set(committed) | set(owners))
    ends = await admin.list_offsets(dict.fromkeys(tps, "latest")) if tps else {}
    partitions = []
    for tp in tps:
        c = committed.get(tp)
        offset = c.offset if c is not None and c.error is None and c.offset >= 0 else None
        end_result = ends.get(tp)
        end = end_result.offset if end_result is not None and end_result.error is None else None
        partitions.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "committed": offset,
                "end": end,
                "lag": end - offset if end is not None and offset is not None else None,
                "member_id": owners.get(tp),
            }
        )
    return {
        "group": group_id,
        "state": description.state,
        "protocol_type": description.protocol_type,
        "protocol": description.protocol,
        "coordinator": description.coordinator,
        "members": members,
        "partitions": partitions,
        "total_lag": sum(p["lag"] for p in partitions if p["lag"] is not None),
    }


@app.command("describe")
def describe_groups(
    groups: Annotated[list[str], typer.Argument(help="Group ids.")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Show a group's state, members and, per partition, committed offset, end offset and lag."""

    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            described = (await admin.describe_groups(groups)).raise_errors()
            out = []
            for g in groups:
                d = described[g]
                if d.state == "Dead":
                    raise GroupIdNotFoundError(f"group {g!r} does not exist")
                out.append(await _describe(admin, g, d))
            return out

    result = run_async(go())
    if as_json:
        print_json(result)
        return

    def section(g: dict[str, Any]) -> tuple[str, list[Table]]:
        summary = (
            f"[bold]{g['group']}[/]  state {g['state']}  protocol {g['protocol'] or '-'}  "
            f"coordinator {g['coordinator']}  members {len(g['members'])}  lag {g['total_lag']}"
        )
        members = table(
            ("member", "client id", "host", "assignment"),
            ([m["member_id"], m["client_id"], m["host"], m["assignment"]] for m in g["members"]),
        )
        partitions = table(
            ("topic", "partition", "committed", "end", "lag", "member"),
            (
                [p["topic"], p["partition"], p["committed"], p["end"], p["lag"], p["member_id"]]
                for p in g["partitions"]
            ),
        )
        return summary, [members, partitions]

    print_sections(stdout_console(), map(section, result))
