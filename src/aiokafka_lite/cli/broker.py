"""``aiokafka-lite broker``: run the embedded Kafka-compatible cluster until Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
from typing import Annotated

import typer

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.broker.__main__ import parse_listen_address
from aiokafka_lite.cli._common import DEFAULT_BOOTSTRAP, Bootstrap, err_console, fail, run_async


def _topic(text: str) -> tuple[str, int]:
    name, sep, count = text.rpartition(":")
    if not sep:
        return text, 1
    if not name or not count.isdigit() or int(count) < 1:
        raise typer.BadParameter(f"expected NAME or NAME:PARTITIONS, got {text!r}", param_hint="--topic")
    return name, int(count)


def _listen_address(bootstrap: str) -> tuple[str, int]:
    """The first HOST:PORT of --bootstrap (port 0 allowed: any free port)."""
    try:
        return parse_listen_address(bootstrap)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--bootstrap") from None


def broker(
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    brokers: Annotated[
        int, typer.Option("--brokers", "-n", help="Number of brokers; broker i listens on PORT+i.", min=1)
    ] = 1,
    topic: Annotated[
        list[str] | None,
        typer.Option(
            "--topic", "-t", metavar="NAME[:PARTITIONS]", help="Create a topic at start. Repeatable."
        ),
    ] = None,
    partitions: Annotated[
        int, typer.Option("--partitions", "-p", help="Partitions of auto-created topics.", min=1)
    ] = 1,
    no_auto_create: Annotated[
        bool, typer.Option("--no-auto-create", help="Do not create topics on first use.")
    ] = False,
    data_dir: Annotated[
        str | None,
        typer.Option("--data-dir", help="Keep logs and offsets here across restarts (default: memory)."),
    ] = None,
) -> None:
    """Start the embedded Kafka-compatible cluster on --bootstrap (port 0: any free port).

    Prints 'listening on HOST:PORT' when ready; Ctrl-C or SIGTERM stops it.
    """
    host, port = _listen_address(bootstrap)
    topics = dict(_topic(t) for t in topic or ())

    async def serve() -> None:
        cluster = EmbeddedCluster(
            brokers=brokers,
            host=host,
            port=port,
            topics=topics,
            data_dir=data_dir,
            auto_create_topics=not no_auto_create,
            default_partitions=partitions,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await cluster.start()
        except OSError as exc:
            fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
        try:
            err_console().print(f"listening on {cluster.bootstrap}")
            await stop.wait()
        finally:
            await cluster.close()
            err_console().print("stopped")

    run_async(serve())
