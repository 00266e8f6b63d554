"""The Transactions V2 differential cases on a cluster set back to ``transaction.version=1``.

Apache Kafka (newest pinned 4.x) is set to level 1 the way ``kafka-features.sh downgrade
--feature transaction.version=1`` does it (UpdateFeatures, safe downgrade); the embedded
broker is started with ``features={"transaction.version": 1}``. Every case of
``tests/differential/_cases_txn_v2.py`` must get the same answers from both. (Kafka 4.4
keys the TV2 rules to the request versions, not to the finalized level: only ApiVersions
tells the two levels apart, and clients choose their versions from it.)
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "differential"))

import _cases_txn_v2  # noqa: F401  (registers the txn2 cases)
from _diffkit import CASES, Target, kafka_generation

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.testing.apache import ApacheCluster
from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import UpdateFeaturesRequest, UpdateFeaturesResponse

SAFE_DOWNGRADE = 2


async def _set_transaction_version(bootstrap: str, level: int) -> None:
    async with await RawClient.connect(bootstrap) as c:
        resp = await c.request(
            UpdateFeaturesRequest(
                timeout_ms=30000,
                feature_updates=[
                    UpdateFeaturesRequest.FeatureUpdateKey(
                        feature="transaction.version", max_version_level=level, upgrade_type=SAFE_DOWNGRADE
                    )
                ],
                validate_only=False,
            ),
            1,
        )
    assert isinstance(resp, UpdateFeaturesResponse)
    assert resp.error_code == 0, resp
    assert all(r.error_code == 0 for r in resp.results), resp


@pytest.fixture(scope="module")
def apache_tv1(pytestconfig: pytest.Config) -> Iterator[str]:
    version = pytestconfig.getoption("--kafka-version", None)
    with ApacheCluster(1, version=str(version) if version else None) as kafka:
        asyncio.run(_set_transaction_version(kafka.bootstrap, 1))
        yield kafka.bootstrap


@pytest.fixture
async def embedded_tv1() -> AsyncIterator[str]:
    async with EmbeddedCluster(features={"transaction.version": 1}) as cluster:
        yield cluster.bootstrap


async def _observe(target: Target, name: str) -> object:
    try:
        return await asyncio.wait_for(CASES["txn2"][name](target), 60)
    finally:
        await target.close()


@pytest.mark.parametrize("name", list(CASES["txn2"]))
async def test_same_answer_at_transaction_version_1(name: str, apache_tv1: str, embedded_tv1: str) -> None:
    apache = await _observe(Target("apache", apache_tv1, await kafka_generation(apache_tv1)), name)
    embedded = await _observe(Target("embedded", embedded_tv1), name)
    assert embedded == apache
