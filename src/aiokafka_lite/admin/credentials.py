"""SCRAM credentials and delegation tokens of the admin client, as Java's Admin:
``describe_user_scram_credentials`` / ``alter_user_scram_credentials`` (KIP-554,
DescribeUserScramCredentials / AlterUserScramCredentials) and
``create_delegation_token`` / ``renew_delegation_token`` / ``expire_delegation_token`` /
``describe_delegation_token`` (KIP-48).

SCRAM: the password never leaves the client. As Java's ``KafkaAdminClient``, an
upsertion is salted and hashed here (``SaltedPassword := Hi(password, salt, i)``, the
PBKDF2 of RFC 5802, on the password's UTF-8 bytes without SASLprep, as Java's
``ScramFormatter``) and only the salt, the iteration count and the salted password are
sent; with no salt given a random one is drawn. The broker derives the stored and
server keys. A description lists each user's mechanisms and iterations, never a secret.
Results are per user: when one alteration of a user fails, Kafka fails all of that
user's alterations of the request with the same error.

Routing, as Java: describes go to the least-loaded broker; alterations (which the broker
forwards to the KRaft controller) go to the controller route; delegation-token calls go
to the least-loaded broker. The broker answers, per item or for the whole request, with
Kafka's error codes, raised here as the typed errors of core/errors.py (e.g.
``ResourceNotFoundError`` for describing/deleting an unknown user,
``UnacceptableCredentialError`` for iterations outside 4096..16384,
``DelegationTokenRequestNotAllowedError`` for a token requested over a connection that is
not SASL-authenticated or is itself token-authenticated).
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from aiokafka_lite.admin.requests import AdminRequests, error_of
from aiokafka_lite.admin.types import Result, Results
from aiokafka_lite.core import errors as E
from aiokafka_lite.net.sasl import scram_salted_password
from aiokafka_lite.wire.message import Request
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

__all__ = [
    "DEFAULT_SCRAM_ITERATIONS",
    "DelegationToken",
    "ScramCredentialInfo",
    "ScramMechanism",
    "TokenInformation",
    "UserScramCredentialAlteration",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
    "alter_user_scram_credentials",
    "create_delegation_token",
    "describe_delegation_token",
    "describe_user_scram_credentials",
    "expire_delegation_token",
    "renew_delegation_token",
]

#: Iterations of ``kafka-configs.sh`` when none are given (Java's ScramMechanism default).
DEFAULT_SCRAM_ITERATIONS = 4096


class ScramMechanism(IntEnum):
    """Kafka's SCRAM mechanism codes (Java's ``org.apache.kafka.clients.admin.ScramMechanism``)."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """The SASL name: ``SCRAM-SHA-256`` / ``SCRAM-SHA-512``."""
        return self.name.replace("_", "-")

    @property
    def hash(self) -> str:
        return self.mechanism_name.removeprefix("SCRAM-")

    @classmethod
    def parse(cls, value: ScramMechanism | str | int) -> ScramMechanism:
        """A mechanism from the enum, its code or its SASL name (``"SCRAM-SHA-256"``)."""
        if isinstance(value, ScramMechanism):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                return cls.UNKNOWN
        if isinstance(value, str):
            key = value.strip().upper().replace("-", "_")
            if key in cls.__members__:
                return cls[key]
        raise E.ConfigError(f"unknown SCRAM mechanism {value!r}; expected SCRAM-SHA-256 or SCRAM-SHA-512")


@dataclass(frozen=True, slots=True)
class ScramCredentialInfo:
    """A mechanism and its iteration count (Java's ``ScramCredentialInfo``)."""

    mechanism: ScramMechanism
    iterations: int = DEFAULT_SCRAM_ITERATIONS


@dataclass(frozen=True, slots=True)
class UserScramCredentialsDescription:
    """A user's SCRAM credentials: which mechanisms and iterations (never secrets)."""

    user: str
    credential_infos: tuple[ScramCredentialInfo, ...] = ()
    error: E.KafkaError | None = None


@dataclass(frozen=True, slots=True)
class UserScramCredentialUpsertion:
    """Create or replace ``user``'s credential for ``info.mechanism``. The password is
    salted and hashed by the client; ``salt`` defaults to random bytes."""

    user: str
    info: ScramCredentialInfo
    password: str = field(repr=False)
    salt: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class UserScramCredentialDeletion:
    """Delete ``user``'s credential for ``mechanism``."""

    user: str
    mechanism: ScramMechanism


UserScramCredentialAlteration = UserScramCredentialUpsertion | UserScramCredentialDeletion


def _random_salt() -> bytes:
    # As Java's ScramFormatter.secureRandomBytes: printable (base-36) text of 130 random bits.
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return (out or "0").encode()


# ---------------------------------------------------------------------------- SCRAM


async def describe_user_scram_credentials(
    rq: AdminRequests, users: Iterable[str] | None = None, *, timeout_ms: float | None = None
) -> Results[str, UserScramCredentialsDescription]:
    """The SCRAM credentials of ``users`` (None or empty: every user that has one). An unknown
    user's result carries ``ResourceNotFoundError``; a request-level error is raised."""
    # As Java: no users, or an empty list, describes every user.
    names = list(dict.fromkeys(users)) if users is not None else None
    names = names or None
    deadline = rq.deadline(timeout_ms)

    def make(version: int) -> Request:
        return DescribeUserScramCredentialsRequest(
            users=None
            if names is None
            else [DescribeUserScramCredentialsRequest.UserName(name=n) for n in names]
        )

    resp = await rq.request(make, "any", deadline)
    assert isinstance(resp, DescribeUserScramCredentialsResponse)
    err = error_of(resp.error_code, resp.error_message)
    if err is not None:
        raise err
    out: Results[str, UserScramCredentialsDescription] = Results()
    for r in resp.results:
        infos = tuple(
            ScramCredentialInfo(ScramMechanism.parse(c.mechanism), c.iterations) for c in r.credential_infos
        )
        out[r.user] = UserScramCredentialsDescription(r.user, infos, error_of(r.error_code, r.error_message))
    for n in names or ():
        if n not in out:
            out[n] = UserScramCredentialsDescription(
                n, error=E.UnknownServerError(f"no result for user {n!r}")
            )
    return out


async def alter_user_scram_credentials(
    rq: AdminRequests,
    alterations: Sequence[UserScramCredentialAlteration],
    *,
    timeout_ms: float | None = None,
) -> Results[str, Result]:
    """Upsert and delete SCRAM credentials; one ``Result`` per user named."""
    deadline = rq.deadline(timeout_ms)
    users = list(dict.fromkeys(a.user for a in alterations))
    local: dict[str, E.KafkaError] = {}
    upserts: list[AlterUserScramCredentialsRequest.ScramCredentialUpsertion] = []
    deletes: list[AlterUserScramCredentialsRequest.ScramCredentialDeletion] = []
    for a in alterations:
        if isinstance(a, UserScramCredentialUpsertion):
            mech = ScramMechanism.parse(a.info.mechanism)
            if mech is ScramMechanism.UNKNOWN:
                local[a.user] = E.UnsupportedSaslMechanismError("Unknown SCRAM mechanism")
                continue
            salt = _random_salt() if a.salt is None else a.salt
            try:
                salted = scram_salted_password(a.password, salt, a.info.iterations, mech.hash, prep=False)
            except ValueError as exc:  # iterations < 1 or an empty salt: let the broker judge the rest
                local[a.user] = E.UnacceptableCredentialError(f"cannot salt the password: {exc}")
                continue
            upserts.append(
                AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                    name=a.user,
                    mechanism=mech,
                    iterations=a.info.iterations,
                    salt=salt,
                    salted_password=salted,
                )
            )
        elif isinstance(a, UserScramCredentialDeletion):
            deletes.append(
                AlterUserScramCredentialsRequest.ScramCredentialDeletion(
                    name=a.user, mechanism=ScramMechanism.parse(a.mechanism)
                )
            )
        else:
            raise E.ConfigError(
                f"{a!r} is neither a UserScramCredentialUpsertion nor a UserScramCredentialDeletion"
            )
    # As Java: a user with a client-side failure is not sent at all.
    upserts = [u for u in upserts if u.name not in local]
    deletes = [d for d in deletes if d.name not in local]
    out: Results[str, Result] = Results()
    outcomes: dict[str, E.KafkaError | None] = dict(local)
    if upserts or deletes:

        def make(version: int) -> Request:
            return AlterUserScramCredentialsRequest(deletions=deletes, upsertions=upserts)

        resp = await rq.request(make, "controller", deadline)
        assert isinstance(resp, AlterUserScramCredentialsResponse)
        for r in resp.results:
            outcomes[r.user] = error_of(r.error_code, r.error_message)
    for u in users:
        if u in outcomes:
            out[u] = Result(outcomes[u])
        else:
            out[u] = Result(E.UnknownServerError(f"no result for user {u!r} in the response"))
    return out


# ---------------------------------------------------------------------------- delegation tokens


@dataclass(frozen=True, slots=True)
class TokenInformation:
    """A delegation token's metadata (Java's ``TokenInformation``). Principals are
    ``"User:name"`` strings; times are epoch milliseconds."""

    token_id: str
    owner: str
    token_requester: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    expiry_timestamp: int
    max_timestamp: int

    def owner_or_renewer(self, principal: str) -> bool:
        return principal == self.owner or principal == self.token_requester or principal in self.renewers


@dataclass(frozen=True, slots=True)
class DelegationToken:
    """A delegation token (Java's ``DelegationToken``): its information and its HMAC,
    the password of a token login (``hmac_as_base64``, SCRAM with ``tokenauth=true``)."""

    token_info: TokenInformation
    hmac: bytes = field(repr=False)

    @property
    def hmac_as_base64(self) -> str:
        return base64.b64encode(self.hmac).decode()

    @property
    def token_id(self) -> str:
        return self.token_info.token_id


def _principal(value: str) -> tuple[str, str]:
    kind, sep, name = value.partition(":")
    if not sep or not kind or not name:
        raise E.ConfigError(f"principal {value!r} must look like 'User:name'")
    return kind, name


def _as_principal(value: str) -> str:
    """``"alice"`` -> ``"User:alice"``; a typed principal is kept."""
    return value if ":" in value else f"User:{value}"


def _check(code: int, what: str) -> None:
    err = error_of(code)
    if err is not None:
        err.add_note(what)
        raise err


async def create_delegation_token(
    rq: AdminRequests,
    renewers: Iterable[str] = (),
    max_lifetime_ms: int = -1,
    owner: str | None = None,
    *,
    timeout_ms: float | None = None,
) -> DelegationToken:
    """Create a token for ``owner`` (default: the authenticated caller)."""
    deadline = rq.deadline(timeout_ms)
    renewer_pairs = [_principal(_as_principal(r)) for r in renewers]
    owner_pair = _principal(_as_principal(owner)) if owner is not None else None

    def make(version: int) -> Request:
        if owner_pair is not None and 0 <= version < 3:
            raise E.UnsupportedVersionError("a token owner needs CreateDelegationToken v3 (Kafka 3.3+)")
        return CreateDelegationTokenRequest(
            owner_principal_type=owner_pair[0] if owner_pair else None,
            owner_principal_name=owner_pair[1] if owner_pair else None,
            renewers=[
                CreateDelegationTokenRequest.CreatableRenewers(principal_type=k, principal_name=n)
                for k, n in renewer_pairs
            ],
            max_lifetime_ms=max_lifetime_ms,
        )

    resp = await rq.request(make, "any", deadline)
    assert isinstance(resp, CreateDelegationTokenResponse)
    _check(resp.error_code, "create_delegation_token")
    owner_p = f"{resp.principal_type}:{resp.principal_name}"
    requester = (
        f"{resp.token_requester_principal_type}:{resp.token_requester_principal_name}"
        if resp.token_requester_principal_name
        else owner_p
    )
    info = TokenInformation(
        token_id=resp.token_id,
        owner=owner_p,
        token_requester=requester,
        renewers=tuple(f"{k}:{n}" for k, n in renewer_pairs),
        issue_timestamp=resp.issue_timestamp_ms,
        expiry_timestamp=resp.expiry_timestamp_ms,
        max_timestamp=resp.max_timestamp_ms,
    )
    return DelegationToken(info, bytes(resp.hmac))


async def renew_delegation_token(
    rq: AdminRequests, hmac: bytes, renew_period_ms: int = -1, *, timeout_ms: float | None = None
) -> int:
    """Extend a token's expiry by ``renew_period_ms`` (-1: the broker's
    ``delegation.token.expiry.time.ms``), capped at its max lifetime; returns the new
    expiry timestamp (ms)."""
    deadline = rq.deadline(timeout_ms)

    def make(version: int) -> Request:
        return RenewDelegationTokenRequest(hmac=bytes(hmac), renew_period_ms=renew_period_ms)

    resp = await rq.request(make, "any", deadline)
    assert isinstance(resp, RenewDelegationTokenResponse)
    _check(resp.error_code, "renew_delegation_token")
    return resp.expiry_timestamp_ms


async def expire_delegation_token(
    rq: AdminRequests, hmac: bytes, expiry_time_period_ms: int = -1, *, timeout_ms: float | None = None
) -> int:
    """Move a token's expiry to now + ``expiry_time_period_ms``; a negative period
    expires it at once. Returns the new expiry timestamp (ms)."""
    deadline = rq.deadline(timeout_ms)

    def make(version: int) -> Request:
        return ExpireDelegationTokenRequest(hmac=bytes(hmac), expiry_time_period_ms=expiry_time_period_ms)

    resp = await rq.request(make, "any", deadline)
    assert isinstance(resp, ExpireDelegationTokenResponse)
    _check(resp.error_code, "expire_delegation_token")
    return resp.expiry_timestamp_ms


async def describe_delegation_token(
    rq: AdminRequests, owners: Iterable[str] | None = None, *, timeout_ms: float | None = None
) -> list[DelegationToken]:
    """The tokens the caller may see (owner, renewer, or DESCRIBE on the token), of
    ``owners`` (``"User:name"`` or a bare name) or of everyone (None)."""
    deadline = rq.deadline(timeout_ms)
    owner_pairs = None if owners is None else [_principal(_as_principal(o)) for o in owners]

    def make(version: int) -> Request:
        return DescribeDelegationTokenRequest(
            owners=None
            if owner_pairs is None
            else [
                DescribeDelegationTokenRequest.DescribeDelegationTokenOwner(
                    principal_type=k, principal_name=n
                )
                for k, n in owner_pairs
            ]
        )

    resp = await rq.request(make, "any", deadline)
    assert isinstance(resp, DescribeDelegationTokenResponse)
    _check(resp.error_code, "describe_delegation_token")
    out: list[DelegationToken] = []
    for t in resp.tokens:
        owner_p = f"{t.principal_type}:{t.principal_name}"
        info = TokenInformation(
            token_id=t.token_id,
            owner=owner_p,
            token_requester=(
                f"{t.token_requester_principal_type}:{t.token_requester_principal_name}"
                if t.token_requester_principal_name
                else owner_p
            ),
            renewers=tuple(f"{r.principal_type}:{r.principal_name}" for r in t.renewers),
            issue_timestamp=t.issue_timestamp,
            expiry_timestamp=t.expiry_timestamp,
            max_timestamp=t.max_timestamp,
        )
        out.append(DelegationToken(info, bytes(t.hmac)))
    return out
