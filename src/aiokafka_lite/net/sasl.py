"""Client-side SASL mechanisms as sans-I/O state machines.

The connection layer drives a mechanism like this (KIP-152 SaslAuthenticate flow)::

    mech = ScramMechanism("alice", "secret", hash="SHA-512")
    send(SaslHandshake(mechanism=mech.name))
    reply = send(SaslAuthenticate(mech.initial_response()))
    while (out := mech.step(reply.auth_bytes)) is not None:
        reply = send(SaslAuthenticate(out))
    assert mech.complete

Nothing here touches sockets, so every mechanism is unit-testable against the RFC test
vectors and against the server-side state machines in ``aiokafka_lite.broker.sasl``.

Implemented: PLAIN (RFC 4616), SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677;
SHA-1 is accepted only to check the RFC 5802 math), OAUTHBEARER (RFC 7628).
Secrets are wrapped so they never show up in ``repr``/``str``; error messages never
include them either.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
import stringprep
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol

from aiokafka_lite.core.errors import AuthenticationError, ConfigError, IllegalStateError

__all__ = [
    "MIN_SCRAM_ITERATIONS",
    "SCRAM_HASHES",
    "OAuthBearerMechanism",
    "PlainMechanism",
    "SaslMechanism",
    "ScramHash",
    "ScramMechanism",
    "create_mechanism",
    "escape_saslname",
    "saslprep",
    "scram_client_proof",
    "scram_keys",
    "scram_salted_password",
    "scram_server_signature",
    "unescape_saslname",
]

ScramHash = Literal["SHA-1", "SHA-256", "SHA-512"]

#: hashlib names of the SCRAM hashes. SHA-1 is not a Kafka mechanism; it exists so the
#: RFC 5802 test vector can exercise the shared math.
SCRAM_HASHES: Mapping[str, str] = {"SHA-1": "sha1", "SHA-256": "sha256", "SHA-512": "sha512"}

#: Kafka refuses SCRAM credentials with fewer iterations than this (both SHA-256 and SHA-512).
MIN_SCRAM_ITERATIONS = 4096

#: Guard against a hostile server making us spin in PBKDF2 for minutes.
DEFAULT_MAX_SCRAM_ITERATIONS = 1_000_000


class SaslMechanism(Protocol):
    """What the connection layer needs from a client mechanism."""

    @property
    def name(self) -> str: ...

    @property
    def complete(self) -> bool: ...

    def initial_response(self) -> bytes: ...

    def step(self, challenge: bytes) -> bytes | None: ...


class _Secret:
    """Holds a secret string; its repr is redacted so it cannot leak via logs or tracebacks."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'<redacted>'"

    __str__ = __repr__


# --------------------------------------------------------------------------------------
# SASLprep (RFC 4013) and SCRAM names (RFC 5802 section 5.1).

_PROHIBITED: tuple[Callable[[str], bool], ...] = (
    stringprep.in_table_c12,  # non-ASCII space
    stringprep.in_table_c21,  # ASCII control
    stringprep.in_table_c22,  # non-ASCII control
    stringprep.in_table_c3,  # private use
    stringprep.in_table_c4,  # non-character code points
    stringprep.in_table_c5,  # surrogates
    stringprep.in_table_c6,  # inappropriate for plain text
    stringprep.in_table_c7,  # inappropriate for canonical representation
    stringprep.in_table_c8,  # change display properties / deprecated
    stringprep.in_table_c9,  # tagging characters
)


def saslprep(text: str, *, allow_unassigned: bool = True) -> str:
    """Prepare a username or password with the SASLprep profile of stringprep (RFC 4013).

    ``allow_unassigned=True`` is the "query" variant RFC 5802 asks for; use False for
    strings being stored. Raises ``ValueError`` without echoing the input, since the
    input is usually a password.
    """
    mapped = []
    for ch in text:
        if stringprep.in_table_c12(ch):
            mapped.append(" ")  # non-ASCII spaces map to SPACE
        elif not stringprep.in_table_b1(ch):  # B.1: "commonly mapped to nothing"
            mapped.append(ch)
    # stringprep is defined against Unicode 3.2, hence the pinned normalization tables.
    prepared = unicodedata.ucd_3_2_0.normalize("NFKC", "".join(mapped))
    for ch in prepared:
        if any(table(ch) for table in _PROHIBITED):
            raise ValueError("string contains a character prohibited by SASLprep")
        if not allow_unassigned and stringprep.in_table_a1(ch):
            raise ValueError("string contains an unassigned code point")
    # Bidirectional rule (RFC 3454 section 6).
    if any(stringprep.in_table_d1(ch) for ch in prepared):
        if any(stringprep.in_table_d2(ch) for ch in prepared):
            raise ValueError("string mixes left-to-right and right-to-left characters")
        if not (stringprep.in_table_d1(prepared[0]) and stringprep.in_table_d1(prepared[-1])):
            raise ValueError("right-to-left string must start and end with a right-to-left character")
    return prepared


_saslprep = saslprep  # reachable inside functions whose ``saslprep`` parameter shadows it


def escape_saslname(name: str) -> str:
    """Escape ``=`` and ``,`` as SCRAM requires (``=3D``, ``=2C``)."""
    return name.replace("=", "=3D").replace(",", "=2C")


_ESCAPE_RE = re.compile(r"=(2C|3D)?")


def unescape_saslname(name: str) -> str:
    """Reverse ``escape_saslname``; any other ``=`` sequence is malformed (ValueError)."""

    def sub(match: re.Match[str]) -> str:
        code = match.group(1)
        if code is None:
            raise ValueError("invalid '=' escape in SCRAM username")
        return "," if code == "2C" else "="

    return _ESCAPE_RE.sub(sub, name)


# --------------------------------------------------------------------------------------
# SCRAM math (RFC 5802 section 3). Shared with the broker-side state machine.


def _hash_name(hash: str) -> str:
    try:
        return SCRAM_HASHES[hash]
    except KeyError:
        raise ConfigError(f"unsupported SCRAM hash {hash!r}; expected SHA-256 or SHA-512") from None


def _hmac(alg: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, alg).digest()


def scram_salted_password(
    password: str, salt: bytes, iterations: int, hash: str, *, prep: bool = True
) -> bytes:
    """``SaltedPassword := Hi(Normalize(password), salt, i)``; Hi is PBKDF2 with HMAC-hash."""
    if prep:
        password = saslprep(password)
    return hashlib.pbkdf2_hmac(_hash_name(hash), password.encode(), salt, iterations)


def scram_keys(salted_password: bytes, hash: str) -> tuple[bytes, bytes, bytes]:
    """Derive ``(ClientKey, StoredKey, ServerKey)`` from the salted password."""
    alg = _hash_name(hash)
    client_key = _hmac(alg, salted_password, b"Client Key")
    stored_key = hashlib.new(alg, client_key).digest()
    server_key = _hmac(alg, salted_password, b"Server Key")
    return client_key, stored_key, server_key


def scram_client_proof(client_key: bytes, stored_key: bytes, auth_message: bytes, hash: str) -> bytes:
    """``ClientProof := ClientKey XOR HMAC(StoredKey, AuthMessage)``."""
    signature = _hmac(_hash_name(hash), stored_key, auth_message)
    return bytes(a ^ b for a, b in zip(client_key, signature, strict=True))


def scram_server_signature(server_key: bytes, auth_message: bytes, hash: str) -> bytes:
    """``ServerSignature := HMAC(ServerKey, AuthMessage)``."""
    return _hmac(_hash_name(hash), server_key, auth_message)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("invalid base64") from None


_NONCE_RE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")  # printable ASCII except ','


def _valid_nonce(nonce: str) -> bool:
    return _NONCE_RE.fullmatch(nonce) is not None


# --------------------------------------------------------------------------------------
# PLAIN


class PlainMechanism:
    """SASL PLAIN (RFC 4616): one message, ``authzid NUL authcid NUL passwd``.

    Only use it over TLS: the password travels as-is. The server does any SASLprep
    comparison (RFC 4616 section 2), so the strings are sent unmodified.
    """

    name = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        if not username:
            raise ConfigError("PLAIN username must not be empty")
        if "\0" in username or "\0" in password:
            raise ConfigError("PLAIN username and password must not contain NUL")
        self.username = username
        self._password = _Secret(password)
        self._sent = False
        self.complete = False

    def initial_response(self) -> bytes:
        if self._sent:
            raise IllegalStateError("initial_response() already called")
        self._sent = True
        return b"\0" + self.username.encode() + b"\0" + self._password.reveal().encode()

    def step(self, challenge: bytes) -> bytes | None:
        if not self._sent or self.complete:
            raise IllegalStateError("PLAIN exchange is not in progress")
        if challenge:
            raise AuthenticationError("PLAIN: unexpected challenge from server")
        self.complete = True
        return None

    def __repr__(self) -> str:
        return f"PlainMechanism(username={self.username!r})"


# --------------------------------------------------------------------------------------
# SCRAM


class ScramMechanism:
    """SCRAM-SHA-256 / SCRAM-SHA-512 client (RFC 5802, RFC 7677) without channel binding.

    Three messages: client-first, client-final (carrying the proof), then verification
    of the server's signature, which proves the server knows our credential; a bad
    signature is an ``AuthenticationError`` even though the broker said "OK".

    ``token_auth=True`` adds Kafka's ``tokenauth=true`` extension (delegation tokens:
    username is the token id, password the token HMAC). ``nonce`` is injectable for
    tests. ``saslprep`` applies RFC 4013 to username and password; Kafka's Java broker
    does not SASLprep, so set it False if a password relies on characters SASLprep
    rewrites or forbids (ASCII passwords without control characters are unaffected).
    """

    def __init__(
        self,
        username: str,
        password: str,
        hash: ScramHash = "SHA-256",
        *,
        nonce: str | None = None,
        token_auth: bool = False,
        saslprep: bool = True,
        min_iterations: int = MIN_SCRAM_ITERATIONS,
        max_iterations: int = DEFAULT_MAX_SCRAM_ITERATIONS,
    ) -> None:
        _hash_name(hash)
        self.hash = hash
        self.name = f"SCRAM-{hash}"
        self.username = username
        self.token_auth = token_auth
        self.min_iterations = min_iterations
        self.max_iterations = max_iterations
        self._saslprep = saslprep
        try:
            prepared_user = _saslprep(username) if saslprep else username
            if saslprep:
                _saslprep(password)
        except ValueError as exc:
            raise ConfigError(f"SCRAM credentials rejected by SASLprep: {exc}") from None
        if not prepared_user:
            raise ConfigError("SCRAM username must not be empty")
        self._saslname = escape_saslname(prepared_user)
        self._password = _Secret(password)
        if nonce is None:
            nonce = secrets.token_urlsafe(24)
        elif not _valid_nonce(nonce):
            raise ConfigError("SCRAM nonce must be printable ASCII without ','")
        self._client_nonce = nonce
        self._gs2_header = "n,,"
        self._client_first_bare = ""
        self._auth_message = b""
        self._server_signature: bytes | None = None
        self._state = "initial"
        self.complete = False

    def initial_response(self) -> bytes:
        if self._state != "initial":
            raise IllegalStateError("initial_response() already called")
        extensions = ",tokenauth=true" if self.token_auth else ""
        self._client_first_bare = f"n={self._saslname},r={self._client_nonce}{extensions}"
        self._state = "server-first"
        return (self._gs2_header + self._client_first_bare).encode()

    def step(self, challenge: bytes) -> bytes | None:
        if self._state == "server-first":
            try:
                return self._client_final(challenge)
            except AuthenticationError:
                self._fail()
                raise
        if self._state == "server-final":
            try:
                self._verify_server_final(challenge)
            except AuthenticationError:
                self._fail()
                raise
            self._state = "done"
            self.complete = True
            return None
        raise IllegalStateError(f"SCRAM exchange is not expecting a challenge (state {self._state})")

    def _fail(self) -> None:
        self._state = "failed"
        self._server_signature = None
        self._password = _Secret("")

    def _client_final(self, challenge: bytes) -> bytes:
        server_first = _decode(challenge, "server-first-message")
        parts = server_first.split(",")
        if parts[0].startswith("m="):
            raise AuthenticationError("SCRAM: server requires an unsupported mandatory extension")
        if len(parts) < 3 or not (
            parts[0].startswith("r=") and parts[1].startswith("s=") and parts[2].startswith("i=")
        ):
            raise AuthenticationError("SCRAM: malformed server-first-message")
        nonce, salt_b64, iter_text = parts[0][2:], parts[1][2:], parts[2][2:]
        if not _valid_nonce(nonce) or not nonce.startswith(self._client_nonce):
            raise AuthenticationError("SCRAM: server nonce does not extend the client nonce")
        if len(nonce) == len(self._client_nonce):
            raise AuthenticationError("SCRAM: server did not contribute a nonce")
        try:
            salt = _b64decode(salt_b64)
        except ValueError:
            raise AuthenticationError("SCRAM: server salt is not valid base64") from None
        if not salt:
            raise AuthenticationError("SCRAM: server salt is empty")
        if not iter_text.isdigit() or not iter_text.isascii():
            raise AuthenticationError("SCRAM: malformed iteration count")
        iterations = int(iter_text)
        if iterations < self.min_iterations:
            raise AuthenticationError(
                f"SCRAM: iteration count {iterations} is below the minimum {self.min_iterations}"
            )
        if iterations > self.max_iterations:
            raise AuthenticationError(
                f"SCRAM: iteration count {iterations} is above the maximum {self.max_iterations}"
            )

        salted = scram_salted_password(
            self._password.reveal(), salt, iterations, self.hash, prep=self._saslprep
        )
        client_key, stored_key, server_key = scram_keys(salted, self.hash)
        self._password = _Secret("")  # not needed any more; drop our reference early
        without_proof = f"c={_b64(self._gs2_header.encode())},r={nonce}"
        self._auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        proof = scram_client_proof(client_key, stored_key, self._auth_message, self.hash)
        self._server_signature = scram_server_signature(server_key, self._auth_message, self.hash)
        self._state = "server-final"
        return f"{without_proof},p={_b64(proof)}".encode()

    def _verify_server_final(self, challenge: bytes) -> None:
        server_final = _decode(challenge, "server-final-message")
        first = server_final.split(",")[0]
        if first.startswith("e="):
            raise AuthenticationError(f"SCRAM: server reported error {first[2:]!r}")
        if not first.startswith("v="):
            raise AuthenticationError("SCRAM: malformed server-final-message")
        try:
            signature = _b64decode(first[2:])
        except ValueError:
            raise AuthenticationError("SCRAM: server signature is not valid base64") from None
        expected = self._server_signature
        self._server_signature = None
        if expected is None or not hmac.compare_digest(signature, expected):
            raise AuthenticationError(
                "SCRAM: server signature mismatch; the server could not prove it knows the credential"
            )

    def __repr__(self) -> str:
        return (
            f"ScramMechanism(username={self.username!r}, hash={self.hash!r}, token_auth={self.token_auth!r})"
        )


def _decode(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationError(f"SASL: {what} is not valid UTF-8") from None


# --------------------------------------------------------------------------------------
# OAUTHBEARER


_B64TOKEN_RE = re.compile(r"[A-Za-z0-9\-._~+/]+=*")  # RFC 6750 section 2.1
_EXT_KEY_RE = re.compile(r"[A-Za-z]+")  # RFC 7628 section 3.1
_EXT_VALUE_RE = re.compile(r"[\x21-\x7e \t\r\n]+")
_KVSEP = "\x01"


class OAuthBearerMechanism:
    """SASL OAUTHBEARER (RFC 7628) with a pre-obtained bearer token.

    The initial response is ``n,,^Aauth=Bearer <token>^A[key=value^A]...^A``. On
    success the server answers with an empty challenge. On failure it sends a JSON error
    document; RFC 7628 requires the client to answer with a lone ``^A`` so the server
    can finish the exchange with an error. The parsed document is kept in
    ``server_error`` for diagnostics, and any further ``step`` raises
    ``AuthenticationError``. Extension values are treated as secrets (only keys are
    shown by ``repr``).
    """

    name = "OAUTHBEARER"

    def __init__(self, token: str, extensions: Mapping[str, str] | None = None) -> None:
        if not _B64TOKEN_RE.fullmatch(token):
            raise ConfigError("OAUTHBEARER token is empty or contains characters invalid in a bearer token")
        ext = dict(extensions or {})
        for key, value in ext.items():
            if not _EXT_KEY_RE.fullmatch(key) or key == "auth":
                raise ConfigError(f"invalid OAUTHBEARER extension name {key!r}")
            if not _EXT_VALUE_RE.fullmatch(value):
                raise ConfigError(f"invalid value for OAUTHBEARER extension {key!r}")
        self._token = _Secret(token)
        self._extensions = {key: _Secret(value) for key, value in ext.items()}
        self._state = "initial"
        self.server_error: dict[str, Any] | None = None
        self.complete = False

    def initial_response(self) -> bytes:
        if self._state != "initial":
            raise IllegalStateError("initial_response() already called")
        self._state = "sent"
        pairs = [f"auth=Bearer {self._token.reveal()}"]
        pairs += [f"{key}={value.reveal()}" for key, value in self._extensions.items()]
        return ("n,," + _KVSEP + "".join(pair + _KVSEP for pair in pairs) + _KVSEP).encode()

    def step(self, challenge: bytes) -> bytes | None:
        if self._state == "sent":
            if not challenge:
                self._state = "done"
                self.complete = True
                return None
            self._state = "error-acked"
            try:
                parsed = json.loads(challenge.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                parsed = None
            self.server_error = parsed if isinstance(parsed, dict) else {"status": "unparseable-error"}
            return _KVSEP.encode()
        if self._state == "error-acked":
            self._state = "failed"
            status = (self.server_error or {}).get("status", "unknown")
            raise AuthenticationError(f"OAUTHBEARER: server rejected the token (status {status!r})")
        raise IllegalStateError(f"OAUTHBEARER exchange is not expecting a challenge (state {self._state})")

    def __repr__(self) -> str:
        return f"OAuthBearerMechanism(extensions={sorted(self._extensions)!r})"


# --------------------------------------------------------------------------------------


def create_mechanism(
    mechanism: str,
    *,
    username: str | None = None,
    password: str | None = None,
    token: str | None = None,
    extensions: Mapping[str, str] | None = None,
    token_auth: bool = False,
) -> SaslMechanism:
    """Build a mechanism from client configuration (``sasl_mechanism=...``);
    ``token_auth`` makes a SCRAM login a delegation-token login (``tokenauth=true``)."""
    upper = mechanism.upper()
    if upper == "OAUTHBEARER":
        if token is None:
            raise ConfigError("OAUTHBEARER requires a token")
        return OAuthBearerMechanism(token, extensions)
    if username is None or password is None:
        raise ConfigError(f"{upper} requires username and password")
    if upper == "PLAIN":
        return PlainMechanism(username, password)
    if upper == "SCRAM-SHA-256":
        return ScramMechanism(username, password, "SHA-256", token_auth=token_auth)
    if upper == "SCRAM-SHA-512":
        return ScramMechanism(username, password, "SHA-512", token_auth=token_auth)
    if token_auth:
        raise ConfigError("sasl_scram_token_auth needs sasl_mechanism SCRAM-SHA-256 or SCRAM-SHA-512")
    raise ConfigError(f"unsupported SASL mechanism {mechanism!r}")
