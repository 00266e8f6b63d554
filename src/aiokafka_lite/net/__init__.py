"""Networking: connections, cluster metadata, request routing and security.

``Client`` is the shared spine used by Producer, Consumer and Admin.
"""

from aiokafka_lite.net.client import Client, Lane, parse_bootstrap
from aiokafka_lite.net.client_config import ClientConfig
from aiokafka_lite.net.connection import BrokerConnection, negotiate_version
from aiokafka_lite.net.hooks import BrokerStats, Hooks
from aiokafka_lite.net.metadata import BrokerInfo, ClusterMetadata, CoordinatorType, PartitionInfo, TopicInfo
from aiokafka_lite.net.protocol import ConnectionProtocol, InFlight
from aiokafka_lite.net.security import ReloadingSslContext, create_ssl_context

__all__ = [
    "BrokerConnection",
    "BrokerInfo",
    "BrokerStats",
    "Client",
    "ClientConfig",
    "ClusterMetadata",
    "ConnectionProtocol",
    "CoordinatorType",
    "Hooks",
    "InFlight",
    "Lane",
    "PartitionInfo",
    "ReloadingSslContext",
    "TopicInfo",
    "create_ssl_context",
    "negotiate_version",
    "parse_bootstrap",
]
