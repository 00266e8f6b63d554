"""``aiokafka-lite produce``: one record per input line, from stdin or a file."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import sys
import time
from typing import Annotated, Any, BinaryIO

import typer
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from aiokafka_lite.admin import Admin, ConfigResource
from aiokafka_lite.cli._common import (
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    ClientOptions,
    err_console,
    fail,
    parse_client_options,
    parse_key_values,
    run_async,
)
from aiokafka_lite.cli._schemas import CLI_SCHEMA_TYPES, SchemaTextError, ValueEncoder, value_encoder
from aiokafka_lite.core.errors import ConfigError, UnknownTopicOrPartitionError
from aiokafka_lite.net import ClientConfig
from aiokafka_lite.produce import BatchResult, Producer, ProducerConfig

#: Bytes read per chunk (each chunk becomes one enqueue_batch call).
CHUNK_BYTES = 256 * 1024
#: Input at least this long (bytes of a file, or lines of stdin) gets a progress bar.
PROGRESS_MIN_BYTES = 4 * 1024 * 1024
PROGRESS_MIN_LINES = 50_000
#: Chunks awaiting acknowledgement before reading pauses (bounds memory of results).
MAX_PENDING_CHUNKS = 64


def _unescape(text: str) -> str:
    """``\\t``, ``\\n``, ``\\r`` and ``\\\\`` typed on a command line, as the characters."""
    out = []
    i = 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in "tnr\\":
            out.append({"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}[text[i + 1]])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _split_lines(chunk: list[bytes], key_sep: bytes | None) -> tuple[list[bytes], list[bytes | None] | None]:
    values: list[bytes] = []
    keys: list[bytes | None] | None = [] if key_sep is not None else None
    for line in chunk:
        if line.endswith(b"\n"):
            line = line[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
        if not line:
            continue  # blank lines carry nothing: skip them (as kcat does)
        if keys is not None and key_sep is not None:
            key, sep, value = line.partition(key_sep)
            if sep:
                keys.append(key)
                values.append(value)
            else:
                keys.append(None)
                values.append(line)
        else:
            values.append(line)
    return values, keys


class _Progress:
    """A progress bar with record and byte rates, started only for long inputs on a terminal."""

    def __init__(self, enabled: bool, total_bytes: int | None) -> None:
        self.enabled = enabled
        self.total_bytes = total_bytes
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def update(self, records: int, nbytes: int, elapsed: float) -> None:
        if not self.enabled:
            return
        if self._bar is None:
            long_file = self.total_bytes is not None and self.total_bytes >= PROGRESS_MIN_BYTES
            long_stream = self.total_bytes is None and records >= PROGRESS_MIN_LINES
            if not (long_file or long_stream):
                return
            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("[bold]produce"),
                BarColumn(),
                TextColumn("{task.fields[records]:,} records"),
                TextColumn("{task.fields[rate]:,.0f} records/s"),
                TextColumn("{task.fields[mbps]:.1f} MB/s"),
                TimeElapsedColumn(),
                console=err_console(),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("produce", total=self.total_bytes, records=0, rate=0.0, mbps=0.0)
        rate = records / elapsed if elapsed > 0 else 0.0
        mbps = nbytes / elapsed / 1e6 if elapsed > 0 else 0.0
        assert self._task is not None
        self._bar.update(self._task, completed=nbytes, records=records, rate=rate, mbps=mbps)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


async def _read_chunk(stream: BinaryIO) -> list[bytes]:
    # readlines(hint) stops after about CHUNK_BYTES; in a thread so the producer keeps sending.
    return await asyncio.to_thread(stream.readlines, CHUNK_BYTES)


def _check(result: BatchResult) -> None:
    errors = result.errors()
    if errors:
        raise errors[0]


async def _check_topic(bootstrap: str, options: dict[str, Any], topic: str) -> None:
    """Fail at once, instead of after max_block_ms, for a missing topic the cluster will
    not create on first use (``auto.create.topics.enable=false``)."""
    client_options = {k: v for k, v in options.items() if k in ClientConfig.option_names()}
    async with Admin(bootstrap, **client_options) as admin:
        described = (await admin.describe_topics([topic]))[topic]
        if not isinstance(described.error, UnknownTopicOrPartitionError):
            return
        cluster = await admin.describe_cluster()
        if not cluster.brokers:
            return
        resource = ConfigResource.broker(cluster.brokers[0].node_id)
        configs = (await admin.describe_configs([resource]))[resource]
        if configs.error is None and configs.value("auto.create.topics.enable") == "false":
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} does not exist and the cluster does not create topics on first use "
                f"(create it with: aiokafka-lite topics create {topic})"
            )


async def _produce(
    stream: BinaryIO,
    topic: str,
    bootstrap: str,
    options: dict[str, Any],
    key_sep: bytes | None,
    headers: list[tuple[str, bytes]],
    partition: int | None,
    progress: _Progress,
    schemas: tuple[str, str | None, str | None] | None = None,
) -> tuple[int, int, float]:
    records = 0
    nbytes = 0
    pending: collections.deque[BatchResult] = collections.deque()
    await _check_topic(bootstrap, options, topic)
    encoder: ValueEncoder | None = None
    async with contextlib.AsyncExitStack() as stack:
        if schemas is not None:
            # The schema is registered or looked up before the first line is read.
            encoder = await stack.enter_async_context(
                value_encoder(schemas[0], topic, schemas[1], schemas[2])
            )
        producer = await stack.enter_async_context(Producer(bootstrap, **options))
        start = time.perf_counter()
        try:
            while True:
                chunk = await _read_chunk(stream)
                if not chunk:
                    break
                nbytes += sum(map(len, chunk))
                values, keys = _split_lines(chunk, key_sep)
                failure: SchemaTextError | None = None
                if encoder is not None:
                    # The lines before a bad one are produced; the bad one and the rest are not.
                    encoded: list[bytes] = []
                    for v in values:
                        try:
                            encoded.append(encoder.encode(v, records + len(encoded) + 1))
                        except SchemaTextError as exc:
                            failure = exc
                            break
                    values = encoded
                    keys = keys[: len(encoded)] if keys is not None else None
                if values:
                    hdrs = [headers] * len(values) if headers else None
                    pending.append(
                        await producer.enqueue_batch(
                            topic, values, keys=keys, headers=hdrs, partition=partition
                        )
                    )
                    records += len(values)
                if failure is not None:
                    await producer.flush()
                    for result in pending:
                        await result.wait()
                        _check(result)
                    raise failure
                # Report delivery errors early and keep the number of result objects bounded.
                while pending and (pending[0].done() or len(pending) > MAX_PENDING_CHUNKS):
                    await pending[0].wait()
                    _check(pending.popleft())
                progress.update(records, nbytes, time.perf_counter() - start)
            await producer.flush()
            for result in pending:
                await result.wait()
                _check(result)
        finally:
            progress.close()
    return records, nbytes, time.perf_counter() - start


def produce(
    topic: Annotated[str, typer.Argument(help="Topic to produce to.")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    file: Annotated[
        str | None, typer.Option("--file", "-f", help="Read lines from this file instead of stdin.")
    ] = None,
    key_separator: Annotated[
        str | None,
        typer.Option(
            "--key-separator",
            "-K",
            help="Split each line at the first SEP into key and value (lines without it get a null key).",
            metavar="SEP",
        ),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header", "-H", metavar="NAME=VALUE", help="Header added to every record. Repeatable."
        ),
    ] = None,
    partition: Annotated[
        int | None,
        typer.Option("--partition", "-p", help="Produce to this partition (default: by key).", min=0),
    ] = None,
    compression: Annotated[
        str, typer.Option("--compression", "-z", help="none, gzip, snappy, lz4 or zstd.")
    ] = "none",
    acks: Annotated[str, typer.Option("--acks", help="all, 1 or 0.")] = "all",
    linger_ms: Annotated[float, typer.Option("--linger-ms", help="Batching delay.", min=0)] = 5.0,
    show_progress: Annotated[
        bool,
        typer.Option(
            "--progress/--no-progress", help="Progress bar on long inputs when stdout is a terminal."
        ),
    ] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary line.")] = False,
    schema_registry: Annotated[
        str | None,
        typer.Option(
            "--schema-registry",
            metavar="URL",
            help="Each line is JSON, written as Avro or JSON Schema with this registry's schema "
            "(Confluent wire format).",
        ),
    ] = None,
    value_schema: Annotated[
        str | None,
        typer.Option(
            "--value-schema",
            metavar="FILE|@SUBJECT",
            help="With --schema-registry: a schema file (registered under TOPIC-value) or @SUBJECT "
            "(its latest version). Default: the latest version of TOPIC-value.",
        ),
    ] = None,
    schema_type: Annotated[
        str | None,
        typer.Option(
            "--schema-type",
            help="AVRO or JSON: the --value-schema file's type (default: .avsc or an Avro type "
            "says AVRO, else JSON).",
        ),
    ] = None,
    option: ClientOptions = None,
) -> None:
    """Produce one record per line of stdin (or --file). Blank lines are skipped."""
    if schema_registry is None and (value_schema is not None or schema_type is not None):
        raise typer.BadParameter("--value-schema and --schema-type need --schema-registry URL")
    if schema_type is not None:
        schema_type = schema_type.upper()
        if schema_type not in CLI_SCHEMA_TYPES:
            raise typer.BadParameter(
                f"must be one of {', '.join(CLI_SCHEMA_TYPES)}", param_hint="--schema-type"
            )
    schemas = (schema_registry, value_schema, schema_type) if schema_registry is not None else None
    if key_separator == "":
        raise typer.BadParameter("must not be empty", param_hint="--key-separator")
    key_sep = _unescape(key_separator).encode() if key_separator else None
    headers = [(k, v.encode()) for k, v in parse_key_values(header, "--header")]
    options: dict[str, Any] = {"compression": compression, "acks": acks, "linger_ms": linger_ms}
    options.update(parse_client_options(option, ProducerConfig, ClientConfig))
    try:
        ProducerConfig.from_options(
            **{k: v for k, v in options.items() if k in ProducerConfig.option_names()}
        )
    except ConfigError as exc:  # bad --acks/--compression/-X values: a usage error
        raise typer.BadParameter(str(exc)) from None

    if file is not None:
        try:
            stream: BinaryIO = open(file, "rb")
        except OSError as exc:
            fail(f"cannot read {file}: {exc.strerror}")
        total: int | None = os.fstat(stream.fileno()).st_size
    else:
        stream = sys.stdin.buffer
        total = None
    progress = _Progress(show_progress and sys.stdout.isatty(), total)
    try:
        records, _, elapsed = run_async(
            _produce(stream, topic, bootstrap, options, key_sep, headers, partition, progress, schemas)
        )
    except SchemaTextError as exc:
        fail(str(exc))
    finally:
        if file is not None:
            stream.close()
    if not quiet:
        rate = f"{records / elapsed:,.0f} records/s" if elapsed > 0 else ""
        err_console().print(f"produced {records:,} records to {topic} in {elapsed:.2f} s ({rate})")
