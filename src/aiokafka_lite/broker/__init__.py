"""An embedded Kafka-compatible broker cluster for development and tests.

In-process::

    async with EmbeddedCluster(brokers=3, topics={"orders": 6}) as cluster:
        ...  # any Kafka client, bootstrap_servers=cluster.bootstrap

As a process: ``python -m aiokafka_lite.broker --port 9092 --brokers 1 [--data-dir DIR]
[--topic NAME:PARTITIONS ...]`` prints ``listening on HOST:PORT[,...]`` when ready.

It speaks the real wire protocol (ApiVersions-negotiated; see ``registry`` of a cluster
for the API/version table), stores record batches exactly as produced (header and CRC
checks, offsets assigned by rewriting the base offset; no per-record work) and serves
them back as stored buffers. Control API on ``EmbeddedCluster`` for reliability tests:
``inject_error``, ``add_latency``, ``drop_connection``, ``close_connections``,
``stop_broker``/``start_broker``/``restart_broker``, ``move_leader``,
``expire_group_member``, ``clear_faults``; inspection: ``observe``/``record_requests``.
Group and transaction coordination live in ``broker.groups``/``broker.transactions``.

Known deviations from Kafka: replication is metadata only (one copy of each log, so
the high watermark is the log end offset and a stopped broker's partitions move to any
live broker); retention is by ``retention.bytes`` only (no time-based deletion);
topic ``compression.type`` other than ``producer`` is not applied (batches are stored
as produced); magic v0/v1 batches are rejected (INVALID_RECORD, as Produce v3+
requires); a retry of an idempotent batch older than the five cached batches gets
DUPLICATE_SEQUENCE_NUMBER (Kafka answers OUT_OF_ORDER_SEQUENCE_NUMBER).
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
