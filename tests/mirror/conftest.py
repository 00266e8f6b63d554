from __future__ import annotations

from typing import Any

import pytest
from mirror_testlib import ClusterFactory, two_clusters


@pytest.fixture
async def clusters(request: pytest.FixtureRequest, kafka_cluster_factory: ClusterFactory) -> tuple[Any, Any]:
    """``(source, target)`` clusters of a mirror test."""
    return await two_clusters(request, kafka_cluster_factory)
