"""SASL mechanisms: RFC test vectors, client/server round trips and failure paths."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import pytest

from aiokafka_lite.broker.sasl import (
    ScramCredential,
    ServerMechanism,
    ServerOAuthBearer,
    ServerPlain,
    ServerScram,
    scram_credential,
)
from aiokafka_lite.core.errors import AuthenticationError, ConfigError, IllegalStateError
from aiokafka_lite.net.sasl import (
    OAuthBearerMechanism,
    PlainMechanism,
    SaslMechanism,
    ScramHash,
    ScramMechanism,
    create_mechanism,
    escape_saslname,
    saslprep,
    scram_keys,
    scram_salted_password,
    unescape_saslname,
)

# RFC 7677 section 3 (SCRAM-SHA-256) and RFC 5802 section 5 (SCRAM-SHA-1).
RFC_VECTORS: dict[str, dict[str, Any]] = {
    "SHA-256": {
        "client_nonce": "rOprNGfwEbeRWgbNEkqO",
        "server_nonce": "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        "salt": "W22ZaJ0SNY7soEsUEjb6gQ==",
        "client_first": b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
        "server_first": b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        "client_final": (
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        ),
        "server_final": b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
    },
    "SHA-1": {
        "client_nonce": "fyko+d2lbbFgONRv9qkxdawL",
        "server_nonce": "3rfcNHYJY1ZVvWVs7j",
        "salt": "QSXCR+Q6sek8bf92",
        "client_first": b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
        "server_first": b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
        "client_final": b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
        "server_final": b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
    },
}


def run_exchange(client: SaslMechanism, server: ServerMechanism) -> None:
    """Drive both state machines the way the connection layer and broker would."""
    challenge = server.step(client.initial_response())
    while (response := client.step(challenge)) is not None:
        challenge = server.step(response)
    assert client.complete
    assert server.complete


# --------------------------------------------------------------------------------------
# RFC vectors


@pytest.mark.parametrize("hash", ["SHA-256", "SHA-1"])
def test_client_matches_rfc_vector(hash: ScramHash) -> None:
    v = RFC_VECTORS[hash]
    client = ScramMechanism("user", "pencil", hash, nonce=v["client_nonce"])
    assert client.initial_response() == v["client_first"]
    assert client.step(v["server_first"]) == v["client_final"]
    assert not client.complete
    assert client.step(v["server_final"]) is None
    assert client.complete


@pytest.mark.parametrize("hash", ["SHA-256", "SHA-1"])
def test_server_matches_rfc_vector(hash: ScramHash) -> None:
    v = RFC_VECTORS[hash]
    cred = scram_credential("pencil", hash, salt=base64.b64decode(v["salt"]))
    server = ServerScram({"user": cred}, hash, server_nonce=v["server_nonce"])
    assert server.name == f"SCRAM-{hash}"
    assert server.step(v["client_first"]) == v["server_first"]
    assert not server.complete
    assert server.step(v["client_final"]) == v["server_final"]
    assert server.complete
    assert server.authenticated_user == "user"


def test_scram_key_derivation_rfc7677() -> None:
    salted = scram_salted_password("pencil", base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096, "SHA-256")
    client_key, stored_key, server_key = scram_keys(salted, "SHA-256")
    assert len(salted) == len(client_key) == len(stored_key) == len(server_key) == 32
    cred = scram_credential("pencil", salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    assert (cred.stored_key, cred.server_key, cred.iterations) == (stored_key, server_key, 4096)


# --------------------------------------------------------------------------------------
# SASLprep (RFC 4013 section 3 examples) and name escaping


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("I\u00adX", "IX"),  # SOFT HYPHEN mapped to nothing
        ("user", "user"),
        ("USER", "USER"),
        ("\u00aa", "a"),  # ORDINAL INDICATOR, NFKC
        ("\u2168", "IX"),  # ROMAN NUMERAL NINE, NFKC
        ("a\u00a0b", "a b"),  # non-ASCII space maps to SPACE
        ("\u0627\u0628", "\u0627\u0628"),  # pure right-to-left is fine
    ],
)
def test_saslprep(given: str, expected: str) -> None:
    assert saslprep(given) == expected


@pytest.mark.parametrize(
    "bad",
    [
        "\u0007",  # ASCII control
        "\u0627\u0031",  # RandALCat string must end with RandALCat
        "a\u0627",  # mixes L and R
        "\ue000",  # private use
        "x\U000e0001",  # tagging character
    ],
)
def test_saslprep_rejects(bad: str) -> None:
    with pytest.raises(ValueError) as info:
        saslprep(bad)
    assert bad not in str(info.value)


def test_saslprep_unassigned() -> None:
    unassigned = "\u0221"  # unassigned in Unicode 3.2
    assert saslprep(unassigned) == unassigned
    with pytest.raises(ValueError):
        saslprep(unassigned, allow_unassigned=False)


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [("plain", "plain"), ("a,b", "a=2Cb"), ("a=b", "a=3Db"), ("=,=", "=3D=2C=3D"), ("=2C", "=3D2C")],
)
def test_saslname_escaping(raw: str, escaped: str) -> None:
    assert escape_saslname(raw) == escaped
    assert unescape_saslname(escaped) == raw


@pytest.mark.parametrize("bad", ["a=", "a=41", "=2c", "x=3"])
def test_saslname_bad_escape(bad: str) -> None:
    with pytest.raises(ValueError):
        unescape_saslname(bad)


# --------------------------------------------------------------------------------------
# PLAIN


def test_plain_round_trip() -> None:
    client = PlainMechanism("alice", "alice-secret")
    server = ServerPlain({"alice": "alice-secret"})
    run_exchange(client, server)
    assert server.authenticated_user == "alice"


def test_plain_initial_response_format() -> None:
    assert PlainMechanism("bob", "pw").initial_response() == b"\0bob\0pw"


def test_plain_saslprep_comparison_on_server() -> None:
    server = ServerPlain({"alice": "I\u00adX"})
    assert server.step(b"\0alice\0IX") == b""
    assert server.authenticated_user == "alice"


@pytest.mark.parametrize(
    "message",
    [b"\0alice\0wrong", b"\0mallory\0alice-secret"],
)
def test_plain_rejects_bad_credentials_with_same_message(message: bytes) -> None:
    server = ServerPlain({"alice": "alice-secret"})
    with pytest.raises(AuthenticationError) as info:
        server.step(message)
    assert str(info.value) == "Authentication failed: invalid username or password"
    assert "secret" not in str(info.value)
    assert not server.complete and server.authenticated_user is None
    with pytest.raises(AuthenticationError):
        server.step(b"\0alice\0alice-secret")  # no second chance on the same exchange


@pytest.mark.parametrize("message", [b"alice\0alice-secret", b"\0\0x", b"\xff\0a\0b", b"a\0b\0c\0d"])
def test_plain_rejects_malformed(message: bytes) -> None:
    with pytest.raises(AuthenticationError):
        ServerPlain({"alice": "alice-secret"}).step(message)


def test_plain_authzid() -> None:
    assert ServerPlain({"alice": "pw"}).step(b"alice\0alice\0pw") == b""
    with pytest.raises(AuthenticationError, match="authorization id"):
        ServerPlain({"alice": "pw"}).step(b"admin\0alice\0pw")


def test_plain_client_state_and_config_errors() -> None:
    client = PlainMechanism("a", "b")
    with pytest.raises(IllegalStateError):
        client.step(b"")
    client.initial_response()
    with pytest.raises(IllegalStateError):
        client.initial_response()
    other = PlainMechanism("a", "b")
    other.initial_response()
    with pytest.raises(AuthenticationError):
        other.step(b"unexpected")
    with pytest.raises(ConfigError):
        PlainMechanism("", "pw")
    with pytest.raises(ConfigError):
        PlainMechanism("a\0b", "pw")


# --------------------------------------------------------------------------------------
# SCRAM round trips


@pytest.mark.parametrize("hash", ["SHA-256", "SHA-512"])
@pytest.mark.parametrize(
    ("username", "password"),
    [
        ("alice", "alice-secret"),
        ("we,ird=name", "p,a=ss"),  # needs =2C / =3D escaping
        ("j\u00fcrgen", "pa\u00dfw\u00f6rd \u2168"),  # non-ASCII, NFKC-affected password
    ],
)
def test_scram_round_trip(hash: ScramHash, username: str, password: str) -> None:
    server = ServerScram({username: scram_credential(password, hash)}, hash)
    client = ScramMechanism(username, password, hash)
    assert client.name == server.name == f"SCRAM-{hash}"
    run_exchange(client, server)
    assert server.authenticated_user == username
    assert not server.token_authenticated


def test_scram_saslprep_equivalent_passwords() -> None:
    server = ServerScram({"u": scram_credential("IX")})
    run_exchange(ScramMechanism("u", "I\u00adX"), server)


def test_scram_without_saslprep_uses_raw_utf8() -> None:
    cred = scram_credential("tab\there", saslprep=False)
    run_exchange(ScramMechanism("u", "tab\there", saslprep=False), ServerScram({"u": cred}))
    with pytest.raises(ConfigError):
        ScramMechanism("u", "tab\there")  # SASLprep forbids control characters


def test_scram_wrong_password() -> None:
    server = ServerScram({"alice": scram_credential("right")})
    client = ScramMechanism("alice", "wrong")
    server_first = server.step(client.initial_response())
    client_final = client.step(server_first)
    assert client_final is not None
    with pytest.raises(AuthenticationError) as info:
        server.step(client_final)
    assert str(info.value) == "Authentication failed: invalid credentials (SCRAM-SHA-256)"
    assert not server.complete and server.authenticated_user is None
    with pytest.raises(AuthenticationError):
        server.step(client_final)


def test_scram_unknown_user_is_indistinguishable_until_the_proof() -> None:
    server = ServerScram({"alice": scram_credential("pw")}, server_nonce="SRV")
    client = ScramMechanism("mallory", "pw", nonce="CLI")
    server_first = server.step(client.initial_response())
    assert server_first.startswith(b"r=CLISRV,s=")
    assert server_first.endswith(b",i=4096")
    # Same fake salt for the same unknown user on a fresh exchange.
    again = ServerScram({"alice": scram_credential("pw")}, server_nonce="SRV")
    assert again.step(ScramMechanism("mallory", "x", nonce="CLI").initial_response()) == server_first
    client_final = client.step(server_first)
    assert client_final is not None
    with pytest.raises(AuthenticationError) as info:
        server.step(client_final)
    assert str(info.value) == "Authentication failed: invalid credentials (SCRAM-SHA-256)"


def test_scram_hash_mismatch_fails() -> None:
    server = ServerScram({"u": scram_credential("pw", "SHA-512")}, "SHA-512")
    client = ScramMechanism("u", "pw", "SHA-256")
    final = client.step(server.step(client.initial_response()))
    assert final is not None
    with pytest.raises(AuthenticationError):
        server.step(final)


def _client_after_first(nonce: str = "clientnonce") -> ScramMechanism:
    client = ScramMechanism("user", "pencil", nonce=nonce)
    client.initial_response()
    return client


def test_scram_tampered_server_signature() -> None:
    server = ServerScram({"user": scram_credential("pencil")})
    client = ScramMechanism("user", "pencil")
    final = client.step(server.step(client.initial_response()))
    assert final is not None
    server_final = server.step(final)
    signature = bytearray(base64.b64decode(server_final[2:]))
    signature[0] ^= 0x01
    with pytest.raises(AuthenticationError, match="server signature mismatch"):
        client.step(b"v=" + base64.b64encode(bytes(signature)))
    assert not client.complete
    with pytest.raises(IllegalStateError):
        client.step(server_final)


def test_scram_server_signature_from_impostor_with_wrong_key() -> None:
    """An impostor that accepts any proof cannot produce the right signature."""
    impostor = ServerScram({"user": scram_credential("not-pencil")})
    client = ScramMechanism("user", "pencil")
    final = client.step(impostor.step(client.initial_response()))
    assert final is not None
    fake_signature = b"v=" + base64.b64encode(b"\0" * 32)
    with pytest.raises(AuthenticationError):
        client.step(fake_signature)


@pytest.mark.parametrize(
    ("server_first", "match"),
    [
        (b"r=othernonceSRV,s=QSXCR+Q6sek8bf92,i=4096", "nonce"),
        (b"r=clientnonce,s=QSXCR+Q6sek8bf92,i=4096", "did not contribute"),
        (b"r=clientnonceSRV,s=QSXCR+Q6sek8bf92,i=4095", "below the minimum 4096"),
        (b"r=clientnonceSRV,s=QSXCR+Q6sek8bf92,i=1", "below the minimum"),
        (b"r=clientnonceSRV,s=QSXCR+Q6sek8bf92,i=-4096", "iteration"),
        (b"r=clientnonceSRV,s=QSXCR+Q6sek8bf92,i=99999999999", "above the maximum"),
        (b"r=clientnonceSRV,s=QSXCR+Q6sek8bf92,i=", "iteration"),
        (b"r=clientnonceSRV,s=not base64!,i=4096", "salt"),
        (b"r=clientnonceSRV,s=,i=4096", "salt"),
        (b"m=ext,r=clientnonceSRV,s=QSXCR+Q6sek8bf92,i=4096", "mandatory extension"),
        (b"s=QSXCR+Q6sek8bf92,r=clientnonceSRV,i=4096", "malformed"),
        (b"r=clientnonceSRV", "malformed"),
        (b"\xff\xfe", "UTF-8"),
        (b"e=other-error", "malformed"),
    ],
)
def test_scram_client_validates_server_first(server_first: bytes, match: str) -> None:
    client = _client_after_first()
    with pytest.raises(AuthenticationError, match=match):
        client.step(server_first)
    with pytest.raises(IllegalStateError):
        client.step(server_first)


def test_scram_client_iteration_limits_are_configurable() -> None:
    client = ScramMechanism("user", "pencil", "SHA-1", nonce="fyko+d2lbbFgONRv9qkxdawL", max_iterations=4000)
    client.initial_response()
    with pytest.raises(AuthenticationError, match="above the maximum 4000"):
        client.step(RFC_VECTORS["SHA-1"]["server_first"])


def test_scram_server_error_attribute() -> None:
    server = ServerScram({"user": scram_credential("pencil")})
    client = ScramMechanism("user", "pencil")
    assert client.step(server.step(client.initial_response())) is not None
    with pytest.raises(AuthenticationError, match="invalid-proof"):
        client.step(b"e=invalid-proof")


@pytest.mark.parametrize("server_final", [b"x=abc", b"v=***", b""])
def test_scram_client_rejects_malformed_server_final(server_final: bytes) -> None:
    server = ServerScram({"user": scram_credential("pencil")})
    client = ScramMechanism("user", "pencil")
    assert client.step(server.step(client.initial_response())) is not None
    with pytest.raises(AuthenticationError):
        client.step(server_final)


def test_scram_server_nonce_mismatch_in_client_final() -> None:
    v = RFC_VECTORS["SHA-256"]
    cred = scram_credential("pencil", salt=base64.b64decode(v["salt"]))
    server = ServerScram({"user": cred}, server_nonce=v["server_nonce"])
    server.step(v["client_first"])
    tampered = v["client_final"].replace(b"k0,p=", b"k1,p=")
    with pytest.raises(AuthenticationError, match="nonce mismatch"):
        server.step(tampered)


def test_scram_server_channel_binding_mismatch() -> None:
    v = RFC_VECTORS["SHA-256"]
    cred = scram_credential("pencil", salt=base64.b64decode(v["salt"]))
    server = ServerScram({"user": cred}, server_nonce=v["server_nonce"])
    server.step(v["client_first"])
    # "eSws" is base64 of "y,," where the client-first used "n,,".
    tampered = v["client_final"].replace(b"c=biws", b"c=eSws")
    with pytest.raises(AuthenticationError, match="channel binding"):
        server.step(tampered)


@pytest.mark.parametrize(
    "client_first",
    [
        b"p=tls-unique,,n=user,r=abc",
        b"n,,m=ext,n=user,r=abc",
        b"n,,r=abc,n=user",
        b"n,,n=,r=abc",
        b"n,,n=us=er,r=abc",
        b"n,,n=user,r=a,bc",  # ',' splits: "bc" is not an attr=value pair
        b"x,,n=user,r=abc",
        b"n,,n=user",
        b"n,n=user,r=abc",
        b"\xff",
    ],
)
def test_scram_server_rejects_malformed_client_first(client_first: bytes) -> None:
    server = ServerScram({"user": scram_credential("pencil")})
    with pytest.raises(AuthenticationError):
        server.step(client_first)
    with pytest.raises(AuthenticationError, match="already failed"):
        server.step(client_first)


@pytest.mark.parametrize(
    "client_final", [b"c=biws,r=abc", b"c=biws,p=AAAA", b"r=abc,c=biws,p=AAAA", b"c=biws,r=x,p=!!"]
)
def test_scram_server_rejects_malformed_client_final(client_final: bytes) -> None:
    server = ServerScram({"user": scram_credential("pencil")})
    server.step(b"n,,n=user,r=abc")
    with pytest.raises(AuthenticationError):
        server.step(client_final)


def test_scram_server_accepts_matching_authzid_only() -> None:
    cred = scram_credential("pencil")
    server = ServerScram({"user": cred})
    assert server.step(b"n,a=user,n=user,r=abc").startswith(b"r=abc")
    with pytest.raises(AuthenticationError, match="authorization id"):
        ServerScram({"user": cred}).step(b"n,a=admin,n=user,r=abc")


def test_scram_after_complete() -> None:
    server = ServerScram({"user": scram_credential("pencil")})
    client = ScramMechanism("user", "pencil")
    run_exchange(client, server)
    with pytest.raises(IllegalStateError):
        client.step(b"v=x")
    with pytest.raises(AuthenticationError, match="already complete"):
        server.step(b"n,,n=user,r=abc")


def test_scram_client_misuse() -> None:
    client = ScramMechanism("user", "pencil")
    with pytest.raises(IllegalStateError):
        client.step(b"r=x,s=y,i=4096")
    client.initial_response()
    with pytest.raises(IllegalStateError):
        client.initial_response()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"username": "", "password": "pw"},
        {"username": "\u0007", "password": "pw"},
        {"username": "u", "password": "pw", "hash": "MD5"},
        {"username": "u", "password": "pw", "nonce": "has,comma"},
        {"username": "u", "password": "pw", "nonce": ""},
    ],
)
def test_scram_client_config_errors(kwargs: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        ScramMechanism(**kwargs)  # type: ignore[arg-type]


def test_scram_credential_helper() -> None:
    cred = scram_credential("pw", "SHA-512", iterations=8192)
    assert cred.iterations == 8192
    assert len(cred.salt) == 24
    assert len(cred.stored_key) == len(cred.server_key) == 64
    assert scram_credential("pw").salt != scram_credential("pw").salt
    with pytest.raises(ConfigError):
        scram_credential("pw", iterations=4095)
    with pytest.raises(ConfigError):
        scram_credential("pw", salt=b"")
    with pytest.raises(ConfigError):
        scram_credential("\u0007")
    with pytest.raises(ConfigError):
        scram_credential("pw", "SHA-384")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        ServerScram({}, server_nonce="a,b")


# --------------------------------------------------------------------------------------
# SCRAM delegation tokens (Kafka's tokenauth extension)


def test_scram_token_auth_round_trip() -> None:
    token_cred = scram_credential("token-hmac", "SHA-512")
    server = ServerScram({}, "SHA-512", token_credentials={"token-id": ("alice", token_cred)})
    client = ScramMechanism("token-id", "token-hmac", "SHA-512", nonce="abc", token_auth=True)
    first = client.initial_response()
    assert first == b"n,,n=token-id,r=abc,tokenauth=true"
    challenge = server.step(first)
    final = client.step(challenge)
    assert final is not None
    assert client.step(server.step(final)) is None
    assert server.authenticated_user == "alice"
    assert server.token_authenticated


def test_scram_token_auth_not_a_regular_user() -> None:
    # A token id must not authenticate against the user table, nor a user against tokens.
    cred = scram_credential("pw")
    for server, token_auth in (
        (ServerScram({"u": cred}), True),
        (ServerScram({}, token_credentials={"u": ("owner", cred)}), False),
    ):
        client = ScramMechanism("u", "pw", token_auth=token_auth)
        final = client.step(server.step(client.initial_response()))
        assert final is not None
        with pytest.raises(AuthenticationError):
            server.step(final)


# --------------------------------------------------------------------------------------
# OAUTHBEARER


class _Validator:
    """Accepts one token and records what it was asked to validate."""

    def __init__(self, expected: str = "good.token", principal: str = "svc") -> None:
        self.expected = expected
        self.principal = principal
        self.seen: list[tuple[str, dict[str, str]]] = []

    def __call__(self, token: str, extensions: Mapping[str, str]) -> str | None:
        self.seen.append((token, dict(extensions)))
        return self.principal if token == self.expected else None


def test_oauth_initial_response_format() -> None:
    assert OAuthBearerMechanism("abc").initial_response() == b"n,,\x01auth=Bearer abc\x01\x01"
    mech = OAuthBearerMechanism("abc", {"traceId": "123", "logicalCluster": "lkc-1"})
    assert mech.initial_response() == b"n,,\x01auth=Bearer abc\x01traceId=123\x01logicalCluster=lkc-1\x01\x01"


def test_oauth_round_trip_with_extensions() -> None:
    validate = _Validator()
    server = ServerOAuthBearer(validate)
    client = OAuthBearerMechanism("good.token", {"traceId": "t-1"})
    run_exchange(client, server)
    assert server.authenticated_user == "svc"
    assert server.extensions == {"traceId": "t-1"}
    assert validate.seen == [("good.token", {"traceId": "t-1"})]


def test_oauth_invalid_token_flow() -> None:
    server = ServerOAuthBearer(_Validator())
    client = OAuthBearerMechanism("bad.token")
    challenge = server.step(client.initial_response())
    assert json.loads(challenge) == {"status": "invalid_token"}
    assert client.step(challenge) == b"\x01"
    assert client.server_error == {"status": "invalid_token"}
    with pytest.raises(AuthenticationError, match="invalid token"):
        server.step(b"\x01")
    assert not server.complete and server.authenticated_user is None
    with pytest.raises(AuthenticationError, match="invalid_token"):
        client.step(b"")
    assert not client.complete


def test_oauth_validator_reason_is_reported() -> None:
    def validate(token: str, extensions: Mapping[str, str]) -> str | None:
        raise AuthenticationError("token expired")

    server = ServerOAuthBearer(validate)
    challenge = server.step(OAuthBearerMechanism("t").initial_response())
    assert json.loads(challenge)["status"] == "invalid_token"
    with pytest.raises(AuthenticationError, match="token expired"):
        server.step(b"\x01")


def test_oauth_server_requires_ack_after_error() -> None:
    server = ServerOAuthBearer(_Validator())
    server.step(OAuthBearerMechanism("bad").initial_response())
    with pytest.raises(AuthenticationError, match="acknowledgement"):
        server.step(b"n,,\x01auth=Bearer good.token\x01\x01")
    with pytest.raises(AuthenticationError, match="already failed"):
        server.step(b"\x01")


def test_oauth_authzid_must_match_principal() -> None:
    server = ServerOAuthBearer(_Validator())
    assert server.step(b"n,a=svc,\x01auth=Bearer good.token\x01\x01") == b""
    assert server.authenticated_user == "svc"
    server = ServerOAuthBearer(_Validator())
    assert (
        json.loads(server.step(b"n,a=root,\x01auth=Bearer good.token\x01\x01"))["status"] == "invalid_token"
    )
    with pytest.raises(AuthenticationError, match="authorization id"):
        server.step(b"\x01")


@pytest.mark.parametrize(
    "message",
    [
        b"n,,\x01auth=Bearer t\x01",  # missing final ^A
        b"n,,auth=Bearer t\x01\x01",  # no ^A after the gs2 header
        b"n,,\x01auth=Basic dXNlcg==\x01\x01",
        b"n,,\x01auth=Bearer \x01\x01",
        b"n,,\x01k=v\x01\x01",  # no auth
        b"n,,\x01auth=Bearer t\x01auth=Bearer u\x01\x01",
        b"n,,\x01auth=Bearer t\x01novalue\x01\x01",
        b"p=x,,\x01auth=Bearer t\x01\x01",
        b"n,x,\x01auth=Bearer t\x01\x01",
        b"\xff",
    ],
)
def test_oauth_server_rejects_malformed(message: bytes) -> None:
    server = ServerOAuthBearer(_Validator("t"))
    with pytest.raises(AuthenticationError, match="malformed"):
        server.step(message)


def test_oauth_client_unparseable_error_challenge() -> None:
    client = OAuthBearerMechanism("t")
    client.initial_response()
    assert client.step(b"not json") == b"\x01"
    assert client.server_error == {"status": "unparseable-error"}


@pytest.mark.parametrize(
    ("token", "extensions"),
    [
        ("", None),
        ("has space", None),
        ("tok\x01en", None),
        ("ok", {"auth": "x"}),
        ("ok", {"bad-key": "x"}),
        ("ok", {"k": ""}),
        ("ok", {"k": "a\x01b"}),
    ],
)
def test_oauth_client_config_errors(token: str, extensions: dict[str, str] | None) -> None:
    with pytest.raises(ConfigError):
        OAuthBearerMechanism(token, extensions)


def test_oauth_client_misuse() -> None:
    client = OAuthBearerMechanism("t")
    with pytest.raises(IllegalStateError):
        client.step(b"")
    client.initial_response()
    with pytest.raises(IllegalStateError):
        client.initial_response()
    client.step(b"")
    with pytest.raises(IllegalStateError):
        client.step(b"")


# --------------------------------------------------------------------------------------
# Secrets stay out of repr/str and error messages


SECRET = "hunter2-Sup3rSecret"


def test_secrets_not_in_repr_or_str() -> None:
    mechanisms: list[object] = [
        PlainMechanism("alice", SECRET),
        ScramMechanism("alice", SECRET, "SHA-512"),
        OAuthBearerMechanism(SECRET, {"traceId": SECRET}),
    ]
    for mech in mechanisms:
        for text in (repr(mech), str(mech), repr(vars(mech))):
            assert SECRET not in text, text
    assert "alice" in repr(mechanisms[0])
    assert "traceId" in repr(mechanisms[2])


def test_server_state_has_no_plain_secrets_in_repr() -> None:
    cred = scram_credential(SECRET)
    assert cred.stored_key.hex() not in repr(cred)
    assert repr(cred).startswith("ScramCredential(salt=")
    assert isinstance(cred, ScramCredential)
    assert SECRET not in repr(ServerPlain({"alice": SECRET}))
    assert SECRET not in repr(ServerScram({"alice": cred}))


def test_secrets_not_in_failure_messages() -> None:
    messages = []
    server = ServerScram({"alice": scram_credential("other")})
    client = ScramMechanism("alice", SECRET)
    final = client.step(server.step(client.initial_response()))
    assert final is not None
    with pytest.raises(AuthenticationError) as info:
        server.step(final)
    messages.append(str(info.value))
    with pytest.raises(AuthenticationError) as info:
        ServerPlain({"alice": "x"}).step(f"\0alice\0{SECRET}".encode())
    messages.append(str(info.value))
    with pytest.raises(ConfigError) as config_info:
        ScramMechanism("alice", SECRET + "\u0007")
    messages.append(str(config_info.value))
    for message in messages:
        assert SECRET not in message


# --------------------------------------------------------------------------------------
# Factory


def test_create_mechanism() -> None:
    assert isinstance(create_mechanism("PLAIN", username="u", password="p"), PlainMechanism)
    scram = create_mechanism("scram-sha-512", username="u", password="p")
    assert isinstance(scram, ScramMechanism) and scram.name == "SCRAM-SHA-512"
    assert create_mechanism("SCRAM-SHA-256", username="u", password="p").name == "SCRAM-SHA-256"
    assert isinstance(create_mechanism("OAUTHBEARER", token="t"), OAuthBearerMechanism)
    with pytest.raises(ConfigError):
        create_mechanism("GSSAPI", username="u", password="p")
    with pytest.raises(ConfigError):
        create_mechanism("PLAIN", username="u")
    with pytest.raises(ConfigError):
        create_mechanism("OAUTHBEARER")
    with pytest.raises(ConfigError):
        create_mechanism("SCRAM-SHA-1", username="u", password="p")
