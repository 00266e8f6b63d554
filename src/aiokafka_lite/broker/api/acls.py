"""ACLs in the embedded broker: the CreateAcls/DescribeAcls/DeleteAcls handlers, and the
authorization of the other requests when the cluster has an authorizer.

Without an authorizer (``ClusterState.authorizer`` None, Kafka without
``authorizer.class.name``) every request is allowed and the ACL calls answer
``SECURITY_DISABLED`` ("No Authorizer is configured."), as Kafka does. With one
(``EmbeddedCluster(authorizer=True)``), ``install_authorization`` wraps the registered
handlers so that each request is checked before its handler runs, as Kafka's
``KafkaApis`` checks it:

* whole-request checks (a transactional producer's WRITE on its transactional id, a
  group member's READ on its group...) answer every item with the error
  (``TRANSACTIONAL_ID_AUTHORIZATION_FAILED``, ``GROUP_AUTHORIZATION_FAILED``...);
* per-item checks (Produce WRITE, Fetch READ, ListOffsets DESCRIBE, CreateTopics CREATE,
  DeleteTopics DELETE, CreatePartitions ALTER per topic; DescribeGroups/DeleteGroups per
  group) pass the authorized items to the handler and answer the others with
  ``TOPIC_AUTHORIZATION_FAILED``/``GROUP_AUTHORIZATION_FAILED``;
* Metadata answers named topics the principal may not DESCRIBE (or auto-create: CREATE
  on the cluster or the topic) with ``TOPIC_AUTHORIZATION_FAILED`` and leaves them out
  of an all-topics listing; ListGroups lists only groups it may DESCRIBE (all with
  DESCRIBE on the cluster);
* the ACL calls need ALTER (create, delete) or DESCRIBE (describe) on the CLUSTER.

Not checked (documented deviation): configs, records deletion, share groups, quotas and
the other operator calls; topics a fetch session keeps without naming them again.
The principal is ``RequestContext.kafka_principal``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Final

from aiokafka_lite.broker.api.common import error_response
from aiokafka_lite.broker.authorizer import Authorizer
from aiokafka_lite.broker.context import EncodedResponse, Handler, HandlerRegistry, RequestContext
from aiokafka_lite.broker.context import HandlerResult as _HandlerResult
from aiokafka_lite.broker.state import ClusterState
from aiokafka_lite.core.acls import (
    CLUSTER_NAME,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    operations_to_bits,
)
from aiokafka_lite.core.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    InvalidRequestError,
    SecurityDisabledError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    RESPONSES,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClusterResponse,
    ListGroupsResponse,
    MetadataRequest,
    MetadataResponse,
)
from aiokafka_lite.wire.primitives import ZERO_UUID

__all__ = ["install_authorization", "register"]

_NO_AUTHORIZER: Final = "No Authorizer is configured."
_TOPIC: Final = TopicAuthorizationFailedError.code
_GROUP: Final = GroupAuthorizationFailedError.code
_CLUSTER: Final = ClusterAuthorizationFailedError.code
_TXN: Final = TransactionalIdAuthorizationFailedError.code
_Op = AclOperation
_RT = ResourceType


def register(registry: HandlerRegistry, state: ClusterState) -> None:
    registry.register(CreateAclsRequest.API_KEY, create_acls, 1, 3)
    registry.register(DescribeAclsRequest.API_KEY, describe_acls, 1, 3)
    registry.register(DeleteAclsRequest.API_KEY, delete_acls, 1, 3)


def _denied_message(ctx: RequestContext, op: AclOperation, what: str) -> str:
    return f"principal {ctx.kafka_principal} is not authorized to {op.name} {what} (no ACL allows it)"


# ---------------------------------------------------------------------------- the ACL calls


def _binding_error(b: AclBinding) -> str | None:
    """Why Kafka refuses to create ``b`` (INVALID_REQUEST), or None."""
    p, e = b.pattern, b.entry
    if p.resource_type in (_RT.UNKNOWN, _RT.ANY):
        return "Invalid resourceType " + p.resource_type.name
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid patternType " + p.pattern_type.name
    if e.operation in (_Op.UNKNOWN, _Op.ANY):
        return "Invalid operation " + e.operation.name
    if e.permission_type in (AclPermissionType.UNKNOWN, AclPermissionType.ANY):
        return "Invalid permissionType " + e.permission_type.name
    if p.resource_type == _RT.CLUSTER and p.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not p.name:
        return "Invalid empty resource name"
    kind, sep, name = e.principal.partition(":")
    if not sep or not kind or not name:
        return f"Could not parse principal from `{e.principal}` (no colon is found)."
    return None


def _enum(cls: Any, value: int) -> Any:
    try:
        return cls(value)
    except ValueError:
        return cls(0)


def _filter(
    rtype: int, name: str | None, ptype: int, principal: str | None, host: str | None, op: int, perm: int
) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(_enum(ResourceType, rtype), name, _enum(PatternType, ptype)),
        AccessControlEntryFilter(principal, host, _enum(AclOperation, op), _enum(AclPermissionType, perm)),
    )


def _filter_error(f: AclBindingFilter) -> str | None:
    if f.pattern_filter.is_unknown():
        return "Unknown patternFilter."
    if f.entry_filter.is_unknown():
        return "Unknown entryFilter."
    return None


async def create_acls(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, CreateAclsRequest)
    auth = ctx.cluster.authorizer
    R = CreateAclsResponse.AclCreationResult

    def every(code: int, message: str) -> CreateAclsResponse:
        return CreateAclsResponse(results=[R(error_code=code, error_message=message) for _ in req.creations])

    if auth is None:
        return every(SecurityDisabledError.code, _NO_AUTHORIZER)
    if not auth.authorize_cluster(ctx.kafka_principal, ctx.client_host, _Op.ALTER):
        return every(_CLUSTER, _denied_message(ctx, _Op.ALTER, "the cluster (create ACLs)"))
    results = []
    for c in req.creations:
        binding = AclBinding(
            ResourcePattern(
                _enum(ResourceType, c.resource_type),
                c.resource_name,
                _enum(PatternType, c.resource_pattern_type),
            ),
            AccessControlEntry(
                c.principal,
                c.host,
                _enum(AclOperation, c.operation),
                _enum(AclPermissionType, c.permission_type),
            ),
        )
        problem = _binding_error(binding)
        if problem is not None:
            results.append(R(error_code=InvalidRequestError.code, error_message=problem))
            continue
        auth.create(binding)
        results.append(R(error_code=0, error_message=None))
    return CreateAclsResponse(results=results)


async def describe_acls(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, DescribeAclsRequest)
    auth = ctx.cluster.authorizer
    if auth is None:
        return DescribeAclsResponse(error_code=SecurityDisabledError.code, error_message=_NO_AUTHORIZER)
    if not auth.authorize_cluster(ctx.kafka_principal, ctx.client_host, _Op.DESCRIBE):
        return DescribeAclsResponse(
            error_code=_CLUSTER,
            error_message=_denied_message(ctx, _Op.DESCRIBE, "the cluster (describe ACLs)"),
        )
    f = _filter(
        req.resource_type_filter,
        req.resource_name_filter,
        req.pattern_type_filter,
        req.principal_filter,
        req.host_filter,
        req.operation,
        req.permission_type,
    )
    problem = _filter_error(f)
    if problem is not None:
        return DescribeAclsResponse(error_code=InvalidRequestError.code, error_message=problem)
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in auth.describe(f):
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    D = DescribeAclsResponse
    return D(
        error_code=0,
        error_message=None,
        resources=[
            D.DescribeAclsResource(
                resource_type=p.resource_type,
                resource_name=p.name,
                pattern_type=p.pattern_type,
                acls=[
                    D.AclDescription(
                        principal=e.principal,
                        host=e.host,
                        operation=e.operation,
                        permission_type=e.permission_type,
                    )
                    for e in entries
                ],
            )
            for p, entries in by_pattern.items()
        ],
    )


async def delete_acls(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, DeleteAclsRequest)
    auth = ctx.cluster.authorizer
    D = DeleteAclsResponse

    def every(code: int, message: str) -> DeleteAclsResponse:
        return D(
            filter_results=[
                D.DeleteAclsFilterResult(error_code=code, error_message=message) for _ in req.filters
            ]
        )

    if auth is None:
        return every(SecurityDisabledError.code, _NO_AUTHORIZER)
    if not auth.authorize_cluster(ctx.kafka_principal, ctx.client_host, _Op.ALTER):
        return every(_CLUSTER, _denied_message(ctx, _Op.ALTER, "the cluster (delete ACLs)"))
    filters = [
        _filter(
            f.resource_type_filter,
            f.resource_name_filter,
            f.pattern_type_filter,
            f.principal_filter,
            f.host_filter,
            f.operation,
            f.permission_type,
        )
        for f in req.filters
    ]
    problems = [_filter_error(f) for f in filters]
    matched = iter(auth.delete([f for f, p in zip(filters, problems, strict=True) if p is None]))
    out = []
    for problem in problems:
        if problem is not None:
            out.append(D.DeleteAclsFilterResult(error_code=InvalidRequestError.code, error_message=problem))
            continue
        out.append(
            D.DeleteAclsFilterResult(
                error_code=0,
                error_message=None,
                matching_acls=[
                    D.DeleteAclsMatchingAcl(
                        error_code=0,
                        error_message=None,
                        resource_type=b.pattern.resource_type,
                        resource_name=b.pattern.name,
                        pattern_type=b.pattern.pattern_type,
                        principal=b.entry.principal,
                        host=b.entry.host,
                        operation=b.entry.operation,
                        permission_type=b.entry.permission_type,
                    )
                    for b in next(matched)
                ],
            )
        )
    return D(filter_results=out)


# ---------------------------------------------------------------------------- enforcement


@dataclasses.dataclass(frozen=True, slots=True)
class _Whole:
    """A check of the whole request: every name ``names`` gives must pass, else every
    item of the request is answered with ``code``."""

    resource: ResourceType
    op: AclOperation
    code: int
    names: Callable[[Request, int], Sequence[str | None]]


@dataclasses.dataclass(frozen=True, slots=True)
class _PerItem:
    """A check per item of the request list ``items`` (answered in the response list
    ``answers``): denied items are answered with ``code``, the rest go to the handler."""

    resource: ResourceType
    op: AclOperation
    code: int
    items: str
    answers: str
    applies: Callable[[Request, int], bool] = lambda r, v: True
    # An item that CREATE on the cluster authorizes whatever its own ACLs say.
    cluster_op: AclOperation | None = None


def _attr(name: str) -> Callable[[Request, int], Sequence[str | None]]:
    return lambda r, v: [getattr(r, name, None)]


def _offset_fetch_group(r: Request, v: int) -> Sequence[str | None]:
    return [getattr(r, "group_id", None)] if v < 8 else []  # v8+: per group, below


def _coordinator_key(resource: ResourceType, key_type: int) -> Callable[[Request, int], Sequence[str | None]]:
    def names(r: Request, v: int) -> Sequence[str | None]:
        if getattr(r, "key_type", 0) != key_type:
            return []
        if v >= 4:
            return list(getattr(r, "coordinator_keys", None) or [])
        return [getattr(r, "key", None)]

    return names


_GROUP_READ = _Whole(_RT.GROUP, _Op.READ, _GROUP, _attr("group_id"))
_TXN_WRITE = _Whole(_RT.TRANSACTIONAL_ID, _Op.WRITE, _TXN, _attr("transactional_id"))

# API key -> whole-request checks, in Kafka's order (the first failing one answers).
_WHOLE: Final[dict[int, tuple[_Whole, ...]]] = {
    0: (_TXN_WRITE,),  # Produce: a transactional producer's id (None for the others)
    8: (_GROUP_READ,),  # OffsetCommit
    9: (_Whole(_RT.GROUP, _Op.DESCRIBE, _GROUP, _offset_fetch_group),),  # OffsetFetch before v8
    10: (  # FindCoordinator
        _Whole(_RT.GROUP, _Op.DESCRIBE, _GROUP, _coordinator_key(_RT.GROUP, 0)),
        _Whole(_RT.TRANSACTIONAL_ID, _Op.DESCRIBE, _TXN, _coordinator_key(_RT.TRANSACTIONAL_ID, 1)),
    ),
    11: (_GROUP_READ,),  # JoinGroup
    12: (_GROUP_READ,),  # Heartbeat
    13: (_GROUP_READ,),  # LeaveGroup
    14: (_GROUP_READ,),  # SyncGroup
    24: (  # AddPartitionsToTxn (a client's, before v4)
        _Whole(
            _RT.TRANSACTIONAL_ID,
            _Op.WRITE,
            _TXN,
            lambda r, v: [getattr(r, "transactional_id", None)] if v < 4 else [],
        ),
    ),
    25: (_TXN_WRITE, _GROUP_READ),  # AddOffsetsToTxn
    26: (_TXN_WRITE,),  # EndTxn
    28: (_TXN_WRITE, _GROUP_READ),  # TxnOffsetCommit
    47: (_Whole(_RT.GROUP, _Op.DELETE, _GROUP, _attr("group_id")),),  # OffsetDelete
    68: (_GROUP_READ,),  # ConsumerGroupHeartbeat
}

_PER_ITEM: Final[dict[int, tuple[_PerItem, ...]]] = {
    0: (_PerItem(_RT.TOPIC, _Op.WRITE, _TOPIC, "topic_data", "responses"),),
    1: (
        _PerItem(
            _RT.TOPIC,
            _Op.READ,
            _TOPIC,
            "topics",
            "responses",
            applies=lambda r, v: getattr(r, "replica_id", -1) < 0,
        ),
    ),
    2: (_PerItem(_RT.TOPIC, _Op.DESCRIBE, _TOPIC, "topics", "topics"),),
    8: (_PerItem(_RT.TOPIC, _Op.READ, _TOPIC, "topics", "topics"),),
    9: (_PerItem(_RT.GROUP, _Op.DESCRIBE, _GROUP, "groups", "groups", applies=lambda r, v: v >= 8),),
    15: (_PerItem(_RT.GROUP, _Op.DESCRIBE, _GROUP, "groups", "groups"),),
    19: (_PerItem(_RT.TOPIC, _Op.CREATE, _TOPIC, "topics", "topics", cluster_op=_Op.CREATE),),
    20: (
        _PerItem(_RT.TOPIC, _Op.DELETE, _TOPIC, "topic_names", "responses", applies=lambda r, v: v < 6),
        _PerItem(_RT.TOPIC, _Op.DELETE, _TOPIC, "topics", "responses", applies=lambda r, v: v >= 6),
    ),
    37: (_PerItem(_RT.TOPIC, _Op.ALTER, _TOPIC, "topics", "results"),),
    42: (_PerItem(_RT.GROUP, _Op.DELETE, _GROUP, "groups_names", "results"),),
    69: (_PerItem(_RT.GROUP, _Op.DESCRIBE, _GROUP, "group_ids", "groups"),),
}


class _Enforcer:
    """Wraps one API's handler with its checks."""

    def __init__(self, state: ClusterState, auth: Authorizer, api_key: int, inner: Handler) -> None:
        self.state = state
        self.auth = auth
        self.api_key = api_key
        self.inner = inner

    def allowed(self, ctx: RequestContext, op: AclOperation, resource: ResourceType, name: str) -> bool:
        return self.auth.authorize(ctx.kafka_principal, ctx.client_host, op, resource, name)

    def _item_name(self, item: Any) -> str | None:
        if isinstance(item, str):
            return item
        name = getattr(item, "name", None) or getattr(item, "topic", None) or getattr(item, "group_id", None)
        if name:
            return str(name)
        topic_id = getattr(item, "topic_id", ZERO_UUID)
        t = self.state.topics_by_id.get(topic_id) if topic_id != ZERO_UUID else None
        return t.name if t is not None else None

    async def __call__(self, ctx: RequestContext, req: Request) -> _HandlerResult:
        v = ctx.api_version
        for check in _WHOLE.get(self.api_key, ()):
            for name in check.names(req, v):
                if name is not None and not self.allowed(ctx, check.op, check.resource, name):
                    return error_response(req, v, check.code)
        if self.api_key == 3:
            return await self._metadata(ctx, req)
        if self.api_key == 22:
            refused = self._init_producer_id(ctx, req)
            if refused is not None:
                return error_response(req, v, refused)
        denied_parts: list[Response] = []
        for rule in _PER_ITEM.get(self.api_key, ()):
            if not rule.applies(req, v):
                continue
            if rule.cluster_op is not None and self.auth.authorize_cluster(
                ctx.kafka_principal, ctx.client_host, rule.cluster_op
            ):
                continue
            items = list(getattr(req, rule.items, None) or [])
            allowed: list[Any] = []
            denied: list[Any] = []
            for item in items:
                name = self._item_name(item)
                # An item without a known name (an unknown topic id) is the handler's to answer.
                ok = name is None or self.allowed(ctx, rule.op, rule.resource, name)
                (allowed if ok else denied).append(item)
            if not denied:
                continue
            answer = error_response(_with(req, rule.items, denied), v, rule.code)
            if not allowed:
                if self.api_key == 0 and getattr(req, "acks", 1) == 0:
                    return None
                return _merge([answer], None, rule.answers, v)
            denied_parts.append(answer)
            req = _with(req, rule.items, allowed)
        result = await self.inner(ctx, req)
        if self.api_key == 60 and isinstance(result, DescribeClusterResponse):
            self._cluster_operations(ctx, req, result)
        elif self.api_key == 16 and isinstance(result, ListGroupsResponse):
            self._list_groups(ctx, result)
        if not denied_parts or result is None:
            return result
        rules = [r for r in _PER_ITEM[self.api_key] if r.applies(req, v)]
        return _merge(denied_parts, result, rules[0].answers, v)

    def _init_producer_id(self, ctx: RequestContext, req: Request) -> int | None:
        txn_id = getattr(req, "transactional_id", None)
        if txn_id:
            ok = self.allowed(ctx, _Op.WRITE, _RT.TRANSACTIONAL_ID, txn_id)
            return None if ok else _TXN
        # An idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic.
        p, h = ctx.kafka_principal, ctx.client_host
        if self.auth.authorize_cluster(p, h, _Op.IDEMPOTENT_WRITE) or self.auth.authorize_any(
            p, h, _Op.WRITE, _RT.TOPIC
        ):
            return None
        return _CLUSTER

    async def _metadata(self, ctx: RequestContext, req: Request) -> _HandlerResult:
        assert isinstance(req, MetadataRequest)
        v = ctx.api_version
        denied: list[str] = []
        if req.topics is not None and not (v == 0 and not req.topics):
            auto = self.state.config.auto_create_topics and (req.allow_auto_topic_creation or v < 4)
            may_create_all = auto and self.auth.authorize_cluster(
                ctx.kafka_principal, ctx.client_host, _Op.CREATE
            )
            kept = []
            for rt in req.topics:
                name = rt.name or self._item_name(rt)
                if name is None:
                    kept.append(rt)
                    continue
                ok = self.allowed(ctx, _Op.DESCRIBE, _RT.TOPIC, name)
                if ok and auto and not may_create_all and name not in self.state.topics:
                    ok = self.allowed(ctx, _Op.CREATE, _RT.TOPIC, name)
                if ok:
                    kept.append(rt)
                else:
                    denied.append(name)
            req = _with(req, "topics", kept)
            assert isinstance(req, MetadataRequest)
        result = await self.inner(ctx, req)
        assert isinstance(result, MetadataResponse)
        if req.topics is None or (v == 0 and not req.topics):
            result.topics = [
                t
                for t in result.topics
                if t.name is not None and self.allowed(ctx, _Op.DESCRIBE, _RT.TOPIC, t.name)
            ]
        for name in denied:
            result.topics.append(
                MetadataResponse.MetadataResponseTopic(error_code=_TOPIC, name=name, topic_id=ZERO_UUID)
            )
        if req.include_topic_authorized_operations:
            for t in result.topics:
                if not t.error_code and t.name is not None:
                    t.topic_authorized_operations = operations_to_bits(
                        self.auth.authorized_operations(
                            ctx.kafka_principal, ctx.client_host, _RT.TOPIC, t.name
                        )
                    )
        if v >= 8 and getattr(req, "include_cluster_authorized_operations", False):
            result.cluster_authorized_operations = self._cluster_bits(ctx)
        return result

    def _cluster_bits(self, ctx: RequestContext) -> int:
        p, h = ctx.kafka_principal, ctx.client_host
        if not self.auth.authorize_cluster(p, h, _Op.DESCRIBE):
            return 0
        return operations_to_bits(self.auth.authorized_operations(p, h, _RT.CLUSTER, CLUSTER_NAME))

    def _cluster_operations(self, ctx: RequestContext, req: Request, result: DescribeClusterResponse) -> None:
        if getattr(req, "include_cluster_authorized_operations", False):
            result.cluster_authorized_operations = self._cluster_bits(ctx)

    def _list_groups(self, ctx: RequestContext, result: ListGroupsResponse) -> None:
        if self.auth.authorize_cluster(ctx.kafka_principal, ctx.client_host, _Op.DESCRIBE):
            return
        result.groups = [g for g in result.groups if self.allowed(ctx, _Op.DESCRIBE, _RT.GROUP, g.group_id)]


def _with(req: Request, attr: str, items: list[Any]) -> Request:
    """A copy of ``req`` whose list ``attr`` holds ``items`` (the request is not changed:
    fault injection and request recorders may hold it)."""
    copy: Request = dataclasses.replace(req, **{attr: items})  # type: ignore[type-var]
    return copy


def _merge(parts: list[Response], result: _HandlerResult, answers: str, v: int) -> Response:
    """The handler's answer (``result``, None when it did not run) with the denied items'
    answers appended to its list ``answers``."""
    if isinstance(result, EncodedResponse):  # a hot path's own encoding: decode to merge
        cls = RESPONSES[type(parts[0]).API_KEY]
        result = cls.decode(b"".join(bytes(p) for p in result.parts), v, strict=False)
    base = result if result is not None else parts.pop(0)
    assert isinstance(base, Response)
    merged = list(getattr(base, answers))
    for part in parts:
        merged.extend(getattr(part, answers))
    setattr(base, answers, merged)
    return base


#: APIs whose handlers are wrapped.
_ENFORCED: Final = frozenset(_WHOLE) | frozenset(_PER_ITEM) | {3, 16, 22, 60}


def install_authorization(registry: HandlerRegistry, state: ClusterState, auth: Authorizer) -> None:
    """Check every request of the enforced APIs against ``auth`` before its handler runs
    (call after every handler is registered)."""
    state.authorizer = auth
    for entry in list(registry):
        if entry.api_key in _ENFORCED:
            registry.register(
                entry.api_key,
                _Enforcer(state, auth, entry.api_key, entry.handler),
                entry.min_version,
                entry.max_version,
            )
