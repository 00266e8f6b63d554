"""``aiokafka-lite mirror``: copy topics from one cluster to another until Ctrl-C.

Ctrl-C (SIGINT) or SIGTERM stops the mirror cleanly: records already read are
delivered, their positions committed, the group left. A second Ctrl-C aborts at once.
Progress goes to stderr: a live table with rich on a terminal, else one line a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from typing import Annotated, Any

import typer

from aiokafka_lite.consume import ConsumerConfig
from aiokafka_lite.core.errors import KafkaError
from aiokafka_lite.integrations.mirror import Mirror, MirrorConfigError, ProgressDisplay
from aiokafka_lite.net import ClientConfig
from aiokafka_lite.produce.producer_config import ProducerConfig

__all__ = ["mirror"]

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


def _options(items: list[str] | None, what: str, *classes: type[Any]) -> dict[str, Any]:
    # Imported here: the shared helpers pull in rich, which the mirror does not need.
    from aiokafka_lite.cli._common import parse_client_options

    try:
        return parse_client_options(items, *classes)
    except typer.BadParameter as exc:
        raise typer.BadParameter(exc.message, param_hint=what) from None


def _error(message: str, code: int) -> typer.Exit:
    print(f"error: {message}", file=sys.stderr, flush=True)
    return typer.Exit(code)


async def _run(m: Mirror, progress: bool, plain: bool | None, interval: float) -> int:
    loop = asyncio.get_running_loop()
    received: list[int] = []
    task = asyncio.current_task()

    def on_signal(signum: int) -> None:
        if received and task is not None:
            task.cancel()  # second signal: stop waiting for the clean finish
        received.append(signum)
        m.stop()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, on_signal, sig)
    try:
        async with m:
            if progress:
                async with ProgressDisplay(m, interval_s=interval, plain=plain):
                    await m.run()
            else:
                await m.run()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
    if not received:
        return 0
    return EXIT_INTERRUPTED if received[0] == signal.SIGINT else EXIT_TERMINATED


def mirror(
    source: Annotated[str, typer.Option("--source", "-s", help="Source cluster, HOST:PORT[,HOST:PORT...].")],
    target: Annotated[str, typer.Option("--target", "-t", help="Target cluster, HOST:PORT[,HOST:PORT...].")],
    include: Annotated[
        str,
        typer.Option("--include", "-i", help="Regex of the topics to copy (full match, e.g. 'orders\\..*')."),
    ],
    exclude: Annotated[
        str | None, typer.Option("--exclude", "-e", help="Regex of topics not to copy (full match).")
    ] = None,
    exactly_once: Annotated[
        bool,
        typer.Option(
            "--exactly-once",
            help="Write the target in transactions that also store the source positions on the target.",
        ),
    ] = False,
    rename: Annotated[
        str | None,
        typer.Option("--rename", help="Target topic name template with {topic}, e.g. '{topic}.mirror'."),
    ] = None,
    prefix: Annotated[
        str | None, typer.Option("--prefix", help="Target topic name prefix, e.g. 'dc1.'.")
    ] = None,
    group: Annotated[
        str,
        typer.Option(
            "--group", "-g", help="Consumer group shared by the instances (and, exactly-once, the target's)."
        ),
    ] = "aiokafka-lite-mirror",
    instance_id: Annotated[
        str | None,
        typer.Option(
            "--instance-id",
            help="Exactly-once: this instance's stable id (unique per instance; default host name).",
        ),
    ] = None,
    commit_interval_ms: Annotated[
        int,
        typer.Option("--commit-interval-ms", help="How often positions/transactions are committed.", min=1),
    ] = 1000,
    from_latest: Annotated[
        bool,
        typer.Option(
            "--from-latest", help="Partitions never copied start at the end (default: the beginning)."
        ),
    ] = False,
    refresh_interval_ms: Annotated[
        int, typer.Option("--refresh-interval-ms", help="How often new source topics are looked for.", min=1)
    ] = 30_000,
    copy_configs: Annotated[
        bool,
        typer.Option("--copy-configs/--no-copy-configs", help="Give created topics the source's configs."),
    ] = True,
    replication_factor: Annotated[
        int, typer.Option("--replication-factor", help="Of created topics; -1: the target's default.")
    ] = -1,
    transaction_timeout_ms: Annotated[
        int, typer.Option("--transaction-timeout-ms", help="Exactly-once: the transaction timeout.", min=1)
    ] = 60_000,
    source_option: Annotated[
        list[str] | None,
        typer.Option(
            "--source-option", "-S", metavar="NAME=VALUE", help="Source client/consumer option. Repeatable."
        ),
    ] = None,
    target_option: Annotated[
        list[str] | None,
        typer.Option(
            "--target-option", "-T", metavar="NAME=VALUE", help="Target client/producer option. Repeatable."
        ),
    ] = None,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show progress on stderr.")
    ] = True,
    plain: Annotated[
        bool, typer.Option("--plain", help="Progress as plain lines even on a terminal with rich.")
    ] = False,
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between progress updates.", min=0.05)
    ] = 1.0,
) -> None:
    """Copy topics from a source cluster to a target cluster until Ctrl-C (nothing lost)."""
    source_opts = _options(source_option, "--source-option", ClientConfig, ConsumerConfig)
    target_opts = _options(target_option, "--target-option", ClientConfig, ProducerConfig)
    try:
        m = Mirror(
            source,
            target,
            include=include,
            exclude=exclude,
            rename=rename,
            prefix=prefix,
            group_id=group,
            exactly_once=exactly_once,
            instance_id=instance_id,
            commit_interval_ms=commit_interval_ms,
            auto_offset_reset="latest" if from_latest else "earliest",
            refresh_interval_ms=refresh_interval_ms,
            copy_configs=copy_configs,
            replication_factor=replication_factor,
            transaction_timeout_ms=transaction_timeout_ms,
            source_options=source_opts,
            target_options=target_opts,
        )
    except MirrorConfigError as exc:
        raise _error(str(exc), EXIT_USAGE) from None
    try:
        code = asyncio.run(_run(m, progress, True if plain else None, interval))
    except KafkaError as exc:
        raise _error(f"{type(exc).__name__}: {exc}", EXIT_ERROR) from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if code:
        raise typer.Exit(code)
