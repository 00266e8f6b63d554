"""Group coordinator settings, read from the broker config (server.properties names)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aiokafka_lite.broker.state import BROKER_CONFIG_DEFAULTS, ClusterState

log = logging.getLogger("aiokafka_lite.broker.groups")


def config_int(cluster: ClusterState, key: str, default: int) -> int:
    """A broker setting from ``BrokerConfig.extra`` (server.properties names), else Kafka's default."""
    raw = cluster.config.extra.get(key, BROKER_CONFIG_DEFAULTS.get(key))
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        log.warning("ignoring non-integer %s=%r", key, raw)
        return default


@dataclass(slots=True)
class GroupConfig:
    """Group coordinator settings (Kafka's broker config names in comments)."""

    initial_rebalance_delay_ms: int = 0  # group.initial.rebalance.delay.ms (Kafka: 3000)
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    max_size: int = 2**31 - 1  # group.max.size
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes

    @classmethod
    def from_cluster(cls, cluster: ClusterState) -> GroupConfig:
        return cls(
            initial_rebalance_delay_ms=config_int(cluster, "group.initial.rebalance.delay.ms", 0),
            min_session_timeout_ms=config_int(cluster, "group.min.session.timeout.ms", 6000),
            max_session_timeout_ms=config_int(cluster, "group.max.session.timeout.ms", 1_800_000),
            max_size=config_int(cluster, "group.max.size", 2**31 - 1),
            offset_metadata_max_bytes=config_int(cluster, "offset.metadata.max.bytes", 4096),
        )
