"""Random well-formed requests for every API and version never make a handler fail.

A handler that raises, or builds a response its own version cannot encode, is logged by
the broker at ERROR level and answered with a generic error; this sweep catches both
(it found Metadata v10/v11 with a null topic name).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import REQUESTS

REQUESTS_PER_VERSION = 3
#: SaslHandshake / SaslAuthenticate change what the connection may do next; the SASL tests cover them.
SKIPPED_APIS = {17, 36}
#: Fields that would make a well-formed request wait in the broker for up to minutes.
WAIT_FIELDS = ("max_wait_ms", "timeout_ms", "rebalance_timeout_ms", "session_timeout_ms")


def _wire_strategies() -> ModuleType:
    # The request generator lives beside the codec tests; load it by path (tests/ is no package).
    path = Path(__file__).parents[1] / "wire" / "test_messages.py"
    spec = importlib.util.spec_from_file_location("_wire_message_strategies", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _ErrorLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[tuple[str, str]] = []
        self.current = ""

    def emit(self, record: logging.LogRecord) -> None:
        exc = f" ({record.exc_info[1]!r})" if record.exc_info else ""
        self.records.append((record.getMessage() + exc, self.current))


async def test_random_requests_for_every_api_and_version() -> None:
    struct_strategy: Any = _wire_strategies().struct_strategy
    errors = _ErrorLog()
    broker_log = logging.getLogger("aiokafka_lite.broker")
    broker_log.addHandler(errors)
    sent = 0
    try:
        async with EmbeddedCluster(brokers=1, topics={"t": 2}) as cluster:
            for entry in cluster.registry:
                if entry.api_key in SKIPPED_APIS:
                    continue
                cls = REQUESTS[entry.api_key]
                for v in range(entry.min_version, entry.max_version + 1):
                    strategy = struct_strategy(cls, v, cls.is_flexible(v))
                    for _ in range(REQUESTS_PER_VERSION):
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            msg = strategy.example()
                        for f in WAIT_FIELDS:
                            if hasattr(msg, f):
                                setattr(msg, f, min(abs(getattr(msg, f)), 50))
                        errors.current = f"{cls.__name__} v{v}: {msg!r:.500}"
                        # A broker may close the connection on a request it refuses; only its log matters.
                        with contextlib.suppress(Exception):
                            async with await RawClient.connect(cluster.bootstrap) as c:
                                await c.request(msg, v, within=1)
                        sent += 1
            await asyncio.sleep(0.2)
    finally:
        broker_log.removeHandler(errors)
    assert sent > 500, "the sweep sent too few requests to mean anything"
    assert errors.records == []
