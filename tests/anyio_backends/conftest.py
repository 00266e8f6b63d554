"""These suites run once per async backend, through anyio's pytest plugin: every test
takes the ``anyio_backend`` fixture (asyncio, then trio). The embedded broker is
asyncio-only, so it runs on its own loop in a thread (``kafka_threaded_cluster_factory``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from aiokafka_lite.testing.threaded import ThreadedCluster


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def threaded_cluster(kafka_threaded_cluster_factory: Callable[..., ThreadedCluster]) -> Iterator[ThreadedCluster]:
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
