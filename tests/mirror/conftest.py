from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mirror_testlib import ClusterFactory, MirrorProcess, SourceWriter, two_clusters


@pytest.fixture
async def clusters(
    request: pytest.FixtureRequest, kafka_cluster_factory: ClusterFactory
) -> AsyncIterator[tuple[Any, Any]]:
    """``(source, target)`` clusters of a mirror test. Mirror processes the test left
    running are killed first: set up after the clusters, this fixture is torn down
    before them, and a live mirror would keep its group from being deleted."""
    try:
        yield await two_clusters(request, kafka_cluster_factory)
    finally:
        await MirrorProcess.kill_leftovers()
        await SourceWriter.stop_leftovers()
