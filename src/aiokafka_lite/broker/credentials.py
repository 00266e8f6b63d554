"""The embedded broker's credential store: SCRAM credentials per user and mechanism,
and delegation tokens (KIP-48), shared by every broker of a cluster.

One store per cluster (``credential_store(state)``, kept in ``ClusterState.extensions``)
feeds both the SASL server (``broker/sasl.py``'s ``ServerScram`` reads the live
per-mechanism maps, so a user upserted by AlterUserScramCredentials logs in at once and
a deleted one cannot) and the admin handlers (``broker/api/credentials.py``).
``EmbeddedCluster(sasl_users=...)`` seeds it with SCRAM-SHA-256 and SCRAM-SHA-512
credentials of those users (4096 iterations).

Delegation tokens follow Kafka: a token's HMAC is HMAC-SHA512 of its id keyed by the
cluster's secret (``delegation.token.secret.key``); a token login is SCRAM with the token
id as user name and the base64 HMAC as password (credentials of 4096 iterations per
mechanism, derived when the token is created); an expired token cannot log in. Kafka
disables tokens without a secret; the embedded cluster draws a random secret when it has
SASL users (it has no broker properties to set one), so tokens work wherever SASL does.
Expired tokens are kept (described, refused for renewal and for logins) as Kafka keeps
them until its periodic check (``delegation.token.expiry.check.interval.ms``, 1 hour)
removes them; expiring with a negative period removes a token at once, as Kafka.
"""

from __future__ import annotations

import base64
import hashlib
import hmac as _hmac
import secrets
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from aiokafka_lite.broker.sasl import ScramCredential, scram_credential
from aiokafka_lite.broker.state import ClusterState
from aiokafka_lite.net.sasl import MIN_SCRAM_ITERATIONS, ScramHash, scram_keys

__all__ = [
    "MAX_SCRAM_ITERATIONS",
    "SCRAM_MECHANISMS",
    "CredentialStore",
    "TokenInfo",
    "credential_store",
]

#: Kafka's SCRAM mechanisms by wire code (ScramMechanism: 1 = SHA-256, 2 = SHA-512).
SCRAM_MECHANISMS: Final[dict[int, ScramHash]] = {1: "SHA-256", 2: "SHA-512"}
#: Kafka's upper bound of SCRAM iterations (ScramMechanism.maxIterations).
MAX_SCRAM_ITERATIONS: Final = 16384
_EXTENSION_KEY: Final = "credentials"


@dataclass(slots=True)
class TokenInfo:
    """A stored delegation token. Principals are ``"User:name"``; times epoch ms."""

    token_id: str
    owner: str
    requester: str
    renewers: list[str]
    issue_ms: int
    expiry_ms: int
    max_ms: int
    hmac: bytes = field(repr=False)
    scram: dict[ScramHash, ScramCredential] = field(default_factory=dict, repr=False)

    def may_modify(self, principal: str) -> bool:
        """Owner, requester or renewer: who may renew or expire it (Kafka's check)."""
        return principal in (self.owner, self.requester) or principal in self.renewers


class _TokenLogins(Mapping[str, tuple[str, ScramCredential]]):
    """token id -> (owner name, credential) of the live tokens, for ``ServerScram``."""

    def __init__(self, store: CredentialStore, hash: ScramHash) -> None:
        self._store = store
        self._hash = hash

    def __getitem__(self, token_id: str) -> tuple[str, ScramCredential]:
        info = self._store.tokens.get(token_id)
        if info is None or info.expiry_ms < self._store.now_ms():
            raise KeyError(token_id)
        return info.owner.partition(":")[2], info.scram[self._hash]

    def __iter__(self) -> Iterator[str]:
        now = self._store.now_ms()
        return iter([t for t, i in self._store.tokens.items() if i.expiry_ms >= now])

    def __len__(self) -> int:
        return sum(1 for _ in self)


class CredentialStore:
    """SCRAM credentials (mechanism -> user -> credential) and delegation tokens."""

    def __init__(self) -> None:
        self.scram: dict[ScramHash, dict[str, ScramCredential]] = {h: {} for h in SCRAM_MECHANISMS.values()}
        self.tokens: dict[str, TokenInfo] = {}
        #: ``delegation.token.secret.key``; None: tokens disabled (DELEGATION_TOKEN_AUTH_DISABLED).
        self.token_secret: bytes | None = None
        #: Whether the cluster's listeners authenticate with SASL: Kafka issues tokens only to
        #: SASL-authenticated callers (not to a TLS certificate's principal).
        self.sasl_enabled = False
        #: ``delegation.token.max.lifetime.ms`` (7 days) and ``delegation.token.expiry.time.ms`` (1 day).
        self.token_max_lifetime_ms = 7 * 24 * 3600 * 1000
        self.token_renew_ms = 24 * 3600 * 1000

    @staticmethod
    def now_ms() -> int:
        return int(time.time() * 1000)

    # -- SCRAM ---------------------------------------------------------------------
    def credentials(self, hash: ScramHash) -> dict[str, ScramCredential]:
        """The live user -> credential map of a mechanism (what ``ServerScram`` reads)."""
        return self.scram[hash]

    def add_password(self, user: str, password: str, *, iterations: int = MIN_SCRAM_ITERATIONS) -> None:
        """Credentials of ``user`` for every mechanism (``EmbeddedCluster(sasl_users=...)``)."""
        for h, creds in self.scram.items():
            creds[user] = scram_credential(password, h, iterations=iterations)

    def upsert_salted(self, user: str, hash: ScramHash, salt: bytes, iterations: int, salted: bytes) -> None:
        """Store what AlterUserScramCredentials sends: the client salted and hashed."""
        _, stored_key, server_key = scram_keys(salted, hash)
        self.scram[hash][user] = ScramCredential(salt, iterations, stored_key, server_key)

    def users(self) -> list[str]:
        return sorted({u for creds in self.scram.values() for u in creds})

    # -- delegation tokens -----------------------------------------------------------
    def token_logins(self, hash: ScramHash) -> Mapping[str, tuple[str, ScramCredential]]:
        return _TokenLogins(self, hash)

    def create_token(
        self, owner: str, requester: str, renewers: list[str], max_lifetime_ms: int
    ) -> TokenInfo:
        assert self.token_secret is not None
        now = self.now_ms()
        lifetime = (
            self.token_max_lifetime_ms
            if max_lifetime_ms <= 0
            else min(max_lifetime_ms, self.token_max_lifetime_ms)
        )
        max_ms = now + lifetime
        token_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        mac = _hmac.new(self.token_secret, token_id.encode(), hashlib.sha512).digest()
        password = base64.b64encode(mac).decode()
        info = TokenInfo(
            token_id,
            owner,
            requester,
            renewers,
            now,
            min(max_ms, now + self.token_renew_ms),
            max_ms,
            mac,
            {h: scram_credential(password, h, saslprep=False) for h in SCRAM_MECHANISMS.values()},
        )
        self.tokens[token_id] = info
        return info

    def token_by_hmac(self, mac: bytes) -> TokenInfo | None:
        for info in self.tokens.values():
            if _hmac.compare_digest(info.hmac, mac):
                return info
        return None

    def enable_tokens(self, secret: bytes | None = None) -> None:
        self.token_secret = secret if secret is not None else secrets.token_bytes(32)


def credential_store(state: ClusterState) -> CredentialStore:
    """The cluster's credential store (created on first use)."""
    store = state.extensions.get(_EXTENSION_KEY)
    if store is None:
        store = state.extensions[_EXTENSION_KEY] = CredentialStore()
    assert isinstance(store, CredentialStore)
    return store
