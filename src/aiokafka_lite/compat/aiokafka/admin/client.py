"""``AIOKafkaAdminClient`` on the native :class:`aiokafka_lite.Admin`.

The topic calls answer with aiokafka's response shape (``response.to_object()`` with
``topic_errors``: topic, error_code, error_message per topic), which FastStream reads.
The other admin calls are those of the native ``Admin`` (reachable as ``.native``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aiokafka_lite.admin import Admin
from aiokafka_lite.compat.aiokafka.admin.new_topic import NewTopic

__all__ = ["AIOKafkaAdminClient"]


class _TopicsResponse:
    """aiokafka's CreateTopics/DeleteTopics response, reduced to ``to_object()``."""

    def __init__(self, results: Any) -> None:
        self.topic_errors = [
            (
                name,
                0 if result.error is None else getattr(result.error, "code", -1),
                None if result.error is None else str(result.error),
            )
            for name, result in results.items()
        ]

    def to_object(self) -> dict[str, Any]:
        return {
            "topic_errors": [
                {"topic": t, "error_code": code, "error_message": msg} for t, code, msg in self.topic_errors
            ]
        }


class AIOKafkaAdminClient:
    def __init__(
        self,
        *,
        loop: Any = None,
        bootstrap_servers: str | list[str] = "localhost",
        client_id: str = "aiokafka-lite",
        request_timeout_ms: int = 40000,
        connections_max_idle_ms: int = 540000,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 300000,
        security_protocol: str = "PLAINTEXT",
        ssl_context: Any = None,
        api_version: Any = None,
        sasl_mechanism: str = "PLAIN",
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        sasl_kerberos_service_name: str = "kafka",
        sasl_kerberos_domain_name: str | None = None,
        sasl_oauth_token_provider: Any = None,
    ) -> None:
        self._request_timeout_ms = request_timeout_ms
        self.native = Admin(
            bootstrap_servers,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            connections_max_idle_ms=connections_max_idle_ms,
            retry_backoff_ms=retry_backoff_ms,
            metadata_max_age_ms=metadata_max_age_ms,
            security_protocol=security_protocol,
            ssl_context=ssl_context,
            sasl_mechanism=sasl_mechanism,
            sasl_plain_username=sasl_plain_username,
            sasl_plain_password=sasl_plain_password,
            sasl_oauth_token_provider=sasl_oauth_token_provider,
            sasl_kerberos_service_name=sasl_kerberos_service_name,
            sasl_kerberos_domain_name=sasl_kerberos_domain_name,
        )

    async def start(self) -> None:
        await self.native.start()

    async def close(self) -> None:
        await self.native.close()

    async def create_topics(
        self, new_topics: list[NewTopic], timeout_ms: int | None = None, validate_only: bool = False
    ) -> _TopicsResponse:
        results = await self.native.create_topics(
            [t.to_native() for t in new_topics], validate_only=validate_only, timeout_ms=timeout_ms
        )
        return _TopicsResponse(results)

    async def delete_topics(self, topics: Iterable[str], timeout_ms: int | None = None) -> _TopicsResponse:
        return _TopicsResponse(await self.native.delete_topics(topics, timeout_ms=timeout_ms))

    async def list_topics(self) -> list[str]:
        return list(await self.native.list_topics())

    async def describe_cluster(self) -> Any:
        return await self.native.describe_cluster()

    async def create_partitions(
        self, topic_partitions: Any, timeout_ms: int | None = None, validate_only: bool = False
    ) -> Any:
        totals = {name: getattr(p, "total_count", p) for name, p in topic_partitions.items()}
        return await self.native.create_partitions(totals, validate_only=validate_only, timeout_ms=timeout_ms)
