"""The embedded broker's authorizer: Kafka's ``StandardAuthorizer`` semantics, sans I/O.

``Authorizer`` holds the cluster's ACL bindings and answers "may principal P, from host
H, do operation O on resource R?" the way Kafka's KRaft ``StandardAuthorizer`` does:

* a principal in ``super_users`` may do everything;
* the bindings that apply to a resource are its LITERAL bindings, the LITERAL ``*``
  binding of its type and every PREFIXED binding whose prefix starts its name; of those,
  the ones for this principal (or ``User:*``) and host (or ``*``);
* a DENY for the operation (or ALL) wins over any ALLOW;
* an ALLOW for the operation, for ALL, or for an operation that implies it grants it:
  DESCRIBE is implied by READ, WRITE, DELETE and ALTER, DESCRIBE_CONFIGS by
  ALTER_CONFIGS;
* a resource no binding applies to at all (for any principal) is allowed only when
  ``allow_everyone_if_no_acl_found`` (Kafka's ``allow.everyone.if.no.acl.found``,
  default false).

Changes (``create``/``delete``) apply at once: Kafka applies them when the broker
replays the controller's metadata record, a moment later; tests on Apache wait for it.
The request handlers (``broker/api/acls.py``) call this; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from aiokafka_lite.core.acls import (
    CLUSTER_NAME,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

__all__ = ["ANONYMOUS", "SUPPORTED_OPERATIONS", "Authorizer"]

#: The principal of an unauthenticated connection (``RequestContext.kafka_principal``).
ANONYMOUS: Final = "User:ANONYMOUS"

_Op = AclOperation
#: Operations that mean something per resource type (Kafka's ``AclEntry.supportedOperations``):
#: what ``authorized_operations`` reports.
SUPPORTED_OPERATIONS: Final[dict[ResourceType, frozenset[AclOperation]]] = {
    ResourceType.TOPIC: frozenset(
        {
            _Op.READ,
            _Op.WRITE,
            _Op.CREATE,
            _Op.DESCRIBE,
            _Op.DELETE,
            _Op.ALTER,
            _Op.DESCRIBE_CONFIGS,
            _Op.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset(
        {_Op.READ, _Op.DESCRIBE, _Op.DELETE, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}
    ),
    ResourceType.CLUSTER: frozenset(
        {
            _Op.CREATE,
            _Op.CLUSTER_ACTION,
            _Op.DESCRIBE_CONFIGS,
            _Op.ALTER_CONFIGS,
            _Op.IDEMPOTENT_WRITE,
            _Op.ALTER,
            _Op.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_Op.DESCRIBE, _Op.WRITE, _Op.TWO_PHASE_COMMIT}),
    ResourceType.DELEGATION_TOKEN: frozenset({_Op.DESCRIBE}),
    ResourceType.USER: frozenset({_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS}),
}

# An ALLOW for the key grants the operations of the value too (StandardAuthorizerData).
_IMPLIED_BY: Final[dict[AclOperation, frozenset[AclOperation]]] = {
    _Op.DESCRIBE: frozenset({_Op.READ, _Op.WRITE, _Op.DELETE, _Op.ALTER}),
    _Op.DESCRIBE_CONFIGS: frozenset({_Op.ALTER_CONFIGS}),
}


class Authorizer:
    """The cluster's ACLs and the decision of each request (see the module docstring)."""

    def __init__(
        self,
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        # Insertion-ordered set of bindings: describe answers in creation order.
        self._bindings: dict[AclBinding, None] = {}

    # ------------------------------------------------------------------ the ACLs

    @property
    def bindings(self) -> Sequence[AclBinding]:
        return list(self._bindings)

    def create(self, binding: AclBinding) -> None:
        """Add a binding (adding one that exists changes nothing, as Kafka)."""
        self._bindings[binding] = None

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self._bindings if acl_filter.matches(b)]

    def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove the bindings each filter matches; per filter, what it matched (a binding
        two filters match is reported for both and removed once, as Kafka's controller)."""
        matched = [self.describe(f) for f in filters]
        for found in matched:
            for b in found:
                self._bindings.pop(b, None)
        return matched

    # ------------------------------------------------------------------ decisions

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        """Whether ``principal`` from ``host`` may do ``operation`` on the resource."""
        if principal in self.super_users:
            return True
        applicable = [b for b in self._bindings if _applies(b.pattern, resource_type, name)]
        if not applicable:
            return self.allow_everyone_if_no_acl_found
        mine = [b for b in applicable if _for(b, principal, host)]
        if any(
            b.entry.permission_type == AclPermissionType.DENY and b.entry.operation in (operation, _Op.ALL)
            for b in mine
        ):
            return False
        granting = {operation, _Op.ALL} | _IMPLIED_BY.get(operation, frozenset())
        return any(
            b.entry.permission_type == AclPermissionType.ALLOW and b.entry.operation in granting for b in mine
        )

    def authorize_cluster(self, principal: str, host: str, operation: AclOperation) -> bool:
        return self.authorize(principal, host, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether the principal may do ``operation`` on some resource of the type (Kafka's
        ``authorizeByResourceType``: an idempotent producer needs WRITE on any topic): an
        ALLOW applies somewhere and no DENY covers every resource of the type."""
        if principal in self.super_users:
            return True
        mine = [
            b for b in self._bindings if b.pattern.resource_type == resource_type and _for(b, principal, host)
        ]
        denied_all = any(
            b.entry.permission_type == AclPermissionType.DENY
            and b.entry.operation in (operation, _Op.ALL)
            and b.pattern.pattern_type == PatternType.LITERAL
            and b.pattern.name == WILDCARD
            for b in mine
        )
        if denied_all:
            return False
        allowed = any(
            b.entry.permission_type == AclPermissionType.ALLOW and b.entry.operation in (operation, _Op.ALL)
            for b in mine
        )
        if allowed:
            return True
        return self.allow_everyone_if_no_acl_found and not any(
            b.pattern.resource_type == resource_type for b in self._bindings
        )

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> frozenset[AclOperation]:
        """The supported operations of the resource this principal may do."""
        return frozenset(
            op
            for op in SUPPORTED_OPERATIONS.get(resource_type, frozenset())
            if self.authorize(principal, host, op, resource_type, name)
        )


def _applies(pattern: ResourcePattern, resource_type: ResourceType, name: str) -> bool:
    if pattern.resource_type != resource_type:
        return False
    if pattern.pattern_type == PatternType.LITERAL:
        return pattern.name in (name, WILDCARD)
    if pattern.pattern_type == PatternType.PREFIXED:
        return name.startswith(pattern.name)
    return False


def _for(binding: AclBinding, principal: str, host: str) -> bool:
    entry = binding.entry
    return entry.principal in (principal, WILDCARD_PRINCIPAL) and entry.host in (host, WILDCARD)
