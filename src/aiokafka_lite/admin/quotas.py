"""Client quotas of the admin client, as Java's Admin (KIP-546):
``describe_client_quotas`` (DescribeClientQuotas) and ``alter_client_quotas``
(AlterClientQuotas).

A quota belongs to an entity: a user, a client id, a user and client id together, or
an IP address. Each part names an entity or, with ``None``, the *default* entity of its
type (``--entity-default`` of ``kafka-configs.sh``). Values are floats on the wire;
Kafka's keys are ``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``
and ``controller_mutation_rate`` for users and client ids, ``connection_creation_rate``
for IPs (the broker rejects others with ``InvalidRequestError``).

Describing takes a filter of components, each matching one entity type by exact name,
the default entity, or any entity of the type; ``strict`` asks for entities made of
exactly the filtered types. Alterations set (``ClientQuotaAlteration.Op(key, value)``)
or remove (``value=None``) keys, with one result per entity; ``validate_only`` checks
without applying. Describes go to the least-loaded broker, alterations to the controller
route (brokers forward them), as Java.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from aiokafka_lite.admin.requests import AdminRequests, error_of
from aiokafka_lite.admin.types import Result, Results
from aiokafka_lite.core import errors as E
from aiokafka_lite.wire.message import Request
from aiokafka_lite.wire.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

__all__ = [
    "CLIENT_ID",
    "IP",
    "USER",
    "ClientQuotaAlteration",
    "ClientQuotaEntity",
    "ClientQuotaFilter",
    "ClientQuotaFilterComponent",
    "ClientQuotaMatch",
    "alter_client_quotas",
    "describe_client_quotas",
]

#: Entity types (Java's ``ClientQuotaEntity.USER`` / ``CLIENT_ID`` / ``IP``).
USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"


class ClientQuotaEntity(Mapping[str, "str | None"]):
    """An entity a quota applies to: entity type -> name (``None``: the default entity
    of that type), e.g. ``ClientQuotaEntity({"user": "alice", "client-id": None})``.
    Immutable and hashable (a key of ``describe_client_quotas``' answer)."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Mapping[str, str | None]) -> None:
        if not entries:
            raise E.ConfigError("a client quota entity names at least one entity type")
        self._entries: tuple[tuple[str, str | None], ...] = tuple(sorted(entries.items()))

    def __getitem__(self, key: str) -> str | None:
        for k, v in self._entries:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __hash__(self) -> int:
        return hash(self._entries)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ClientQuotaEntity):
            return self._entries == other._entries
        return NotImplemented

    def __repr__(self) -> str:
        return f"ClientQuotaEntity({dict(self._entries)!r})"

    def __str__(self) -> str:
        return ", ".join(f"{k}={'<default>' if v is None else v}" for k, v in self._entries)


class ClientQuotaMatch(IntEnum):
    """How a filter component matches (the wire's ``match_type``)."""

    EXACT = 0
    DEFAULT = 1
    ANY = 2


@dataclass(frozen=True, slots=True)
class ClientQuotaFilterComponent:
    """One entity type of a filter (Java's ``ClientQuotaFilterComponent``): use
    ``of_entity(type, name)``, ``of_default_entity(type)`` or ``of_entity_type(type)``."""

    entity_type: str
    match: ClientQuotaMatch
    name: str | None = None

    @classmethod
    def of_entity(cls, entity_type: str, name: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, ClientQuotaMatch.EXACT, name)

    @classmethod
    def of_default_entity(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, ClientQuotaMatch.DEFAULT)

    @classmethod
    def of_entity_type(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, ClientQuotaMatch.ANY)


@dataclass(frozen=True, slots=True)
class ClientQuotaFilter:
    """Which entities to describe (Java's ``ClientQuotaFilter``): ``contains(components)``
    matches entities having at least those types, ``contains_only`` exactly those, and
    ``all()`` every entity."""

    components: tuple[ClientQuotaFilterComponent, ...] = ()
    strict: bool = False

    @classmethod
    def contains(cls, components: Iterable[ClientQuotaFilterComponent]) -> ClientQuotaFilter:
        return cls(tuple(components), False)

    @classmethod
    def contains_only(cls, components: Iterable[ClientQuotaFilterComponent]) -> ClientQuotaFilter:
        return cls(tuple(components), True)

    @classmethod
    def all(cls) -> ClientQuotaFilter:
        return cls((), False)


@dataclass(frozen=True, slots=True)
class ClientQuotaAlteration:
    """Set or remove quota keys of one entity (Java's ``ClientQuotaAlteration``)."""

    @dataclass(frozen=True, slots=True)
    class Op:
        """Set ``key`` to ``value``, or remove it with ``value=None``."""

        key: str
        value: float | None

    entity: ClientQuotaEntity
    ops: tuple[ClientQuotaAlteration.Op, ...]

    def __init__(self, entity: ClientQuotaEntity | Mapping[str, str | None], ops: Iterable[Op]) -> None:
        object.__setattr__(
            self, "entity", entity if isinstance(entity, ClientQuotaEntity) else ClientQuotaEntity(entity)
        )
        object.__setattr__(self, "ops", tuple(ops))


def _entity_of(parts: Iterable[tuple[str, str | None]]) -> ClientQuotaEntity:
    return ClientQuotaEntity(dict(parts))


async def describe_client_quotas(
    rq: AdminRequests, quota_filter: ClientQuotaFilter | None = None, *, timeout_ms: float | None = None
) -> dict[ClientQuotaEntity, dict[str, float]]:
    """The quotas of the entities ``quota_filter`` matches (default: all): entity -> key -> value."""
    flt = quota_filter or ClientQuotaFilter.all()
    deadline = rq.deadline(timeout_ms)

    def make(version: int) -> Request:
        return DescribeClientQuotasRequest(
            components=[
                DescribeClientQuotasRequest.ComponentData(
                    entity_type=c.entity_type, match_type=int(c.match), match=c.name
                )
                for c in flt.components
            ],
            strict=flt.strict,
        )

    resp = await rq.request(make, "any", deadline)
    assert isinstance(resp, DescribeClientQuotasResponse)
    err = error_of(resp.error_code, resp.error_message)
    if err is not None:
        raise err
    out: dict[ClientQuotaEntity, dict[str, float]] = {}
    for entry in resp.entries or ():
        entity = _entity_of((e.entity_type, e.entity_name) for e in entry.entity)
        out[entity] = {v.key: v.value for v in entry.values}
    return out


async def alter_client_quotas(
    rq: AdminRequests,
    alterations: Sequence[ClientQuotaAlteration],
    *,
    validate_only: bool = False,
    timeout_ms: float | None = None,
) -> Results[ClientQuotaEntity, Result]:
    """Apply ``alterations`` (or only validate them); one ``Result`` per entity."""
    deadline = rq.deadline(timeout_ms)
    entities = list(dict.fromkeys(a.entity for a in alterations))
    if not entities:
        return Results()

    def make(version: int) -> Request:
        return AlterClientQuotasRequest(
            entries=[
                AlterClientQuotasRequest.EntryData(
                    entity=[
                        AlterClientQuotasRequest.EntityData(entity_type=k, entity_name=v)
                        for k, v in a.entity.items()
                    ],
                    ops=[
                        AlterClientQuotasRequest.OpData(
                            key=op.key,
                            value=0.0 if op.value is None else float(op.value),
                            remove=op.value is None,
                        )
                        for op in a.ops
                    ],
                )
                for a in alterations
            ],
            validate_only=validate_only,
        )

    resp = await rq.request(make, "controller", deadline)
    assert isinstance(resp, AlterClientQuotasResponse)
    outcomes: dict[ClientQuotaEntity, E.KafkaError | None] = {}
    for entry in resp.entries:
        entity = _entity_of((e.entity_type, e.entity_name) for e in entry.entity)
        outcomes[entity] = error_of(entry.error_code, entry.error_message)
    out: Results[ClientQuotaEntity, Result] = Results()
    for entity in entities:
        if entity in outcomes:
            out[entity] = Result(outcomes[entity])
        else:
            out[entity] = Result(E.UnknownServerError(f"no result for {entity} in the response"))
    return out
