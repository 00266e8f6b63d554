"""These suites run once per async backend, through anyio's pytest plugin: every test
takes the ``anyio_backend`` fixture (asyncio, then trio). The embedded broker is
asyncio-only, so it runs on its own loop in a thread (``kafka_threaded_cluster_factory``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.testing.threaded import ThreadedCluster


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Apache Kafka pass (``--kafka=apache``/container/external) runs the client suites
    on asyncio elsewhere; these two-backend suites are for the embedded broker (each test
    would start its own Apache Kafka through the threaded factory)."""
    if config.getoption("--kafka") == "embedded" and not config.getoption("--kafka-bootstrap"):
        return
    here = str(Path(__file__).parent)
    kept = [item for item in items if not str(item.path).startswith(here)]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def threaded_cluster(
    kafka_threaded_cluster_factory: Callable[..., ThreadedCluster],
) -> Iterator[ThreadedCluster]:
    """One embedded broker (auto-created topics, three partitions by default) in a thread."""
    yield kafka_threaded_cluster_factory(brokers=1, default_partitions=3)


FAST: dict[str, Any] = {"retry_backoff_ms": 5, "retry_backoff_max_ms": 50, "reconnect_backoff_ms": 5}


@pytest.hookimpl(hookwrapper=True)
def pytest_pycollect_makeitem(collector: Any, name: str, obj: object) -> Iterator[None]:
    """Hand the tests marked ``anyio`` back to anyio's plugin: pytest-asyncio's auto mode
    (the project's setting) claims every coroutine test and would run the trio variants
    on asyncio. This wrapper runs after pytest-asyncio's and undoes its substitution."""
    outcome = yield
    result = outcome.get_result()
    if not result:
        return
    items = result if isinstance(result, list) else [result]
    converted: list[Any] = []
    for item in items:
        if (
            isinstance(item, pytest.Function)
            and type(item) is not pytest.Function
            and item.get_closest_marker("anyio") is not None
        ):
            plain = pytest.Function.from_parent(
                item.parent,
                name=item.name,
                callspec=getattr(item, "callspec", None),
                callobj=item.obj,
                fixtureinfo=item._fixtureinfo,
                keywords=item.keywords,
                originalname=item.originalname,
            )
            plain.own_markers = [m for m in item.own_markers if m.name != "asyncio"]
            converted.append(plain)
        else:
            converted.append(item)
    outcome.force_result(converted)


def client_tasks_running() -> list[str]:
    """Tasks of the running event loop whose coroutine is the client's code (asyncio:
    every task of the loop; trio: every task under the root task)."""
    import asyncio

    def ours(coro: Any) -> bool:
        code = getattr(coro, "cr_code", None)
        return (
            code is not None and "/aiokafka_lite/" in code.co_filename and "/testing/" not in code.co_filename
        )

    if asyncio._get_running_loop() is not None:
        return [repr(t) for t in asyncio.all_tasks() if not t.done() and ours(t.get_coro())]
    import trio

    found: list[str] = []
    todo = [trio.lowlevel.current_root_task()]
    while todo:
        task = todo.pop()
        if ours(task.coro):
            found.append(task.name)
        for nursery in task.child_nurseries:
            todo.extend(nursery.child_tasks)
    return found


class UnretrievedErrors:
    """Made inside an async test. asyncio: collects what the loop's exception handler
    receives (an exception of a task or future that nobody retrieved is reported there
    when it is garbage-collected); ``check()`` collects garbage and returns them. trio
    has no such report: a task's error always propagates, so the list stays empty."""

    def __init__(self) -> None:
        import asyncio

        self.seen: list[dict[str, Any]] = []
        self._loop = asyncio._get_running_loop()
        if self._loop is not None:
            self._previous = self._loop.get_exception_handler()
            self._loop.set_exception_handler(lambda _loop, ctx: self.seen.append(ctx))

    def check(self) -> list[dict[str, Any]]:
        import gc

        gc.collect()
        if self._loop is not None:
            self._loop.set_exception_handler(self._previous)
        return self.seen
