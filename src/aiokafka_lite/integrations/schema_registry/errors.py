"""Typed errors of the schema registry client, the embedded registry and the serializers.

A registry error carries the registry's own ``error_code`` (Confluent's numbering: 40401 subject not
found, 409 incompatible, 42201 invalid schema, ...), its ``message`` and the HTTP status. The class is
chosen from the error code, so ``except SubjectNotFoundError`` works against any Confluent-compatible
registry.
"""

from __future__ import annotations

from aiokafka_lite.core.errors import SerializerNotReadyError


class SchemaRegistryError(Exception):
    """The registry answered with an error (or could not be reached: ``http_status`` is then -1)."""

    def __init__(self, http_status: int, error_code: int, message: str) -> None:
        super().__init__(f"{message} (HTTP {http_status}, error code {error_code})")
        self.http_status = http_status
        self.error_code = error_code
        self.message = message


class SubjectNotFoundError(SchemaRegistryError):
    """40401: the subject is not registered (or only soft-deleted and not asked for)."""


class VersionNotFoundError(SchemaRegistryError):
    """40402: the subject has no such version."""


class SchemaNotFoundError(SchemaRegistryError):
    """40403: no schema with this id, or the schema is not registered under the subject."""


class SubjectSoftDeletedError(SchemaRegistryError):
    """40404: the subject was soft-deleted (a hard delete needs the soft delete first)."""


class SubjectNotSoftDeletedError(SchemaRegistryError):
    """40405: a permanent delete of a subject that was not soft-deleted first."""


class VersionSoftDeletedError(SchemaRegistryError):
    """40406: the version was soft-deleted."""


class VersionNotSoftDeletedError(SchemaRegistryError):
    """40407: a permanent delete of a version that was not soft-deleted first."""


class SubjectCompatibilityNotConfiguredError(SchemaRegistryError):
    """40408: the subject has no compatibility level of its own."""


class IncompatibleSchemaError(SchemaRegistryError):
    """409: the schema breaks the subject's compatibility level; ``message`` names the rule broken."""


class InvalidSchemaError(SchemaRegistryError):
    """42201: the schema text does not parse, or a reference does not resolve."""


class InvalidVersionError(SchemaRegistryError):
    """42202: the version is neither a positive number nor ``latest``."""


class InvalidCompatibilityLevelError(SchemaRegistryError):
    """42203: not one of NONE, BACKWARD, FORWARD, FULL and their _TRANSITIVE forms."""


class RegistryUnavailableError(SchemaRegistryError):
    """The registry kept failing (5xx or transport errors) until the retries or the timeout ran out."""


_BY_CODE: dict[int, type[SchemaRegistryError]] = {
    40401: SubjectNotFoundError,
    40402: VersionNotFoundError,
    40403: SchemaNotFoundError,
    40404: SubjectSoftDeletedError,
    40405: SubjectNotSoftDeletedError,
    40406: VersionSoftDeletedError,
    40407: VersionNotSoftDeletedError,
    40408: SubjectCompatibilityNotConfiguredError,
    409: IncompatibleSchemaError,
    42201: InvalidSchemaError,
    42202: InvalidVersionError,
    42203: InvalidCompatibilityLevelError,
}


def error_for(http_status: int, error_code: int, message: str) -> SchemaRegistryError:
    """The typed error for a registry error body."""
    return _BY_CODE.get(error_code, SchemaRegistryError)(http_status, error_code, message)


class SerializationError(Exception):
    """A record could not be serialized or deserialized (bad framing, unknown id, schema mismatch)."""


class SchemaNotResolvedError(SerializationError, SerializerNotReadyError):
    """The sync fast path was called before the schema of this subject was resolved.

    Await ``serializer.prepare(topic)`` (or call ``serialize_async``) first: the registry lookup is I/O
    and is never done on the event loop's thread from a synchronous call.
    """
