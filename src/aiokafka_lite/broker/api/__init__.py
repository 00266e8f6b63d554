"""The broker's core API handlers (everything but the group and transaction coordinators)."""

from __future__ import annotations

from aiokafka_lite.broker.api import (
    acls,
    admin,
    fetch,
    log_offsets,
    meta,
    produce,
    quorum,
    telemetry,
    transactions_admin,
)
from aiokafka_lite.broker.api.credentials import register as register_credentials
from aiokafka_lite.broker.api.quotas import register as register_quotas
from aiokafka_lite.broker.api.replicas import register as register_replicas
from aiokafka_lite.broker.api.streams_groups import register as register_streams_groups
from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.state import ClusterState
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import SaslAuthenticateRequest, SaslHandshakeRequest

__all__ = ["register_core_handlers"]


async def _connection_level(ctx: RequestContext, req: Request) -> Response:
    # SASL requests change the connection's state, so the connection loop serves them;
    # these entries only advertise the versions.
    raise RuntimeError("SASL requests are served by the connection")


def register_core_handlers(registry: HandlerRegistry, state: ClusterState) -> None:
    meta.register(registry)
    admin.register(registry)
    produce.register(registry)
    fetch.register(registry, state)
    log_offsets.register(registry)
    quorum.register(registry, state)
    telemetry.register_telemetry_handlers(registry, state)
    # -- ACLs
    acls.register(registry, state)
    # -- SCRAM credentials, client quotas, delegation tokens
    register_credentials(registry, state)
    register_quotas(registry, state)
    # -- transactions admin (ListTransactions, DescribeTransactions, DescribeProducers)
    transactions_admin.register(registry, state)  # DescribeProducers, WriteTxnMarkers
    # -- replicas, leaders, log dirs, features
    register_replicas(registry, state)
    # -- streams groups (KIP-1071): StreamsGroupDescribe only, no streams groups
    register_streams_groups(registry, state)
    registry.register(SaslHandshakeRequest.API_KEY, _connection_level, 0, SaslHandshakeRequest.MAX_VERSION)
    registry.register(
        SaslAuthenticateRequest.API_KEY, _connection_level, 0, SaslAuthenticateRequest.MAX_VERSION
    )
