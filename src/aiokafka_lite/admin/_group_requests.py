"""What the consumer-group and share-group operations share (``consumer_groups.py``,
``share_groups.py``): checking group ids, and describing groups at their coordinators.

``ConsumerGroupDescribe`` and ``ShareGroupDescribe`` have the same frame: a batch of
group ids goes to the groups' coordinator, and the answer has one entry per group with
its own error code. ``describe_at_coordinators`` does the batching, the retries when a
coordinator moves (``AdminRequests.by_coordinator``) and the per-group errors; the caller turns
one answered group into its description."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from aiokafka_lite.admin.requests import AdminRequests, Outcome, error_of
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.message import Request

K = TypeVar("K")
# What the broker sends for authorized_operations when they were not asked for.
_NO_OPERATIONS = -(2**31)


class DescribedGroup(Protocol):
    """One group of a ``ConsumerGroupDescribe``/``ShareGroupDescribe`` answer."""

    @property
    def group_id(self) -> str: ...
    @property
    def error_code(self) -> int: ...
    @property
    def error_message(self) -> str | None: ...


G = TypeVar("G", bound=DescribedGroup)
G_co = TypeVar("G_co", bound=DescribedGroup, covariant=True)


class DescribeResponse(Protocol[G_co]):
    @property
    def groups(self) -> Sequence[G_co]: ...


class _TopicPartitions(Protocol):
    @property
    def topic_name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[int]: ...


class Assignment(Protocol):
    """A member's assignment in a describe answer (topics with their partition indexes)."""

    @property
    def topic_partitions(self) -> Sequence[_TopicPartitions]: ...


def group_ids_of(group_ids: Iterable[str], kind: str) -> list[str]:
    """The ids once each, in order; an empty one is refused (``kind``: "consumer", "share")."""
    items = list(dict.fromkeys(group_ids))
    for g in items:
        if not g:
            raise E.InvalidGroupIdError(f"a {kind} group id must not be empty")
    return items


def authorized_operations(value: int) -> int | None:
    """None when the broker did not report them (they were not asked for)."""
    return None if value == _NO_OPERATIONS else value


def assigned_partitions(assignment: Assignment) -> tuple[TopicPartition, ...]:
    return tuple(
        sorted(TopicPartition(t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)
    )


async def describe_at_coordinators(
    rq: AdminRequests,
    group_ids: list[str],
    deadline: float,
    request: Callable[[list[str]], Request],
    response_type: type[DescribeResponse[G]],
    describe: Callable[[G, int], Outcome],
    *,
    outcome_of_code: Mapping[int, Outcome] | None = None,
    unsupported: Outcome | None = None,
) -> dict[str, Outcome]:
    """Send ``request(batch)`` to each batch's coordinator and map the answer per group:
    ``describe(group, coordinator)`` for a group without error, the error otherwise.
    ``outcome_of_code`` gives error codes that stand for another outcome than a failure;
    ``unsupported``, when not None, is every group's outcome on a broker without the API
    (else ``UnsupportedVersionError`` is the groups' error)."""

    async def send(node: int, batch: list[str]) -> dict[str, Outcome]:
        try:
            resp = await rq.request(lambda version: request(batch), node, deadline)
        except E.UnsupportedVersionError:
            if unsupported is None:
                raise
            return dict.fromkeys(batch, unsupported)
        assert isinstance(resp, response_type)
        out: dict[str, Outcome] = {}
        for g in resp.groups:
            if outcome_of_code is not None and g.error_code in outcome_of_code:
                out[g.group_id] = outcome_of_code[g.error_code]
                continue
            err = error_of(g.error_code, g.error_message)
            out[g.group_id] = err if err is not None else describe(g, node)
        return out

    return await rq.by_coordinator(group_ids, send, deadline)
