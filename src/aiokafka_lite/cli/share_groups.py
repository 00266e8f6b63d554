"""``aiokafka-lite share-groups list|describe|delete``: share groups (KIP-932), their
members, and where they stand on each partition (start offset and lag)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

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

app = typer.Typer(
    help="List share groups; describe members, start offsets and lag; delete empty ones.",
    no_args_is_help=True,
)


@app.command("list")
def list_share_groups(
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    state: Annotated[
        list[str] | None,
        typer.Option("--state", help="Only groups in this state (Stable, Empty). Repeatable."),
    ] = None,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """List share groups."""

    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            result = await admin.list_share_groups(states=state)
        if result.errors and not result.groups:
            raise next(iter(result.errors.values()))
        return [
            {"group": g.group_id, "state": g.state, "coordinator": g.coordinator}
            for g in sorted(result.groups, key=lambda g: g.group_id)
        ]

    rows = run_async(go())
    if as_json:
        print_json(rows)
        return
    stdout_console().print(
        table(("group", "state", "coordinator"), ([r["group"], r["state"], r["coordinator"]] for r in rows))
    )


@app.command("describe")
def describe_share_groups(
    groups: Annotated[list[str], typer.Argument(help="Share group ids.")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Show a share group's state, members and, per partition, start offset and lag."""

    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            described = (await admin.describe_share_groups(groups)).raise_errors()
            out = []
            for g in groups:
                d = described[g]
                offsets = await admin.list_share_group_offsets(g)
                out.append(
                    {
                        "group": g,
                        "state": d.state,
                        "group_epoch": d.group_epoch,
                        "assignor": d.assignor,
                        "coordinator": d.coordinator,
                        "members": [
                            {
                                "member_id": m.member_id,
                                "member_epoch": m.member_epoch,
                                "client_id": m.client_id,
                                "host": m.client_host,
                                "assignment": [f"{tp.topic}-{tp.partition}" for tp in m.assignment],
                            }
                            for m in d.members
                        ],
                        "partitions": [
                            {
                                "topic": tp.topic,
                                "partition": tp.partition,
                                "start_offset": None if o.start_offset < 0 else o.start_offset,
                                "lag": o.lag,
                            }
                            for tp, o in sorted(offsets.items())
                        ],
                    }
                )
            return out

    result = run_async(go())
    if as_json:
        print_json(result)
        return

    def section(g: dict[str, Any]) -> tuple[str, list[Table]]:
        lags = [p["lag"] for p in g["partitions"] if p["lag"] is not None]
        summary = (
            f"[bold]{g['group']}[/]  state {g['state']}  epoch {g['group_epoch']}  "
            f"coordinator {g['coordinator']}  members {len(g['members'])}  lag {sum(lags) if lags else '-'}"
        )
        members = table(
            ("member", "epoch", "client id", "host", "assignment"),
            (
                [m["member_id"], m["member_epoch"], m["client_id"], m["host"], m["assignment"]]
                for m in g["members"]
            ),
        )
        partitions = table(
            ("topic", "partition", "start offset", "lag"),
            ([p["topic"], p["partition"], p["start_offset"], p["lag"]] for p in g["partitions"]),
        )
        return summary, [members, partitions]

    print_sections(stdout_console(), map(section, result))


@app.command("delete")
def delete_share_groups(
    groups: Annotated[list[str], typer.Argument(help="Share group ids (each must have no members).")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Delete empty share groups and their share-partition state."""

    async def go() -> None:
        async with make_admin(bootstrap, option, timeout) as admin:
            (await admin.delete_share_groups(groups)).raise_errors()

    run_async(go())
    for g in groups:
        typer.echo(f"deleted share group {g}")
