"""KRaft metadata quorum operations of the admin client, as Java's Admin:
``describe_metadata_quorum`` (DescribeQuorum, KIP-595/KIP-836/KIP-853),
``add_raft_voter``/``remove_raft_voter`` (AddRaftVoter/RemoveRaftVoter, KIP-853) and
``unregister_controller`` (UnregisterController, Kafka 4.4+).

Where they go: Java's Admin sends these to the least-loaded broker when it was given
``bootstrap.servers`` (the broker forwards them to the active controller) and to the
active controller itself only when given ``bootstrap.controllers`` (KIP-919). This client
connects to brokers only (it has no ``bootstrap_controllers``), so it does the former:
every Kafka broker since 3.9 accepts them and forwards them.

Errors, as Java: a ``NOT_CONTROLLER`` answer (the controller moved while the request was
forwarded) is retried until the call's deadline (DescribeQuorum, a read, retries every
retriable error); anything else is raised as the typed error of its code. A quorum formatted with
``controller.quorum.voters`` is static (``kraft.version`` 0) and refuses voter changes
with ``UNSUPPORTED_VERSION``: raised as ``UnsupportedVersionError`` saying the cluster
needs a dynamic quorum (KIP-853: storage formatted with ``--standalone`` or
``--initial-controllers``, or ``kraft.version`` upgraded to 1).

The embedded broker answers DescribeQuorum with a one-voter quorum and refuses voter
changes as a static Kafka quorum does (``broker/api/quorum.py``).
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Callable, Iterable
from typing import Final

from aiokafka_lite.admin.requests import AdminRequests, error_of
from aiokafka_lite.admin.types import QuorumInfo, QuorumNode, QuorumReplicaState, RaftVoterEndpoint
from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core import errors as E
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    UnregisterControllerRequest,
    UnregisterControllerResponse,
)

__all__ = [
    "METADATA_TOPIC",
    "add_raft_voter",
    "describe_metadata_quorum",
    "parse_directory_id",
    "quorum_info",
    "remove_raft_voter",
    "unregister_controller",
]

#: The KRaft metadata log, the only partition a quorum describes.
METADATA_TOPIC: Final = "__cluster_metadata"
_DYNAMIC_QUORUM_HINT: Final = (
    "changing the voters needs a dynamic KRaft quorum (KIP-853, Kafka 3.9+: kraft.version 1, "
    "storage formatted with --standalone or --initial-controllers; a quorum set by "
    "controller.quorum.voters is static)"
)


def parse_directory_id(value: uuid.UUID | str) -> uuid.UUID:
    """A metadata log directory id from a ``uuid.UUID``, Kafka's own text form (22
    characters of URL-safe base64, as ``kafka-metadata-quorum.sh`` and ``meta.properties``
    print it) or a hyphenated UUID."""
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        text = value.strip()
        if len(text) == 22:
            try:
                raw = base64.urlsafe_b64decode(text + "==")
            except (binascii.Error, ValueError):
                raw = b""
            if len(raw) == 16:
                return uuid.UUID(bytes=raw)
        try:
            return uuid.UUID(text)
        except ValueError:
            pass
    raise E.ConfigError(
        f"voter_directory_id {value!r} is neither a uuid.UUID, Kafka's 22-character base64 "
        "form (as kafka-metadata-quorum.sh prints it) nor a hyphenated UUID"
    )


def _check_voter_id(voter_id: int) -> None:
    if isinstance(voter_id, bool) or not isinstance(voter_id, int) or voter_id < 0:
        raise E.ConfigError(f"voter_id must be a node id (an int >= 0), got {voter_id!r}")


async def _controller_call(
    rq: AdminRequests,
    make: Callable[[int], Request],
    deadline: float,
    check: Callable[[Response], E.KafkaError | None],
) -> Response:
    """Send a request that a broker forwards to the controller (route "any", as Java's
    ``LeastLoadedBrokerOrActiveKController`` with bootstrap servers) until its answer
    carries no retriable error (``check``) or the deadline passes."""
    retry = rq.retry_schedule(deadline)
    while True:
        resp = await rq.request(make, "any", deadline)
        err = check(resp)
        if err is None:
            return resp
        delay = retry.next_delay() if err.retriable else None
        if delay is None:
            raise err
        await _backend.sleep(delay)
        await rq.refresh((), deadline)


def _unsupported(api: str, exc: E.UnsupportedVersionError) -> E.UnsupportedVersionError:
    """``UNSUPPORTED_VERSION`` from a voter change, with what the cluster needs."""
    detail = exc.message if isinstance(exc, E.BrokerResponseError) else str(exc)
    return E.UnsupportedVersionError(f"{api}: {detail}; {_DYNAMIC_QUORUM_HINT}")


# ---------------------------------------------------------------------------- describe


async def describe_metadata_quorum(rq: AdminRequests, *, timeout_ms: float | None = None) -> QuorumInfo:
    """The metadata quorum's leader, epoch, high watermark, voters and observers."""
    deadline = rq.deadline(timeout_ms)

    def make(version: int) -> Request:
        return DescribeQuorumRequest(
            topics=[
                DescribeQuorumRequest.TopicData(
                    topic_name=METADATA_TOPIC,
                    partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)],
                )
            ]
        )

    def check(resp: Response) -> E.KafkaError | None:
        assert isinstance(resp, DescribeQuorumResponse)
        err = error_of(resp.error_code, resp.error_message)
        if err is not None:
            return err
        part = _the_metadata_partition(resp)
        return error_of(part.error_code, part.error_message)

    try:
        resp = await _controller_call(rq, make, deadline, check)
    except E.UnsupportedVersionError as exc:
        raise E.UnsupportedVersionError(
            f"{exc}; describing the metadata quorum needs a KRaft cluster (Kafka 3.3+)"
        ) from exc
    assert isinstance(resp, DescribeQuorumResponse)
    return quorum_info(resp)


def _the_metadata_partition(resp: DescribeQuorumResponse) -> DescribeQuorumResponse.PartitionData:
    """The answer's one partition, checked as Java checks it (an answer of another shape
    is a broker bug: ``UnknownServerError``)."""
    if len(resp.topics) != 1:
        raise E.UnknownServerError(f"DescribeQuorum answered {len(resp.topics)} topics where 1 was asked")
    topic = resp.topics[0]
    if topic.topic_name != METADATA_TOPIC:
        raise E.UnknownServerError(
            f"DescribeQuorum answered topic {topic.topic_name!r}, not {METADATA_TOPIC}"
        )
    if len(topic.partitions) != 1 or topic.partitions[0].partition_index != 0:
        indexes = [p.partition_index for p in topic.partitions]
        raise E.UnknownServerError(
            f"DescribeQuorum answered partitions {indexes} of {METADATA_TOPIC}, not [0]"
        )
    return topic.partitions[0]


def quorum_info(resp: DescribeQuorumResponse) -> QuorumInfo:
    """The ``QuorumInfo`` of a successful DescribeQuorum answer (pure)."""
    part = _the_metadata_partition(resp)
    return QuorumInfo(
        leader_id=part.leader_id,
        leader_epoch=part.leader_epoch,
        high_watermark=part.high_watermark,
        voters=tuple(_replica(r) for r in part.current_voters),
        observers=tuple(_replica(r) for r in part.observers),
        nodes={
            n.node_id: QuorumNode(
                n.node_id, tuple(RaftVoterEndpoint(li.name, li.host, li.port) for li in n.listeners)
            )
            for n in resp.nodes
        },
    )


def _replica(r: DescribeQuorumResponse.ReplicaState) -> QuorumReplicaState:
    return QuorumReplicaState(
        replica_id=r.replica_id,
        replica_directory_id=r.replica_directory_id,
        log_end_offset=r.log_end_offset,
        last_fetch_timestamp=None if r.last_fetch_timestamp == -1 else r.last_fetch_timestamp,
        last_caught_up_timestamp=None if r.last_caught_up_timestamp == -1 else r.last_caught_up_timestamp,
    )


# ---------------------------------------------------------------------------- voters


def _retriable_or_none(code: int, message: str | None) -> E.KafkaError | None:
    """A voter change's error to retry: only NOT_CONTROLLER (the controller moved), as
    Java's ``handleNotControllerError``. Another retriable error (a timeout waiting for
    the new voter to catch up, a leader change) may come after the change was applied,
    where a retry would fail with DUPLICATE_VOTER/VOTER_NOT_FOUND: it is raised, as Java
    does. None for success or a final error (raised after)."""
    err = error_of(code, message)
    return err if isinstance(err, E.NotControllerError) else None


def _final(api: str, code: int, message: str | None) -> None:
    err = error_of(code, message)
    if isinstance(err, E.UnsupportedVersionError):
        raise _unsupported(api, err)
    if err is not None:
        raise err


async def add_raft_voter(
    rq: AdminRequests,
    voter_id: int,
    voter_directory_id: uuid.UUID | str,
    endpoints: Iterable[RaftVoterEndpoint],
    *,
    cluster_id: str | None = None,
    timeout_ms: float | None = None,
) -> None:
    """Add a controller to the voters of a dynamic quorum (KIP-853). The node must
    already run as an observer of the metadata log with this directory id and listen on
    ``endpoints`` (its controller listeners). ``cluster_id``, when given, is checked by
    the controller (``InconsistentClusterIdError`` on a mismatch)."""
    _check_voter_id(voter_id)
    directory_id = parse_directory_id(voter_directory_id)
    listeners: dict[str, RaftVoterEndpoint] = {}
    for ep in endpoints:
        if not isinstance(ep, RaftVoterEndpoint):
            raise E.ConfigError(f"endpoints takes RaftVoterEndpoint objects, got {type(ep).__name__}")
        if not ep.listener or not ep.host or not 0 <= ep.port <= 65535:
            raise E.ConfigError(f"endpoint {ep} needs a listener name, a host and a port in 0..65535")
        if ep.listener in listeners:
            raise E.ConfigError(f"listener {ep.listener!r} given twice (one endpoint per listener name)")
        listeners[ep.listener] = ep
    if not listeners:
        raise E.ConfigError("add_raft_voter needs the new voter's endpoints (its controller listeners)")
    deadline = rq.deadline(timeout_ms)

    def make(version: int) -> Request:
        return AddRaftVoterRequest(
            cluster_id=cluster_id,
            timeout_ms=int(rq.remaining_ms(deadline)),
            voter_id=voter_id,
            voter_directory_id=directory_id,
            listeners=[
                AddRaftVoterRequest.Listener(name=ep.listener, host=ep.host, port=ep.port)
                for ep in listeners.values()
            ],
        )

    def check(resp: Response) -> E.KafkaError | None:
        assert isinstance(resp, AddRaftVoterResponse)
        return _retriable_or_none(resp.error_code, resp.error_message)

    try:
        resp = await _controller_call(rq, make, deadline, check)
    except E.UnsupportedVersionError as exc:  # a broker without the API (before Kafka 3.9)
        raise _unsupported("AddRaftVoter", exc) from exc
    assert isinstance(resp, AddRaftVoterResponse)
    _final("AddRaftVoter", resp.error_code, resp.error_message)


async def remove_raft_voter(
    rq: AdminRequests,
    voter_id: int,
    voter_directory_id: uuid.UUID | str,
    *,
    cluster_id: str | None = None,
    timeout_ms: float | None = None,
) -> None:
    """Remove a controller from the voters of a dynamic quorum (KIP-853); the node
    stays an observer of the metadata log while it runs. ``VoterNotFoundError`` when no
    voter has this id and directory id."""
    _check_voter_id(voter_id)
    directory_id = parse_directory_id(voter_directory_id)
    deadline = rq.deadline(timeout_ms)

    def make(version: int) -> Request:
        return RemoveRaftVoterRequest(
            cluster_id=cluster_id, voter_id=voter_id, voter_directory_id=directory_id
        )

    def check(resp: Response) -> E.KafkaError | None:
        assert isinstance(resp, RemoveRaftVoterResponse)
        return _retriable_or_none(resp.error_code, resp.error_message)

    try:
        resp = await _controller_call(rq, make, deadline, check)
    except E.UnsupportedVersionError as exc:
        raise _unsupported("RemoveRaftVoter", exc) from exc
    assert isinstance(resp, RemoveRaftVoterResponse)
    _final("RemoveRaftVoter", resp.error_code, resp.error_message)


async def unregister_controller(
    rq: AdminRequests, controller_id: int, *, timeout_ms: float | None = None
) -> None:
    """Remove a controller's registration from the cluster metadata (Java's
    ``unregisterController``), once it was removed from the voters and shut down.
    ``ControllerIdNotRegisteredError`` for an id with no registration; Kafka refuses
    the active controller with ``InvalidRequestError``. As Java, only a
    ``REQUEST_TIMED_OUT`` answer is retried."""
    if isinstance(controller_id, bool) or not isinstance(controller_id, int) or controller_id < 0:
        raise E.ConfigError(f"controller_id must be a node id (an int >= 0), got {controller_id!r}")
    deadline = rq.deadline(timeout_ms)

    def make(version: int) -> Request:
        return UnregisterControllerRequest(controller_id=controller_id)

    def check(resp: Response) -> E.KafkaError | None:
        assert isinstance(resp, UnregisterControllerResponse)
        err = error_of(resp.error_code, resp.error_message)
        return err if isinstance(err, E.RequestTimedOutError) else None

    try:
        resp = await _controller_call(rq, make, deadline, check)
    except E.UnsupportedVersionError as exc:
        raise E.UnsupportedVersionError(f"{exc}; unregistering a controller needs Kafka 4.4+") from exc
    assert isinstance(resp, UnregisterControllerResponse)
    err = error_of(resp.error_code, resp.error_message)
    if err is not None:
        raise err
