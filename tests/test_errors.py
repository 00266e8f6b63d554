"""Tests for the Kafka error-code table and the client-side error classes."""

from __future__ import annotations

import pickle
import re

import pytest

from aiokafka_lite.core import errors
from aiokafka_lite.core.errors import (
    ERRORS_BY_CODE,
    AuthenticationError,
    BrokerResponseError,
    ClosedError,
    CommitFailedError,
    CoordinatorError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MetadataInvalidatingError,
    NoBrokersAvailableError,
    ProducerClosedError,
    RecordTooLargeError,
    UnknownKafkaError,
    error_for,
    for_code,
    raise_for_code,
)

# Codes whose Java exception extends RetriableException (directly, or through
# InvalidMetadataException / RefreshRetriableException), Kafka 4.x.
JAVA_RETRIABLE = {
    2,  # CORRUPT_MESSAGE
    3,  # UNKNOWN_TOPIC_OR_PARTITION
    5,  # LEADER_NOT_AVAILABLE
    6,  # NOT_LEADER_OR_FOLLOWER
    7,  # REQUEST_TIMED_OUT
    9,  # REPLICA_NOT_AVAILABLE
    13,  # NETWORK_EXCEPTION
    14,  # COORDINATOR_LOAD_IN_PROGRESS
    15,  # COORDINATOR_NOT_AVAILABLE
    16,  # NOT_COORDINATOR
    19,  # NOT_ENOUGH_REPLICAS
    20,  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
    41,  # NOT_CONTROLLER
    51,  # CONCURRENT_TRANSACTIONS
    56,  # KAFKA_STORAGE_ERROR
    70,  # FETCH_SESSION_ID_NOT_FOUND
    71,  # INVALID_FETCH_SESSION_EPOCH
    72,  # LISTENER_NOT_FOUND
    74,  # FENCED_LEADER_EPOCH
    75,  # UNKNOWN_LEADER_EPOCH
    78,  # OFFSET_NOT_AVAILABLE
    80,  # PREFERRED_LEADER_NOT_AVAILABLE
    83,  # ELIGIBLE_LEADERS_NOT_AVAILABLE
    84,  # ELECTION_NOT_NEEDED
    88,  # UNSTABLE_OFFSET_COMMIT
    89,  # THROTTLING_QUOTA_EXCEEDED
    100,  # UNKNOWN_TOPIC_ID
    103,  # INCONSISTENT_TOPIC_ID
    106,  # FETCH_SESSION_TOPIC_ID_ERROR
    122,  # SHARE_SESSION_NOT_FOUND
    123,  # INVALID_SHARE_SESSION_EPOCH
    133,  # SHARE_SESSION_LIMIT_REACHED
}


def test_table_covers_every_code_from_minus_one_to_136() -> None:
    # 136 (CONTROLLER_ID_NOT_REGISTERED) is the last code of Kafka 4.4's Errors.
    assert set(ERRORS_BY_CODE) == {-1, *range(1, 137)}
    assert 0 not in ERRORS_BY_CODE


@pytest.mark.parametrize("code", sorted(ERRORS_BY_CODE))
def test_every_code_round_trips(code: int) -> None:
    cls = for_code(code)
    assert cls is ERRORS_BY_CODE[code]
    assert cls.code == code
    assert issubclass(cls, BrokerResponseError)
    exc = error_for(code, "detail")
    assert type(exc) is cls
    assert exc.code == code
    assert exc.message == "detail"
    assert str(exc) == f"[Error {code}] {cls.name}: detail"
    with pytest.raises(cls):
        raise_for_code(code)


def test_names_and_class_names_are_unique_and_well_formed() -> None:
    names = [cls.name for cls in ERRORS_BY_CODE.values()]
    class_names = [cls.__name__ for cls in ERRORS_BY_CODE.values()]
    assert len(set(names)) == len(names)
    assert len(set(class_names)) == len(class_names)
    for cls in ERRORS_BY_CODE.values():
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", cls.name), cls.name
        assert re.fullmatch(r"[A-Z][A-Za-z]*Error", cls.__name__), cls.__name__
        assert getattr(errors, cls.__name__) is cls
        assert cls.__name__ in errors.__all__
        assert cls.__doc__


@pytest.mark.parametrize(
    ("name", "code", "const"),
    [
        ("UnknownServerError", -1, "UNKNOWN_SERVER_ERROR"),
        ("OffsetOutOfRangeError", 1, "OFFSET_OUT_OF_RANGE"),
        ("UnknownTopicOrPartitionError", 3, "UNKNOWN_TOPIC_OR_PARTITION"),
        ("NotLeaderOrFollowerError", 6, "NOT_LEADER_OR_FOLLOWER"),
        ("RequestTimedOutError", 7, "REQUEST_TIMED_OUT"),
        ("MessageSizeTooLargeError", 10, "MESSAGE_TOO_LARGE"),
        ("NetworkError", 13, "NETWORK_EXCEPTION"),
        ("CoordinatorNotAvailableError", 15, "COORDINATOR_NOT_AVAILABLE"),
        ("NotCoordinatorError", 16, "NOT_COORDINATOR"),
        ("InvalidTopicError", 17, "INVALID_TOPIC_EXCEPTION"),
        ("IllegalGenerationError", 22, "ILLEGAL_GENERATION"),
        ("UnknownMemberIdError", 25, "UNKNOWN_MEMBER_ID"),
        ("RebalanceInProgressError", 27, "REBALANCE_IN_PROGRESS"),
        ("UnsupportedVersionError", 35, "UNSUPPORTED_VERSION"),
        ("TopicAlreadyExistsError", 36, "TOPIC_ALREADY_EXISTS"),
        ("OutOfOrderSequenceNumberError", 45, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
        ("DuplicateSequenceNumberError", 46, "DUPLICATE_SEQUENCE_NUMBER"),
        ("InvalidProducerEpochError", 47, "INVALID_PRODUCER_EPOCH"),
        ("KafkaStorageError", 56, "KAFKA_STORAGE_ERROR"),
        ("SaslAuthenticationFailedError", 58, "SASL_AUTHENTICATION_FAILED"),
        ("UnknownProducerIdError", 59, "UNKNOWN_PRODUCER_ID"),
        ("FetchSessionIdNotFoundError", 70, "FETCH_SESSION_ID_NOT_FOUND"),
        ("InvalidFetchSessionEpochError", 71, "INVALID_FETCH_SESSION_EPOCH"),
        ("FencedLeaderEpochError", 74, "FENCED_LEADER_EPOCH"),
        ("UnknownLeaderEpochError", 75, "UNKNOWN_LEADER_EPOCH"),
        ("MemberIdRequiredError", 79, "MEMBER_ID_REQUIRED"),
        ("GroupMaxSizeReachedError", 81, "GROUP_MAX_SIZE_REACHED"),
        ("FencedInstanceIdError", 82, "FENCED_INSTANCE_ID"),
        ("ProducerFencedError", 90, "PRODUCER_FENCED"),
        ("UnknownTopicIdError", 100, "UNKNOWN_TOPIC_ID"),
        ("FetchSessionTopicIdError", 106, "FETCH_SESSION_TOPIC_ID_ERROR"),
        ("TransactionAbortableError", 120, "TRANSACTION_ABORTABLE"),
        ("InvalidRecordStateError", 121, "INVALID_RECORD_STATE"),
        ("ShareSessionNotFoundError", 122, "SHARE_SESSION_NOT_FOUND"),
        ("InvalidRegularExpressionError", 128, "INVALID_REGULAR_EXPRESSION"),
        ("RebootstrapRequiredError", 129, "REBOOTSTRAP_REQUIRED"),
        ("ShareSessionLimitReachedError", 133, "SHARE_SESSION_LIMIT_REACHED"),
    ],
)
def test_well_known_classes(name: str, code: int, const: str) -> None:
    cls = getattr(errors, name)
    assert cls.code == code
    assert cls.name == const
    assert for_code(code) is cls


def test_retriable_flags_match_java_classification() -> None:
    retriable = {code for code, cls in ERRORS_BY_CODE.items() if cls.retriable}
    assert retriable == JAVA_RETRIABLE


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (1, False),  # OFFSET_OUT_OF_RANGE: needs a reset policy, not a retry
        (6, True),
        (7, True),
        (10, False),
        (15, True),
        (22, False),
        (25, False),
        (27, False),
        (35, False),
        (45, False),
        (47, False),
        (51, True),
        (58, False),
        (59, False),
        (90, False),
        (120, False),
        (121, False),
        (124, False),
    ],
)
def test_retriable_spot_checks(code: int, expected: bool) -> None:
    assert for_code(code).retriable is expected
    assert error_for(code).retriable is expected


def test_invalidates_metadata_flag() -> None:
    flagged = {code for code, cls in ERRORS_BY_CODE.items() if cls.invalidates_metadata}
    for code in (3, 5, 6, 41, 56, 74, 75, 100):
        assert code in flagged
        assert issubclass(ERRORS_BY_CODE[code], MetadataInvalidatingError)
    for code in (1, 7, 15, 16, 22, 27, 47):
        assert code not in flagged
    assert all(issubclass(ERRORS_BY_CODE[c], MetadataInvalidatingError) for c in flagged)


def test_coordinator_flag() -> None:
    flagged = {code for code, cls in ERRORS_BY_CODE.items() if cls.coordinator_error}
    assert flagged == {14, 15, 16}
    for code in flagged:
        assert issubclass(ERRORS_BY_CODE[code], CoordinatorError)
        assert ERRORS_BY_CODE[code].retriable


def test_flags_default_false_on_base() -> None:
    assert BrokerResponseError.invalidates_metadata is False
    assert BrokerResponseError.coordinator_error is False


@pytest.mark.parametrize("code", [-2, 137, 999, 32767, -32768])
def test_unknown_codes(code: int) -> None:
    assert for_code(code) is UnknownKafkaError
    exc = error_for(code, "new broker")
    assert isinstance(exc, UnknownKafkaError)
    assert exc.code == code
    assert exc.retriable is False
    assert str(exc) == f"[Error {code}] UNKNOWN: new broker"
    with pytest.raises(UnknownKafkaError) as info:
        raise_for_code(code)
    assert info.value.code == code


def test_code_zero_is_not_an_error() -> None:
    raise_for_code(0)
    raise_for_code(0, "ignored")
    with pytest.raises(ValueError):
        for_code(0)
    with pytest.raises(ValueError):
        error_for(0)


def test_str_without_message() -> None:
    assert str(error_for(3)) == "[Error 3] UNKNOWN_TOPIC_OR_PARTITION"
    assert errors.NotCoordinatorError().message is None


def test_repr() -> None:
    assert repr(errors.NotCoordinatorError("x")) == "NotCoordinatorError('x')"
    assert repr(UnknownKafkaError(500)) == "UnknownKafkaError(500, None)"


@pytest.mark.parametrize("exc", [error_for(6, "moved"), error_for(-1), UnknownKafkaError(777, "m")])
def test_pickle_round_trip(exc: BrokerResponseError) -> None:
    clone = pickle.loads(pickle.dumps(exc))
    assert type(clone) is type(exc)
    assert clone.code == exc.code
    assert clone.name == exc.name
    assert clone.message == exc.message
    assert str(clone) == str(exc)


def test_client_side_errors() -> None:
    for cls in (CommitFailedError, NoBrokersAvailableError, AuthenticationError, RecordTooLargeError):
        assert issubclass(cls, KafkaError)
        assert not issubclass(cls, BrokerResponseError)
    assert NoBrokersAvailableError.retriable
    assert not CommitFailedError.retriable
    assert not AuthenticationError.retriable
    assert issubclass(ProducerClosedError, ClosedError)
    assert issubclass(RecordTooLargeError, ValueError)


def test_broker_sasl_failure_is_an_authentication_error() -> None:
    exc = error_for(58, "bad password")
    assert isinstance(exc, AuthenticationError)
    assert isinstance(exc, BrokerResponseError)
    clone = pickle.loads(pickle.dumps(exc))
    assert isinstance(clone, AuthenticationError)
    assert str(clone) == "[Error 58] SASL_AUTHENTICATION_FAILED: bad password"


def test_request_timed_out_is_distinct_from_local_timeout() -> None:
    assert not issubclass(errors.RequestTimedOutError, KafkaTimeoutError)
    assert not issubclass(errors.RequestTimedOutError, TimeoutError)
    assert not issubclass(errors.NetworkError, KafkaConnectionError)


def test_existing_base_classes_kept() -> None:
    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(KafkaTimeoutError, TimeoutError) and KafkaTimeoutError.retriable
    assert issubclass(KafkaConnectionError, ConnectionError) and KafkaConnectionError.retriable
    assert issubclass(errors.UnsupportedCodecError, errors.CorruptRecordError)
    assert errors.MessageTooLargeError is errors.MessageSizeTooLargeError


def test_delivery_failed_error_is_one_class_in_errors_and_produce() -> None:
    from aiokafka_lite import produce
    from aiokafka_lite.produce import batch

    assert "DeliveryFailedError" in errors.__all__
    assert produce.DeliveryFailedError is errors.DeliveryFailedError
    assert batch.DeliveryFailedError is errors.DeliveryFailedError
    failure = produce.RecordFailure(0, "orders", 1, errors.NotEnoughReplicasError("isr"))
    raised = errors.DeliveryFailedError.from_failures([failure], total=3)
    assert "1 of 3 record(s) not delivered: orders-1: NotEnoughReplicasError" in str(raised)
    with pytest.raises(errors.DeliveryFailedError) as info:
        raise raised
    assert info.value.failures == [failure]
