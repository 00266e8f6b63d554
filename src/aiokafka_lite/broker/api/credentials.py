"""SCRAM credential and delegation-token APIs of the embedded broker, as Kafka 4.4
serves them: DescribeUserScramCredentials, AlterUserScramCredentials (KIP-554) and
CreateDelegationToken / RenewDelegationToken / ExpireDelegationToken /
DescribeDelegationToken (KIP-48), over the cluster's ``CredentialStore``
(``broker/credentials.py``), which the SASL server reads too.

Validation and error codes as Kafka's (KafkaApis and the controller's
ScramControlManager / DelegationTokenControlManager):

* SCRAM alterations are judged per user, deletions first, and a request may alter a user
  once (a second alteration of the same user, even of another mechanism, is
  ``DUPLICATE_RESOURCE`` unless the first already failed): an unknown mechanism is
  ``UNSUPPORTED_SASL_MECHANISM``, an empty name or iterations outside 4096..16384
  ``UNACCEPTABLE_CREDENTIAL``, deleting a credential that does not exist
  ``RESOURCE_NOT_FOUND``. Describing an unknown user is ``RESOURCE_NOT_FOUND``, naming
  one twice ``DUPLICATE_RESOURCE``; no (or an empty) user list describes every user.
* Token requests need a SASL-authenticated connection that was not itself authenticated
  with a token (else ``DELEGATION_TOKEN_REQUEST_NOT_ALLOWED``); without a token secret
  they answer ``DELEGATION_TOKEN_AUTH_DISABLED``; owners and renewers must be ``User``
  principals (``INVALID_PRINCIPAL_TYPE``); only the owner, the requester or a renewer may
  renew or expire a token (``DELEGATION_TOKEN_OWNER_MISMATCH``); an unknown HMAC is
  ``DELEGATION_TOKEN_NOT_FOUND``, an expired token ``DELEGATION_TOKEN_EXPIRED``.
  Describe shows the tokens whose owner, requester or renewer is the caller (Kafka also
  shows those it may DESCRIBE by ACL; the embedded broker has no per-token ACLs here).
"""

from __future__ import annotations

from typing import Final

from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.credentials import (
    MAX_SCRAM_ITERATIONS,
    SCRAM_MECHANISMS,
    TokenInfo,
    credential_store,
)
from aiokafka_lite.broker.state import ClusterState
from aiokafka_lite.core import errors as E
from aiokafka_lite.net.sasl import MIN_SCRAM_ITERATIONS
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
    DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse,
    RenewDelegationTokenRequest,
    RenewDelegationTokenResponse,
)

__all__ = ["register"]

_USER: Final = "User"
_NOT_FOUND_DESCRIBE: Final = "Attempt to describe a user credential that does not exist"
_NOT_FOUND_DELETE: Final = "Attempt to delete a user credential that does not exist"


def register(registry: HandlerRegistry, state: ClusterState) -> None:
    credential_store(state)
    for req_type, handler in (
        (DescribeUserScramCredentialsRequest, describe_user_scram_credentials),
        (AlterUserScramCredentialsRequest, alter_user_scram_credentials),
        (CreateDelegationTokenRequest, create_delegation_token),
        (RenewDelegationTokenRequest, renew_delegation_token),
        (ExpireDelegationTokenRequest, expire_delegation_token),
        (DescribeDelegationTokenRequest, describe_delegation_token),
    ):
        registry.register(req_type.API_KEY, handler, req_type.MIN_VERSION, req_type.MAX_VERSION)


# ---------------------------------------------------------------------------- SCRAM


async def describe_user_scram_credentials(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, DescribeUserScramCredentialsRequest)
    store = credential_store(ctx.cluster)
    Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
    Info = DescribeUserScramCredentialsResponse.CredentialInfo
    code_of = {h: c for c, h in SCRAM_MECHANISMS.items()}

    def infos(user: str) -> list[DescribeUserScramCredentialsResponse.CredentialInfo]:
        return [
            Info(mechanism=code_of[h], iterations=creds[user].iterations)
            for h, creds in store.scram.items()
            if user in creds
        ]

    results = []
    if not req.users:
        results = [Result(user=u, credential_infos=infos(u)) for u in store.users()]
    else:
        names = [u.name for u in req.users]
        for name in dict.fromkeys(names):
            if names.count(name) > 1:
                results.append(
                    Result(
                        user=name,
                        error_code=E.DuplicateResourceError.code,
                        error_message="Cannot describe SCRAM credentials for the same user twice in a single request",
                    )
                )
                continue
            found = infos(name)
            if found:
                results.append(Result(user=name, credential_infos=found))
            else:
                results.append(
                    Result(
                        user=name, error_code=E.ResourceNotFoundError.code, error_message=_NOT_FOUND_DESCRIBE
                    )
                )
    return DescribeUserScramCredentialsResponse(results=results)


async def alter_user_scram_credentials(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, AlterUserScramCredentialsRequest)
    store = credential_store(ctx.cluster)
    # As Kafka's controller (ScramControlManager): one alteration per user and request;
    # deletions are judged first, then upsertions; a user's first error is its answer.
    errors: dict[str, tuple[int, str]] = {}
    deletions: dict[str, AlterUserScramCredentialsRequest.ScramCredentialDeletion] = {}
    upsertions: dict[str, AlterUserScramCredentialsRequest.ScramCredentialUpsertion] = {}
    order: list[str] = []
    duplicate = (
        E.DuplicateResourceError.code,
        "A user credential cannot be altered twice in the same request",
    )
    for d in req.deletions:
        order.append(d.name)
        if d.name in errors:
            continue
        if deletions.pop(d.name, None) is not None:
            errors[d.name] = duplicate
            continue
        hash_ = SCRAM_MECHANISMS.get(d.mechanism)
        if not d.name:
            errors[d.name] = (E.UnacceptableCredentialError.code, "Username must not be empty")
        elif hash_ is None:
            errors[d.name] = (E.UnsupportedSaslMechanismError.code, "Unknown SCRAM mechanism")
        elif d.name not in store.scram[hash_]:
            errors[d.name] = (E.ResourceNotFoundError.code, _NOT_FOUND_DELETE)
        else:
            deletions[d.name] = d
    for u in req.upsertions:
        order.append(u.name)
        if u.name in errors:
            continue
        if deletions.pop(u.name, None) is not None or upsertions.pop(u.name, None) is not None:
            errors[u.name] = duplicate
            continue
        if not u.name:
            errors[u.name] = (E.UnacceptableCredentialError.code, "Username must not be empty")
        elif u.mechanism not in SCRAM_MECHANISMS:
            errors[u.name] = (E.UnsupportedSaslMechanismError.code, "Unknown SCRAM mechanism")
        elif u.iterations < MIN_SCRAM_ITERATIONS:
            errors[u.name] = (E.UnacceptableCredentialError.code, "Too few iterations")
        elif u.iterations > MAX_SCRAM_ITERATIONS:
            errors[u.name] = (E.UnacceptableCredentialError.code, "Too many iterations")
        else:
            upsertions[u.name] = u
    for d in deletions.values():
        store.scram[SCRAM_MECHANISMS[d.mechanism]].pop(d.name, None)
    for u in upsertions.values():
        store.upsert_salted(
            u.name, SCRAM_MECHANISMS[u.mechanism], bytes(u.salt), u.iterations, bytes(u.salted_password)
        )
    Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
    results = []
    for user in dict.fromkeys(order):
        code, message = errors.get(user, (0, ""))
        results.append(Result(user=user, error_code=code, error_message=message or None))
    return AlterUserScramCredentialsResponse(results=results)


# ---------------------------------------------------------------------------- delegation tokens


def _token_request_error(ctx: RequestContext) -> int:
    """Kafka's ``allowTokenRequests`` and ``tokenAuthEnabled`` checks (0: allowed)."""
    store = credential_store(ctx.cluster)
    if not store.sasl_enabled or ctx.principal is None or ctx.token_authenticated:
        return E.DelegationTokenRequestNotAllowedError.code
    if store.token_secret is None:
        return E.DelegationTokenAuthDisabledError.code
    return 0


def _caller(ctx: RequestContext) -> str:
    return f"{_USER}:{ctx.principal}"


def _split(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


async def create_delegation_token(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, CreateDelegationTokenRequest)
    caller = _caller(ctx)

    def refuse(code: int) -> CreateDelegationTokenResponse:
        kind, name = _split(caller) if ctx.principal is not None else ("", "")
        return CreateDelegationTokenResponse(
            error_code=code,
            principal_type=kind,
            principal_name=name,
            token_requester_principal_type=kind,
            token_requester_principal_name=name,
        )

    if not credential_store(ctx.cluster).sasl_enabled or ctx.principal is None or ctx.token_authenticated:
        return refuse(E.DelegationTokenRequestNotAllowedError.code)
    owner = caller
    if req.owner_principal_name:
        if req.owner_principal_type != _USER:
            return refuse(E.InvalidPrincipalTypeError.code)
        owner = f"{_USER}:{req.owner_principal_name}"
    if any(r.principal_type != _USER for r in req.renewers):
        return refuse(E.InvalidPrincipalTypeError.code)
    code = _token_request_error(ctx)
    if code:
        return refuse(code)
    store = credential_store(ctx.cluster)
    info = store.create_token(
        owner, caller, [f"{r.principal_type}:{r.principal_name}" for r in req.renewers], req.max_lifetime_ms
    )
    okind, oname = _split(info.owner)
    rkind, rname = _split(info.requester)
    return CreateDelegationTokenResponse(
        principal_type=okind,
        principal_name=oname,
        token_requester_principal_type=rkind,
        token_requester_principal_name=rname,
        issue_timestamp_ms=info.issue_ms,
        expiry_timestamp_ms=info.expiry_ms,
        max_timestamp_ms=info.max_ms,
        token_id=info.token_id,
        hmac=info.hmac,
    )


def _modifiable(ctx: RequestContext, mac: bytes) -> tuple[int, TokenInfo | None]:
    code = _token_request_error(ctx)
    if code:
        return code, None
    store = credential_store(ctx.cluster)
    info = store.token_by_hmac(bytes(mac))
    if info is None:
        return E.DelegationTokenNotFoundError.code, None
    if not info.may_modify(_caller(ctx)):
        return E.DelegationTokenOwnerMismatchError.code, None
    now = store.now_ms()
    if info.max_ms < now or info.expiry_ms < now:
        return E.DelegationTokenExpiredError.code, None
    return 0, info


async def renew_delegation_token(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, RenewDelegationTokenRequest)
    code, info = _modifiable(ctx, req.hmac)
    if info is None:
        return RenewDelegationTokenResponse(error_code=code)
    store = credential_store(ctx.cluster)
    period = store.token_renew_ms if req.renew_period_ms < 0 else req.renew_period_ms
    info.expiry_ms = min(info.max_ms, store.now_ms() + period)
    return RenewDelegationTokenResponse(expiry_timestamp_ms=info.expiry_ms)


async def expire_delegation_token(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, ExpireDelegationTokenRequest)
    code, info = _modifiable(ctx, req.hmac)
    if info is None:
        return ExpireDelegationTokenResponse(error_code=code)
    store = credential_store(ctx.cluster)
    now = store.now_ms()
    if req.expiry_time_period_ms < 0:
        del store.tokens[info.token_id]
        return ExpireDelegationTokenResponse(expiry_timestamp_ms=now)
    info.expiry_ms = min(info.max_ms, now + req.expiry_time_period_ms)
    return ExpireDelegationTokenResponse(expiry_timestamp_ms=info.expiry_ms)


async def describe_delegation_token(ctx: RequestContext, req: Request) -> Response:
    assert isinstance(req, DescribeDelegationTokenRequest)
    code = _token_request_error(ctx)
    if code:
        return DescribeDelegationTokenResponse(error_code=code)
    if req.owners is not None and not req.owners:
        return DescribeDelegationTokenResponse()
    owners = None if req.owners is None else {f"{o.principal_type}:{o.principal_name}" for o in req.owners}
    caller = _caller(ctx)
    Token = DescribeDelegationTokenResponse.DescribedDelegationToken
    Renewer = DescribeDelegationTokenResponse.DescribedDelegationTokenRenewer
    tokens = []
    for info in credential_store(ctx.cluster).tokens.values():
        if owners is not None and info.owner not in owners and info.requester not in owners:
            continue
        if not info.may_modify(caller):
            continue
        okind, oname = _split(info.owner)
        rkind, rname = _split(info.requester)
        tokens.append(
            Token(
                principal_type=okind,
                principal_name=oname,
                token_requester_principal_type=rkind,
                token_requester_principal_name=rname,
                issue_timestamp=info.issue_ms,
                expiry_timestamp=info.expiry_ms,
                max_timestamp=info.max_ms,
                token_id=info.token_id,
                hmac=info.hmac,
                renewers=[Renewer(principal_type=k, principal_name=n) for k, n in map(_split, info.renewers)],
            )
        )
    return DescribeDelegationTokenResponse(tokens=tokens)
