"""Kafka's ACL model, as Java's ``org.apache.kafka.common.acl`` and ``.resource``:
``AclBinding(ResourcePattern, AccessControlEntry)`` and the filters that match them.

Shared by the admin client (``admin/acls.py``: CreateAcls, DescribeAcls, DeleteAcls) and
the embedded broker's authorizer (``broker/authorizer.py``), so both speak the same
codes (the enum values are the wire codes) and match filters the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final

__all__ = [
    "CLUSTER_NAME",
    "OMITTED_OPERATIONS",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "operations_from_bits",
    "operations_to_bits",
]

#: The one name of the CLUSTER resource.
CLUSTER_NAME: Final = "kafka-cluster"
#: A literal resource name that matches every resource of its type.
WILDCARD: Final = "*"
#: The principal that matches every user.
WILDCARD_PRINCIPAL: Final = "User:*"


class ResourceType(IntEnum):
    """What an ACL protects (Java's ``ResourceType``; ANY only in filters)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    """How a resource name matches (Java's ``PatternType``): a binding is LITERAL (the
    name, or ``*`` for all) or PREFIXED; filters may also say ANY (either type, exact
    name) or MATCH (every binding that would apply to the named resource)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    """An operation on a resource (Java's ``AclOperation``; ANY only in filters)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    """ALLOW or DENY (ANY only in filters)."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """A resource name pattern of a binding: ``ResourcePattern(ResourceType.TOPIC,
    "orders", PatternType.LITERAL)``; name ``*`` (LITERAL) is every resource of the type."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return f"{self.resource_type.name}:{self.pattern_type.name}:{self.name}"

    def is_unknown(self) -> bool:
        """Whether a part is UNKNOWN (a broker newer than us answered it)."""
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def to_filter(self) -> ResourcePatternFilter:
        return ResourcePatternFilter(self.resource_type, self.name, self.pattern_type)


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (``principal``, e.g. ``"User:alice"`` or ``"User:*"``) may or may not
    (``permission_type``) do what (``operation``) from where (``host``, ``*`` for any)."""

    principal: str
    host: str = WILDCARD
    operation: AclOperation = AclOperation.ALL
    permission_type: AclPermissionType = AclPermissionType.ALLOW

    def __str__(self) -> str:
        return f"{self.principal} {self.permission_type.name} {self.operation.name} from host {self.host}"

    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def to_filter(self) -> AccessControlEntryFilter:
        return AccessControlEntryFilter(self.principal, self.host, self.operation, self.permission_type)


@dataclass(frozen=True, slots=True)
class AclBinding:
    """An ACL: a resource pattern and an access control entry."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        return f"({self.pattern}, {self.entry})"

    def is_unknown(self) -> bool:
        return self.pattern.is_unknown() or self.entry.is_unknown()

    def to_filter(self) -> AclBindingFilter:
        """The filter that matches exactly this binding."""
        return AclBindingFilter(self.pattern.to_filter(), self.entry.to_filter())


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Matches resource patterns; ``name=None`` is any name (Java's ``ResourcePatternFilter``)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: every binding that applies to the resource named ``name``.
        if pattern.pattern_type == PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD)
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Matches entries; None (principal, host) and ANY (operation, permission) match all."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def matches(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Matches bindings (Java's ``AclBindingFilter``); ``AclBindingFilter()`` matches all."""

    pattern_filter: ResourcePatternFilter = ResourcePatternFilter()
    entry_filter: AccessControlEntryFilter = AccessControlEntryFilter()

    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown() or self.entry_filter.is_unknown()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)


#: The ``authorized_operations`` bit field Kafka sends when it was not asked for them.
OMITTED_OPERATIONS: Final = -(2**31)


def operations_to_bits(ops: frozenset[AclOperation] | set[AclOperation]) -> int:
    """The int32 bit field of authorized operations (bit ``op`` set per operation)."""
    bits = 0
    for op in ops:
        bits |= 1 << int(op)
    return bits


def operations_from_bits(bits: int) -> frozenset[AclOperation] | None:
    """The operations of an ``authorized_operations`` bit field; None when the broker
    did not say (Kafka's ``Integer.MIN_VALUE``), as Java's client gives null."""
    if bits == OMITTED_OPERATIONS:
        return None
    return frozenset(
        op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY) and bits >> op & 1
    )
