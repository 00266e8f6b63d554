"""``aiokafka-lite topics list|create|delete|describe``."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from aiokafka_lite.admin import Admin, ConfigResource, NewTopic
from aiokafka_lite.cli._common import (
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    ClientOptions,
    JsonOutput,
    Timeout,
    err_console,
    parse_client_options,
    parse_key_values,
    print_json,
    run_async,
    stdout_console,
)
from aiokafka_lite.core.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError
from aiokafka_lite.net import ClientConfig

app = typer.Typer(help="List, create, delete and describe topics.", no_args_is_help=True)


def make_admin(bootstrap: str, options: list[str] | None, timeout: float) -> Admin:
    return Admin(bootstrap, default_timeout_ms=timeout * 1000, **parse_client_options(options, ClientConfig))


@app.command("list")
def list_topics(
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    internal: Annotated[bool, typer.Option("--internal", help="Include internal topics.")] = False,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """List topics with their partition counts."""

    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            names = await admin.list_topics(include_internal=internal)
            described = await admin.describe_topics(names) if names else {}
        rows = []
        for name in names:
            d = described[name]
            rf = len(d.partitions[0].replicas) if d.partitions else 0
            rows.append(
                {
                    "topic": name,
                    "partitions": len(d.partitions),
                    "replication_factor": rf,
                    "internal": d.is_internal,
                    "error": type(d.error).__name__ if d.error else None,
                }
            )
        return rows

    rows = run_async(go())
    if as_json:
        print_json(rows)
        return
    table = Table("topic", "partitions", "replication", box=None, header_style="bold")
    for r in rows:
        table.add_row(
            r["topic"], str(r["partitions"]) if not r["error"] else r["error"], str(r["replication_factor"])
        )
    stdout_console().print(table)


@app.command("create")
def create_topic(
    name: Annotated[str, typer.Argument(help="Topic name.")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    partitions: Annotated[
        int, typer.Option("--partitions", "-p", help="Partition count (-1: the broker's default).")
    ] = -1,
    replication_factor: Annotated[
        int, typer.Option("--replication-factor", "-r", help="Replicas per partition (-1: broker default).")
    ] = -1,
    config: Annotated[
        list[str] | None,
        typer.Option("--config", "-c", metavar="NAME=VALUE", help="Topic config, e.g. retention.ms=60000."),
    ] = None,
    if_not_exists: Annotated[
        bool, typer.Option("--if-not-exists", help="Succeed if the topic already exists.")
    ] = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Create a topic."""
    if partitions == 0 or partitions < -1:
        raise typer.BadParameter("must be >= 1 (or -1 for the broker default)", param_hint="--partitions")
    configs = dict(parse_key_values(config, "--config"))

    async def go() -> bool:
        async with make_admin(bootstrap, option, timeout) as admin:
            results = await admin.create_topics(
                [
                    NewTopic(
                        name, partitions=partitions, replication_factor=replication_factor, configs=configs
                    )
                ]
            )
        result = results[name]
        if isinstance(result.error, TopicAlreadyExistsError) and if_not_exists:
            return False
        if result.error is not None:
            raise result.error
        return True

    if run_async(go()):
        err_console().print(f"created topic {name}")
    else:
        err_console().print(f"topic {name} already exists")


@app.command("delete")
def delete_topics(
    names: Annotated[list[str], typer.Argument(help="Topics to delete.")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    if_exists: Annotated[
        bool, typer.Option("--if-exists", help="Succeed for topics that do not exist.")
    ] = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Delete topics."""

    async def go() -> list[str]:
        async with make_admin(bootstrap, option, timeout) as admin:
            results = await admin.delete_topics(names)
        deleted = []
        for name, result in results.items():
            if result.error is None:
                deleted.append(name)
            elif not (if_exists and isinstance(result.error, UnknownTopicOrPartitionError)):
                raise result.error
        return deleted

    for name in run_async(go()):
        err_console().print(f"deleted topic {name}")


@app.command("describe")
def describe_topics(
    names: Annotated[list[str], typer.Argument(help="Topics to describe.")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    all_configs: Annotated[
        bool, typer.Option("--all-configs", help="Show every config, not only those set on the topic.")
    ] = False,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Show partitions (leader, replicas, in-sync replicas) and configs of topics."""

    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            described = (await admin.describe_topics(names)).raise_errors()
            configs = await admin.describe_configs([ConfigResource.topic(n) for n in names])
        out = []
        for name in names:
            d = described[name]
            cfg = configs[ConfigResource.topic(name)]
            entries = {
                e.name: e.value
                for e in sorted(cfg.entries.values(), key=lambda e: e.name)
                if all_configs or not e.is_default
            }
            out.append(
                {
                    "topic": name,
                    "topic_id": str(d.topic_id) if d.topic_id else None,
                    "internal": d.is_internal,
                    "partitions": [
                        {
                            "partition": p.partition,
                            "leader": p.leader,
                            "leader_epoch": p.leader_epoch,
                            "replicas": list(p.replicas),
                            "isr": list(p.isr),
                            "offline": list(p.offline),
                        }
                        for p in d.partitions
                    ],
                    "configs": entries,
                }
            )
        return out

    topics = run_async(go())
    if as_json:
        print_json(topics)
        return
    console = stdout_console()
    for i, t in enumerate(topics):
        if i:
            console.print()
        console.print(
            f"[bold]{t['topic']}[/]  id {t['topic_id']}  partitions {len(t['partitions'])}", markup=True
        )
        table = Table(
            "partition", "leader", "epoch", "replicas", "isr", "offline", box=None, header_style="bold"
        )
        for p in t["partitions"]:
            table.add_row(
                str(p["partition"]),
                str(p["leader"]),
                str(p["leader_epoch"]),
                ",".join(map(str, p["replicas"])),
                ",".join(map(str, p["isr"])),
                ",".join(map(str, p["offline"])) or "-",
            )
        console.print(table)
        if t["configs"]:
            console.print("configs: " + ", ".join(f"{k}={v}" for k, v in t["configs"].items()), markup=False)
