"""Client quota APIs of the embedded broker, as Kafka 4.4 serves them:
DescribeClientQuotas and AlterClientQuotas (KIP-546), over the cluster's ``QuotaStore``
(``broker/quotas.py``). Quotas are stored and described; they do not throttle.

Validation as Kafka's controller (ClientQuotaControlManager) and metadata image
(ClientQuotasImage), all ``INVALID_REQUEST`` with a message naming the cause:

* an entity names at least one of ``user``, ``client-id``, ``ip``, each once; ``ip``
  is not combined with the others and names a valid address (or the default);
* a key is one of Kafka's quota keys for the entity's types (``producer_byte_rate``,
  ``consumer_byte_rate``, ``request_percentage``, ``controller_mutation_rate`` for users
  and client ids; ``connection_creation_rate`` for IPs), and the integer ones
  (byte rates, connection rate) take whole numbers;
* a describe filter names known types (an unknown one is ``UNSUPPORTED_VERSION``, as
  Kafka answers it), each once, EXACT with a name, DEFAULT and ANY without
  one, and does not combine ``ip`` with the others. ``strict`` matches entities made of
  exactly the filter's types, otherwise entities having at least them; an empty
  non-strict filter matches every entity.

A failed entity of an alteration leaves the others to succeed (per-entity results);
``validate_only`` checks without storing.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.quotas import ENTITY_TYPES, QUOTA_KEYS, Entity, quota_store
from aiokafka_lite.broker.state import ClusterState
from aiokafka_lite.core import errors as E
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

__all__ = ["register"]

_EXACT, _DEFAULT, _ANY = 0, 1, 2
_INT_LIMIT = 2**63


class _Invalid(Exception):
    pass


def register(registry: HandlerRegistry, state: ClusterState) -> None:
    quota_store(state)
    for req_type, handler in (
        (DescribeClientQuotasRequest, describe_client_quotas),
        (AlterClientQuotasRequest, alter_client_quotas),
    ):
        registry.register(req_type.API_KEY, handler, req_type.MIN_VERSION, req_type.MAX_VERSION)


def _check_types(types: Sequence[str], what: str) -> None:
    for t in types:
        if t not in ENTITY_TYPES:
            raise _Invalid(f"Invalid entity type {t}")
    for t in set(types):
        if types.count(t) > 1:
            raise _Invalid(f"Entity type {t} cannot appear more than once in the {what}.")
    if "ip" in types and len(types) > 1:
        raise _Invalid(
            f"Invalid entity {what} combination, IP entity should not be combined with User or ClientId"
        )


def _entity(pairs: Sequence[tuple[str, str | None]]) -> Entity:
    if not pairs:
        raise _Invalid("Invalid empty client quota entity")
    _check_types([t for t, _ in pairs], "entity")
    for t, name in pairs:
        if t == "ip" and name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                raise _Invalid(f"{name} is not a valid IP or resolvable host.") from None
    return tuple(sorted(pairs, key=lambda p: p[0]))


async def alter_client_quotas(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, AlterClientQuotasRequest)
    store = quota_store(ctx.cluster)
    entries = []
    for entry in req.entries:
        pairs = [(e.entity_type, e.entity_name) for e in entry.entity]
        code, message = 0, ""
        try:
            entity = _entity(pairs)
            types = {t for t, _ in entity}
            sets: dict[str, float] = {}
            removes: set[str] = set()
            for op in entry.ops:
                spec = QUOTA_KEYS.get(op.key)
                if spec is None or not types <= spec[0]:
                    raise _Invalid(f"Invalid configuration key {op.key}")
                if op.key in sets or op.key in removes:
                    raise _Invalid(f"Duplicate quota key {op.key} not updating quota for entity")
                if op.remove:
                    removes.add(op.key)
                    continue
                if spec[1] and (op.value != int(op.value) or abs(op.value) >= _INT_LIMIT):
                    raise _Invalid(f"Configuration {op.key} must be a Long value")
                sets[op.key] = op.value
            if not req.validate_only:
                store.apply(entity, sets, removes)
        except _Invalid as exc:
            code, message = E.InvalidRequestError.code, str(exc)
        except (OverflowError, ValueError) as exc:  # an infinite or NaN value
            code, message = E.InvalidRequestError.code, f"Invalid quota value: {exc}"
        entries.append(
            AlterClientQuotasResponse.EntryData(
                error_code=code,
                error_message=message or None,
                entity=[AlterClientQuotasResponse.EntityData(entity_type=t, entity_name=n) for t, n in pairs],
            )
        )
    return AlterClientQuotasResponse(entries=entries)


async def describe_client_quotas(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, DescribeClientQuotasRequest)
    for c in req.components:
        if c.entity_type not in ENTITY_TYPES:
            # Kafka's ClientQuotasImage answers an unknown type so (not INVALID_REQUEST).
            return DescribeClientQuotasResponse(
                error_code=E.UnsupportedVersionError.code,
                error_message=f"Unsupported entity type {c.entity_type}",
                entries=None,
            )
    try:
        _check_types([c.entity_type for c in req.components], "filter component")
        for c in req.components:
            if c.match_type == _EXACT and c.match is None:
                raise _Invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            if c.match_type == _DEFAULT and c.match is not None:
                raise _Invalid("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            if c.match_type == _ANY and c.match is not None:
                raise _Invalid("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            if c.match_type not in (_EXACT, _DEFAULT, _ANY):
                raise _Invalid(f"Unknown match type {c.match_type}")
    except _Invalid as exc:
        return DescribeClientQuotasResponse(
            error_code=E.InvalidRequestError.code, error_message=str(exc), entries=None
        )
    wanted = {c.entity_type for c in req.components}
    out = []
    for entity, values in quota_store(ctx.cluster).quotas.items():
        names = dict(entity)
        if req.strict and set(names) != wanted:
            continue
        if not all(_matches(c, names) for c in req.components):
            continue
        out.append(
            DescribeClientQuotasResponse.EntryData(
                entity=[
                    DescribeClientQuotasResponse.EntityData(entity_type=t, entity_name=n) for t, n in entity
                ],
                values=[
                    DescribeClientQuotasResponse.ValueData(key=k, value=v) for k, v in sorted(values.items())
                ],
            )
        )
    return DescribeClientQuotasResponse(entries=out)


def _matches(c: DescribeClientQuotasRequest.ComponentData, names: dict[str, str | None]) -> bool:
    if c.entity_type not in names:
        return False
    name = names[c.entity_type]
    if c.match_type == _EXACT:
        return name == c.match
    if c.match_type == _DEFAULT:
        return name is None
    return True
