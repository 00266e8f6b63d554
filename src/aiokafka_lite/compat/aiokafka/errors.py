"""aiokafka's ``errors`` module on top of ``aiokafka_lite.core.errors``.

Every exception class of ours is exported under its own name, which is aiokafka's name
for the broker error codes (``TopicAlreadyExistsError``, ``NotCoordinatorError``...), so
``except aiokafka.errors.X`` catches what the native clients raise. aiokafka's other
spellings (``ProducerFenced``, ``NotLeaderForPartitionError``, ...) are aliases of the
same classes. Deviations: our ``KafkaError`` derives from ``Exception`` (aiokafka's from
``RuntimeError``); errors aiokafka defines but we never raise (``Cancelled``,
``TooManyInFlightRequests``, ...) exist so imports work.
"""

from __future__ import annotations

from aiokafka_lite.core import errors as _native
from aiokafka_lite.core.errors import *  # noqa: F403 - the module mirrors ours by design
from aiokafka_lite.core.errors import (
    BrokerResponseError,
    ClosedError,
    ConfigError,
    IllegalStateError,
    KafkaError,
    for_code,
)

__all__ = [
    *_native.__all__,
    "ConsumerStoppedError",
    "IllegalOperation",
    "NoOffsetForPartitionError",
    "ProducerClosed",
    "for_code",
]


class ConsumerStoppedError(Exception):
    """The consumer was stopped (aiokafka: a plain ``Exception``, not a ``KafkaError``)."""


class IllegalOperation(IllegalStateError):
    """An operation the consumer's configuration does not allow (commit without a group)."""


class NoOffsetForPartitionError(KafkaError):
    """No position and ``auto_offset_reset='none'``."""


class KafkaProtocolError(KafkaError):
    pass


class CorrelationIdError(KafkaProtocolError):
    pass


class _NeverRaised(KafkaError):
    """aiokafka error classes we define for imports but never raise."""


Cancelled = type("Cancelled", (_NeverRaised,), {})
TooManyInFlightRequests = type("TooManyInFlightRequests", (_NeverRaised,), {})
StaleMetadata = type("StaleMetadata", (_NeverRaised,), {})
MetadataEmptyBrokerList = type("MetadataEmptyBrokerList", (_NeverRaised,), {})
UnrecognizedBrokerVersion = type("UnrecognizedBrokerVersion", (_NeverRaised,), {})
IncompatibleBrokerVersion = type("IncompatibleBrokerVersion", (_NeverRaised,), {})
AuthenticationMethodNotSupported = type("AuthenticationMethodNotSupported", (_NeverRaised,), {})
KafkaUnavailableError = type("KafkaUnavailableError", (_NeverRaised,), {})
QuotaViolationError = type("QuotaViolationError", (_NeverRaised,), {})
NodeNotReadyError = _native.KafkaConnectionError
NoError = type("NoError", (BrokerResponseError,), {"errno": 0})

# aiokafka's spellings of the classes we have under another name.
ProducerClosed = _native.ProducerClosedError
NoBrokersAvailable = _native.NoBrokersAvailableError
KafkaConfigurationError = ConfigError
IllegalArgumentError = ConfigError
AuthenticationFailedError = _native.AuthenticationError
UnknownError = _native.UnknownServerError
CorruptRecordException = _native.CorruptMessageError
InvalidMessageError = _native.CorruptMessageError
InvalidFetchRequestError = _native.InvalidFetchSizeError
NotLeaderForPartitionError = _native.NotLeaderOrFollowerError
StaleLeaderEpochCodeError = _native.NetworkError
GroupLoadInProgressError = _native.CoordinatorLoadInProgressError
GroupCoordinatorNotAvailableError = _native.CoordinatorNotAvailableError
NotCoordinatorForGroupError = _native.NotCoordinatorError
InvalidReplicationAssignmentError = _native.InvalidReplicaAssignmentError
InvalidConfigurationError = _native.InvalidConfigError
OutOfOrderSequenceNumber = _native.OutOfOrderSequenceNumberError
DuplicateSequenceNumber = _native.DuplicateSequenceNumberError
InvalidProducerEpoch = _native.InvalidProducerEpochError
InvalidTxnState = _native.InvalidTxnStateError
InvalidProducerIdMapping = _native.InvalidProducerIdMappingError
InvalidTransactionTimeout = _native.InvalidTransactionTimeoutError
ConcurrentTransactions = _native.ConcurrentTransactionsError
TransactionCoordinatorFenced = _native.TransactionCoordinatorFencedError
TransactionalIdAuthorizationFailed = _native.TransactionalIdAuthorizationFailedError
SecurityDisabled = _native.SecurityDisabledError
OperationNotAttempted = _native.OperationNotAttemptedError
LogDirNotFound = _native.LogDirNotFoundError
SaslAuthenticationFailed = _native.SaslAuthenticationFailedError
UnknownProducerId = _native.UnknownProducerIdError
ReassignmentInProgress = _native.ReassignmentInProgressError
DelegationTokenAuthDisabled = _native.DelegationTokenAuthDisabledError
DelegationTokenNotFound = _native.DelegationTokenNotFoundError
DelegationTokenOwnerMismatch = _native.DelegationTokenOwnerMismatchError
DelegationTokenRequestNotAllowed = _native.DelegationTokenRequestNotAllowedError
DelegationTokenAuthorizationFailed = _native.DelegationTokenAuthorizationFailedError
DelegationTokenExpired = _native.DelegationTokenExpiredError
InvalidPrincipalType = _native.InvalidPrincipalTypeError
NonEmptyGroup = _native.NonEmptyGroupError
GroupIdNotFound = _native.GroupIdNotFoundError
FetchSessionIdNotFound = _native.FetchSessionIdNotFoundError
InvalidFetchSessionEpoch = _native.InvalidFetchSessionEpochError
ListenerNotFound = _native.ListenerNotFoundError
MemberIdRequired = _native.MemberIdRequiredError
ProducerFenced = _native.ProducerFencedError

_ = ClosedError  # re-exported by the star import; named here for readers
