"""Server-side SASL mechanisms for the embedded broker, as sans-I/O state machines.

The broker feeds each SaslAuthenticate payload to ``step`` and sends back what it
returns. ``step`` raises ``AuthenticationError`` when the client must be rejected; the
message is written to be safe to return to the client (it never includes secrets and
does not reveal whether a username exists). Once ``complete`` is True,
``authenticated_user`` names the principal.

The SCRAM math, SASLprep and name escaping are shared with the client
(``aiokafka_lite.net.sasl``) so both sides agree by construction; the tests also check
them against the RFC 5802 / RFC 7677 vectors.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from aiokafka_lite.core.errors import AuthenticationError, ConfigError
from aiokafka_lite.net.sasl import (
    MIN_SCRAM_ITERATIONS,
    ScramHash,
    _b64decode,
    _hash_name,
    _valid_nonce,
    saslprep,
    scram_keys,
    scram_salted_password,
    scram_server_signature,
    unescape_saslname,
)

__all__ = [
    "ScramCredential",
    "ServerMechanism",
    "ServerOAuthBearer",
    "ServerPlain",
    "ServerScram",
    "ValidatedToken",
    "scram_credential",
]


class ServerMechanism(Protocol):
    """What the broker needs from a server mechanism."""

    @property
    def name(self) -> str: ...

    @property
    def complete(self) -> bool: ...

    @property
    def authenticated_user(self) -> str | None: ...

    def step(self, client_bytes: bytes) -> bytes: ...


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationError("Authentication failed: malformed SASL message") from None


class _Machine:
    """Shared bookkeeping: a failed or finished exchange accepts no more input."""

    name = ""

    def __init__(self) -> None:
        self.complete = False
        self.authenticated_user: str | None = None
        self._failed = False

    def _check_open(self) -> None:
        if self._failed:
            raise AuthenticationError("Authentication failed: exchange already failed")
        if self.complete:
            raise AuthenticationError("Authentication failed: exchange already complete")

    def _succeed(self, user: str) -> None:
        self.authenticated_user = user
        self.complete = True


# --------------------------------------------------------------------------------------
# PLAIN


class ServerPlain(_Machine):
    """PLAIN (RFC 4616) against a username -> password table.

    Both sides are SASLprep-ed before a constant-time comparison (RFC 4616 section 2).
    An authorization id is accepted only if it equals the username, as Kafka does.
    """

    name = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        super().__init__()
        self._users = users

    def step(self, client_bytes: bytes) -> bytes:
        self._check_open()
        self._failed = True  # until proven otherwise
        parts = _decode(client_bytes).split("\0")
        if len(parts) != 3:
            raise AuthenticationError("Authentication failed: malformed PLAIN message")
        authzid, username, password = parts
        if not username:
            raise AuthenticationError("Authentication failed: empty username")
        if authzid and authzid != username:
            raise AuthenticationError("Authentication failed: authorization id must match the username")
        expected = self._users.get(username)
        if expected is None or not _prepped_equal(password, expected):
            raise AuthenticationError("Authentication failed: invalid username or password")
        self._failed = False
        self._succeed(username)
        return b""

    def __repr__(self) -> str:
        return f"ServerPlain(users={len(self._users)})"


def _prepped_equal(given: str, expected: str) -> bool:
    try:
        a, b = saslprep(given).encode(), saslprep(expected).encode()
    except ValueError:
        return False
    return hmac.compare_digest(a, b)


# --------------------------------------------------------------------------------------
# SCRAM


@dataclass(frozen=True)
class ScramCredential:
    """What a SCRAM server stores instead of the password (RFC 5802 section 3).

    StoredKey verifies client proofs; ServerKey signs the final message. Neither lets
    the holder log in directly, but both are sensitive, so they are kept out of repr.
    """

    salt: bytes
    iterations: int
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)


def scram_credential(
    password: str,
    hash: ScramHash = "SHA-256",
    *,
    iterations: int = MIN_SCRAM_ITERATIONS,
    salt: bytes | None = None,
    saslprep: bool = True,
) -> ScramCredential:
    """Derive the stored credential for ``password`` (random 24-byte salt by default)."""
    if iterations < MIN_SCRAM_ITERATIONS:
        raise ConfigError(f"SCRAM iterations must be at least {MIN_SCRAM_ITERATIONS}")
    if salt is None:
        salt = secrets.token_bytes(24)
    elif not salt:
        raise ConfigError("SCRAM salt must not be empty")
    try:
        salted = scram_salted_password(password, salt, iterations, hash, prep=saslprep)
    except ValueError as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"SCRAM password rejected by SASLprep: {exc}") from None
    _, stored_key, server_key = scram_keys(salted, hash)
    return ScramCredential(salt, iterations, stored_key, server_key)


# Unknown users get a fake but stable salt so the exchange looks the same as for a real
# user up to the final proof check (RFC 5802 section 5.1 suggests this to avoid leaking
# which usernames exist).
_MOCK_KEY = secrets.token_bytes(32)


class ServerScram(_Machine):
    """SCRAM-SHA-256/512 server (RFC 5802, RFC 7677), no channel binding.

    ``credentials`` maps usernames to ``ScramCredential``. ``token_credentials`` maps
    delegation-token ids to ``(owner, credential)`` for clients sending Kafka's
    ``tokenauth=true`` extension; the authenticated user is then the token owner.
    ``server_nonce`` is injectable for tests.
    """

    def __init__(
        self,
        credentials: Mapping[str, ScramCredential],
        hash: ScramHash = "SHA-256",
        *,
        token_credentials: Mapping[str, tuple[str, ScramCredential]] | None = None,
        server_nonce: str | None = None,
    ) -> None:
        super().__init__()
        self.hash = hash
        self._alg = _hash_name(hash)
        self.name = f"SCRAM-{hash}"
        self._credentials = credentials
        self._token_credentials = token_credentials
        if server_nonce is None:
            server_nonce = secrets.token_urlsafe(24)
        elif not _valid_nonce(server_nonce):
            raise ConfigError("SCRAM nonce must be printable ASCII without ','")
        self._server_nonce = server_nonce
        self._state = "client-first"
        self._gs2_header = ""
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self._principal = ""
        self.token_authenticated = False

    def step(self, client_bytes: bytes) -> bytes:
        self._check_open()
        try:
            if self._state == "client-first":
                return self._server_first_message(_decode(client_bytes))
            return self._server_final_message(_decode(client_bytes))
        except AuthenticationError:
            self._failed = True
            self._credential = None
            raise

    def _server_first_message(self, message: str) -> bytes:
        # gs2-header: cbind-flag "," [authzid] ","
        parts = message.split(",", 2)
        if len(parts) != 3:
            raise AuthenticationError("Authentication failed: malformed client-first-message")
        cbind, authzid, bare = parts
        if cbind.startswith("p="):
            raise AuthenticationError("Authentication failed: channel binding is not supported")
        if cbind not in ("n", "y"):
            raise AuthenticationError("Authentication failed: malformed client-first-message")
        if authzid and not authzid.startswith("a="):
            raise AuthenticationError("Authentication failed: malformed client-first-message")
        attrs = bare.split(",")
        if attrs[0].startswith("m="):
            raise AuthenticationError("Authentication failed: unsupported mandatory extension")
        if len(attrs) < 2 or not attrs[0].startswith("n=") or not attrs[1].startswith("r="):
            raise AuthenticationError("Authentication failed: malformed client-first-message")
        try:
            username = unescape_saslname(attrs[0][2:])
            authz = unescape_saslname(authzid[2:]) if authzid else ""
        except ValueError:
            raise AuthenticationError("Authentication failed: malformed username") from None
        client_nonce = attrs[1][2:]
        if not username or not _valid_nonce(client_nonce):
            raise AuthenticationError("Authentication failed: malformed client-first-message")
        extensions = dict(_split_attr(a) for a in attrs[2:])
        token_auth = extensions.get("tokenauth", "false").lower() == "true"

        credential: ScramCredential | None
        if token_auth:
            entry = (self._token_credentials or {}).get(username)
            credential, principal = (entry[1], entry[0]) if entry else (None, "")
        else:
            credential, principal = self._credentials.get(username), username
        if authz and authz != principal:
            raise AuthenticationError("Authentication failed: authorization id must match the username")
        self._credential = credential
        self._principal = principal
        self.token_authenticated = token_auth

        if credential is None:
            salt = hmac.new(_MOCK_KEY, username.encode(), "sha256").digest()[:24]
            iterations = MIN_SCRAM_ITERATIONS
        else:
            salt, iterations = credential.salt, credential.iterations
        self._gs2_header = f"{cbind},{authzid},"
        self._client_first_bare = bare
        self._nonce = client_nonce + self._server_nonce
        self._server_first = f"r={self._nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        self._state = "client-final"
        return self._server_first.encode()

    def _server_final_message(self, message: str) -> bytes:
        without_proof, sep, proof_b64 = message.rpartition(",p=")
        if not sep:
            raise AuthenticationError("Authentication failed: client-final-message has no proof")
        attrs = without_proof.split(",")
        if len(attrs) < 2 or not attrs[0].startswith("c=") or not attrs[1].startswith("r="):
            raise AuthenticationError("Authentication failed: malformed client-final-message")
        try:
            cbind_data = _b64decode(attrs[0][2:])
            proof = _b64decode(proof_b64)
        except ValueError:
            raise AuthenticationError("Authentication failed: malformed client-final-message") from None
        if cbind_data != self._gs2_header.encode():
            raise AuthenticationError("Authentication failed: channel binding data mismatch")
        if attrs[1][2:] != self._nonce:
            raise AuthenticationError("Authentication failed: nonce mismatch")
        credential = self._credential
        self._credential = None
        if credential is None:
            raise AuthenticationError(f"Authentication failed: invalid credentials ({self.name})")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.new(credential.stored_key, auth_message, self._alg).digest()
        if len(proof) != len(signature):
            raise AuthenticationError(f"Authentication failed: invalid credentials ({self.name})")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._alg, client_key).digest(), credential.stored_key):
            raise AuthenticationError(f"Authentication failed: invalid credentials ({self.name})")
        server_signature = scram_server_signature(credential.server_key, auth_message, self.hash)
        self._succeed(self._principal)
        return b"v=" + base64.b64encode(server_signature)

    def __repr__(self) -> str:
        return f"ServerScram(hash={self.hash!r}, users={len(self._credentials)})"


def _split_attr(attr: str) -> tuple[str, str]:
    key, sep, value = attr.partition("=")
    if not sep or not key:
        raise AuthenticationError("Authentication failed: malformed SCRAM attribute")
    return key, value


# --------------------------------------------------------------------------------------
# OAUTHBEARER


@dataclass(frozen=True)
class ValidatedToken:
    """What a validator may return instead of a bare principal: the principal and the
    token's expiry (epoch seconds), which bounds the KIP-368 session lifetime."""

    principal: str
    expires_at: float | None = None


#: Validates a bearer token (and the client's extensions) and returns the principal name
#: (or a ``ValidatedToken``), or None if the token is not acceptable. It may instead raise
#: ``AuthenticationError`` whose message explains the rejection (it is sent to the client,
#: so keep it safe).
TokenValidator = Callable[[str, Mapping[str, str]], "str | ValidatedToken | None"]


class ServerOAuthBearer(_Machine):
    """OAUTHBEARER server (RFC 7628).

    A valid token completes the exchange with an empty response. An invalid one gets
    the RFC's JSON error challenge; the client must answer with a lone ``^A``, after
    which ``step`` raises ``AuthenticationError``.
    """

    name = "OAUTHBEARER"

    def __init__(self, validator: TokenValidator) -> None:
        super().__init__()
        self._validator = validator
        self._state = "initial"
        self._reason = ""
        self.extensions: dict[str, str] = {}
        #: The accepted token's expiry (epoch seconds) when the validator reported it.
        self.credential_expires_at: float | None = None

    def step(self, client_bytes: bytes) -> bytes:
        self._check_open()
        if self._state == "error-sent":
            self._failed = True
            if client_bytes != b"\x01":
                raise AuthenticationError("Authentication failed: expected the error acknowledgement")
            raise AuthenticationError(f"Authentication failed: {self._reason}")
        try:
            authzid, token, extensions = _parse_oauth_initial(_decode(client_bytes))
        except AuthenticationError:
            self._failed = True
            raise
        self.extensions = extensions
        try:
            result = self._validator(token, extensions)
            reason = "invalid token"
        except AuthenticationError as exc:
            result, reason = None, str(exc) or "invalid token"
        principal = result.principal if isinstance(result, ValidatedToken) else result
        if isinstance(result, ValidatedToken):
            self.credential_expires_at = result.expires_at
        if principal is not None and authzid and authzid != principal:
            principal, reason = None, "authorization id must match the token's principal"
        if principal is None:
            self._reason = reason
            self._state = "error-sent"
            return json.dumps({"status": "invalid_token"}).encode()
        self._succeed(principal)
        return b""

    def __repr__(self) -> str:
        return f"ServerOAuthBearer(complete={self.complete!r})"


def _parse_oauth_initial(message: str) -> tuple[str, str, dict[str, str]]:
    """Split ``gs2-header ^A kvpair^A ... ^A`` into (authzid, token, extensions)."""
    malformed = AuthenticationError("Authentication failed: malformed OAUTHBEARER message")
    header, sep, rest = message.partition("\x01")
    if not sep or not rest.endswith("\x01\x01"):
        raise malformed
    cbind, _, tail = header.partition(",")
    authz_field, comma, after = tail.partition(",")
    if cbind not in ("n", "y") or not comma or after:
        raise malformed
    authzid = ""
    if authz_field:
        if not authz_field.startswith("a="):
            raise malformed
        try:
            authzid = unescape_saslname(authz_field[2:])
        except ValueError:
            raise malformed from None
    token: str | None = None
    extensions: dict[str, str] = {}
    for pair in rest[:-2].split("\x01"):
        key, eq, value = pair.partition("=")
        if not eq or not key or key in extensions:
            raise malformed
        if key == "auth":
            if token is not None:
                raise malformed
            scheme, space, credentials = value.partition(" ")
            if scheme.lower() != "bearer" or not space or not credentials:
                raise malformed
            token = credentials.strip()
        else:
            extensions[key] = value
    if not token:
        raise malformed
    return authzid, token, extensions
