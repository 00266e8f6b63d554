"""What the clients' hot paths look at: whether any tracing is on, and the global one.

This module imports nothing at run time: the producer and consumers import it
unconditionally, so with OpenTelemetry off (not installed, or not enabled) a send or a
consumed record costs one module-attribute load and a falsy check (``enabled``).

It sits in core, below the clients, while the tracing itself is an integration above them
(``aiokafka_lite.integrations.otel``): the integration registers its ``KafkaTracing`` and
``end_iteration`` here when it loads (``register``), so nothing here imports upwards. A
client given ``tracer_provider=`` before the integration was imported loads it by name,
the way an optional plugin is loaded (``_OTEL_TRACING``).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiokafka_lite.integrations.otel.tracing import KafkaTracing

#: The tracing every client uses unless it was given its own ``tracer_provider=``
#: (set by ``aiokafka_lite.integrations.otel.instrument()``).
tracing: KafkaTracing | None = None
#: Whether some client may trace: ``instrument()`` is in effect, or a client was created
#: with ``tracer_provider=``. False means no client traces (the hot paths' only check).
enabled = False
_client_providers = False

_OTEL_TRACING = "aiokafka_lite.integrations.otel.tracing"
#: Set by the tracing integration when it loads (``register``).
_make_tracing: Callable[[Any], KafkaTracing] | None = None
_end_iteration: Callable[[Any], None] | None = None


def register(make_tracing: Callable[[Any], KafkaTracing], end: Callable[[Any], None]) -> None:
    """Called once by ``aiokafka_lite.integrations.otel.tracing`` at import."""
    global _make_tracing, _end_iteration
    _make_tracing, _end_iteration = make_tracing, end


def set_global(value: KafkaTracing | None) -> None:
    global tracing, enabled
    tracing = value
    enabled = value is not None or _client_providers


def client_tracing(tracer_provider: Any) -> KafkaTracing | None:
    """The tracing of a client created with ``tracer_provider=`` (None: none given)."""
    global enabled, _client_providers
    if tracer_provider is None:
        return None
    if _make_tracing is None:
        importlib.import_module(_OTEL_TRACING)  # registers itself
    assert _make_tracing is not None, f"{_OTEL_TRACING} did not register"
    _client_providers = enabled = True
    return _make_tracing(tracer_provider)


def of(client: Any) -> KafkaTracing | None:
    """The tracing a client uses: its own ``tracer_provider=``, else the global one."""
    own: KafkaTracing | None = getattr(client, "_tracing", None)
    return own if own is not None else tracing


def begin_iteration(consumer: Any, record: Any) -> None:
    """Start the process span of a record an ``async for`` over ``consumer`` hands out,
    current in the loop body, if ``consumer`` is traced (only called while ``enabled``)."""
    traced = of(consumer)
    if traced is not None:
        traced.begin_iteration(consumer, record)


def end_iteration(consumer: Any) -> None:
    """End the process span of the record an ``async for`` over ``consumer`` handed out
    last (called on close; only while ``enabled``, so the tracing module is loaded)."""
    if _end_iteration is not None:
        _end_iteration(consumer)


async def in_process_span(consumer: Any, record: Any, call: Callable[[], Any]) -> None:
    """Run a worker's handler call for ``record`` (awaiting what it returns) inside the
    record's process span, when ``consumer`` is traced (only called while ``enabled``)."""
    traced = of(consumer)
    if traced is not None:
        await traced.run_handler(consumer, record, call)
        return
    result = call()
    if inspect.isawaitable(result):
        await result


async def in_batch_span(consumer: Any, batch: Mapping[Any, Sequence[Any]], call: Callable[[], Any]) -> None:
    """``in_process_span`` for a handler of a batch of records by partition."""
    traced = of(consumer)
    if traced is not None:
        await traced.run_batch_handler(consumer, [r for rs in batch.values() for r in rs], call)
        return
    result = call()
    if inspect.isawaitable(result):
        await result
