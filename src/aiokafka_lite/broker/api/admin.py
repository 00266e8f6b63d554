"""Topic administration and configs: CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs; and a fallback InitProducerId
for idempotent (non-transactional) producers, replaced by the transaction coordinator's
handler when that module is present."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Final

from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.group_configs import group_config_entries, validate_group_config
from aiokafka_lite.broker.share.groups import get_share_groups
from aiokafka_lite.broker.state import TOPIC_CONFIG_DEFAULTS, ClusterState, Topic
from aiokafka_lite.core.errors import (
    BrokerResponseError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidRequestError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownServerError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from aiokafka_lite.wire.primitives import ZERO_UUID

__all__ = ["register"]

RESOURCE_TOPIC: Final = 2
RESOURCE_BROKER: Final = 4
RESOURCE_BROKER_LOGGER: Final = 8
RESOURCE_GROUP: Final = 32
SOURCE_DYNAMIC_TOPIC: Final = 1
SOURCE_DYNAMIC_BROKER: Final = 2
SOURCE_STATIC_BROKER: Final = 4
SOURCE_DEFAULT: Final = 5
# ConfigType (DescribeConfigs v3+)
_TYPE_BOOLEAN, _TYPE_STRING, _TYPE_INT, _TYPE_LONG, _TYPE_DOUBLE, _TYPE_LIST = 1, 2, 3, 5, 6, 7
_CONFIG_TYPES: Final[dict[str, int]] = {
    "cleanup.policy": _TYPE_LIST,
    "compression.type": _TYPE_STRING,
    "message.timestamp.type": _TYPE_STRING,
    "min.cleanable.dirty.ratio": _TYPE_DOUBLE,
    "preallocate": _TYPE_BOOLEAN,
    "unclean.leader.election.enable": _TYPE_BOOLEAN,
    "auto.create.topics.enable": _TYPE_BOOLEAN,
    "delete.topic.enable": _TYPE_BOOLEAN,
    "max.message.bytes": _TYPE_INT,
    "message.max.bytes": _TYPE_INT,
    "min.insync.replicas": _TYPE_INT,
    "num.partitions": _TYPE_INT,
    "index.interval.bytes": _TYPE_INT,
    "segment.bytes": _TYPE_INT,
    "segment.index.bytes": _TYPE_INT,
}
_OP_SET, _OP_DELETE, _OP_APPEND, _OP_SUBTRACT = 0, 1, 2, 3


def register(registry: HandlerRegistry) -> None:
    registry.register(
        CreateTopicsRequest.API_KEY,
        create_topics,
        CreateTopicsRequest.MIN_VERSION,
        CreateTopicsRequest.MAX_VERSION,
    )
    registry.register(
        DeleteTopicsRequest.API_KEY,
        delete_topics,
        DeleteTopicsRequest.MIN_VERSION,
        DeleteTopicsRequest.MAX_VERSION,
    )
    registry.register(
        CreatePartitionsRequest.API_KEY, create_partitions, 0, CreatePartitionsRequest.MAX_VERSION
    )
    registry.register(
        DescribeConfigsRequest.API_KEY,
        describe_configs,
        DescribeConfigsRequest.MIN_VERSION,
        DescribeConfigsRequest.MAX_VERSION,
    )
    registry.register(AlterConfigsRequest.API_KEY, alter_configs, 0, AlterConfigsRequest.MAX_VERSION)
    registry.register(
        IncrementalAlterConfigsRequest.API_KEY,
        incremental_alter_configs,
        0,
        IncrementalAlterConfigsRequest.MAX_VERSION,
    )
    # Fallback until/unless the transaction coordinator registers the real one (v0-v5:
    # v6 adds two-phase-commit fields this fallback has no use for).
    registry.register(InitProducerIdRequest.API_KEY, init_producer_id, 0, 5)


def _config_type(name: str) -> int:
    if name in _CONFIG_TYPES:
        return _CONFIG_TYPES[name]
    if name.endswith((".ms", ".bytes", ".messages")):
        return _TYPE_LONG
    return _TYPE_STRING


def _topic_config_entries(topic: Topic) -> list[tuple[str, str, int]]:
    """(name, value, source) for every topic config: explicit ones and defaults."""
    out = []
    for name in sorted(set(TOPIC_CONFIG_DEFAULTS) | set(topic.configs)):
        if name in topic.configs:
            out.append((name, topic.configs[name], SOURCE_DYNAMIC_TOPIC))
        else:
            out.append((name, TOPIC_CONFIG_DEFAULTS[name], SOURCE_DEFAULT))
    return out


# -- CreateTopics -------------------------------------------------------------------
async def create_topics(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, CreateTopicsRequest)
    state = ctx.cluster
    v = ctx.api_version
    counts = Counter(t.name for t in req.topics)
    results = []
    for ct in req.topics:
        res = CreateTopicsResponse.CreatableTopicResult(name=ct.name, error_message=None)
        if counts[ct.name] > 1:
            res.error_code = InvalidRequestError.code
            res.error_message = f"topic {ct.name!r} appears more than once in the request"
            results.append(res)
            continue
        configs: dict[str, str] = {}
        try:
            for c in ct.configs:
                if c.value is None:
                    raise InvalidConfigError(f"null value for config {c.name!r}")
                configs[c.name] = c.value
            assignments = {a.partition_index: list(a.broker_ids) for a in ct.assignments} or None
            if req.validate_only:
                n, rf = state.check_new_topic(
                    ct.name, ct.num_partitions, ct.replication_factor, configs, assignments
                )
                topic = None
            else:
                topic = state.create_topic(
                    ct.name, ct.num_partitions, ct.replication_factor, configs, assignments=assignments
                )
                n, rf = len(topic.partitions), len(topic.partitions[0].replicas)
        except BrokerResponseError as e:
            res.error_code = e.code
            res.error_message = e.message
            if v >= 5:
                res.configs = None
            results.append(res)
            continue
        if topic is not None:
            res.topic_id = topic.topic_id
        res.num_partitions = n
        res.replication_factor = rf
        if v >= 5:
            shown = topic or Topic(ct.name, ZERO_UUID, [], configs)
            res.configs = [
                CreateTopicsResponse.CreatableTopicConfigs(
                    name=name, value=value, read_only=False, config_source=source, is_sensitive=False
                )
                for name, value, source in _topic_config_entries(shown)
            ]
        results.append(res)
    return CreateTopicsResponse(topics=results)


# -- DeleteTopics --------------------------------------------------------------------
async def delete_topics(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, DeleteTopicsRequest)
    state = ctx.cluster
    out = []
    if ctx.api_version >= 6:
        wanted: list[tuple[str | None, uuid.UUID]] = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(n, ZERO_UUID) for n in req.topic_names]
    for name, topic_id in wanted:
        res = DeleteTopicsResponse.DeletableTopicResult(name=name, topic_id=ZERO_UUID, error_message=None)
        try:
            if name is None or (not name and topic_id != ZERO_UUID):
                topic = state.topics_by_id.get(topic_id)
                if topic is None:
                    raise UnknownTopicIdError(f"no topic with id {topic_id}")
                name = topic.name
                res.name = name
            existing = state.get_topic(name)
            if existing is not None and existing.internal:
                raise TopicAuthorizationFailedError(f"internal topic {name!r} cannot be deleted")
            topic = state.delete_topic(name)
            res.topic_id = topic.topic_id
        except BrokerResponseError as e:
            res.error_code = e.code
            res.error_message = e.message
        out.append(res)
    return DeleteTopicsResponse(responses=out)


# -- CreatePartitions ----------------------------------------------------------------
async def create_partitions(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, CreatePartitionsRequest)
    state = ctx.cluster
    counts = Counter(t.name for t in req.topics)
    results = []
    for t in req.topics:
        res = CreatePartitionsResponse.CreatePartitionsTopicResult(name=t.name, error_message=None)
        try:
            if counts[t.name] > 1:
                raise InvalidRequestError(f"topic {t.name!r} appears more than once in the request")
            topic = state.get_topic(t.name)
            if topic is None:
                raise UnknownTopicOrPartitionError(f"topic {t.name!r} does not exist")
            assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None
            if req.validate_only:
                if t.count <= len(topic.partitions):
                    raise InvalidPartitionsError(
                        f"topic has {len(topic.partitions)} partitions; cannot set {t.count}"
                    )
            else:
                state.add_partitions(t.name, t.count, assignments)
        except BrokerResponseError as e:
            res.error_code = e.code
            res.error_message = e.message
        results.append(res)
    return CreatePartitionsResponse(results=results)


# -- configs -------------------------------------------------------------------------
def _describe_entry(
    name: str, value: str | None, source: int, v: int, synonyms: bool, docs: bool
) -> DescribeConfigsResponse.DescribeConfigsResourceResult:
    entry = DescribeConfigsResponse.DescribeConfigsResourceResult(
        name=name,
        value=value,
        read_only=source in (SOURCE_STATIC_BROKER,),
        config_source=source,
        is_sensitive=False,
        config_type=_config_type(name),
        documentation=None,
    )
    if synonyms and v >= 1:
        entry.synonyms = [
            DescribeConfigsResponse.DescribeConfigsSynonym(name=name, value=value, source=source)
        ]
    return entry


async def describe_configs(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, DescribeConfigsRequest)
    state = ctx.cluster
    v = ctx.api_version
    results = []
    for r in req.resources:
        res = DescribeConfigsResponse.DescribeConfigsResult(
            resource_type=r.resource_type, resource_name=r.resource_name, error_message=None
        )
        keys = set(r.configuration_keys) if r.configuration_keys is not None else None
        entries: list[tuple[str, str, int]] = []
        if r.resource_type == RESOURCE_TOPIC:
            topic = state.get_topic(r.resource_name)
            if topic is None:
                res.error_code = UnknownTopicOrPartitionError.code
                res.error_message = f"topic {r.resource_name!r} does not exist"
            else:
                entries = _topic_config_entries(topic)
        elif r.resource_type == RESOURCE_BROKER:
            try:
                bid = int(r.resource_name) if r.resource_name else ctx.broker_id
            except ValueError:
                bid = -1
            if r.resource_name and bid not in state.brokers:
                res.error_code = InvalidRequestError.code
                res.error_message = f"no broker {r.resource_name!r}"
            else:
                entries = [
                    (k, val, SOURCE_DYNAMIC_BROKER if k in state.config.extra else SOURCE_STATIC_BROKER)
                    for k, val in sorted(state.config.as_configs(bid).items())
                ]
        elif r.resource_type == RESOURCE_BROKER_LOGGER:
            entries = []
        elif r.resource_type == RESOURCE_GROUP:
            _describe_group_configs(state, res, keys, v, req.include_synonyms, req.include_documentation)
            results.append(res)
            continue
        else:
            res.error_code = InvalidRequestError.code
            res.error_message = f"unsupported resource type {r.resource_type}"
        res.configs = [
            _describe_entry(name, value, source, v, req.include_synonyms, req.include_documentation)
            for name, value, source in entries
            if keys is None or name in keys
        ]
        results.append(res)
    return DescribeConfigsResponse(results=results)


def _describe_group_configs(
    state: ClusterState,
    res: DescribeConfigsResponse.DescribeConfigsResult,
    keys: set[str] | None,
    v: int,
    synonyms: bool,
    docs: bool,
) -> None:
    """A GROUP resource: every group config (Kafka lists them whether or not the group exists)."""
    if not res.resource_name:
        res.error_code = InvalidRequestError.code
        res.error_message = "Group name must not be empty"
        return
    res.configs = [
        DescribeConfigsResponse.DescribeConfigsResourceResult(
            name=e.name,
            value=e.value,
            read_only=False,
            config_source=e.source,
            is_sensitive=False,
            config_type=e.type,
            documentation=e.doc if docs and v >= 3 else None,
            synonyms=[
                DescribeConfigsResponse.DescribeConfigsSynonym(name=n, value=val, source=src)
                for n, val, src in e.synonyms
            ]
            if synonyms and v >= 1
            else [],
        )
        for e in group_config_entries(state.group_configs.get(res.resource_name, {}), state.config.extra)
        if keys is None or e.name in keys
    ]


def _alter(
    state: ClusterState,
    resource_type: int,
    resource_name: str,
    changes: dict[str, str | None],
    incremental: bool,
    validate_only: bool,
) -> None:
    if resource_type == RESOURCE_TOPIC:
        topic = state.get_topic(resource_name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {resource_name!r} does not exist")
        if validate_only:
            new = dict(topic.configs) if incremental else {}
            new.update({k: v for k, v in changes.items() if v is not None})
            state.validate_topic_configs(new)
        else:
            state.set_topic_configs(topic, changes, incremental=incremental)
    elif resource_type == RESOURCE_BROKER:
        # Dynamic broker configs are recorded and described, not enforced.
        if validate_only:
            return
        if not incremental:
            state.config.extra.clear()
        for k, val in changes.items():
            if val is None:
                state.config.extra.pop(k, None)
            else:
                state.config.extra[k] = val
    elif resource_type == RESOURCE_BROKER_LOGGER:
        return
    elif resource_type == RESOURCE_GROUP:
        if not resource_name:
            raise InvalidRequestError("Default group resources are not allowed.")
        for k, val in changes.items():
            problem = validate_group_config(k, val, state.config.extra)
            if problem is not None:
                raise InvalidConfigError(problem)
        if validate_only:
            return
        configs = state.group_configs.setdefault(resource_name, {}) if incremental else {}
        state.group_configs[resource_name] = configs
        for k, val in changes.items():
            if val is None:
                configs.pop(k, None)
            else:
                configs[k] = val
        get_share_groups(state).persist(resource_name)  # journaled: kept if the broker is killed
    else:
        raise InvalidRequestError(f"unsupported resource type {resource_type}")


async def alter_configs(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, AlterConfigsRequest)
    out = []
    for r in req.resources:
        res = AlterConfigsResponse.AlterConfigsResourceResponse(
            resource_type=r.resource_type, resource_name=r.resource_name, error_message=None
        )
        try:
            _alter(
                ctx.cluster,
                r.resource_type,
                r.resource_name,
                {c.name: c.value for c in r.configs},
                False,
                req.validate_only,
            )
        except BrokerResponseError as e:
            res.error_code = e.code
            res.error_message = e.message
        out.append(res)
    return AlterConfigsResponse(responses=out)


async def incremental_alter_configs(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, IncrementalAlterConfigsRequest)
    state = ctx.cluster
    out = []
    for r in req.resources:
        res = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
            resource_type=r.resource_type, resource_name=r.resource_name, error_message=None
        )
        try:
            current: dict[str, str] = {}
            if r.resource_type == RESOURCE_TOPIC:
                topic = state.get_topic(r.resource_name)
                current = dict(topic.configs) if topic is not None else {}
            changes: dict[str, str | None] = {}
            for c in r.configs:
                if c.config_operation == _OP_SET:
                    changes[c.name] = c.value or ""
                elif c.config_operation == _OP_DELETE:
                    changes[c.name] = None
                elif c.config_operation in (_OP_APPEND, _OP_SUBTRACT):
                    if _config_type(c.name) != _TYPE_LIST:
                        raise InvalidConfigError(f"{c.name} is not a list config")
                    base = changes.get(c.name) or current.get(c.name) or TOPIC_CONFIG_DEFAULTS.get(c.name, "")
                    items = [i for i in base.split(",") if i]
                    vals = [i for i in (c.value or "").split(",") if i]
                    if c.config_operation == _OP_APPEND:
                        items += [i for i in vals if i not in items]
                    else:
                        items = [i for i in items if i not in vals]
                    changes[c.name] = ",".join(items)
                else:
                    # Kafka fails looking the operation up and answers UNKNOWN_SERVER_ERROR.
                    raise UnknownServerError(f"unknown config operation {c.config_operation}")
            _alter(state, r.resource_type, r.resource_name, changes, True, req.validate_only)
        except BrokerResponseError as e:
            res.error_code = e.code
            res.error_message = e.message
        out.append(res)
    return IncrementalAlterConfigsResponse(responses=out)


# -- InitProducerId (idempotent producers only) ------------------------------------
async def init_producer_id(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, InitProducerIdRequest)
    if req.transactional_id is not None:
        # Only the transaction coordinator can fence transactional ids.
        return InitProducerIdResponse(
            error_code=TransactionalIdAuthorizationFailedError.code, producer_id=-1, producer_epoch=-1
        )
    if req.producer_id >= 0:
        # KIP-360 epoch bump of an idempotent producer: keep the id, raise the epoch.
        epoch = req.producer_epoch + 1
        if epoch <= 32767:
            return InitProducerIdResponse(error_code=0, producer_id=req.producer_id, producer_epoch=epoch)
    return InitProducerIdResponse(
        error_code=0, producer_id=ctx.cluster.allocate_producer_id(), producer_epoch=0
    )
