"""Client quotas (``describe_client_quotas`` / ``alter_client_quotas``, KIP-546) against
the pass's broker: the embedded one, or with ``--kafka=apache`` the session's Apache
Kafka. Kafka applies an alteration in its controller and the broker's metadata image
catches up a moment later, so reads after a write wait for the expected answer (a
deadline, no sleeps). Each test uses entity names of its own: the Apache broker is shared.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from _support.settle import settled

from aiokafka_lite.admin import (
    Admin,
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
)
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.core.errors import InvalidRequestError, UnsupportedVersionError

Op = ClientQuotaAlteration.Op


@pytest.fixture
async def admin(kafka_cluster: EmbeddedCluster) -> AsyncIterator[Admin]:
    async with Admin(kafka_cluster.bootstrap) as a:
        yield a


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def test_set_describe_and_remove_a_user_quota(admin: Admin) -> None:
    user = _name("qu")
    entity = ClientQuotaEntity({"user": user})
    flt = ClientQuotaFilter.contains_only([ClientQuotaFilterComponent.of_entity("user", user)])
    res = await admin.alter_client_quotas(
        [ClientQuotaAlteration(entity, [Op("producer_byte_rate", 1024), Op("request_percentage", 12.5)])]
    )
    assert res.ok and list(res) == [entity]

    want = {entity: {"producer_byte_rate": 1024.0, "request_percentage": 12.5}}
    got = await settled(lambda: admin.describe_client_quotas(flt), lambda a: a == want)
    assert got == want

    (
        await admin.alter_client_quotas([ClientQuotaAlteration(entity, [Op("producer_byte_rate", None)])])
    ).raise_errors()
    want = {entity: {"request_percentage": 12.5}}
    assert await settled(lambda: admin.describe_client_quotas(flt), lambda a: a == want) == want

    # Removing the last key removes the entity from descriptions.
    (
        await admin.alter_client_quotas([ClientQuotaAlteration(entity, [Op("request_percentage", None)])])
    ).raise_errors()
    assert await settled(lambda: admin.describe_client_quotas(flt), lambda a: a == {}) == {}


async def test_filters_match_exact_default_and_any_names_strictly_or_not(admin: Admin) -> None:
    client = _name("qc")
    user = _name("qu")
    pair = ClientQuotaEntity({"user": user, "client-id": client})
    default_user_of_client = ClientQuotaEntity({"user": None, "client-id": client})
    only_client = ClientQuotaEntity({"client-id": client})
    (
        await admin.alter_client_quotas(
            [
                ClientQuotaAlteration(pair, [Op("consumer_byte_rate", 2048)]),
                ClientQuotaAlteration(default_user_of_client, [Op("consumer_byte_rate", 4096)]),
                ClientQuotaAlteration(only_client, [Op("controller_mutation_rate", 3.5)]),
            ]
        )
    ).raise_errors()
    by_client = ClientQuotaFilterComponent.of_entity("client-id", client)

    # Not strict: every entity that has this client id, whatever else it names.
    everything = await settled(
        lambda: admin.describe_client_quotas(ClientQuotaFilter.contains([by_client])), lambda a: len(a) == 3
    )
    assert everything == {
        pair: {"consumer_byte_rate": 2048.0},
        default_user_of_client: {"consumer_byte_rate": 4096.0},
        only_client: {"controller_mutation_rate": 3.5},
    }
    # Strict: entities made of exactly the filter's types.
    assert await admin.describe_client_quotas(ClientQuotaFilter.contains_only([by_client])) == {
        only_client: {"controller_mutation_rate": 3.5}
    }
    # The default user (with this client id) only.
    default_user = ClientQuotaFilterComponent.of_default_entity("user")
    assert await admin.describe_client_quotas(ClientQuotaFilter.contains_only([default_user, by_client])) == {
        default_user_of_client: {"consumer_byte_rate": 4096.0}
    }
    # An exact user name with this client id.
    exact_user = ClientQuotaFilterComponent.of_entity("user", user)
    assert await admin.describe_client_quotas(ClientQuotaFilter.contains([exact_user, by_client])) == {
        pair: {"consumer_byte_rate": 2048.0}
    }
    # Any user with this client id: named and default users both have a user part.
    any_user = ClientQuotaFilterComponent.of_entity_type("user")
    found = await admin.describe_client_quotas(ClientQuotaFilter.contains_only([any_user, by_client]))
    assert pair in found and only_client not in found

    await admin.alter_client_quotas(
        [
            ClientQuotaAlteration(pair, [Op("consumer_byte_rate", None)]),
            ClientQuotaAlteration(default_user_of_client, [Op("consumer_byte_rate", None)]),
            ClientQuotaAlteration(only_client, [Op("controller_mutation_rate", None)]),
        ]
    )


async def test_ip_quotas_take_only_the_connection_rate(admin: Admin) -> None:
    ip = ClientQuotaEntity({"ip": "10.11.12.13"})
    res = await admin.alter_client_quotas(
        [
            ClientQuotaAlteration(ip, [Op("connection_creation_rate", 7)]),
            ClientQuotaAlteration(ClientQuotaEntity({"ip": "10.11.12.14"}), [Op("producer_byte_rate", 1)]),
        ]
    )
    assert res[ip].error is None
    err = res[ClientQuotaEntity({"ip": "10.11.12.14"})].error
    assert isinstance(err, InvalidRequestError)
    flt = ClientQuotaFilter.contains_only([ClientQuotaFilterComponent.of_entity("ip", "10.11.12.13")])
    want = {ip: {"connection_creation_rate": 7.0}}
    assert await settled(lambda: admin.describe_client_quotas(flt), lambda a: a == want) == want
    (
        await admin.alter_client_quotas([ClientQuotaAlteration(ip, [Op("connection_creation_rate", None)])])
    ).raise_errors()


async def test_bad_alterations_fail_per_entity_and_validate_only_changes_nothing(admin: Admin) -> None:
    user = _name("qv")
    good = ClientQuotaEntity({"user": user})
    bad_key = ClientQuotaEntity({"user": _name("qk")})
    fractional = ClientQuotaEntity({"client-id": _name("qf")})
    mixed = ClientQuotaEntity({"user": _name("qm"), "ip": "10.0.0.1"})
    bad_ip = ClientQuotaEntity({"ip": "not an address"})
    res = await admin.alter_client_quotas(
        [
            ClientQuotaAlteration(good, [Op("producer_byte_rate", 100)]),
            ClientQuotaAlteration(bad_key, [Op("no_such_quota", 1)]),
            ClientQuotaAlteration(fractional, [Op("producer_byte_rate", 1.5)]),
            ClientQuotaAlteration(mixed, [Op("producer_byte_rate", 1)]),
            ClientQuotaAlteration(bad_ip, [Op("connection_creation_rate", 1)]),
        ],
        validate_only=True,
    )
    assert res[good].error is None
    for entity in (bad_key, fractional, mixed, bad_ip):
        assert isinstance(res[entity].error, InvalidRequestError), entity
    # validate_only: nothing was stored (a write would show here once applied; check the
    # describe answers and a later real write is seen, so the read is not merely stale).
    flt = ClientQuotaFilter.contains_only([ClientQuotaFilterComponent.of_entity("user", user)])
    assert await admin.describe_client_quotas(flt) == {}
    (
        await admin.alter_client_quotas([ClientQuotaAlteration(good, [Op("producer_byte_rate", 200)])])
    ).raise_errors()
    want = {good: {"producer_byte_rate": 200.0}}
    assert await settled(lambda: admin.describe_client_quotas(flt), lambda a: a == want) == want
    (
        await admin.alter_client_quotas([ClientQuotaAlteration(good, [Op("producer_byte_rate", None)])])
    ).raise_errors()


async def test_invalid_filters_are_refused(admin: Admin) -> None:
    twice = ClientQuotaFilter.contains(
        [ClientQuotaFilterComponent.of_entity("user", "a"), ClientQuotaFilterComponent.of_entity("user", "b")]
    )
    with pytest.raises(InvalidRequestError):
        await admin.describe_client_quotas(twice)
    ip_and_user = ClientQuotaFilter.contains(
        [ClientQuotaFilterComponent.of_entity_type("ip"), ClientQuotaFilterComponent.of_entity_type("user")]
    )
    with pytest.raises(InvalidRequestError):
        await admin.describe_client_quotas(ip_and_user)
    # Kafka answers an entity type it does not know with UNSUPPORTED_VERSION.
    unknown = ClientQuotaFilter.contains([ClientQuotaFilterComponent.of_entity_type("group")])
    with pytest.raises(UnsupportedVersionError, match="group"):
        await admin.describe_client_quotas(unknown)
