"""Pieces shared by the commands: common options, running coroutines, errors, parsing."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import os
import signal
import sys
import types
import typing
from collections.abc import Coroutine, Iterable, Sequence
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from aiokafka_lite.core.errors import KafkaError
from aiokafka_lite.core.options import Options

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "Bootstrap",
    "ClientOptions",
    "JsonOutput",
    "Timeout",
    "err_console",
    "fail",
    "parse_client_options",
    "parse_key_values",
    "parse_timestamp",
    "print_json",
    "run_async",
    "stdout_console",
]

T = TypeVar("T")

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

#: Exit codes: 0 ok, 1 a Kafka/runtime error, 2 bad usage (click's), 130 interrupted.
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

Bootstrap = Annotated[
    str,
    typer.Option(
        "--bootstrap",
        "-b",
        envvar="KAFKA_BOOTSTRAP",
        show_envvar=True,
        help="Bootstrap servers, HOST:PORT[,HOST:PORT...].",
    ),
]
ClientOptions = Annotated[
    list[str] | None,
    typer.Option(
        "--option",
        "-X",
        metavar="NAME=VALUE",
        help="Client/producer/consumer option, e.g. -X security_protocol=SASL_PLAINTEXT "
        "-X sasl_mechanism=SCRAM-SHA-256 (Java-style dotted names work too). Repeatable.",
    ),
]
Timeout = Annotated[
    float,
    typer.Option("--timeout", help="Seconds to wait for the cluster before failing.", min=0.001),
]
JsonOutput = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def stdout_console() -> Console:
    """A console on the current stdout (looked up per call: tests swap sys.stdout)."""
    return Console(file=sys.stdout, highlight=False, soft_wrap=True)


def err_console() -> Console:
    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code``."""
    err_console().print(f"[bold red]error:[/] {message}", markup=True, highlight=False)
    raise typer.Exit(code)


class _Terminated(Exception):
    """SIGTERM arrived: the command's task was cancelled and has cleaned up."""


async def _main(coro: Coroutine[Any, Any, T]) -> T:
    # SIGTERM cancels the command like Ctrl-C does, so consumers leave their group and
    # producers flush (asyncio.run already turns SIGINT into a cancellation).
    task = asyncio.ensure_future(coro)
    loop = asyncio.get_running_loop()
    terminated = False

    def on_term() -> None:
        nonlocal terminated
        terminated = True
        task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_term)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
        pass
    try:
        return await task
    except asyncio.CancelledError:
        if terminated:
            raise _Terminated from None
        raise
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGTERM)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine; Kafka errors become a message and exit code 1,
    Ctrl-C exit code 130 and SIGTERM 143 (both after the command cleaned up)."""
    try:
        return asyncio.run(_main(coro))
    except KafkaError as exc:
        fail(f"{type(exc).__name__}: {_escape(str(exc))}")
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except _Terminated:
        raise typer.Exit(EXIT_TERMINATED) from None


def _escape(text: str) -> str:
    return text.replace("[", "\\[")


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def parse_key_values(items: Iterable[str] | None, what: str) -> list[tuple[str, str]]:
    """``["a=1", "b=2"]`` -> ``[("a", "1"), ("b", "2")]``; a bad item is a usage error."""
    out = []
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint=what)
        out.append((key, value))
    return out


# ------------------------------------------------------------------------------ -X options


def _coerce(name: str, text: str, annotation: Any) -> Any:
    """Convert ``text`` to the option's annotated type (the first member of a union that fits)."""
    candidates: Sequence[Any]
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        candidates = typing.get_args(annotation)
    else:
        candidates = (annotation,)
    if type(None) in candidates and text.lower() in ("none", "null"):
        return None
    for tp in candidates:
        if tp is bool:
            if text.lower() in ("true", "1", "yes", "on"):
                return True
            if text.lower() in ("false", "0", "no", "off"):
                return False
        elif tp is int:
            try:
                return int(text)
            except ValueError:
                pass
        elif tp is float:
            try:
                return float(text)
            except ValueError:
                pass
    if any(tp is str for tp in candidates) or typing.get_origin(annotation) is typing.Literal:
        return text
    if annotation is Any:  # e.g. the producer's partitioner: names are strings
        return text
    raise typer.BadParameter(f"cannot use {text!r} for {name} (type {annotation})", param_hint="-X")


def parse_client_options(items: Iterable[str] | None, *classes: type[Options]) -> dict[str, Any]:
    """Parse ``-X name=value`` items against the option classes, converting each value to
    the option's type. Unknown names and bad values are usage errors (exit code 2)."""
    fields: dict[str, Any] = {}
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.init:
                fields.setdefault(f.name, hints.get(f.name, Any))
    out: dict[str, Any] = {}
    for raw_name, text in parse_key_values(items, "-X"):
        name = raw_name.strip().replace(".", "_").replace("-", "_")
        if name not in fields:
            raise typer.BadParameter(f"unknown option {raw_name!r}", param_hint="-X")
        out[name] = _coerce(name, text, fields[name])
    return out


# ------------------------------------------------------------------------------ time


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch from an integer or an ISO-8601 date/time (UTC unless
    the text has an offset)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        value = int(text)
        if value < 0:
            raise typer.BadParameter("a timestamp must be >= 0", param_hint="--timestamp")
        return value
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(
            f"expected milliseconds or an ISO-8601 date/time, got {text!r}", param_hint="--timestamp"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def env_bootstrap() -> str:
    return os.environ.get("KAFKA_BOOTSTRAP") or DEFAULT_BOOTSTRAP
