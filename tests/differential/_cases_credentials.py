"""Differential cases: SCRAM credentials, client quotas and delegation tokens.

DescribeUserScramCredentials / AlterUserScramCredentials (KIP-554): per-user error codes
for unknown and duplicate users, iterations out of range, unknown mechanisms, a user
altered twice in one request, deleting a credential that does not exist.
DescribeClientQuotas / AlterClientQuotas (KIP-546): validation of entities, keys,
values and filters, per entity. Delegation tokens over a listener without SASL: Kafka
refuses every token request (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED).

Error codes are compared, and the entities and values a describe returns; messages are
not (Kafka's wording changes between releases).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from _diffkit import Observation, Target, case

from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse,
    RenewDelegationTokenRequest,
    RenewDelegationTokenResponse,
)

T = TypeVar("T")
Upsert = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Delete = AlterUserScramCredentialsRequest.ScramCredentialDeletion
_SALTED = bytes(32)  # the broker stores what it is sent; the codes do not depend on it


async def _alter_scram(
    c: RawClient, deletions: list[Delete], upsertions: list[Upsert], names: dict[str, str]
) -> Observation:
    resp = await c.request(AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions), 0)
    assert isinstance(resp, AlterUserScramCredentialsResponse)
    return {names.get(r.user, r.user): r.error_code for r in resp.results}


def _upsert(name: str, mechanism: int = 1, iterations: int = 4096) -> Upsert:
    return Upsert(
        name=name, mechanism=mechanism, iterations=iterations, salt=b"salt", salted_password=_SALTED
    )


@case("scram")
async def case_scram_alterations_per_user(t: Target) -> Observation:
    names = {t.unique(k): k for k in ("ok", "few", "many", "mech", "missing", "twice", "dup_delete")}
    u = {v: k for k, v in names.items()}
    c = await t.client()
    return await _alter_scram(
        c,
        [Delete(name=u["missing"], mechanism=2), Delete(name=u["dup_delete"], mechanism=1)],
        [
            _upsert(u["ok"]),
            _upsert(u["few"], iterations=4095),
            _upsert(u["many"], iterations=16385),
            _upsert(u["mech"], mechanism=0),
            _upsert(u["twice"], 1),
            _upsert(u["twice"], 2),
            _upsert(u["dup_delete"], 1),
        ],
        names,
    )


@case("scram")
async def case_scram_describe_unknown_and_duplicate_users(t: Target) -> Observation:
    known, unknown, dup = t.unique("known"), t.unique("unknown"), t.unique("dup")
    names = {known: "known", unknown: "unknown", dup: "dup"}
    c = await t.client()
    await _alter_scram(c, [], [_upsert(known, 2, 8192)], names)
    Name = DescribeUserScramCredentialsRequest.UserName

    async def describe() -> DescribeUserScramCredentialsResponse:
        resp = await c.request(
            DescribeUserScramCredentialsRequest(users=[Name(name=n) for n in (known, unknown, dup, dup)]), 0
        )
        assert isinstance(resp, DescribeUserScramCredentialsResponse)
        return resp

    # Kafka's broker image follows its controller: wait until the upsert shows.
    resp = await _until(describe, lambda r: any(x.user == known and not x.error_code for x in r.results))
    return {
        "error": resp.error_code,
        "users": {
            names[r.user]: (r.error_code, [(i.mechanism, i.iterations) for i in r.credential_infos])
            for r in resp.results
        },
    }


async def _until(read: Callable[[], Awaitable[T]], ok: Callable[[T], bool], within_s: float = 15.0) -> T:
    """Kafka applies these writes through its controller: read until the answer shows it."""
    deadline = time.monotonic() + within_s
    while True:
        answer = await read()
        if ok(answer) or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.1)


# ---------------------------------------------------------------------------- quotas

Entity = AlterClientQuotasRequest.EntityData
Op = AlterClientQuotasRequest.OpData


def _entry(
    entity: list[tuple[str, str | None]], ops: list[tuple[str, float | None]]
) -> AlterClientQuotasRequest.EntryData:
    return AlterClientQuotasRequest.EntryData(
        entity=[Entity(entity_type=k, entity_name=v) for k, v in entity],
        ops=[Op(key=k, value=v or 0.0, remove=v is None) for k, v in ops],
    )


@case("quotas")
async def case_quota_alterations_are_validated_per_entity(t: Target) -> Observation:
    user = t.unique("quser")
    entries = {
        "ok": _entry([("user", user)], [("producer_byte_rate", 1024.0), ("request_percentage", 12.5)]),
        "unknown_key": _entry([("user", t.unique("k"))], [("no_such_quota", 1.0)]),
        "fractional_long": _entry([("client-id", t.unique("f"))], [("consumer_byte_rate", 1.5)]),
        "ip_key_on_user": _entry([("user", t.unique("i"))], [("connection_creation_rate", 1.0)]),
        "user_key_on_ip": _entry([("ip", "10.9.8.7")], [("producer_byte_rate", 1.0)]),
        "bad_ip": _entry([("ip", "not-an-ip")], [("connection_creation_rate", 1.0)]),
        "ip_with_user": _entry([("ip", "10.9.8.6"), ("user", t.unique("m"))], [("producer_byte_rate", 1.0)]),
        "fractional_connection_rate": _entry([("ip", None)], [("connection_creation_rate", 2.5)]),
        "unknown_type": _entry([("weird", t.unique("w"))], [("producer_byte_rate", 1.0)]),
    }
    c = await t.client()
    resp = await c.request(AlterClientQuotasRequest(entries=list(entries.values()), validate_only=True), 1)
    assert isinstance(resp, AlterClientQuotasResponse)
    # Kafka answers in an order of its own: match the answers to the entries by entity.
    label = {_key(e.entity): name for name, e in entries.items()}
    return {label[_key(e.entity)]: e.error_code for e in resp.entries}


def _key(entity: list[Any]) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(((e.entity_type, e.entity_name) for e in entity), key=lambda p: p[0]))


@case("quotas")
async def case_quota_filters(t: Target) -> Observation:
    client = t.unique("qclient")
    c = await t.client()
    resp = await c.request(
        AlterClientQuotasRequest(
            entries=[
                _entry([("client-id", client)], [("controller_mutation_rate", 2.5)]),
                _entry([("user", None), ("client-id", client)], [("consumer_byte_rate", 4096.0)]),
            ]
        ),
        1,
    )
    assert isinstance(resp, AlterClientQuotasResponse) and not any(e.error_code for e in resp.entries)
    Component = DescribeClientQuotasRequest.ComponentData

    async def describe(
        components: list[tuple[str, int, str | None]], strict: bool
    ) -> DescribeClientQuotasResponse:
        r = await c.request(
            DescribeClientQuotasRequest(
                components=[Component(entity_type=k, match_type=m, match=v) for k, m, v in components],
                strict=strict,
            ),
            1,
        )
        assert isinstance(r, DescribeClientQuotasResponse)
        return r

    def seen(r: DescribeClientQuotasResponse) -> object:
        if r.error_code:
            return r.error_code
        return sorted(
            (
                sorted(
                    (e.entity_type, e.entity_name == client if e.entity_name else None) for e in entry.entity
                ),
                sorted((v.key, v.value) for v in entry.values),
            )
            for entry in r.entries or ()
        )

    loose = [("client-id", 0, client)]
    await _until(lambda: describe(loose, False), lambda r: len(r.entries or ()) == 2)
    out: Observation = {
        "loose": seen(await describe(loose, False)),
        "strict": seen(await describe(loose, True)),
        "default_user": seen(await describe([("user", 1, None), ("client-id", 0, client)], True)),
        "any_user": seen(await describe([("user", 2, None), ("client-id", 0, client)], False)),
        "unknown_type": seen(await describe([("group", 2, None)], False)),
        "type_twice": seen(await describe([("user", 2, None), ("user", 1, None)], False)),
        "exact_without_name": seen(await describe([("user", 0, None)], False)),
        "ip_with_user": seen(await describe([("ip", 2, None), ("user", 2, None)], False)),
    }
    await c.request(
        AlterClientQuotasRequest(
            entries=[
                _entry([("client-id", client)], [("controller_mutation_rate", None)]),
                _entry([("user", None), ("client-id", client)], [("consumer_byte_rate", None)]),
            ]
        ),
        1,
    )
    return out


# ---------------------------------------------------------------------------- delegation tokens


@case("delegation_tokens")
async def case_token_requests_without_sasl(t: Target) -> Observation:
    c = await t.client()
    create = await c.request(CreateDelegationTokenRequest(renewers=[], max_lifetime_ms=-1), 3)
    renew = await c.request(RenewDelegationTokenRequest(hmac=b"x" * 64, renew_period_ms=-1), 2)
    expire = await c.request(ExpireDelegationTokenRequest(hmac=b"x" * 64, expiry_time_period_ms=-1), 2)
    describe = await c.request(DescribeDelegationTokenRequest(owners=None), 3)
    assert isinstance(create, CreateDelegationTokenResponse)
    assert isinstance(renew, RenewDelegationTokenResponse)
    assert isinstance(expire, ExpireDelegationTokenResponse)
    assert isinstance(describe, DescribeDelegationTokenResponse)
    return {
        "create": create.error_code,
        "renew": renew.error_code,
        "expire": expire.error_code,
        "describe": (describe.error_code, len(describe.tokens)),
    }
