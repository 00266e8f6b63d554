"""TransactSession on asyncio and on trio: consume-transform-produce rounds, a failing
handler's round aborted and its input processed again, so read_committed readers see
each input's output exactly once and the group's offsets cover the input."""

from __future__ import annotations

import uuid

import anyio
import pytest

from aiokafka_lite import Producer
from aiokafka_lite.processing.transact import Batch, TransactSession
from aiokafka_lite.testing.threaded import ThreadedCluster
from anyio_backends.conftest import FAST, UnretrievedErrors, client_tasks_running
from anyio_backends.test_backend_transactions import _read
from anyio_backends.testlib import fill_topic

pytestmark = pytest.mark.anyio


async def test_transact_session_exactly_once(anyio_backend: str, threaded_cluster: ThreadedCluster) -> None:
    bootstrap = threaded_cluster.bootstrap
    source, sink = f"ts-in-{anyio_backend}", f"ts-out-{anyio_backend}"
    sent = await fill_topic(bootstrap, source, 2, 120)
    await fill_topic(bootstrap, sink, 2, 0)
    unretrieved = UnretrievedErrors()
    failed_once: list[bool] = []
    aborted_rounds = 0

    async def handler(batch: Batch, producer: Producer) -> None:
        for records in batch.values():
            for r in records:
                await producer.enqueue(sink, b"out-" + r.value)
        if not failed_once:  # the first round's output must never be committed
            failed_once.append(True)
            raise ValueError("handler failed")

    async with TransactSession(
        bootstrap,
        group_id=f"ts-g-{anyio_backend}",
        topics=source,
        transactional_id=f"ts-{uuid.uuid4().hex[:8]}",
        consumer_options={"auto_offset_reset": "earliest", "max_poll_records": 25, **FAST},
        producer_options={"linger_ms": 1, **FAST},
    ) as session:
        with anyio.fail_after(60):
            while True:
                try:
                    outcome = await session.process(handler, timeout_ms=300)
                except ValueError:
                    aborted_rounds += 1
                    continue
                if outcome is None and session.consumer.assignment():
                    positions = [await session.consumer.position(tp) for tp in session.consumer.assignment()]
                    committed = [await session.consumer.committed(tp) for tp in session.consumer.assignment()]
                    if [p or 0 for p in committed] == positions and sum(positions) == len(sent):
                        break
                elif outcome is not None:
                    assert outcome is True
        assert not session.in_transaction
    assert aborted_rounds == 1
    output = await _read(bootstrap, sink, "read_committed", len(sent))
    done = {v.removeprefix(b"out-") for v in output}
    assert len(output) == len(sent) and done == sent  # each input's output once
    assert client_tasks_running() == []
    assert unretrieved.check() == []
