"""Targets of the differential suite: Apache Kafka and a fresh embedded broker.

Apache Kafka comes from the plugin's ``apache_kafka`` fixture (started from Maven on first
use). ``AIOKAFKA_LITE_APACHE_BOOTSTRAP=HOST:PORT`` points the suite at an already running
Kafka instead (a developer's broker; the cases use unique topic/group names, so a shared
broker is fine).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
from _diffkit import Target, kafka_generation

from aiokafka_lite.broker import EmbeddedCluster


@pytest.fixture
async def apache_target(request: pytest.FixtureRequest) -> AsyncIterator[Target]:
    bootstrap = os.environ.get("AIOKAFKA_LITE_APACHE_BOOTSTRAP")
    if not bootstrap:
        bootstrap = str(request.getfixturevalue("apache_kafka").bootstrap)
    target = Target("apache", bootstrap)
    target.generation = await kafka_generation(bootstrap)
    try:
        yield target
    finally:
        await target.close()


@pytest.fixture
async def embedded_target() -> AsyncIterator[Target]:
    async with EmbeddedCluster(brokers=1) as cluster:
        target = Target("embedded", cluster.bootstrap)
        try:
            yield target
        finally:
            await target.close()
