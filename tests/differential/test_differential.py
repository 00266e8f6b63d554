"""Every differential case on Apache Kafka and on the embedded broker: same answers.

Each case (``_cases.py``, ``_cases_other.py``) sends the same raw requests to both
brokers and returns what a client can observe: error codes, offsets, watermarks,
records a fetch returns. The embedded broker must answer exactly like Kafka. The few
deliberate differences are listed in ``DIFFERENCES`` with their reason; each is
documented in docs/guide/embedded-broker-differences.md and checked here to be exactly
what that page says. Where Kafka 4.0 and the newest 4.x answer differently, the embedded
broker follows the newest; ``FOUR_O`` says what 4.0 answers instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import _cases  # noqa: F401  (registers the cases)
import _cases_acls  # noqa: F401
import _cases_consumer_groups  # noqa: F401
import _cases_credentials  # noqa: F401
import _cases_other  # noqa: F401
import _cases_replicas  # noqa: F401
import _cases_share_admin  # noqa: F401
import _cases_txn_admin  # noqa: F401
import _cases_txn_v2  # noqa: F401
import pytest
from _diffkit import CASES, Observation, Target

CASE_IDS = [f"{area}/{name}" for area, cases in CASES.items() for name in cases]

Check = Callable[[Observation, Observation], None]


#: Case -> the documented relation between Kafka's and the embedded broker's answers.
DIFFERENCES: dict[str, Check] = {}


def _four_o_segment_bytes(obs: Observation) -> Observation:
    # Kafka 4.0 still accepted segment.bytes below 1 MiB (the minimum was 14 bytes).
    return {**obs, "segment_bytes_small": 40} if obs.get("segment_bytes_small") == 0 else obs


#: Case -> how Kafka 4.0's answer maps onto the newest 4.x's (what the embedded broker gives).
FOUR_O: dict[str, Callable[[Observation], Observation]] = {
    "admin/create_topic_config_values": _four_o_segment_bytes,
}


def comparable(obs: Any) -> Any:
    """The observation without its ``_``-prefixed, informational entries (messages)."""
    if isinstance(obs, dict):
        return {k: comparable(v) for k, v in obs.items() if not k.startswith("_")}
    if isinstance(obs, list | tuple):
        return [comparable(v) for v in obs]
    return obs


async def observe(case_id: str, target: Target) -> Observation:
    area, name = case_id.split("/")
    try:
        return await asyncio.wait_for(CASES[area][name](target), 60)
    finally:
        await target.close()


@pytest.mark.parametrize("case_id", CASE_IDS)
async def test_same_answer(case_id: str, apache_target: Target, embedded_target: Target) -> None:
    apache = comparable(await observe(case_id, apache_target))
    embedded = comparable(await observe(case_id, embedded_target))
    if apache_target.generation == "4.0" and case_id in FOUR_O:
        apache = FOUR_O[case_id](apache)
    check = DIFFERENCES.get(case_id)
    if check is not None:
        check(apache, embedded)
        return
    assert embedded == apache


def test_every_difference_names_a_case() -> None:
    assert set(DIFFERENCES) | set(FOUR_O) <= set(CASE_IDS)
