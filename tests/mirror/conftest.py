from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mirror_testlib import ClusterFactory, MirrorProcess, two_clusters


@pytest.fixture
async def clusters(request: pytest.FixtureRequest, kafka_cluster_factory: ClusterFactory) -> tuple[Any, Any]:
    """``(source, target)`` clusters of a mirror test."""
    return await two_clusters(request, kafka_cluster_factory)


@pytest.fixture(autouse=True)
async def _no_mirror_process_left() -> AsyncIterator[None]:
    yield
    await MirrorProcess.kill_leftovers()
