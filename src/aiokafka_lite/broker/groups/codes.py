"""Kafka error codes and keys the group coordinators answer with."""

from __future__ import annotations

import logging
from typing import Final

from aiokafka_lite.core import errors

log = logging.getLogger("aiokafka_lite.broker.groups")


NONE: Final = 0
UNKNOWN_SERVER_ERROR: Final = errors.UnknownServerError.code
COORDINATOR_NOT_AVAILABLE: Final = errors.CoordinatorNotAvailableError.code
NOT_COORDINATOR: Final = errors.NotCoordinatorError.code
ILLEGAL_GENERATION: Final = errors.IllegalGenerationError.code
INCONSISTENT_GROUP_PROTOCOL: Final = errors.InconsistentGroupProtocolError.code
INVALID_GROUP_ID: Final = errors.InvalidGroupIdError.code
UNKNOWN_MEMBER_ID: Final = errors.UnknownMemberIdError.code
INVALID_SESSION_TIMEOUT: Final = errors.InvalidSessionTimeoutError.code
REBALANCE_IN_PROGRESS: Final = errors.RebalanceInProgressError.code
MEMBER_ID_REQUIRED: Final = errors.MemberIdRequiredError.code
GROUP_MAX_SIZE_REACHED: Final = errors.GroupMaxSizeReachedError.code
FENCED_INSTANCE_ID: Final = errors.FencedInstanceIdError.code
UNKNOWN_TOPIC_OR_PARTITION: Final = errors.UnknownTopicOrPartitionError.code
OFFSET_METADATA_TOO_LARGE: Final = errors.OffsetMetadataTooLargeError.code
NON_EMPTY_GROUP: Final = errors.NonEmptyGroupError.code
GROUP_ID_NOT_FOUND: Final = errors.GroupIdNotFoundError.code
GROUP_SUBSCRIBED_TO_TOPIC: Final = errors.GroupSubscribedToTopicError.code
UNSTABLE_OFFSET_COMMIT: Final = errors.UnstableOffsetCommitError.code
INVALID_REQUEST: Final = errors.InvalidRequestError.code
UNSUPPORTED_VERSION: Final = errors.UnsupportedVersionError.code
FENCED_MEMBER_EPOCH: Final = errors.FencedMemberEpochError.code
UNRELEASED_INSTANCE_ID: Final = errors.UnreleasedInstanceIdError.code
UNSUPPORTED_ASSIGNOR: Final = errors.UnsupportedAssignorError.code
STALE_MEMBER_EPOCH: Final = errors.StaleMemberEpochError.code
INVALID_REGULAR_EXPRESSION: Final = errors.InvalidRegularExpressionError.code

GROUP_KEY: Final = 0
TXN_KEY: Final = 1
NEW_MEMBER_JOIN_TIMEOUT_MS: Final = 5 * 60 * 1000  # Kafka's bound on a new member's pending JoinGroup
# DescribeGroups authorized operations when asked: READ, DELETE, DESCRIBE (no ACLs here).
_GROUP_OPERATIONS: Final = (1 << 3) | (1 << 6) | (1 << 8)
# ConsumerGroupDescribe: also DESCRIBE_CONFIGS and ALTER_CONFIGS (groups have configs, KIP-848).
CONSUMER_GROUP_OPERATIONS: Final = _GROUP_OPERATIONS | (1 << 10) | (1 << 11)
