"""ACL operations of the admin client, as Java's Admin: ``create_acls`` (CreateAcls),
``describe_acls`` (DescribeAcls) and ``delete_acls`` (DeleteAcls), over Java's model
(``core/acls.py``): ``AclBinding(ResourcePattern, AccessControlEntry)`` and
``AclBindingFilter(ResourcePatternFilter, AccessControlEntryFilter)``.

Where they go: any broker (Java's least-loaded node); a KRaft broker forwards creations
and deletions to the controller, and serves descriptions from its own copy of the
metadata, so a binding just created may take a moment to be described by another
broker (as with Java's client).

Errors, as Java: a broker without an authorizer answers ``SecurityDisabledError``; a
principal without ALTER (create, delete) or DESCRIBE (describe) on the CLUSTER resource
``ClusterAuthorizationFailedError``, raised with what it needs; a binding the broker
refuses (a CLUSTER resource not named ``kafka-cluster``, a principal without a type)
fails per item with ``InvalidRequestError``. Bindings and filters that cannot be sent
(ANY/MATCH in a binding, UNKNOWN parts) raise ``ConfigError`` before anything is sent
(Java refuses to build them). Retriable failures (connection, timeout) are retried until
the call's deadline; nothing else is retried.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from aiokafka_lite.admin.requests import AdminRequests, error_of
from aiokafka_lite.admin.types import Result, Results
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from aiokafka_lite.wire.message import Request
from aiokafka_lite.wire.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)

__all__ = ["DeleteAclsResult", "create_acls", "delete_acls", "describe_acls"]


@dataclass(frozen=True, slots=True)
class DeleteAclsResult:
    """What one filter of ``delete_acls`` deleted (or its error)."""

    filter: AclBindingFilter
    deleted: tuple[AclBinding, ...] = ()
    error: E.KafkaError | None = None


def _check_binding(b: AclBinding) -> None:
    if not isinstance(b, AclBinding):
        raise E.ConfigError(f"create_acls takes AclBinding objects, got {type(b).__name__}")
    p, e = b.pattern, b.entry
    if p.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise E.ConfigError(
            f"ACL binding {b}: the resource type must be a concrete one, not {p.resource_type.name}"
        )
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise E.ConfigError(
            f"ACL binding {b}: the pattern type must be LITERAL or PREFIXED, not {p.pattern_type.name}"
        )
    if e.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise E.ConfigError(f"ACL binding {b}: the operation must be a concrete one, not {e.operation.name}")
    if e.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise E.ConfigError(
            f"ACL binding {b}: the permission must be ALLOW or DENY, not {e.permission_type.name}"
        )


def _check_filter(f: AclBindingFilter) -> None:
    if not isinstance(f, AclBindingFilter):
        raise E.ConfigError(f"expected an AclBindingFilter, got {type(f).__name__}")
    if f.is_unknown():
        raise E.ConfigError(f"ACL filter {f} has UNKNOWN parts (use ANY to match everything)")


def _with_hint(err: E.KafkaError, action: str) -> E.KafkaError:
    """``err`` with what the principal needs, for the authorization errors of ACL calls."""
    if isinstance(err, E.ClusterAuthorizationFailedError):
        detail = err.message if isinstance(err, E.BrokerResponseError) and err.message else "not authorized"
        return E.ClusterAuthorizationFailedError(
            f"{detail}; {action} needs an ACL allowing the client's principal "
            "ALTER (create/delete) or DESCRIBE (describe) on the CLUSTER resource, or a super user"
        )
    if isinstance(err, E.SecurityDisabledError):
        detail = (
            err.message if isinstance(err, E.BrokerResponseError) and err.message else "security disabled"
        )
        return E.SecurityDisabledError(
            f"{detail} ({action} needs a broker with an authorizer: authorizer.class.name)"
        )
    return err


async def create_acls(
    rq: AdminRequests, bindings: Iterable[AclBinding], *, timeout_ms: float | None = None
) -> Results[AclBinding, Result]:
    """Create ACL bindings; per binding, ``Result()`` or its error."""
    items = list(dict.fromkeys(bindings))
    for b in items:
        _check_binding(b)
    out: Results[AclBinding, Result] = Results()
    if not items:
        return out
    deadline = rq.deadline(timeout_ms)

    def make(version: int) -> Request:
        return CreateAclsRequest(
            creations=[
                CreateAclsRequest.AclCreation(
                    resource_type=b.pattern.resource_type,
                    resource_name=b.pattern.name,
                    resource_pattern_type=b.pattern.pattern_type,
                    principal=b.entry.principal,
                    host=b.entry.host,
                    operation=b.entry.operation,
                    permission_type=b.entry.permission_type,
                )
                for b in items
            ]
        )

    resp = await rq.request(make, "any", deadline)
    assert isinstance(resp, CreateAclsResponse)
    if len(resp.results) != len(items):
        raise E.UnknownServerError(
            f"CreateAcls answered {len(resp.results)} results for {len(items)} bindings"
        )
    for b, r in zip(items, resp.results, strict=True):
        err = error_of(r.error_code, r.error_message)
        out[b] = Result(None if err is None else _with_hint(err, "creating ACLs"))
    return out


def _binding(rtype: int, name: str, ptype: int, principal: str, host: str, op: int, perm: int) -> AclBinding:
    def enum(cls: type, value: int) -> object:
        try:
            return cls(value)
        except ValueError:
            return cls(0)

    return AclBinding(
        ResourcePattern(enum(ResourceType, rtype), name, enum(PatternType, ptype)),  # type: ignore[arg-type]
        AccessControlEntry(principal, host, enum(AclOperation, op), enum(AclPermissionType, perm)),  # type: ignore[arg-type]
    )


async def describe_acls(
    rq: AdminRequests, acl_filter: AclBindingFilter | None = None, *, timeout_ms: float | None = None
) -> list[AclBinding]:
    """The bindings ``acl_filter`` matches (default: all)."""
    f = AclBindingFilter() if acl_filter is None else acl_filter
    _check_filter(f)
    deadline = rq.deadline(timeout_ms)
    pf, ef = f.pattern_filter, f.entry_filter

    def make(version: int) -> Request:
        return DescribeAclsRequest(
            resource_type_filter=pf.resource_type,
            resource_name_filter=pf.name,
            pattern_type_filter=pf.pattern_type,
            principal_filter=ef.principal,
            host_filter=ef.host,
            operation=ef.operation,
            permission_type=ef.permission_type,
        )

    resp = await rq.request(make, "any", deadline)
    assert isinstance(resp, DescribeAclsResponse)
    err = error_of(resp.error_code, resp.error_message)
    if err is not None:
        raise _with_hint(err, "describing ACLs")
    return [
        _binding(
            res.resource_type,
            res.resource_name,
            res.pattern_type,
            a.principal,
            a.host,
            a.operation,
            a.permission_type,
        )
        for res in resp.resources
        for a in res.acls
    ]


async def delete_acls(
    rq: AdminRequests, filters: Iterable[AclBindingFilter], *, timeout_ms: float | None = None
) -> Results[AclBindingFilter, DeleteAclsResult]:
    """Delete the bindings each filter matches; per filter, the deleted bindings (a
    binding two filters match is listed under both) or the filter's error."""
    items = list(dict.fromkeys(filters))
    for f in items:
        _check_filter(f)
    out: Results[AclBindingFilter, DeleteAclsResult] = Results()
    if not items:
        return out
    deadline = rq.deadline(timeout_ms)

    def make(version: int) -> Request:
        return DeleteAclsRequest(
            filters=[
                DeleteAclsRequest.DeleteAclsFilter(
                    resource_type_filter=f.pattern_filter.resource_type,
                    resource_name_filter=f.pattern_filter.name,
                    pattern_type_filter=f.pattern_filter.pattern_type,
                    principal_filter=f.entry_filter.principal,
                    host_filter=f.entry_filter.host,
                    operation=f.entry_filter.operation,
                    permission_type=f.entry_filter.permission_type,
                )
                for f in items
            ]
        )

    resp = await rq.request(make, "any", deadline)
    assert isinstance(resp, DeleteAclsResponse)
    if len(resp.filter_results) != len(items):
        raise E.UnknownServerError(
            f"DeleteAcls answered {len(resp.filter_results)} results for {len(items)} filters"
        )
    for f, r in zip(items, resp.filter_results, strict=True):
        err = error_of(r.error_code, r.error_message)
        if err is None:
            # Java reports a matching ACL's own error as the filter's.
            err = next(
                (error_of(m.error_code, m.error_message) for m in r.matching_acls if m.error_code), None
            )
        if err is not None:
            out[f] = DeleteAclsResult(f, error=_with_hint(err, "deleting ACLs"))
            continue
        out[f] = DeleteAclsResult(
            f,
            tuple(
                _binding(
                    m.resource_type,
                    m.resource_name,
                    m.pattern_type,
                    m.principal,
                    m.host,
                    m.operation,
                    m.permission_type,
                )
                for m in r.matching_acls
            ),
        )
    return out
