"""Consumer-group administration across both group protocols: ``describe_consumer_groups``
and ``list_consumer_groups`` (operations over ``AdminRequests``; ``Admin`` has them as methods).

As Kafka's Java admin, ``describe_consumer_groups`` asks the coordinator with
``ConsumerGroupDescribe`` (KIP-848) first: a group of the consumer protocol comes back
with its group epoch, target assignment epoch, assignor, and per member its epoch, its
current assignment and the target assignment the broker reconciles it to. A group the
broker reports as unknown to that API (``GROUP_ID_NOT_FOUND``: it is a classic group, or
it does not exist) and every group on a broker without the API are described with the
classic ``DescribeGroups`` instead, and reported with type ``"classic"``. A group that
does not exist comes back as Kafka 4 answers DescribeGroups: ``GroupIdNotFoundError``
(older brokers describe it as an empty group in state ``"Dead"``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from aiokafka_lite.admin import groups
from aiokafka_lite.admin._group_requests import (
    assigned_partitions,
    authorized_operations,
    describe_at_coordinators,
    group_ids_of,
)
from aiokafka_lite.admin.requests import AdminRequests, results
from aiokafka_lite.admin.types import GroupDescription, ListGroupsResult, Results
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.message import Request
from aiokafka_lite.wire.messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse

__all__ = [
    "ConsumerGroupDescription",
    "ConsumerGroupMember",
    "describe_consumer_groups",
    "list_consumer_groups",
]

_GROUP_ID_NOT_FOUND = E.GroupIdNotFoundError.code
# ConsumerGroupDescribe v1 member types.
_MEMBER_TYPES = {0: "classic", 1: "consumer"}


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    #: The partitions the member owns now.
    assignment: tuple[TopicPartition, ...] = ()
    #: Consumer protocol: the partitions the broker is reconciling the member to (None
    #: for a classic group, which has no such thing).
    target_assignment: tuple[TopicPartition, ...] | None = None
    #: Consumer protocol: the member's epoch (None for a classic group).
    member_epoch: int | None = None
    rack_id: str | None = None
    subscribed_topics: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    #: Which protocol the member itself speaks, in a consumer group: "consumer", or
    #: "classic" for a JoinGroup member of a mixed group ("" when the broker does not say).
    member_type: str = ""


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    group_id: str
    #: "consumer" (KIP-848) or "classic".
    type: str = ""
    #: Consumer protocol: "Empty", "Assigning", "Reconciling", "Stable", "Dead"; classic:
    #: "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead".
    state: str = ""
    #: The partition assignor: the broker's (consumer protocol) or the one the members
    #: chose (classic).
    assignor: str = ""
    members: list[ConsumerGroupMember] = field(default_factory=list)
    coordinator: int = -1
    #: Consumer protocol only (None for classic groups).
    group_epoch: int | None = None
    target_assignment_epoch: int | None = None
    authorized_operations: int | None = None
    error: E.KafkaError | None = None


class _Classic:
    """Outcome marker: describe this group with DescribeGroups."""


_CLASSIC = _Classic()


async def list_consumer_groups(
    rq: AdminRequests,
    *,
    states: Iterable[str] | None = None,
    types: Iterable[str] = ("classic", "consumer"),
    timeout_ms: float | None = None,
) -> ListGroupsResult:
    """Consumer groups of either protocol (ListGroups filtered by type); ``types``
    narrows it to ``["consumer"]`` or ``["classic"]``."""
    wanted = list(types)
    for t in wanted:
        if t not in ("classic", "consumer"):
            raise E.ConfigError(f"consumer group type {t!r}: expected 'classic' or 'consumer'")
    result = await groups.list_groups(rq, states=states, types=wanted, timeout_ms=timeout_ms)
    # Before Kafka 3.8's ListGroups v5 brokers do not report types: keep the classic
    # groups of the consumer protocol type (what such brokers can have).
    listed = [
        g
        for g in result.groups
        if g.type in wanted or (not g.type and g.protocol_type in ("consumer", "") and "classic" in wanted)
    ]
    return ListGroupsResult(listed, result.errors)


async def describe_consumer_groups(
    rq: AdminRequests,
    group_ids: Iterable[str],
    *,
    include_authorized_operations: bool = False,
    timeout_ms: float | None = None,
) -> Results[str, ConsumerGroupDescription]:
    """Describe consumer groups of either protocol (see the module docstring)."""
    items = group_ids_of(group_ids, "consumer")

    def request(batch: list[str]) -> Request:
        return ConsumerGroupDescribeRequest(
            group_ids=batch, include_authorized_operations=include_authorized_operations
        )

    outcomes = await describe_at_coordinators(
        rq,
        items,
        rq.deadline(timeout_ms),
        request,
        ConsumerGroupDescribeResponse,
        _description,
        # Not a group of the consumer protocol (classic, or none at all), or a broker
        # before KIP-848: DescribeGroups tells.
        outcome_of_code={_GROUP_ID_NOT_FOUND: _CLASSIC},
        unsupported=_CLASSIC,
    )
    classic = [g for g in items if outcomes[g] is _CLASSIC]
    if classic:
        described = await groups.describe_groups(
            rq, classic, include_authorized_operations=include_authorized_operations, timeout_ms=timeout_ms
        )
        for g in classic:
            d = described[g]
            outcomes[g] = d.error if d.error is not None else _from_classic(d)
    return results(items, outcomes, lambda g, e: ConsumerGroupDescription(group_id=g, error=e))


def _description(g: ConsumerGroupDescribeResponse.DescribedGroup, node: int) -> ConsumerGroupDescription:
    members = [
        ConsumerGroupMember(
            member_id=m.member_id,
            group_instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            assignment=assigned_partitions(m.assignment),
            target_assignment=assigned_partitions(m.target_assignment),
            member_epoch=m.member_epoch,
            rack_id=m.rack_id,
            subscribed_topics=tuple(m.subscribed_topic_names),
            subscribed_topic_regex=m.subscribed_topic_regex or None,
            member_type=_MEMBER_TYPES.get(m.member_type, ""),
        )
        for m in g.members
    ]
    return ConsumerGroupDescription(
        group_id=g.group_id,
        type="consumer",
        state=g.group_state,
        assignor=g.assignor_name,
        members=members,
        coordinator=node,
        group_epoch=g.group_epoch,
        target_assignment_epoch=g.assignment_epoch,
        authorized_operations=authorized_operations(g.authorized_operations),
    )


def _from_classic(d: GroupDescription) -> ConsumerGroupDescription | E.KafkaError:
    if d.protocol_type not in ("consumer", ""):
        return E.GroupIdNotFoundError(
            f"group {d.group_id!r} is not a consumer group (its protocol type is {d.protocol_type!r})"
        )
    return ConsumerGroupDescription(
        group_id=d.group_id,
        type="classic",
        state=d.state,
        assignor=d.protocol,
        members=[
            ConsumerGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                assignment=tuple(sorted(m.assignment)),
            )
            for m in d.members
        ],
        coordinator=d.coordinator,
        authorized_operations=d.authorized_operations,
    )
