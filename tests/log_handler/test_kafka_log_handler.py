"""aiokafka_lite.integrations.log_handler: the JSON format, KafkaHandler against a broker (embedded, or
Apache Kafka with ``--kafka=apache``) and against no broker at all."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import re
import socket
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import aiokafka_lite
from aiokafka_lite import Consumer
from aiokafka_lite.core.errors import ConfigError
from aiokafka_lite.integrations.log_handler import JsonFormatter, KafkaHandler, created_ms


def test_no_module_of_the_package_shadows_the_standard_logging() -> None:
    # A Python started inside the package folder has that folder first on sys.path: a
    # logging.py there was imported as the standard library's logging.
    package_dir = Path(aiokafka_lite.__file__).parent
    assert not (package_dir / "logging.py").exists()
    probe = "import logging.config, sys; print(logging.__file__); print(logging.config.dictConfig)"
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=package_dir, capture_output=True, text=True, check=True, timeout=60
    )
    assert Path(out.stdout.split()[0]).parent == Path(logging.__file__).parent


def test_the_old_module_path_is_the_same_module() -> None:
    import aiokafka_lite.logging
    from aiokafka_lite.logging import KafkaHandler as OldPathHandler

    import aiokafka_lite.integrations.log_handler

    assert aiokafka_lite.logging is aiokafka_lite.integrations.log_handler
    assert OldPathHandler is KafkaHandler
    assert aiokafka_lite.integrations.log_handler.__spec__ is not None
    assert aiokafka_lite.integrations.log_handler.__spec__.name == "aiokafka_lite.integrations.log_handler"


class ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def app_logger() -> Iterator[logging.Logger]:
    """A fresh logger that does not propagate to pytest's handlers."""
    logger = logging.getLogger(f"app-{uuid.uuid4().hex[:8]}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger
    for handler in list(logger.handlers):
        logger.removeHandler(handler)


@pytest.fixture
def own_logs() -> Iterator[ListHandler]:
    """What the handler's thread logs (the aiokafka_lite loggers, at DEBUG)."""
    collector = ListHandler()
    package = logging.getLogger("aiokafka_lite")
    level = package.level
    package.setLevel(logging.DEBUG)
    package.addHandler(collector)
    yield collector
    package.removeHandler(collector)
    package.setLevel(level)


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


async def eventually(cond: Any, limit: float = 30.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + limit
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def read_topic(bootstrap: str, topic: str, want: int) -> list[Any]:
    out: list[Any] = []
    async with Consumer(bootstrap, topics=[topic], auto_offset_reset="earliest") as reader:
        deadline = asyncio.get_running_loop().time() + 60
        while len(out) < want and asyncio.get_running_loop().time() < deadline:
            for batch in (await reader.getmany(timeout_ms=300)).values():
                out += batch
        extra = await reader.getmany(timeout_ms=300)  # nothing more than expected
        out += [r for batch in extra.values() for r in batch]
    return out


# ---------------------------------------------------------------- the format


def test_json_format_has_the_fields_extra_and_exception() -> None:
    formatter = JsonFormatter()
    try:
        raise KeyError("missing")
    except KeyError:
        record = logging.getLogger("orders.api").makeRecord(
            "orders.api",
            logging.ERROR,
            "/srv/app/api.py",
            42,
            "order %s failed",
            ("A-7",),
            sys.exc_info(),
            func="place",
            extra={"order_id": 7, "raw": b"\xffab", "tags": {"x"}, "when": dt.date(2026, 1, 2)},
        )
    record.created = 1795480000.1234
    doc = json.loads(formatter.format(record))
    assert doc["time"] == "2026-11-24T00:26:40.123+00:00"
    assert (doc["level"], doc["logger"], doc["message"]) == ("ERROR", "orders.api", "order A-7 failed")
    assert (doc["module"], doc["function"], doc["line"]) == ("api", "place", 42)
    assert doc["thread"] == threading.current_thread().name and isinstance(doc["process"], int)
    assert doc["exception"].startswith("Traceback") and doc["exception"].endswith("KeyError: 'missing'")
    assert doc["extra"] == {"order_id": 7, "raw": "\ufffdab", "tags": ["x"], "when": "2026-01-02"}
    assert "stack" not in doc


def test_json_format_without_extras_or_exception_and_with_a_stack() -> None:
    record = logging.makeLogRecord({"name": "x", "levelno": 20, "levelname": "INFO", "msg": "plain"})
    doc = json.loads(JsonFormatter().format(record))
    assert doc["message"] == "plain" and not {"exception", "extra", "stack"} & set(doc)
    record.stack_info = "Stack (most recent call last):\n  here"
    assert json.loads(JsonFormatter().format(record))["stack"] == record.stack_info


@pytest.mark.parametrize("created", [1764203327.2379999, 1764203327.2375, 1764203327.9999996, 0.0015])
def test_the_time_field_and_the_kafka_timestamp_are_the_same_millisecond(created: float) -> None:
    # A float just under a millisecond boundary: truncating it and letting datetime round it
    # to the microsecond disagree by one millisecond (CI once saw .237 against .238).
    record = logging.LogRecord("app", logging.INFO, __file__, 1, "m", None, None)
    record.created = created
    stamped = dt.datetime.fromtimestamp(created_ms(record) / 1000, dt.UTC)
    assert stamped.isoformat(timespec="milliseconds") == JsonFormatter().to_dict(record)["time"]
    assert abs(created_ms(record) / 1000 - created) < 0.001


def test_configuration_errors_name_the_option() -> None:
    with pytest.raises(ConfigError, match="linger_ms"):
        KafkaHandler(closed_port(), "logs", lingerms=5)
    with pytest.raises(ConfigError, match="topic"):
        KafkaHandler(closed_port(), "")
    with pytest.raises(ConfigError, match="max_buffered"):
        KafkaHandler(closed_port(), "logs", max_buffered=0)


# ---------------------------------------------------------------- no broker


async def test_unreachable_kafka_never_blocks_and_the_buffer_stays_bounded(
    app_logger: logging.Logger, own_logs: ListHandler
) -> None:
    handler = KafkaHandler(closed_port(), "logs", max_buffered=100, close_timeout_ms=200)
    app_logger.addHandler(handler)
    # The handler's own warnings reach the root logger too: it must not handle them.
    logging.getLogger().addHandler(handler)
    try:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        beat = asyncio.create_task(ticker())
        for i in range(5000):
            app_logger.info("event %d", i)
            if i % 500 == 0:
                seen = ticks
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                assert ticks > seen  # the event loop keeps running between log calls
        beat.cancel()
        assert handler.buffered == 100 and handler.dropped == 4900

        # The drops are reported in one warning per report period: on a loaded machine the
        # 5000 calls above can span two periods. Together the warnings count every drop.
        def reported_drops() -> int:
            found = (re.search(r"dropped (\d+) log record", r.getMessage()) for r in own_logs.records)
            return sum(int(m.group(1)) for m in found if m)

        await eventually(lambda: reported_drops() == 4900, what="the drop warnings")
        await eventually(
            lambda: any("cannot reach Kafka" in r.getMessage() for r in own_logs.records),
            what="the connection warning",
        )
        # Warnings logged by the handler's thread were not taken as records to send.
        assert handler.buffered == 100 and handler.dropped == 4900
    finally:
        logging.getLogger().removeHandler(handler)
        await asyncio.to_thread(handler.close)
    assert handler.dropped == 5000 and handler.sent == 0  # what was still buffered is counted
    app_logger.info("after close")  # ignored, no error
    assert handler.dropped == 5001


def test_a_record_logged_while_formatting_is_ignored(app_logger: logging.Logger) -> None:
    handler = KafkaHandler(closed_port(), "logs", max_buffered=10, close_timeout_ms=0)
    app_logger.addHandler(handler)
    calls = 0

    class Noisy:
        def __str__(self) -> str:
            nonlocal calls
            calls += 1
            app_logger.warning("formatting me")
            return "noisy"

    try:
        app_logger.info("value: %s", Noisy())
        # One record, plus one for each time *another* handler formatted it (pytest's may);
        # the one logged while this handler formatted is not taken.
        assert calls >= 1 and handler.buffered == calls
    finally:
        handler.close()  # (maybe before its thread's loop even ran: it stops all the same)
    assert not handler._thread.is_alive()


# ---------------------------------------------------------------- with a broker


async def test_ten_thousand_lines_arrive_intact_and_in_order(
    kafka_cluster: Any, app_logger: logging.Logger, own_logs: ListHandler
) -> None:
    topic = f"logs-{uuid.uuid4().hex[:10]}"
    kafka_cluster.create_topic(topic, partitions=1)
    handler = KafkaHandler(kafka_cluster.bootstrap, topic, max_buffered=20_000, acks=1)
    app_logger.addHandler(handler)
    logging.getLogger("aiokafka_lite").addHandler(handler)  # the producer's own logs: ignored
    total = 10_000
    try:
        for i in range(total):
            app_logger.info("line %d of %s", i, "batch", extra={"seq": i, "user": f"u{i % 7}"})
            if i % 1000 == 0:
                await asyncio.sleep(0)  # (the embedded broker runs in this event loop)
        try:
            raise ValueError("bad input")
        except ValueError:
            app_logger.exception("the last one")
        await asyncio.to_thread(handler.flush)
        assert handler.sent == total + 1
    finally:
        logging.getLogger("aiokafka_lite").removeHandler(handler)
        await asyncio.to_thread(handler.close)
    assert (handler.sent, handler.failed, handler.dropped) == (total + 1, 0, 0)
    # The handler's thread did log (connection, metadata) and none of it was sent.
    assert any(r.thread == handler._thread_id for r in own_logs.records)

    records = await read_topic(kafka_cluster.bootstrap, topic, total + 1)
    assert len(records) == total + 1
    docs = [json.loads(r.value) for r in records]
    assert {d["logger"] for d in docs} == {app_logger.name}
    assert [d["message"] for d in docs[:total]] == [f"line {i} of batch" for i in range(total)]
    assert [d["extra"] for d in docs[:total]] == [{"seq": i, "user": f"u{i % 7}"} for i in range(total)]
    assert all(d["level"] == "INFO" and d["function"] == docs[0]["function"] for d in docs[:total])
    last = docs[-1]
    assert last["level"] == "ERROR" and last["message"] == "the last one"
    assert "ValueError: bad input" in last["exception"] and "extra" not in last
    for record, doc in zip(records[:50], docs[:50], strict=True):
        stamped = dt.datetime.fromtimestamp(record.timestamp_ms / 1000, dt.UTC)
        assert stamped.isoformat(timespec="milliseconds") == doc["time"]
        assert record.key is None


async def test_a_full_buffer_is_announced_on_the_topic(
    kafka_cluster: Any, app_logger: logging.Logger
) -> None:
    topic = f"logs-{uuid.uuid4().hex[:10]}"
    kafka_cluster.create_topic(topic, partitions=1)
    handler = KafkaHandler(kafka_cluster.bootstrap, topic, max_buffered=10)
    app_logger.addHandler(handler)
    try:
        app_logger.info("first")
        await asyncio.to_thread(handler.flush)
        assert handler.sent == 1
        # Hold the handler's thread, as a stalled network would: the buffer fills up.
        held, release = threading.Event(), threading.Event()

        def stall() -> None:
            held.set()
            release.wait(30)

        assert handler._loop is not None
        handler._loop.call_soon_threadsafe(stall)
        assert await asyncio.to_thread(held.wait, 10)
        for i in range(50):
            app_logger.info("burst %d", i)
        assert (handler.buffered, handler.dropped) == (10, 40)
        release.set()
        await asyncio.to_thread(handler.flush)
    finally:
        release.set()
        await asyncio.to_thread(handler.close)
    docs = [json.loads(r.value) for r in await read_topic(kafka_cluster.bootstrap, topic, 12)]
    assert [d["message"] for d in docs[:1]] == ["first"]
    notice = docs[1]
    assert notice["level"] == "WARNING" and notice["logger"] == "aiokafka_lite.integrations.log_handler"
    assert notice["extra"] == {"dropped": 40} and "40 log record(s) dropped" in notice["message"]
    assert [d["message"] for d in docs[2:]] == [f"burst {i}" for i in range(10)]


async def test_dict_config_and_the_flush_at_interpreter_exit(kafka_cluster: Any) -> None:
    # The module's old dotted path, aiokafka_lite.logging, as configurations written
    # before the rename spell it: still resolved, in a fresh interpreter.
    topic = f"logs-{uuid.uuid4().hex[:10]}"
    kafka_cluster.create_topic(topic, partitions=1)
    script = textwrap.dedent(
        f"""
        import logging, logging.config
        logging.config.dictConfig({{
            "version": 1,
            "handlers": {{"kafka": {{
                "class": "aiokafka_lite.logging.KafkaHandler",
                "bootstrap_servers": {kafka_cluster.bootstrap!r},
                "topic": {topic!r},
                "level": "INFO",
                "max_buffered": 5000,
                "linger_ms": 200,
            }}}},
            "root": {{"handlers": ["kafka"], "level": "DEBUG"}},
        }})
        log = logging.getLogger("worker")
        for i in range(300):
            log.info("job %d done", i, extra={{"job": i}})
        log.debug("not at INFO")
        # no close, no flush: the handler flushes as the interpreter exits
        """
    )
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, stderr.decode()
    docs = [json.loads(r.value) for r in await read_topic(kafka_cluster.bootstrap, topic, 300)]
    assert [d["extra"]["job"] for d in docs] == list(range(300))
    assert {d["logger"] for d in docs} == {"worker"}


async def test_dict_config_replacing_the_handler_does_not_wait_for_its_thread(kafka_cluster: Any) -> None:
    # dictConfig flushes and closes the handlers it replaces while it holds logging's module
    # lock, which the handler's thread needs as soon as it logs anything (asyncio does as its
    # loop starts, the client as it connects): waiting for that thread there stalled the
    # configuration for the whole flush and close timeouts. Here the thread is held for the
    # length of the dictConfig call, as that lock would hold it, and the timeouts are an hour:
    # dictConfig returns all the same, and every record reaches the topic, the old
    # handler's thread finishing its work after the configuration (waited for at exit).
    topic = f"logs-{uuid.uuid4().hex[:10]}"
    kafka_cluster.create_topic(topic, partitions=1)
    script = textwrap.dedent(
        f"""
        import logging, logging.config, threading

        def config(logger):
            return {{
                "version": 1,
                "disable_existing_loggers": False,
                "handlers": {{"kafka": {{
                    "class": "aiokafka_lite.integrations.log_handler.KafkaHandler",
                    "bootstrap_servers": {kafka_cluster.bootstrap!r},
                    "topic": {topic!r},
                    "flush_timeout_ms": 3_600_000,
                    "close_timeout_ms": 3_600_000,
                }}}},
                "loggers": {{logger: {{"handlers": ["kafka"], "level": "INFO"}}}},
            }}

        logging.config.dictConfig(config("before"))
        old = logging.getLogger("before").handlers[0]
        for i in range(300):
            logging.getLogger("before").info("before %d", i)
        assert old._ready.wait(60)
        held, release = threading.Event(), threading.Event()

        def hold():
            held.set()
            release.wait(600)

        old._loop.call_soon_threadsafe(hold)
        assert held.wait(60)
        logging.config.dictConfig(config("after"))
        print("replaced, old thread alive:", old._thread.is_alive())
        release.set()
        for i in range(100):
            logging.getLogger("after").info("after %d", i)
        # no flush, no close: the old handler's thread finishes, the new handler flushes at exit
        """
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError("dictConfig replacing a KafkaHandler stalled") from None
    assert proc.returncode == 0, stderr.decode()
    assert stdout.decode().strip() == "replaced, old thread alive: True"  # closed without waiting
    assert "dropped" not in stderr.decode()
    docs = [json.loads(r.value) for r in await read_topic(kafka_cluster.bootstrap, topic, 400)]
    by_logger: dict[str, list[str]] = {"before": [], "after": []}
    for doc in docs:
        by_logger[doc["logger"]].append(doc["message"])
    assert by_logger["before"] == [f"before {i}" for i in range(300)]
    assert by_logger["after"] == [f"after {i}" for i in range(100)]


async def test_close_is_bounded_when_kafka_is_gone(app_logger: logging.Logger) -> None:
    # A listener that accepts connections and never answers: requests hang until timeouts.
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    handler = KafkaHandler(f"127.0.0.1:{port}", "logs", close_timeout_ms=300, flush_timeout_ms=300)
    app_logger.addHandler(handler)
    try:
        for i in range(100):
            app_logger.info("x %d", i)
        await asyncio.to_thread(handler.flush)  # gives up after flush_timeout_ms
    finally:
        await asyncio.to_thread(handler.close)
        server.close()
        with contextlib.suppress(Exception):
            await server.wait_closed()
    assert not handler._thread.is_alive()
    assert handler.sent == 0 and handler.dropped + handler.failed == 100


@pytest.mark.kafka_embedded
async def test_a_stopped_broker_never_blocks_and_delivery_resumes(
    kafka_cluster: Any, app_logger: logging.Logger
) -> None:
    topic = f"logs-{uuid.uuid4().hex[:10]}"
    kafka_cluster.create_topic(topic, partitions=1)
    (node,) = [b.node_id for b in kafka_cluster.brokers]
    handler = KafkaHandler(
        kafka_cluster.bootstrap, topic, max_buffered=50, request_timeout_ms=1000, delivery_timeout_ms=60_000
    )
    app_logger.addHandler(handler)
    try:
        app_logger.info("before")
        await asyncio.to_thread(handler.flush)
        assert handler.sent == 1
        await kafka_cluster.stop_broker(node)
        for i in range(2000):
            app_logger.info("while stopped %d", i)
            if i % 100 == 0:
                await asyncio.sleep(0.01)
        # Logging went on; what the handler holds is bounded by its buffer (and the
        # producer's buffer_memory); the rest was dropped and counted.
        assert handler.buffered <= 50 and handler.dropped > 0
        assert handler.sent + handler.dropped + handler.buffered <= 2001
        await kafka_cluster.start_broker(node)
        await eventually(lambda: handler.buffered == 0, what="the buffer drained")
        app_logger.info("after")  # (logged into a full buffer, it would be dropped)
        await asyncio.to_thread(handler.flush)
    finally:
        await asyncio.to_thread(handler.close)
    dropped, sent = handler.dropped, handler.sent
    docs = [json.loads(r.value) for r in await read_topic(kafka_cluster.bootstrap, topic, sent)]
    assert len(docs) == sent and handler.failed == 0
    messages = [d["message"] for d in docs]
    assert messages[0] == "before" and messages[-1] == "after"
    # Each batch taken after drops starts with a notice of how many.
    notices = [d for d in docs if d["logger"] == "aiokafka_lite.integrations.log_handler"]
    assert notices and sum(d["extra"]["dropped"] for d in notices) == dropped
    assert sent - len(notices) + dropped == 2002
    kept = [int(m.rsplit(" ", 1)[1]) for m in messages if m.startswith("while stopped")]
    assert kept == sorted(kept) and len(kept) == 2000 - dropped
