"""Removing members from a consumer group by an operator (Java's
``removeMembersFromConsumerGroup``).

A batched LeaveGroup (v3+) sent to the group's coordinator on the members' behalf. Static
members are named by their ``group.instance.id``, which is what an operator knows of a
member that was shut down without leaving (its partitions wait for
``session.timeout.ms`` otherwise). With no members named, every member the group has now
is removed, as Java's ``removeAll()`` does: the group is described first (either protocol)
and each member is named by member id and instance id.

A group-level error (no such group, not the coordinator, authorization) raises; each
member's own error (``UnknownMemberIdError`` for an instance id the group does not have,
``FencedInstanceIdError``) is in its item of the result.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka_lite.admin.consumer_groups import describe_consumer_groups
from aiokafka_lite.admin.requests import AdminRequests, Outcome, error_of
from aiokafka_lite.admin.types import Result, Results
from aiokafka_lite.core import errors as E
from aiokafka_lite.wire.message import Request
from aiokafka_lite.wire.messages import LeaveGroupRequest, LeaveGroupResponse

__all__ = ["remove_members_from_consumer_group"]

#: The reason the coordinator logs when the caller gives none (Java's default wording is
#: its own; this one says the same thing).
DEFAULT_REASON = "member was removed by an admin"


class _Removed:
    """One LeaveGroup's answer: the per-member errors, keyed as the caller named them."""

    __slots__ = ("members",)

    def __init__(self, members: dict[str, E.KafkaError | None]) -> None:
        self.members = members


async def remove_members_from_consumer_group(
    rq: AdminRequests,
    group_id: str,
    group_instance_ids: Iterable[str] | None = None,
    *,
    reason: str | None = None,
    timeout_ms: float | None = None,
) -> Results[str, Result]:
    """Remove the static members ``group_instance_ids`` (or, when None, every member the
    group has now) from ``group_id``; results keyed by instance id (by member id for a
    dynamic member removed with the rest)."""
    if not group_id:
        raise E.InvalidGroupIdError("group_id must be a non-empty string")
    deadline = rq.deadline(timeout_ms)
    why = reason if reason else DEFAULT_REASON
    identities: list[LeaveGroupRequest.MemberIdentity]
    if group_instance_ids is None:
        described = await describe_consumer_groups(rq, [group_id], timeout_ms=rq.remaining_ms(deadline))
        desc = described[group_id]
        if desc.error is not None:
            raise desc.error
        identities = [
            LeaveGroupRequest.MemberIdentity(
                member_id=m.member_id, group_instance_id=m.group_instance_id, reason=why
            )
            for m in desc.members
        ]
    else:
        ids = list(dict.fromkeys(group_instance_ids))
        if not ids:
            raise E.InvalidRequestError("name at least one group_instance_id, or None to remove every member")
        if any(not i for i in ids):
            raise E.InvalidRequestError("a group_instance_id must be a non-empty string")
        identities = [
            LeaveGroupRequest.MemberIdentity(member_id="", group_instance_id=i, reason=why) for i in ids
        ]
    out: Results[str, Result] = Results()
    if not identities:
        return out

    def key(member_id: str, instance_id: str | None) -> str:
        return instance_id if instance_id else member_id

    async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
        def make(version: int) -> Request:
            if 0 <= version < 3:  # -1: the caller probing which API this is
                raise E.UnsupportedVersionError(
                    f"removing members needs LeaveGroup v3+ (Kafka 2.4+); the broker offers only v{version}"
                )
            return LeaveGroupRequest(group_id=group_id, members=identities)

        resp = await rq.request(make, node, deadline)
        assert isinstance(resp, LeaveGroupResponse)
        err = error_of(resp.error_code)
        if err is not None:
            return {group_id: err}
        return {
            group_id: _Removed(
                {key(m.member_id, m.group_instance_id): error_of(m.error_code) for m in resp.members}
            )
        }

    outcome = (await rq.by_coordinator([group_id], send, deadline))[group_id]
    if isinstance(outcome, E.KafkaError):
        raise outcome
    assert isinstance(outcome, _Removed)
    for ident in identities:
        k = key(ident.member_id, ident.group_instance_id)
        # A member the broker did not answer for was not removed: say so rather than
        # report success.
        err = outcome.members.get(k, E.UnknownMemberIdError(f"the coordinator did not answer for member {k}"))
        out[k] = Result(err)
    return out
