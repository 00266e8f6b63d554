"""Structured logs to a Kafka topic: :class:`KafkaHandler`, a standard ``logging.Handler``.

::

    import logging
    from aiokafka_lite.integrations.log_handler import KafkaHandler

    logging.getLogger().addHandler(KafkaHandler("127.0.0.1:9092", "app-logs", acks=1))
    logging.getLogger("orders").info("order placed", extra={"order_id": 42})

or from ``logging.config.dictConfig`` (keys other than ``class``, ``level``,
``formatter`` and ``filters`` are the constructor's keyword arguments)::

    "handlers": {"kafka": {"class": "aiokafka_lite.integrations.log_handler.KafkaHandler",
                           "bootstrap_servers": "127.0.0.1:9092", "topic": "app-logs",
                           "level": "INFO", "max_buffered": 10000, "linger_ms": 100}}

Each log record becomes one Kafka record: a JSON object (:class:`JsonFormatter`) with
``time`` (ISO 8601, UTC, milliseconds), ``level``, ``logger``, ``message``, ``module``,
``function``, ``line``, ``thread``, ``process``, ``exception`` (the formatted traceback,
when there is one), ``stack`` (with ``stack_info``) and ``extra`` (the fields given with
``extra=``, when there are any; values JSON cannot hold are written as ``str()``). The
Kafka record's timestamp is the log record's time; it has no key. Another formatter set
on the handler (``setFormatter``, or ``formatter`` in ``dictConfig``) replaces the JSON:
its text, UTF-8, is the record's value.

How it stays out of the application's way:

* ``emit`` formats the record and appends it to a bounded buffer (``max_buffered``
  records): no I/O and no waiting, from any thread or from the event loop's. When the
  buffer is full the record is dropped and counted (``dropped``); a warning says how
  many (at most once a second, on the ``aiokafka_lite.integrations.log_handler`` logger) and, once Kafka
  takes records again, a WARNING record on the topic itself tells its readers how many
  are missing (``extra.dropped``).
* The records are produced by our ``Producer`` on a thread of the handler's own, with
  its own event loop. Kafka being slow or unreachable only fills the buffer: the handler
  retries to connect (with backoff) and keeps counting what it drops.
* It never handles its own logs: records made on its thread (the producer's and the
  client's logs, and its own warnings) are filtered out (other handlers still get
  them), and a record logged while a record is being formatted is ignored, so nothing
  recurses.
* ``flush()`` waits (at most ``flush_timeout_ms``) until what was logged so far is
  acknowledged; it also runs when the interpreter begins to exit. ``close()`` (called
  by ``logging.shutdown()`` at exit) sends what is buffered within
  ``close_timeout_ms`` and stops the thread. Records still buffered then are counted as
  dropped, with a warning. Both wait, so call them at shutdown rather than on an event
  loop that must stay responsive. ``dictConfig`` (and ``fileConfig``) replacing the
  handler call them holding ``logging``'s module lock, which the handler's thread needs
  to log: then neither waits, the thread sends what is buffered once the configuration
  is done (within ``close_timeout_ms``) and stops, and the interpreter waits for it at
  exit.

``sent``, ``failed`` (delivery failed: Kafka refused the records or the producer gave
up, per ``delivery_timeout_ms``/``max_block_ms``), ``dropped`` and ``buffered`` are
counters for monitoring. The handler is not fork-safe: create it in the process that
logs.

The module was called ``aiokafka_lite.logging``; that name, which let a Python started
inside the package folder import it instead of the standard library's ``logging``, still
works as an alias (``from aiokafka_lite.logging import KafkaHandler``, and
``"class": "aiokafka_lite.logging.KafkaHandler"`` in ``dictConfig``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import concurrent.futures.thread  # registers its exit hook before ours (see _flush_before_exit)
import contextlib
import datetime as dt
import json
import logging
import threading
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Final

from aiokafka_lite.core.errors import ConfigError, KafkaError
from aiokafka_lite.produce.batch import RecordFuture
from aiokafka_lite.produce.producer import Producer

__all__ = ["JsonFormatter", "KafkaHandler"]

log = logging.getLogger(__name__)

#: Attributes every LogRecord has: the rest came from ``extra=``.
_RECORD_ATTRIBUTES: Final = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}
#: Delay before reporting drops and delivery failures, so that a burst makes one warning.
_REPORT_EVERY_S: Final = 1.0
_START_BACKOFF_S: Final = 0.5
_START_BACKOFF_MAX_S: Final = 30.0


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, set | frozenset):
        return list(value)
    return str(value)


def created_ms(record: logging.LogRecord) -> int:
    """The record's time in whole milliseconds: its Kafka timestamp and its ``time`` field.

    Both come from this one number, so they agree: ``int(created * 1000)`` truncates a float
    such as ``...237.9999`` to 237 where ``datetime.fromtimestamp`` first rounds it to the
    microsecond (238).
    """
    return round(record.created * 1_000_000) // 1000


class JsonFormatter(logging.Formatter):
    """Formats a log record as one line of JSON (the fields: see the module docstring)."""

    def to_dict(self, record: logging.LogRecord) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(created_ms(record) / 1000, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "module": record.module,
            "function": record.funcName,
            "line": record.lineno,
            "thread": record.threadName,
            "process": record.process,
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            doc["exception"] = record.exc_text
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        extra = {k: v for k, v in record.__dict__.items() if k not in _RECORD_ATTRIBUTES}
        if extra:
            doc["extra"] = extra
        return doc

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(self.to_dict(record), ensure_ascii=False, default=_jsonable)


def _flush_before_exit(handler: KafkaHandler) -> None:
    """Flush ``handler`` when the interpreter starts to exit, before its thread pools stop.

    ``logging.shutdown()`` (an ``atexit`` hook) comes too late for a producer that has not
    connected yet: by then asyncio's default executor, which resolves host names, refuses
    work. ``threading``'s exit hooks run first, newest first, so this one runs before the
    executor's (registered when ``concurrent.futures.thread`` was imported, above).
    """
    register = getattr(threading, "_register_atexit", None)
    if register is None:  # (CPython has it since 3.9)
        return
    ref = weakref.ref(handler)

    def finish() -> None:
        alive = ref()
        if alive is not None:
            alive._finish_at_exit()

    with contextlib.suppress(RuntimeError):  # already exiting
        register(finish)


def _holds_logging_lock() -> bool:
    """Whether this thread holds ``logging``'s module lock, as ``dictConfig`` and
    ``fileConfig`` do while they close the handlers they replace.

    The handler's thread needs that lock as soon as it logs anything after the
    configuration cleared the loggers' level caches (asyncio logs as its loop starts, the
    client as it connects), so waiting for that thread then would only wait out the
    timeouts. (``_is_owned`` is what ``threading.Condition`` uses on an RLock; without it,
    the answer is "no" and close() waits as it always did.)
    """
    lock = getattr(logging, "_lock", None)
    is_owned = getattr(lock, "_is_owned", None)
    return bool(is_owned()) if callable(is_owned) else False


class KafkaHandler(logging.Handler):
    """Sends log records to ``topic`` as JSON, through a producer on its own thread.

    ``producer_options`` are ``Producer`` options (``acks``, ``linger_ms`` (50 here
    unless given), ``compression``, security settings, ...); a bad one raises
    ``ConfigError`` here. See the module docstring for the buffer, the counters, and
    what happens when Kafka is unreachable.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        topic: str,
        *,
        level: int | str = logging.NOTSET,
        max_buffered: int = 10_000,
        flush_timeout_ms: float = 5_000,
        close_timeout_ms: float = 5_000,
        **producer_options: Any,
    ) -> None:
        super().__init__(level)
        if not isinstance(topic, str) or not topic:
            raise ConfigError(f"KafkaHandler needs a topic name, got {topic!r}")
        if max_buffered < 1:
            raise ConfigError(f"max_buffered must be >= 1, got {max_buffered}")
        if flush_timeout_ms < 0 or close_timeout_ms < 0:
            raise ConfigError("flush_timeout_ms and close_timeout_ms must be >= 0")
        options = {"linger_ms": 50, **producer_options}
        Producer(bootstrap_servers, **options)  # check the options now, in the caller's thread
        self.topic = topic
        self.max_buffered = max_buffered
        self._bootstrap = bootstrap_servers
        self._options = options
        self._flush_timeout_s = flush_timeout_ms / 1000
        self._close_timeout_s = close_timeout_ms / 1000
        self.setFormatter(JsonFormatter())

        # Shared with the sender thread, under _items_lock (held for a few operations only).
        self._items_lock = threading.Lock()
        self._items: deque[tuple[int, bytes]] = deque()
        self._appended = 0  # records ever put in the buffer
        self._wake_pending = False
        self._report_pending = False
        self._closed = False
        self._close_deferred = False  # closed without waiting for the thread: joined at exit
        self._dropped = 0
        self._drops_to_announce = 0  # not told on the topic yet
        self._drops_to_log = 0  # not warned about yet
        # Written by the sender thread only.
        self._sent = 0
        self._failed = 0
        self._failures_to_log = 0
        self._last_failure: BaseException | None = None
        self._taken = 0  # records taken from the buffer and handed to the producer (or failed)
        self._unsettled = 0  # handed to the producer, delivery callback not run yet

        self._local = threading.local()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()  # the sender thread's loop runs (or could not start)
        self._thread_id: int | None = None
        self._thread = threading.Thread(target=self._run, name=f"KafkaHandler[{topic}]", daemon=True)
        # Not waiting for the loop here: dictConfig builds handlers holding logging's lock,
        # which the new thread needs as soon as it logs anything.
        self._thread.start()
        self._thread_id = self._thread.ident
        _flush_before_exit(self)

    # ------------------------------------------------------------------ counters
    @property
    def dropped(self) -> int:
        """Records dropped: the buffer was full, or still held them when the handler closed."""
        return self._dropped

    @property
    def sent(self) -> int:
        """Records Kafka acknowledged."""
        return self._sent

    @property
    def failed(self) -> int:
        """Records the producer could not deliver."""
        return self._failed

    @property
    def buffered(self) -> int:
        """Records waiting in the buffer (not yet handed to the producer)."""
        return len(self._items)

    # ------------------------------------------------------------------ logging.Handler
    def filter(self, record: logging.LogRecord) -> Any:
        # Before Handler.handle takes the handler's lock: the sender thread must never wait
        # for it (flush() and close() hold it while they wait for that thread).
        if threading.get_ident() == self._thread_id or record.thread == self._thread_id:
            return False
        return super().filter(record)

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(self._local, "formatting", False):
            return  # logged while formatting a record (by a __str__ of an argument, say)
        self._local.formatting = True
        try:
            value = self.format(record).encode("utf-8")
        except Exception:
            self.handleError(record)
            return
        finally:
            self._local.formatting = False
        with self._items_lock:
            if len(self._items) >= self.max_buffered or self._closed:
                self._dropped += 1
                if self._closed:
                    return
                self._drops_to_announce += 1
                self._drops_to_log += 1
                wake = not self._report_pending
                self._report_pending = True
                callback: Callable[[], None] = self._schedule_report
            else:
                self._items.append((created_ms(record), value))
                self._appended += 1
                wake = not self._wake_pending
                self._wake_pending = True
                callback = self._wake
        if wake:
            self._call_soon(callback)

    def flush(self) -> None:
        """Wait until what was logged so far is acknowledged (at most ``flush_timeout_ms``).

        Returns at once when called holding ``logging``'s module lock (``dictConfig`` replacing
        the handler flushes it so before closing it): the close that follows sends the records.
        """
        if threading.get_ident() == self._thread_id or _holds_logging_lock():
            return
        if not self._ready.wait(self._flush_timeout_s):
            return
        loop = self._loop
        if loop is None or not self._thread.is_alive():
            return
        try:
            future = asyncio.run_coroutine_threadsafe(self._flush(), loop)
        except RuntimeError:  # the loop is closed
            return
        try:
            future.result(self._flush_timeout_s)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            future.cancel()
        except Exception as exc:  # a flush that failed is no error of the application's
            future.cancel()
            log.debug("KafkaHandler(%s): flush failed: %r", self.topic, exc)

    def close(self) -> None:
        """Send what is buffered (at most ``close_timeout_ms``), then stop. Idempotent.

        Called holding ``logging``'s module lock (by ``dictConfig`` or ``fileConfig``
        replacing the handler), it returns at once instead: the handler's thread, which
        needs that lock to log, sends what is buffered once the configuration is done
        (within ``close_timeout_ms`` from then) and stops, and the interpreter waits for it
        at exit. Records it cannot send in that time are dropped, with a warning.
        """
        with self._items_lock:
            already = self._closed
            self._closed = True
        if not already and threading.get_ident() != self._thread_id and self._thread.is_alive():
            if _holds_logging_lock():
                self._close_deferred = True
                self._call_soon(self._begin_close)  # (a loop not running yet sees _closed)
            else:
                self._ready.wait(self._close_timeout_s)
                self._call_soon(self._begin_close)
                self._thread.join(self._close_timeout_s + 5)
        super().close()

    def _finish_at_exit(self) -> None:
        """At interpreter exit: flush, or let the thread of a handler closed without
        waiting (see close) finish sending."""
        if not self._closed:
            self.flush()
        elif self._close_deferred and threading.get_ident() != self._thread_id:
            self._thread.join(self._close_timeout_s + 5)

    def __repr__(self) -> str:
        level = logging.getLevelName(self.level)
        return f"<KafkaHandler {self.topic} ({level}) sent={self._sent} dropped={self._dropped}>"

    # ------------------------------------------------------------------ any thread -> sender thread
    def _call_soon(self, callback: Callable[[], None]) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the handler is shut down
                loop.call_soon_threadsafe(callback)

    # ------------------------------------------------------------------ sender thread
    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        finally:
            self._ready.set()  # (also when the loop could not start)

    async def _main(self) -> None:
        self._wakeup = asyncio.Event()
        self._closing = asyncio.Event()
        self._progress = asyncio.Condition()
        self._report_timer: asyncio.TimerHandle | None = None
        self._producer = Producer(self._bootstrap, **self._options)
        self._started = False
        loop = self._loop = asyncio.get_running_loop()  # from now on, emit wakes this loop
        self._ready.set()
        with self._items_lock:  # calls made before the loop ran could not reach it
            if self._report_pending:
                self._schedule_report()
            if self._closed:
                self._closing.set()
        serve = asyncio.create_task(self._serve_logged())
        await self._closing.wait()
        self._wakeup.set()
        deadline = loop.time() + self._close_timeout_s
        await asyncio.wait({serve}, timeout=self._close_timeout_s)
        if not serve.done():
            serve.cancel()
        await asyncio.gather(serve, return_exceptions=True)
        with contextlib.suppress(KafkaError):
            await self._producer.close(timeout=max(0.0, deadline - loop.time()))
        # A start cut short by the close (Kafka unresponsive) fails once the client is
        # closed; nobody awaits it any more.
        start = getattr(self._producer, "_start_task", None)
        if isinstance(start, asyncio.Task) and start.done() and not start.cancelled():
            start.exception()
        await self._settle()  # the counters include every record the producer was given
        with self._items_lock:
            left = len(self._items)
            self._items.clear()
            self._dropped += left
        if self._report_timer is not None:
            self._report_timer.cancel()
        self._report()
        if left:
            log.warning(
                "KafkaHandler(%s): %d log record(s) still buffered at close, dropped", self.topic, left
            )

    def _wake(self) -> None:
        self._wakeup.set()

    def _begin_close(self) -> None:
        self._closing.set()

    async def _serve_logged(self) -> None:
        try:
            await self._serve()
        except Exception:  # a bug: records now pile up and are dropped, never blocking anyone
            log.exception("KafkaHandler(%s): the sender stopped", self.topic)

    async def _serve(self) -> None:
        backoff = _START_BACKOFF_S
        while not self._started:
            try:
                await self._producer.start()
                self._started = True
            except KafkaError as exc:
                log.warning(
                    "KafkaHandler(%s): cannot reach Kafka (%s); retrying in %.1f s", self.topic, exc, backoff
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), backoff)
                if self._closing.is_set():
                    return
                backoff = min(backoff * 2, _START_BACKOFF_MAX_S)
        while True:
            self._wakeup.clear()
            batch, appended = self._take()
            if not batch:
                if self._closing.is_set():
                    return
                await self._wakeup.wait()
                continue
            for timestamp_ms, value in batch:
                try:
                    future = await self._producer.enqueue(self.topic, value, timestamp_ms=timestamp_ms)
                except KafkaError as exc:  # no metadata or no buffer memory within max_block_ms
                    self._note_failure(exc)
                else:
                    self._unsettled += 1
                    future.add_done_callback(self._delivered)
            self._taken += appended
            async with self._progress:
                self._progress.notify_all()

    def _take(self) -> tuple[list[tuple[int, bytes]], int]:
        """Everything buffered (after a notice of the drops since the last time), and how
        many of those records ``emit`` appended."""
        with self._items_lock:
            batch = list(self._items)
            self._items.clear()
            self._wake_pending = False
            announce = self._drops_to_announce
            self._drops_to_announce = 0
        appended = len(batch)
        if announce:
            batch.insert(0, self._drop_notice(announce))
        return batch, appended

    def _drop_notice(self, dropped: int) -> tuple[int, bytes]:
        record = logging.LogRecord(
            log.name,
            logging.WARNING,
            __file__,
            0,
            "%d log record(s) dropped here: the handler's buffer (%d records) was full",
            (dropped, self.max_buffered),
            None,
        )
        record.__dict__["dropped"] = dropped
        try:
            text = self.format(record)
        except Exception:  # a user formatter that cannot take it
            text = json.dumps({"level": "WARNING", "logger": log.name, "dropped": dropped})
        return created_ms(record), text.encode("utf-8")

    def _delivered(self, future: RecordFuture) -> None:
        self._unsettled -= 1
        error = None if future.cancelled() else future.exception()
        if error is None:
            self._sent += 1
        else:
            self._note_failure(error)

    def _note_failure(self, error: BaseException) -> None:
        self._failed += 1
        self._failures_to_log += 1
        self._last_failure = error
        self._schedule_report()

    def _schedule_report(self) -> None:
        if self._report_timer is None:
            self._report_timer = asyncio.get_running_loop().call_later(_REPORT_EVERY_S, self._report)

    def _report(self) -> None:
        self._report_timer = None
        with self._items_lock:
            drops = self._drops_to_log
            self._drops_to_log = 0
            self._report_pending = False
        if drops:
            log.warning(
                "KafkaHandler(%s): dropped %d log record(s) (%d in all): buffer of %d records full",
                self.topic,
                drops,
                self._dropped,
                self.max_buffered,
            )
        if self._failures_to_log:
            log.warning(
                "KafkaHandler(%s): %d log record(s) not delivered (%d in all), last error: %r",
                self.topic,
                self._failures_to_log,
                self._failed,
                self._last_failure,
            )
            self._failures_to_log = 0

    async def _flush(self) -> None:
        with self._items_lock:
            target = self._appended
        self._wakeup.set()
        async with self._progress:
            await self._progress.wait_for(lambda: self._taken >= target or self._closing.is_set())
        if self._started and not self._closing.is_set():
            await self._producer.flush()
            await self._settle()

    async def _settle(self) -> None:
        """After a flush or the close every record is delivered or failed, but the delivery
        callbacks are only scheduled: let them run, so that the counters are complete."""
        for _ in range(100):
            if self._unsettled <= 0:
                return
            await asyncio.sleep(0)
