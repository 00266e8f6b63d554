"""What the group mixins of ``Admin`` share (``ConsumerGroupsAdmin``, ``ShareGroupsAdmin``):
the part of ``Admin`` they use, and describing groups at their coordinators.

``ConsumerGroupDescribe`` and ``ShareGroupDescribe`` have the same frame: a batch of
group ids goes to the groups' coordinator, and the answer has one entry per group with
its own error code. ``describe_at_coordinators`` does the batching, the retries when a
coordinator moves (``Admin._by_coordinator``) and the per-group errors; the caller turns
one answered group into its description."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar

from aiokafka_lite.admin.types import GroupDescription, ListGroupsResult, Result, Results
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.message import Request, Response

Outcome = Any  # a result object or a KafkaError
K = TypeVar("K")
# What the broker sends for authorized_operations when they were not asked for.
_NO_OPERATIONS = -(2**31)


class GroupAdmin(Protocol):
    """What the group mixins use of ``Admin`` (its request plumbing and group methods)."""

    def _deadline(self, timeout_ms: float | None) -> float: ...

    async def _call(
        self, make: Callable[[int], Request], node: int | Literal["controller", "any"], deadline: float
    ) -> Response: ...

    async def _by_coordinator(
        self,
        group_ids: list[str],
        send: Callable[[int, list[str]], Awaitable[dict[str, Outcome]]],
        deadline: float,
    ) -> dict[str, Outcome]: ...

    def _results(
        self, items: Iterable[K], outcomes: dict[K, Outcome], on_error: Callable[[K, E.KafkaError], Any]
    ) -> Results[K, Any]: ...

    async def list_groups(
        self,
        *,
        states: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        timeout_ms: float | None = None,
    ) -> ListGroupsResult: ...

    async def describe_groups(
        self,
        group_ids: Iterable[str],
        *,
        include_authorized_operations: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[str, GroupDescription]: ...

    async def delete_groups(
        self, group_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> Results[str, Result]: ...


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


def group_error(code: int, message: str | None = None) -> E.KafkaError | None:
    return E.error_for(code, message or None) if code else None


def authorized_operations(value: int) -> int | None:
    """None when the broker did not report them (they were not asked for)."""
    return None if value == _NO_OPERATIONS else value


def assigned_partitions(assignment: Assignment) -> tuple[TopicPartition, ...]:
    return tuple(
        sorted(TopicPartition(t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)
    )


async def describe_at_coordinators(
    admin: GroupAdmin,
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
            resp = await admin._call(lambda version: request(batch), node, deadline)
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
            err = group_error(g.error_code, g.error_message)
            out[g.group_id] = err if err is not None else describe(g, node)
        return out

    return await admin._by_coordinator(group_ids, send, deadline)
