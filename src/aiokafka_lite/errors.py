"""Exception hierarchy.

Two families:

* ``KafkaError`` subclasses raised by the client itself (bad input, corrupt frames,
  configuration, closed objects).
* ``BrokerResponseError`` subclasses, one per Kafka protocol error code, each with
  ``code`` and ``retriable`` class attributes. ``for_code(code)`` maps a code to its
  class; unknown codes map to ``UnknownKafkaError``.
"""

from __future__ import annotations


class KafkaError(Exception):
    """Base of every error raised by aiokafka_lite."""

    retriable: bool = False


class CorruptFrameError(KafkaError):
    """A protocol frame could not be decoded (truncated, malformed, oversized)."""


class CorruptRecordError(KafkaError):
    """A record batch failed validation (CRC mismatch, bad framing, bad compression)."""


class UnsupportedCodecError(CorruptRecordError):
    """A record batch uses a compression code this client does not know."""


class VersionError(KafkaError):
    """A message cannot be encoded at the requested version (field or nullability gate)."""


class ConfigError(KafkaError, ValueError):
    """Invalid configuration."""


class IllegalStateError(KafkaError):
    """An operation was called in a state that does not allow it."""


class ClosedError(KafkaError):
    """The object was closed."""


class KafkaTimeoutError(KafkaError, TimeoutError):
    """An operation did not complete within its deadline."""

    retriable = True


class KafkaConnectionError(KafkaError, ConnectionError):
    """A broker connection failed or was lost; in-flight requests fail with this."""

    retriable = True


class BrokerResponseError(KafkaError):
    """An error code returned by a broker."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"

    def __init__(self, message: str | None = None) -> None:
        self.message = message
        text = f"[Error {self.code}] {self.name}"
        if message:
            text += f": {message}"
        super().__init__(text)


class UnknownKafkaError(BrokerResponseError):
    """An error code this client has no class for."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = code
        self.name = "UNKNOWN"
        super().__init__(message)
