"""Exception hierarchy.

Two families:

* ``KafkaError`` subclasses raised by the client itself (bad input, corrupt frames,
  configuration, closed objects).
* ``BrokerResponseError`` subclasses, one per Kafka protocol error code, each with
  ``code`` and ``retriable`` class attributes. ``for_code(code)`` maps a code to its
  class; unknown codes map to ``UnknownKafkaError``.

``retriable`` follows the Java client's classification (the exception is a
``RetriableException`` subclass there), so retry policies here behave like the
reference client's. Two extra flags drive client bookkeeping rather than retries:

* ``invalidates_metadata``: cached cluster metadata (leaders, topic ids) is likely
  stale; refresh it before retrying. Also available as ``except MetadataInvalidatingError``.
* ``coordinator_error``: the group/transaction coordinator moved or is loading; look
  it up again. Also available as ``except CoordinatorError``.

The table covers codes -1 through 133 (Kafka 4.x). Newer codes decode to
``UnknownKafkaError`` carrying the numeric code, so nothing is lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = [
    "ERRORS_BY_CODE",
    "AuthenticationError",
    "BrokerResponseError",
    "ClosedError",
    "CommitFailedError",
    "ConfigError",
    "CoordinatorError",
    "CorruptFrameError",
    "CorruptRecordError",
    "DeliveryFailedError",
    "IllegalStateError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "MetadataInvalidatingError",
    "NoBrokersAvailableError",
    "OAuthBearerTokenError",
    "ProducerClosedError",
    "RecordTooLargeError",
    "UnknownKafkaError",
    "UnsupportedCodecError",
    "VersionError",
    "error_for",
    "for_code",
    "raise_for_code",
]
# (The per-code classes are exported too; they are appended to __all__ below.)


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


# --------------------------------------------------------------------------------------
# Client-side errors (never sent by a broker).


class ProducerClosedError(ClosedError):
    """The producer was closed; pending and new sends fail with this."""


class CommitFailedError(KafkaError):
    """An offset commit cannot succeed because the group moved on (rebalance, fencing).

    Raised instead of the underlying broker error so callers get one type meaning
    "the partitions may have been reassigned; the commit was not applied".
    """


class NoBrokersAvailableError(KafkaError):
    """No bootstrap or known broker could be reached. Retriable: brokers may come back."""

    retriable = True


class AuthenticationError(KafkaError):
    """Authentication failed (a local SASL check, or the broker rejected our credentials).

    The message is safe to log or send to a peer: it never contains secrets.
    """


class OAuthBearerTokenError(AuthenticationError):
    """No OAUTHBEARER token could be obtained (OIDC token endpoint refused the credentials,
    unreachable, or returned an unusable token; or a token callback such as the AWS MSK
    IAM signer failed). The message names the likely cause, never a secret."""


class RecordTooLargeError(KafkaError, ValueError):
    """A record is larger than the client's own size limit, so it was never sent.

    The broker-side counterpart is ``MessageSizeTooLargeError`` (code 10).
    """


# --------------------------------------------------------------------------------------
# Broker error codes.


class BrokerResponseError(KafkaError):
    """An error code returned by a broker."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    invalidates_metadata: bool = False
    coordinator_error: bool = False

    def __init__(self, message: str | None = None) -> None:
        self.message = message
        text = f"[Error {self.code}] {self.name}"
        if message:
            text += f": {message}"
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, ...]:
        # ``args`` holds the formatted text, not the constructor arguments, so the
        # default pickling would re-wrap the text; rebuild from the raw message.
        return (type(self), (self.message,))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class UnknownKafkaError(BrokerResponseError):
    """An error code this client has no class for."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = code
        self.name = "UNKNOWN"
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.message))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r})"


class MetadataInvalidatingError(BrokerResponseError):
    """Marker base: the client's cached metadata is probably stale; refresh before retrying."""

    invalidates_metadata = True


class CoordinatorError(BrokerResponseError):
    """Marker base: the coordinator moved or is loading; rediscover it before retrying."""

    coordinator_error = True


class UnknownServerError(BrokerResponseError):
    """The broker hit an unexpected internal error."""

    code = -1
    name = "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRangeError(BrokerResponseError):
    """The fetch offset is outside the log's available range."""

    code = 1
    name = "OFFSET_OUT_OF_RANGE"


class CorruptMessageError(BrokerResponseError):
    """A record failed CRC or size validation on the broker."""

    code = 2
    name = "CORRUPT_MESSAGE"
    retriable = True


class UnknownTopicOrPartitionError(MetadataInvalidatingError):
    """The broker does not host this topic-partition (yet)."""

    code = 3
    name = "UNKNOWN_TOPIC_OR_PARTITION"
    retriable = True


class InvalidFetchSizeError(BrokerResponseError):
    """The requested fetch size is invalid."""

    code = 4
    name = "INVALID_FETCH_SIZE"


class LeaderNotAvailableError(MetadataInvalidatingError):
    """A leader election is in progress for the partition."""

    code = 5
    name = "LEADER_NOT_AVAILABLE"
    retriable = True


class NotLeaderOrFollowerError(MetadataInvalidatingError):
    """The broker is not the leader (or not a replica) for the partition."""

    code = 6
    name = "NOT_LEADER_OR_FOLLOWER"
    retriable = True


class RequestTimedOutError(BrokerResponseError):
    """The broker timed the request out (e.g. waiting for acks); not our local KafkaTimeoutError."""

    code = 7
    name = "REQUEST_TIMED_OUT"
    retriable = True


class BrokerNotAvailableError(BrokerResponseError):
    """The broker is not available."""

    code = 8
    name = "BROKER_NOT_AVAILABLE"


class ReplicaNotAvailableError(MetadataInvalidatingError):
    """The replica is not available for the partition."""

    code = 9
    name = "REPLICA_NOT_AVAILABLE"
    retriable = True


class MessageSizeTooLargeError(BrokerResponseError):
    """A record batch exceeds the broker's maximum message size."""

    code = 10
    name = "MESSAGE_TOO_LARGE"


class StaleControllerEpochError(BrokerResponseError):
    """The controller moved to another broker."""

    code = 11
    name = "STALE_CONTROLLER_EPOCH"


class OffsetMetadataTooLargeError(BrokerResponseError):
    """The committed offset's metadata string is too large."""

    code = 12
    name = "OFFSET_METADATA_TOO_LARGE"


class NetworkError(MetadataInvalidatingError):
    """The broker lost a connection before answering."""

    code = 13
    name = "NETWORK_EXCEPTION"
    retriable = True


class CoordinatorLoadInProgressError(CoordinatorError):
    """The coordinator is still loading its state."""

    code = 14
    name = "COORDINATOR_LOAD_IN_PROGRESS"
    retriable = True


class CoordinatorNotAvailableError(CoordinatorError):
    """The coordinator is not available; look it up again."""

    code = 15
    name = "COORDINATOR_NOT_AVAILABLE"
    retriable = True


class NotCoordinatorError(CoordinatorError):
    """This broker is not the coordinator for the group or transaction."""

    code = 16
    name = "NOT_COORDINATOR"
    retriable = True


class InvalidTopicError(BrokerResponseError):
    """The topic name is invalid or the topic is internal."""

    code = 17
    name = "INVALID_TOPIC_EXCEPTION"


class RecordListTooLargeError(BrokerResponseError):
    """A record batch is larger than the broker's segment size."""

    code = 18
    name = "RECORD_LIST_TOO_LARGE"


class NotEnoughReplicasError(BrokerResponseError):
    """Fewer in-sync replicas than min.insync.replicas; nothing was written."""

    code = 19
    name = "NOT_ENOUGH_REPLICAS"
    retriable = True


class NotEnoughReplicasAfterAppendError(BrokerResponseError):
    """Written, but to fewer in-sync replicas than required."""

    code = 20
    name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    retriable = True


class InvalidRequiredAcksError(BrokerResponseError):
    """The produce request's acks value is invalid."""

    code = 21
    name = "INVALID_REQUIRED_ACKS"


class IllegalGenerationError(BrokerResponseError):
    """The group generation id is stale; rejoin the group."""

    code = 22
    name = "ILLEGAL_GENERATION"


class InconsistentGroupProtocolError(BrokerResponseError):
    """The member's protocols are incompatible with the group's."""

    code = 23
    name = "INCONSISTENT_GROUP_PROTOCOL"


class InvalidGroupIdError(BrokerResponseError):
    """The group id is invalid (e.g. empty)."""

    code = 24
    name = "INVALID_GROUP_ID"


class UnknownMemberIdError(BrokerResponseError):
    """The coordinator does not know this member id; rejoin."""

    code = 25
    name = "UNKNOWN_MEMBER_ID"


class InvalidSessionTimeoutError(BrokerResponseError):
    """The session timeout is outside the broker's allowed range."""

    code = 26
    name = "INVALID_SESSION_TIMEOUT"


class RebalanceInProgressError(BrokerResponseError):
    """The group is rebalancing; rejoin."""

    code = 27
    name = "REBALANCE_IN_PROGRESS"


class InvalidCommitOffsetSizeError(BrokerResponseError):
    """The offset commit data size is invalid."""

    code = 28
    name = "INVALID_COMMIT_OFFSET_SIZE"


class TopicAuthorizationFailedError(BrokerResponseError):
    """Not authorized to access the topic."""

    code = 29
    name = "TOPIC_AUTHORIZATION_FAILED"


class GroupAuthorizationFailedError(BrokerResponseError):
    """Not authorized to access the group."""

    code = 30
    name = "GROUP_AUTHORIZATION_FAILED"


class ClusterAuthorizationFailedError(BrokerResponseError):
    """Not authorized for the cluster operation."""

    code = 31
    name = "CLUSTER_AUTHORIZATION_FAILED"


class InvalidTimestampError(BrokerResponseError):
    """A record timestamp is outside the acceptable range."""

    code = 32
    name = "INVALID_TIMESTAMP"


class UnsupportedSaslMechanismError(BrokerResponseError):
    """The broker does not enable the requested SASL mechanism."""

    code = 33
    name = "UNSUPPORTED_SASL_MECHANISM"


class IllegalSaslStateError(BrokerResponseError):
    """The request is not valid in the current SASL state."""

    code = 34
    name = "ILLEGAL_SASL_STATE"


class UnsupportedVersionError(BrokerResponseError):
    """The broker does not support this API version."""

    code = 35
    name = "UNSUPPORTED_VERSION"


class TopicAlreadyExistsError(BrokerResponseError):
    """A topic with this name already exists."""

    code = 36
    name = "TOPIC_ALREADY_EXISTS"


class InvalidPartitionsError(BrokerResponseError):
    """The partition count is invalid."""

    code = 37
    name = "INVALID_PARTITIONS"


class InvalidReplicationFactorError(BrokerResponseError):
    """The replication factor is invalid."""

    code = 38
    name = "INVALID_REPLICATION_FACTOR"


class InvalidReplicaAssignmentError(BrokerResponseError):
    """The replica assignment is invalid."""

    code = 39
    name = "INVALID_REPLICA_ASSIGNMENT"


class InvalidConfigError(BrokerResponseError):
    """A configuration value is invalid."""

    code = 40
    name = "INVALID_CONFIG"


class NotControllerError(MetadataInvalidatingError):
    """This broker is not the active controller."""

    code = 41
    name = "NOT_CONTROLLER"
    retriable = True


class InvalidRequestError(BrokerResponseError):
    """The request was malformed or sent to an incompatible broker."""

    code = 42
    name = "INVALID_REQUEST"


class UnsupportedForMessageFormatError(BrokerResponseError):
    """The broker's message format does not support the request."""

    code = 43
    name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"


class PolicyViolationError(BrokerResponseError):
    """The request violates a configured broker policy."""

    code = 44
    name = "POLICY_VIOLATION"


class OutOfOrderSequenceNumberError(BrokerResponseError):
    """The broker saw a gap in the producer's sequence numbers."""

    code = 45
    name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class DuplicateSequenceNumberError(BrokerResponseError):
    """The broker already has a batch with this sequence number."""

    code = 46
    name = "DUPLICATE_SEQUENCE_NUMBER"


class InvalidProducerEpochError(BrokerResponseError):
    """The producer epoch is stale (an older producer instance)."""

    code = 47
    name = "INVALID_PRODUCER_EPOCH"


class InvalidTxnStateError(BrokerResponseError):
    """The transactional operation is invalid in the current state."""

    code = 48
    name = "INVALID_TXN_STATE"


class InvalidProducerIdMappingError(BrokerResponseError):
    """The producer id is not assigned to this transactional id."""

    code = 49
    name = "INVALID_PRODUCER_ID_MAPPING"


class InvalidTransactionTimeoutError(BrokerResponseError):
    """The transaction timeout exceeds transaction.max.timeout.ms."""

    code = 50
    name = "INVALID_TRANSACTION_TIMEOUT"


class ConcurrentTransactionsError(BrokerResponseError):
    """Another operation on the same transaction is still in progress."""

    code = 51
    name = "CONCURRENT_TRANSACTIONS"
    retriable = True


class TransactionCoordinatorFencedError(BrokerResponseError):
    """The transaction coordinator writing markers was superseded."""

    code = 52
    name = "TRANSACTION_COORDINATOR_FENCED"


class TransactionalIdAuthorizationFailedError(BrokerResponseError):
    """Not authorized for the transactional id."""

    code = 53
    name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


class SecurityDisabledError(BrokerResponseError):
    """Security features are disabled on the broker."""

    code = 54
    name = "SECURITY_DISABLED"


class OperationNotAttemptedError(BrokerResponseError):
    """The broker skipped this operation because another in the batch failed."""

    code = 55
    name = "OPERATION_NOT_ATTEMPTED"


class KafkaStorageError(MetadataInvalidatingError):
    """The broker hit a disk error on the log directory."""

    code = 56
    name = "KAFKA_STORAGE_ERROR"
    retriable = True


class LogDirNotFoundError(BrokerResponseError):
    """The requested log directory is not configured on the broker."""

    code = 57
    name = "LOG_DIR_NOT_FOUND"


class SaslAuthenticationFailedError(BrokerResponseError, AuthenticationError):
    """SASL authentication failed."""

    code = 58
    name = "SASL_AUTHENTICATION_FAILED"


class UnknownProducerIdError(BrokerResponseError):
    """The broker has no state for this producer id."""

    code = 59
    name = "UNKNOWN_PRODUCER_ID"


class ReassignmentInProgressError(BrokerResponseError):
    """A partition reassignment is in progress."""

    code = 60
    name = "REASSIGNMENT_IN_PROGRESS"


class DelegationTokenAuthDisabledError(BrokerResponseError):
    """Delegation tokens are not enabled."""

    code = 61
    name = "DELEGATION_TOKEN_AUTH_DISABLED"


class DelegationTokenNotFoundError(BrokerResponseError):
    """The delegation token does not exist."""

    code = 62
    name = "DELEGATION_TOKEN_NOT_FOUND"


class DelegationTokenOwnerMismatchError(BrokerResponseError):
    """The principal is not the token's owner or renewer."""

    code = 63
    name = "DELEGATION_TOKEN_OWNER_MISMATCH"


class DelegationTokenRequestNotAllowedError(BrokerResponseError):
    """Token requests are not allowed on this channel."""

    code = 64
    name = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"


class DelegationTokenAuthorizationFailedError(BrokerResponseError):
    """Not authorized for the delegation token operation."""

    code = 65
    name = "DELEGATION_TOKEN_AUTHORIZATION_FAILED"


class DelegationTokenExpiredError(BrokerResponseError):
    """The delegation token has expired."""

    code = 66
    name = "DELEGATION_TOKEN_EXPIRED"


class InvalidPrincipalTypeError(BrokerResponseError):
    """The principal type is not supported."""

    code = 67
    name = "INVALID_PRINCIPAL_TYPE"


class NonEmptyGroupError(BrokerResponseError):
    """The group still has members."""

    code = 68
    name = "NON_EMPTY_GROUP"


class GroupIdNotFoundError(BrokerResponseError):
    """The group does not exist."""

    code = 69
    name = "GROUP_ID_NOT_FOUND"


class FetchSessionIdNotFoundError(BrokerResponseError):
    """The incremental fetch session was evicted or never existed."""

    code = 70
    name = "FETCH_SESSION_ID_NOT_FOUND"
    retriable = True


class InvalidFetchSessionEpochError(BrokerResponseError):
    """The fetch session epoch does not match the broker's."""

    code = 71
    name = "INVALID_FETCH_SESSION_EPOCH"
    retriable = True


class ListenerNotFoundError(MetadataInvalidatingError):
    """The leader has no listener matching the one the request used."""

    code = 72
    name = "LISTENER_NOT_FOUND"
    retriable = True


class TopicDeletionDisabledError(BrokerResponseError):
    """Topic deletion is disabled on the broker."""

    code = 73
    name = "TOPIC_DELETION_DISABLED"


class FencedLeaderEpochError(MetadataInvalidatingError):
    """Our leader epoch is older than the broker's; refresh metadata."""

    code = 74
    name = "FENCED_LEADER_EPOCH"
    retriable = True


class UnknownLeaderEpochError(MetadataInvalidatingError):
    """Our leader epoch is newer than the broker's; it has not caught up."""

    code = 75
    name = "UNKNOWN_LEADER_EPOCH"
    retriable = True


class UnsupportedCompressionTypeError(BrokerResponseError):
    """The client cannot read the partition's compression type."""

    code = 76
    name = "UNSUPPORTED_COMPRESSION_TYPE"


class StaleBrokerEpochError(BrokerResponseError):
    """The broker epoch has changed."""

    code = 77
    name = "STALE_BROKER_EPOCH"


class OffsetNotAvailableError(BrokerResponseError):
    """The new leader's high watermark has not caught up yet."""

    code = 78
    name = "OFFSET_NOT_AVAILABLE"
    retriable = True


class MemberIdRequiredError(BrokerResponseError):
    """Rejoin using the member id the coordinator just assigned."""

    code = 79
    name = "MEMBER_ID_REQUIRED"


class PreferredLeaderNotAvailableError(MetadataInvalidatingError):
    """The preferred leader is not available."""

    code = 80
    name = "PREFERRED_LEADER_NOT_AVAILABLE"
    retriable = True


class GroupMaxSizeReachedError(BrokerResponseError):
    """The group is full (group.max.size)."""

    code = 81
    name = "GROUP_MAX_SIZE_REACHED"


class FencedInstanceIdError(BrokerResponseError):
    """Another member registered the same group.instance.id."""

    code = 82
    name = "FENCED_INSTANCE_ID"


class EligibleLeadersNotAvailableError(MetadataInvalidatingError):
    """No eligible leader is available for the election."""

    code = 83
    name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    retriable = True


class ElectionNotNeededError(MetadataInvalidatingError):
    """The leader election was not needed."""

    code = 84
    name = "ELECTION_NOT_NEEDED"
    retriable = True


class NoReassignmentInProgressError(BrokerResponseError):
    """There is no reassignment to cancel."""

    code = 85
    name = "NO_REASSIGNMENT_IN_PROGRESS"


class GroupSubscribedToTopicError(BrokerResponseError):
    """Offsets cannot be deleted while the group is subscribed to the topic."""

    code = 86
    name = "GROUP_SUBSCRIBED_TO_TOPIC"


class InvalidRecordError(BrokerResponseError):
    """The broker rejected a record during validation."""

    code = 87
    name = "INVALID_RECORD"


class UnstableOffsetCommitError(BrokerResponseError):
    """Pending transactional offsets must be resolved first."""

    code = 88
    name = "UNSTABLE_OFFSET_COMMIT"
    retriable = True


class ThrottlingQuotaExceededError(BrokerResponseError):
    """The controller mutation quota is exhausted."""

    code = 89
    name = "THROTTLING_QUOTA_EXCEEDED"
    retriable = True


class ProducerFencedError(BrokerResponseError):
    """A newer producer with the same transactional id fenced this one."""

    code = 90
    name = "PRODUCER_FENCED"


class ResourceNotFoundError(BrokerResponseError):
    """The referenced resource does not exist."""

    code = 91
    name = "RESOURCE_NOT_FOUND"


class DuplicateResourceError(BrokerResponseError):
    """The same resource was referenced twice."""

    code = 92
    name = "DUPLICATE_RESOURCE"


class UnacceptableCredentialError(BrokerResponseError):
    """The credential does not meet the acceptability criteria."""

    code = 93
    name = "UNACCEPTABLE_CREDENTIAL"


class InconsistentVoterSetError(BrokerResponseError):
    """Sender or receiver is not in the expected KRaft voter set."""

    code = 94
    name = "INCONSISTENT_VOTER_SET"


class InvalidUpdateVersionError(BrokerResponseError):
    """The update version is invalid."""

    code = 95
    name = "INVALID_UPDATE_VERSION"


class FeatureUpdateFailedError(BrokerResponseError):
    """Finalized features could not be updated."""

    code = 96
    name = "FEATURE_UPDATE_FAILED"


class PrincipalDeserializationFailureError(BrokerResponseError):
    """A forwarded request's principal could not be deserialized."""

    code = 97
    name = "PRINCIPAL_DESERIALIZATION_FAILURE"


class SnapshotNotFoundError(BrokerResponseError):
    """The requested snapshot does not exist."""

    code = 98
    name = "SNAPSHOT_NOT_FOUND"


class PositionOutOfRangeError(BrokerResponseError):
    """The snapshot position is out of range."""

    code = 99
    name = "POSITION_OUT_OF_RANGE"


class UnknownTopicIdError(MetadataInvalidatingError):
    """The broker does not host this topic id."""

    code = 100
    name = "UNKNOWN_TOPIC_ID"
    retriable = True


class DuplicateBrokerRegistrationError(BrokerResponseError):
    """This broker id is already registered."""

    code = 101
    name = "DUPLICATE_BROKER_REGISTRATION"


class BrokerIdNotRegisteredError(BrokerResponseError):
    """The broker id is not registered."""

    code = 102
    name = "BROKER_ID_NOT_REGISTERED"


class InconsistentTopicIdError(MetadataInvalidatingError):
    """The log's topic id differs from the request's."""

    code = 103
    name = "INCONSISTENT_TOPIC_ID"
    retriable = True


class InconsistentClusterIdError(BrokerResponseError):
    """The request's cluster id differs from the broker's."""

    code = 104
    name = "INCONSISTENT_CLUSTER_ID"


class TransactionalIdNotFoundError(BrokerResponseError):
    """The transactional id does not exist."""

    code = 105
    name = "TRANSACTIONAL_ID_NOT_FOUND"


class FetchSessionTopicIdError(BrokerResponseError):
    """The fetch session used topic ids inconsistently."""

    code = 106
    name = "FETCH_SESSION_TOPIC_ID_ERROR"
    retriable = True


class IneligibleReplicaError(BrokerResponseError):
    """The proposed ISR contains an ineligible replica."""

    code = 107
    name = "INELIGIBLE_REPLICA"


class NewLeaderElectedError(BrokerResponseError):
    """The partition state was updated but the leader changed."""

    code = 108
    name = "NEW_LEADER_ELECTED"


class OffsetMovedToTieredStorageError(BrokerResponseError):
    """The offset now lives only in tiered storage."""

    code = 109
    name = "OFFSET_MOVED_TO_TIERED_STORAGE"


class FencedMemberEpochError(BrokerResponseError):
    """The member epoch was fenced; release partitions and rejoin."""

    code = 110
    name = "FENCED_MEMBER_EPOCH"


class UnreleasedInstanceIdError(BrokerResponseError):
    """The instance id is still held by another member."""

    code = 111
    name = "UNRELEASED_INSTANCE_ID"


class UnsupportedAssignorError(BrokerResponseError):
    """The group does not support the requested assignor."""

    code = 112
    name = "UNSUPPORTED_ASSIGNOR"


class StaleMemberEpochError(BrokerResponseError):
    """The member epoch is stale; wait for the next heartbeat's epoch."""

    code = 113
    name = "STALE_MEMBER_EPOCH"


class MismatchedEndpointTypeError(BrokerResponseError):
    """The request was sent to the wrong kind of endpoint."""

    code = 114
    name = "MISMATCHED_ENDPOINT_TYPE"


class UnsupportedEndpointTypeError(BrokerResponseError):
    """This endpoint type is not supported yet."""

    code = 115
    name = "UNSUPPORTED_ENDPOINT_TYPE"


class UnknownControllerIdError(BrokerResponseError):
    """The controller id is unknown."""

    code = 116
    name = "UNKNOWN_CONTROLLER_ID"


class UnknownSubscriptionIdError(BrokerResponseError):
    """The telemetry subscription id is unknown or outdated."""

    code = 117
    name = "UNKNOWN_SUBSCRIPTION_ID"


class TelemetryTooLargeError(BrokerResponseError):
    """The pushed telemetry exceeds the broker's limit."""

    code = 118
    name = "TELEMETRY_TOO_LARGE"


class InvalidRegistrationError(BrokerResponseError):
    """The controller considers the broker registration invalid."""

    code = 119
    name = "INVALID_REGISTRATION"


class TransactionAbortableError(BrokerResponseError):
    """The transaction hit an error; abort it to keep using the transactional id."""

    code = 120
    name = "TRANSACTION_ABORTABLE"


class InvalidRecordStateError(BrokerResponseError):
    """A share-group acknowledgement targeted a record in the wrong state."""

    code = 121
    name = "INVALID_RECORD_STATE"


class ShareSessionNotFoundError(BrokerResponseError):
    """The share session does not exist."""

    code = 122
    name = "SHARE_SESSION_NOT_FOUND"
    retriable = True


class InvalidShareSessionEpochError(BrokerResponseError):
    """The share session epoch is invalid."""

    code = 123
    name = "INVALID_SHARE_SESSION_EPOCH"
    retriable = True


class FencedStateEpochError(BrokerResponseError):
    """The share-group state epoch does not match."""

    code = 124
    name = "FENCED_STATE_EPOCH"


class InvalidVoterKeyError(BrokerResponseError):
    """The voter key does not match the receiving replica."""

    code = 125
    name = "INVALID_VOTER_KEY"


class DuplicateVoterError(BrokerResponseError):
    """The voter is already in the voter set."""

    code = 126
    name = "DUPLICATE_VOTER"


class VoterNotFoundError(BrokerResponseError):
    """The voter is not in the voter set."""

    code = 127
    name = "VOTER_NOT_FOUND"


class InvalidRegularExpressionError(BrokerResponseError):
    """The subscription regular expression is invalid."""

    code = 128
    name = "INVALID_REGULAR_EXPRESSION"


class RebootstrapRequiredError(MetadataInvalidatingError):
    """Client metadata is stale; rebootstrap from the bootstrap servers."""

    code = 129
    name = "REBOOTSTRAP_REQUIRED"


class StreamsInvalidTopologyError(BrokerResponseError):
    """The streams topology is invalid."""

    code = 130
    name = "STREAMS_INVALID_TOPOLOGY"


class StreamsInvalidTopologyEpochError(BrokerResponseError):
    """The streams topology epoch is invalid."""

    code = 131
    name = "STREAMS_INVALID_TOPOLOGY_EPOCH"


class StreamsTopologyFencedError(BrokerResponseError):
    """The streams topology epoch is outdated."""

    code = 132
    name = "STREAMS_TOPOLOGY_FENCED"


class ShareSessionLimitReachedError(BrokerResponseError):
    """The broker's share session limit is reached."""

    code = 133
    name = "SHARE_SESSION_LIMIT_REACHED"
    retriable = True


class GroupDeletionFailedError(BrokerResponseError):
    """DeleteGroups could not complete (the per-group results say why)."""

    code = 134
    name = "GROUP_DELETION_FAILED"


class StreamsTopologyDescriptionUpdateFailedError(BrokerResponseError):
    """The broker could not apply a streams group's topology description update (KIP-1071)."""

    code = 135
    name = "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED"


class ControllerIdNotRegisteredError(BrokerResponseError):
    """UnregisterController named a controller id that is not registered."""

    code = 136
    name = "CONTROLLER_ID_NOT_REGISTERED"


# --------------------------------------------------------------------------------------
# Lookup.

# Kafka's own spelling for code 10, for readers coming from the protocol guide.
MessageTooLargeError = MessageSizeTooLargeError


def _collect() -> dict[int, type[BrokerResponseError]]:
    table: dict[int, type[BrokerResponseError]] = {}
    for obj in list(globals().values()):
        if (
            isinstance(obj, type)
            and issubclass(obj, BrokerResponseError)
            and "code" in vars(obj)
            and obj is not BrokerResponseError
        ):
            if obj.code in table and table[obj.code] is not obj:
                raise RuntimeError(f"duplicate error code {obj.code}: {obj} and {table[obj.code]}")
            table[obj.code] = obj
    return dict(sorted(table.items()))


ERRORS_BY_CODE: dict[int, type[BrokerResponseError]] = _collect()
"""Every known broker error code mapped to its class (code 0, NONE, is absent)."""

__all__ += sorted(cls.__name__ for cls in ERRORS_BY_CODE.values())


def for_code(code: int) -> type[BrokerResponseError]:
    """The class for a broker error code; ``UnknownKafkaError`` for codes we do not know.

    ``UnknownKafkaError`` needs the code to be instantiated, so prefer ``error_for``
    when an instance is wanted. Code 0 means success and is rejected with ``ValueError``.
    """
    if code == 0:
        raise ValueError("error code 0 (NONE) is not an error")
    return ERRORS_BY_CODE.get(code, UnknownKafkaError)


def error_for(code: int, message: str | None = None) -> BrokerResponseError:
    """An exception instance for a non-zero broker error code (unknown codes included)."""
    cls = for_code(code)
    if cls is UnknownKafkaError:
        return UnknownKafkaError(code, message)
    return cls(message)


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise the exception for ``code``; do nothing for 0 (NONE)."""
    if code != 0:
        raise error_for(code, message)


# --------------------------------------------------------------------------------------
# Consumer errors (appended by the fetch/consumer engineer).


class LogTruncationError(OffsetOutOfRangeError):
    """The leader's log diverged below the consumer's position (detected through KIP-320).

    Raised when ``auto_offset_reset="none"``; otherwise the consumer resets to the
    divergence point and logs a warning. ``divergent_offsets`` maps each affected
    partition to the first offset that is no longer in the leader's log.
    """

    def __init__(self, message: str | None = None, divergent_offsets: dict[Any, int] | None = None) -> None:
        self.divergent_offsets = dict(divergent_offsets or {})
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.divergent_offsets))


class RecordDeserializationError(KafkaError):
    """A key or value deserializer failed; the position stays at the failing record.

    ``seek(tp, offset + 1)`` skips it.
    """

    def __init__(self, message: str, topic: str, partition: int, offset: int) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.args[0], self.topic, self.partition, self.offset))


class SerializerNotReadyError(KafkaError):
    """A context serializer (deserializer) needs I/O before it can handle this record (a schema
    registry lookup for a subject or schema id not cached yet) and was called synchronously.

    The clients' async paths catch it and await the serializer's ``serialize_async``
    (``deserialize_async``); see ``aiokafka_lite.core.serialization``.
    """


# --------------------------------------------------------------------------------------
# Producer errors (appended by the producer engineer).


class ProducerRecordTooLargeError(RecordTooLargeError, MessageSizeTooLargeError):
    """A record exceeds the producer's ``max_request_size`` or ``buffer_memory``; it was
    rejected before being buffered. Catch it as ``MessageSizeTooLargeError`` (what the
    Java client raises for this case) or as ``RecordTooLargeError`` (client-side limit)."""


class RecordFailure(NamedTuple):
    """A record that was not delivered: its position among the futures waited for,
    where it was going, and why (what ``DeliveryFailedError.failures`` lists; also
    importable as ``aiokafka_lite.produce.RecordFailure``)."""

    position: int
    topic: str
    partition: int
    error: BaseException


class DeliveryFailedError(ExceptionGroup[Exception]):
    """Some of the records waited for (``Producer.wait_all``) were not delivered.

    ``exceptions`` holds each distinct delivery error once (records of one batch share
    theirs), so ``except* NotEnoughReplicasError:`` works; ``failures`` lists every
    failed record (:class:`~aiokafka_lite.produce.RecordFailure`: position, topic,
    partition, error), in order. Also importable as ``aiokafka_lite.produce.DeliveryFailedError``.
    """

    failures: list[RecordFailure]

    def __new__(
        cls, message: str, exceptions: Sequence[Exception], failures: Sequence[RecordFailure] = ()
    ) -> DeliveryFailedError:
        self = super().__new__(cls, message, exceptions)
        self.failures = list(failures)
        return self

    def __init__(
        self, message: str, exceptions: Sequence[Exception], failures: Sequence[RecordFailure] = ()
    ) -> None:
        super().__init__(message, exceptions)

    def derive(self, excs: Sequence[Exception]) -> DeliveryFailedError:  # type: ignore[override]
        """The part of this group with ``excs`` (``except*``, ``split``): keeps the
        failures those errors explain."""
        # (ignore: the base's other overload takes BaseExceptions, never in an ExceptionGroup)
        kept = {id(e) for e in excs}
        return DeliveryFailedError(self.message, excs, [f for f in self.failures if id(f.error) in kept])

    @classmethod
    def from_failures(cls, failures: Sequence[RecordFailure], total: int) -> DeliveryFailedError:
        """One group for ``failures`` out of ``total`` records; the message names each
        partition and error with its record count."""
        errors: dict[int, Exception] = {}
        counts: dict[tuple[str, int, int], int] = {}
        for f in failures:
            err = f.error
            if id(err) not in errors:
                errors[id(err)] = err if isinstance(err, Exception) else KafkaError(repr(err))
            key = (f.topic, f.partition, id(err))
            counts[key] = counts.get(key, 0) + 1
        parts = []
        for (topic, partition, err_id), n in counts.items():
            err = errors[err_id]
            parts.append(
                f"{topic}-{partition}: {type(err).__name__}: {err} ({n} record{'s' if n != 1 else ''})"
            )
        shown = "; ".join(parts[:10]) + (f"; and {len(parts) - 10} more" if len(parts) > 10 else "")
        message = f"{len(failures)} of {total} record(s) not delivered: {shown}"
        return cls(message, list(errors.values()), failures)


# --------------------------------------------------------------------------------------
# Transaction errors (appended by the transactions engineer).


class TransactionAbortedError(KafkaError):
    """The record's transaction was aborted before the record was delivered
    (``abort_transaction()``, or an abort forced by an earlier error or a rebalance)."""


# --------------------------------------------------------------------------------------
# Connection errors (appended by the net engineer).


class SecurityProtocolMismatchError(KafkaConnectionError):
    """The listener most likely speaks another security protocol than the client's
    ``security_protocol``: TLS sent to a plaintext listener (the broker drops the TLS
    handshake), or plaintext sent to a TLS listener (it answers with a TLS record).

    The message says which and what to check. Retriable like any connection failure,
    so a list of bootstrap servers is still tried in turn; when none answers, the
    client's ``NoBrokersAvailableError`` carries this error as its cause.
    """


# --------------------------------------------------------------------------------------
# Mutual TLS and Kerberos errors (appended by the authentication engineer, issue 29).


class SslCredentialsError(ConfigError):
    """The client's TLS credentials cannot be loaded: a wrong or missing key password, a
    private key that does not belong to the certificate, a file that is not PEM or
    cannot be read. The message names the file, never the password."""


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake failed on a certificate (Java's ``SslAuthenticationException``):
    the broker rejected the client certificate of mutual TLS (none sent, expired, or
    signed by a CA it does not trust), or the client rejected the broker's. Not
    retriable: the same certificate fails the same way on every broker."""


class KerberosError(AuthenticationError):
    """SASL GSSAPI (Kerberos) authentication failed: no or expired credentials, a keytab
    without the principal's key, a principal or service the KDC does not know, a KDC
    that cannot be reached, or a broker that rejected the context. The message says
    which, with the GSSAPI status text."""
