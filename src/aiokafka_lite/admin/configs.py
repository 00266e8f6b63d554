"""Config operations of the admin client: ``describe_configs`` and
``incremental_alter_configs``. Broker configs go to that broker, the others to any
broker (``config_route``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from aiokafka_lite.admin.requests import AdminRequests, Outcome, Route, error_of, results
from aiokafka_lite.admin.types import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    Result,
    Results,
)
from aiokafka_lite.core import errors as E
from aiokafka_lite.wire.message import Request
from aiokafka_lite.wire.messages import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

__all__ = ["config_route", "describe_configs", "incremental_alter_configs"]


def config_route(resource: ConfigResource) -> Route:
    if resource.type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER) and resource.name:
        try:
            return int(resource.name)
        except ValueError:
            raise E.ConfigError(
                f"broker config resource name must be a node id, got {resource.name!r}"
            ) from None
    return "any"


async def describe_configs(
    rq: AdminRequests,
    resources: Iterable[ConfigResource],
    *,
    include_synonyms: bool = False,
    include_documentation: bool = False,
    timeout_ms: float | None = None,
) -> Results[ConfigResource, ConfigDescription]:
    items = list(dict.fromkeys(resources))
    deadline = rq.deadline(timeout_ms)

    async def one_node(node: Route, batch: list[ConfigResource]) -> dict[ConfigResource, Outcome]:
        def make(version: int) -> Request:
            return DescribeConfigsRequest(
                resources=[
                    DescribeConfigsRequest.DescribeConfigsResource(
                        resource_type=int(r.type), resource_name=r.name, configuration_keys=None
                    )
                    for r in batch
                ],
                include_synonyms=include_synonyms and version >= 1,
                include_documentation=include_documentation and version >= 3,
            )

        resp = await rq.request(make, node, deadline)
        assert isinstance(resp, DescribeConfigsResponse)
        out: dict[ConfigResource, Outcome] = {}
        for r in resp.results:
            key = ConfigResource(ConfigResourceType(r.resource_type), r.resource_name)
            err = error_of(r.error_code, r.error_message)
            if err is not None:
                out[key] = err
                continue
            entries = {
                c.name: ConfigEntry(
                    name=c.name,
                    value=c.value,
                    source=_source(c.config_source),
                    read_only=c.read_only,
                    is_default=c.config_source == ConfigSource.DEFAULT_CONFIG,
                    is_sensitive=c.is_sensitive,
                    synonyms=tuple((s.name, s.value, s.source) for s in c.synonyms),
                    type=c.config_type,
                    documentation=c.documentation or None,
                )
                for c in r.configs
            }
            out[key] = ConfigDescription(key, entries)
        return out

    async def attempt(batch: list[ConfigResource]) -> dict[ConfigResource, Outcome]:
        return await rq.split(batch, config_route, one_node)

    outcomes = await rq.per_item(items, attempt, deadline)
    return results(items, outcomes, lambda r, e: ConfigDescription(r, error=e))


async def incremental_alter_configs(
    rq: AdminRequests,
    changes: Mapping[ConfigResource, Sequence[AlterConfigOp] | Mapping[str, str | None]],
    *,
    validate_only: bool = False,
    timeout_ms: float | None = None,
) -> Results[ConfigResource, Result]:
    """Apply config operations; a ``{name: value}`` mapping means SET (DELETE for None)."""
    ops: dict[ConfigResource, list[AlterConfigOp]] = {}
    for resource, change in changes.items():
        if isinstance(change, Mapping):
            ops[resource] = [
                AlterConfigOp(k, v, AlterConfigOpType.DELETE if v is None else AlterConfigOpType.SET)
                for k, v in change.items()
            ]
        else:
            ops[resource] = list(change)
    deadline = rq.deadline(timeout_ms)

    async def one_node(node: Route, batch: list[ConfigResource]) -> dict[ConfigResource, Outcome]:
        def make(version: int) -> Request:
            return IncrementalAlterConfigsRequest(
                resources=[
                    IncrementalAlterConfigsRequest.AlterConfigsResource(
                        resource_type=int(r.type),
                        resource_name=r.name,
                        configs=[
                            IncrementalAlterConfigsRequest.AlterableConfig(
                                name=op.name, config_operation=int(op.op), value=op.value
                            )
                            for op in ops[r]
                        ],
                    )
                    for r in batch
                ],
                validate_only=validate_only,
            )

        resp = await rq.request(make, node, deadline)
        assert isinstance(resp, IncrementalAlterConfigsResponse)
        return {
            ConfigResource(ConfigResourceType(r.resource_type), r.resource_name): error_of(
                r.error_code, r.error_message
            )
            or Result()
            for r in resp.responses
        }

    async def attempt(batch: list[ConfigResource]) -> dict[ConfigResource, Outcome]:
        return await rq.split(batch, config_route, one_node)

    outcomes = await rq.per_item(list(ops), attempt, deadline)
    return results(ops, outcomes, lambda r, e: Result(e))


def _source(code: int) -> ConfigSource | int:
    try:
        return ConfigSource(code)
    except ValueError:
        return code
