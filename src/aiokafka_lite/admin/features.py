"""Feature flags (KIP-584) of the admin client, as Java's ``Admin``:

* ``describe_features``: the feature levels a broker supports and those the cluster has
  finalized, with the finalized levels' epoch. As Java, this is an ApiVersions request to
  one broker (the least loaded), sent fresh for the call, not the answer the connection
  got when it opened (a level may have changed since).
* ``update_features`` (UpdateFeatures): upgrade, safe downgrade or unsafe downgrade of
  finalized levels, all or none; ``validate_only`` is the controller's dry run
  (``kafka-features.sh --dry-run``). To the controller (a broker forwards it). A
  request-level error fails every feature of the call, as in Java; version 2 answers
  carry no per-feature results (success is the top-level code).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from aiokafka_lite.admin.requests import AdminRequests, error_of, results
from aiokafka_lite.admin.types import Result, Results
from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.wire.message import Request
from aiokafka_lite.wire.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)

__all__ = [
    "FeatureMetadata",
    "FeatureUpdate",
    "FinalizedVersionRange",
    "SupportedVersionRange",
    "UpgradeType",
    "describe_features",
    "update_features",
]


class UpgradeType(IntEnum):
    """How a level may move (Java's ``FeatureUpdate.UpgradeType``): only up, down where no
    metadata is lost (safe), or down losing metadata (unsafe)."""

    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    """The level to finalize a feature at (0 disables it), and how it may move."""

    max_version_level: int
    upgrade_type: UpgradeType = UpgradeType.UPGRADE


@dataclass(frozen=True, slots=True)
class SupportedVersionRange:
    """Levels of a feature the broker can run (Java's ``SupportedVersionRange``)."""

    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True)
class FinalizedVersionRange:
    """The level the cluster runs a feature at (Java's ``FinalizedVersionRange``; Kafka
    reports min and max levels equal since 3.3)."""

    min_version_level: int
    max_version_level: int


@dataclass(frozen=True, slots=True)
class FeatureMetadata:
    """Java's ``FeatureMetadata``: finalized levels (features at level 0 are absent, as
    Kafka omits them), their epoch (None when the broker reports none) and the levels the
    answering broker supports."""

    finalized_features: dict[str, FinalizedVersionRange] = field(default_factory=dict)
    finalized_features_epoch: int | None = None
    supported_features: dict[str, SupportedVersionRange] = field(default_factory=dict)


async def describe_features(rq: AdminRequests, *, timeout_ms: float | None = None) -> FeatureMetadata:
    """Supported and finalized feature levels, from a fresh ApiVersions answer."""
    deadline = rq.deadline(timeout_ms)
    config = rq.client.config

    def make(version: int) -> Request:
        if 0 <= version < 3:
            raise E.UnsupportedVersionError("describing features needs ApiVersions v3 (Kafka 2.7+)")
        return ApiVersionsRequest(
            client_software_name=config.client_software_name,
            client_software_version=config.client_software_version,
        )

    resp = await rq.request(make, "any", deadline)
    assert isinstance(resp, ApiVersionsResponse)
    err = error_of(resp.error_code)
    if err is not None:
        raise err
    return FeatureMetadata(
        finalized_features={
            f.name: FinalizedVersionRange(f.min_version_level, f.max_version_level)
            for f in resp.finalized_features
        },
        finalized_features_epoch=None if resp.finalized_features_epoch < 0 else resp.finalized_features_epoch,
        supported_features={
            f.name: SupportedVersionRange(f.min_version, f.max_version) for f in resp.supported_features
        },
    )


async def update_features(
    rq: AdminRequests,
    updates: Mapping[str, FeatureUpdate],
    *,
    validate_only: bool = False,
    timeout_ms: float | None = None,
) -> Results[str, Result]:
    """Finalize feature levels, all or none (see the module docstring)."""
    if not updates:
        raise E.ConfigError("update_features needs at least one feature update")
    for name, u in updates.items():
        if not isinstance(name, str) or not name.strip():
            raise E.ConfigError(f"a feature name must be a non-empty string, got {name!r}")
        if not isinstance(u, FeatureUpdate):
            raise E.ConfigError(f"the update of {name} must be a FeatureUpdate, got {u!r}")
        if not 0 <= u.max_version_level <= 32767:
            raise E.ConfigError(f"the level of {name} must be in 0..32767, got {u.max_version_level}")
        UpgradeType(u.upgrade_type)
    items = list(updates)
    deadline = rq.deadline(timeout_ms)

    def make(version: int) -> Request:
        if 0 <= version < 1 and validate_only:
            raise E.UnsupportedVersionError("validate_only needs UpdateFeatures v1 (Kafka 3.3+)")
        if 0 <= version < 1 and any(u.upgrade_type is UpgradeType.UNSAFE_DOWNGRADE for u in updates.values()):
            raise E.UnsupportedVersionError("an unsafe downgrade needs UpdateFeatures v1 (Kafka 3.3+)")
        return UpdateFeaturesRequest(
            timeout_ms=int(min(rq.remaining_ms(deadline), 2**31 - 1)),
            feature_updates=[
                UpdateFeaturesRequest.FeatureUpdateKey(
                    feature=name,
                    max_version_level=u.max_version_level,
                    allow_downgrade=version < 1 and u.upgrade_type is not UpgradeType.UPGRADE,
                    upgrade_type=int(u.upgrade_type),
                )
                for name, u in updates.items()
            ],
            validate_only=validate_only,
        )

    retry = rq.retry_schedule(deadline)
    while True:
        resp = await rq.request(make, "controller", deadline)
        assert isinstance(resp, UpdateFeaturesResponse)
        err = error_of(resp.error_code, resp.error_message)
        delay = retry.next_delay() if err is not None and err.retriable else None
        if delay is None:
            break
        await _backend.sleep(delay)
        await rq.refresh((), deadline)
    if err is not None:
        return results(items, dict.fromkeys(items, err), lambda n, e: Result(e))
    per = {r.feature: Result(error_of(r.error_code, r.error_message)) for r in resp.results}
    out: Results[str, Result] = Results()
    for name in items:
        out[name] = per.get(name, Result())
    return out
