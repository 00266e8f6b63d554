"""An embedded Kafka-compatible broker cluster for development and tests.

``EmbeddedCluster`` runs N brokers in the current event loop; ``python -m
aiokafka_lite.broker`` runs one as a process. See ``broker.cluster`` for the control
API (fault injection, request inspection) and ``broker.context`` for the handler
interface.
"""

from __future__ import annotations

from aiokafka_lite.broker.cluster import DEFAULT_SASL_MECHANISMS, EmbeddedCluster
from aiokafka_lite.broker.context import EncodedResponse, Handler, HandlerRegistry, RequestContext, Service
from aiokafka_lite.broker.faults import ObservedRequest, RequestRecorder
from aiokafka_lite.broker.log import PartitionLog
from aiokafka_lite.broker.server import BrokerServer
from aiokafka_lite.broker.state import BrokerConfig, BrokerInfo, ClusterState, Partition, Topic

__all__ = [
    "DEFAULT_SASL_MECHANISMS",
    "BrokerConfig",
    "BrokerInfo",
    "BrokerServer",
    "ClusterState",
    "EmbeddedCluster",
    "EncodedResponse",
    "Handler",
    "HandlerRegistry",
    "ObservedRequest",
    "Partition",
    "PartitionLog",
    "RequestContext",
    "RequestRecorder",
    "Service",
    "Topic",
]
