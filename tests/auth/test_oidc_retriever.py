"""The OIDC token retriever (``net.oidc``) without a broker: Java's refresh window, the
token endpoint's answers, one request for many callers, backoff, and secret hygiene.
The endpoint is an ``httpx.MockTransport`` or the loopback provider of ``_support``."""

from __future__ import annotations

import base64
import json
import logging
import time
from typing import Any

import anyio
import httpx
import pytest
from _support.oidc_provider import OidcProvider, SigningKey

from aiokafka_lite.broker.oidc import JwksTokenValidator
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.errors import AuthenticationError, ConfigError
from aiokafka_lite.net import ClientConfig
from aiokafka_lite.net.oidc import OidcTokenRetriever, RefreshPolicy, jwt_claims, jwt_header, sign_jwt

pytestmark = pytest.mark.anyio

SECRET = "retriever-secret-never-logged"


# ---------------------------------------------------------------------- refresh window


def test_refresh_window_factor_and_jitter() -> None:
    policy = RefreshPolicy()  # Java's defaults: 0.8, 0.05, 60 s, 300 s
    assert policy.refresh_at(0, 3600, rand=lambda: 0.0) == 2880
    assert policy.refresh_at(0, 3600, rand=lambda: 1.0) == pytest.approx(3060)


def test_refresh_buffer_and_minimum_period() -> None:
    policy = RefreshPolicy()
    # 80 % of 1000 s would leave less than the 300 s buffer: refresh 300 s before expiry.
    assert policy.refresh_at(0, 1000, rand=lambda: 0.0) == 700
    # 400 s: the buffer says 100 s, above the 60 s minimum period.
    assert policy.refresh_at(0, 400, rand=lambda: 0.0) == 100
    # Shorter than minimum period + buffer: half way.
    assert policy.refresh_at(0, 100, rand=lambda: 0.0) == 50
    assert RefreshPolicy(min_period_seconds=0, buffer_seconds=0).refresh_at(0, 10, rand=lambda: 0.0) == 8


@pytest.mark.parametrize(
    "kwargs",
    [{"window_factor": 0.4}, {"window_jitter": 0.3}, {"min_period_seconds": 901}, {"buffer_seconds": 3601}],
)
def test_refresh_settings_outside_javas_ranges_are_config_errors(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        RefreshPolicy(**kwargs)  # type: ignore[arg-type]


def test_client_config_checks_the_oidc_options() -> None:
    base = {"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER"}
    with pytest.raises(ConfigError, match="sasl_oauth_token_provider or sasl_oauthbearer_token_endpoint_url"):
        ClientConfig(**base)
    with pytest.raises(ConfigError, match="client_credentials"):
        ClientConfig(**base, sasl_oauthbearer_token_endpoint_url="https://idp/token")
    with pytest.raises(ConfigError, match="http"):
        ClientConfig(
            **base,
            sasl_oauthbearer_token_endpoint_url="idp/token",
            sasl_oauthbearer_client_credentials_client_id="a",
            sasl_oauthbearer_client_credentials_client_secret=SECRET,
        )
    with pytest.raises(ConfigError, match="sasl_login_refresh_window_factor"):
        ClientConfig(**base, sasl_login_refresh_window_factor=0.2)
    with pytest.raises(ConfigError, match="cannot be read"):
        ClientConfig(
            **base,
            sasl_oauthbearer_token_endpoint_url="https://idp/token",
            sasl_oauthbearer_assertion_private_key_file="/nonexistent/key.pem",
        )
    config = ClientConfig(
        **base,
        sasl_oauthbearer_token_endpoint_url="https://idp/token",
        sasl_oauthbearer_client_credentials_client_id="a",
        sasl_oauthbearer_client_credentials_client_secret=SECRET,
    )
    assert isinstance(config.oauth_token_provider, OidcTokenRetriever)
    assert config.oauth_token_provider is config.oauth_token_provider  # one per configuration
    assert SECRET not in repr(config) and SECRET not in repr(config.oauth_token_provider)


# ---------------------------------------------------------------------- endpoint answers


def _jwt(lifetime: float = 3600, **claims: Any) -> str:
    key = SigningKey.generate("k")
    now = time.time()
    return sign_jwt(
        {"sub": "svc", "iat": int(now), "exp": int(now + lifetime), **claims}, key.private, "RS256"
    )


def _retriever(handler: Any, **kwargs: Any) -> OidcTokenRetriever:
    return OidcTokenRetriever(
        "https://idp.test/token",
        client_id="svc",
        client_secret=SECRET,
        http_transport=httpx.MockTransport(handler),
        retry_backoff_ms=10,
        retry_backoff_max_ms=100,
        **kwargs,
    )


async def test_one_request_serves_concurrent_callers_and_the_cache(anyio_backend: str) -> None:
    token = _jwt(scope="kafka")
    requests: list[httpx.Request] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        await anyio.sleep(0.05)  # a slow identity provider: the callers overlap
        return httpx.Response(200, json={"access_token": token, "expires_in": 3600})

    retriever = _retriever(handler, scope="kafka")
    results: list[str] = []
    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(lambda: _collect(retriever, results))
    assert results == [token] * 10
    assert await retriever() == token
    assert len(requests) == 1
    form = dict(x.split("=", 1) for x in requests[0].content.decode().split("&"))
    assert form == {"grant_type": "client_credentials", "scope": "kafka"}
    assert requests[0].headers["authorization"].startswith("Basic ")
    current = retriever.current
    assert current is not None and current.principal == "svc" and current.scope == ("kafka",)


async def _collect(retriever: OidcTokenRetriever, out: list[str]) -> None:
    out.append(await retriever())


async def test_a_token_due_for_refresh_is_replaced(anyio_backend: str) -> None:
    tokens = iter([_jwt(jti="1"), _jwt(jti="2")])

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"access_token": next(tokens)})

    retriever = _retriever(handler)
    first = await retriever()
    retriever._refresh_at = 0.0  # as once the refresh time has passed
    second = await retriever()
    assert jwt_claims(first)["jti"] == "1" and jwt_claims(second)["jti"] == "2"


async def test_a_failed_refresh_keeps_the_valid_token(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    answers = [httpx.Response(200, json={"access_token": _jwt()}), httpx.Response(401, json={})]

    def handler(request: httpx.Request) -> httpx.Response:
        return answers.pop(0)

    retriever = _retriever(handler)
    first = await retriever()
    retriever._refresh_at = 0.0
    with caplog.at_level(logging.WARNING, logger="aiokafka_lite.net.oidc"):
        assert await retriever() == first
    assert "keeping the current token" in caplog.text and SECRET not in caplog.text


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        (httpx.Response(200, json={"token_type": "Bearer"}), "no access_token"),
        (httpx.Response(200, json={"access_token": "opaque-not-a-jwt"}), "not a JWT"),
        (httpx.Response(200, text="<html>"), "without a JSON object"),
        (httpx.Response(404, json={"error": "nope"}), "no token endpoint at this URL"),
        (httpx.Response(400, json={"error": "invalid_scope"}), "refused the scope"),
    ],
)
async def test_unusable_answers_are_typed_errors(
    anyio_backend: str, answer: httpx.Response, match: str
) -> None:
    retriever = _retriever(lambda request: answer)
    with pytest.raises(E.OAuthBearerTokenError, match=match):
        await retriever()
    assert retriever.requests == 1


async def test_errors_within_the_backoff_are_not_new_requests(anyio_backend: str) -> None:
    retriever = _retriever(lambda request: httpx.Response(401, json={"error": "invalid_client"}))
    retriever.backoff = type(retriever.backoff)(5000, 10000)
    for _ in range(5):
        with pytest.raises(E.OAuthBearerTokenError, match="invalid_client"):
            await retriever()
    assert retriever.requests == 1


async def test_secrets_stay_out_of_logs_and_errors(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    token = _jwt()

    def handler(request: httpx.Request) -> httpx.Response:
        if "fail" in request.url.path:
            return httpx.Response(500, json={"error": "server_error", "error_description": SECRET})
        return httpx.Response(200, json={"access_token": token})

    with caplog.at_level(logging.DEBUG):
        ok = _retriever(handler)
        await ok()
        failing = OidcTokenRetriever(
            "https://idp.test/fail",
            client_id="svc",
            client_secret=SECRET,
            http_transport=httpx.MockTransport(handler),
            retry_backoff_ms=10,
            retry_backoff_max_ms=50,
        )
        with pytest.raises(E.OAuthBearerTokenError) as info:
            await failing()
    assert failing.requests >= 2  # a 5xx is retried
    assert SECRET not in caplog.text and token not in caplog.text
    assert SECRET not in str(info.value) and SECRET not in repr(failing)


async def test_es256_assertions_verify_against_the_jwk(anyio_backend: str) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    from aiokafka_lite.broker.oidc import _verify

    key = ec.generate_private_key(ec.SECP256R1())
    token = sign_jwt({"sub": "x"}, key, "ES256", "ec-1")
    assert jwt_header(token) == {"alg": "ES256", "typ": "JWT", "kid": "ec-1"}
    assert _verify(token, "ES256", key.public_key())
    assert not _verify(token, "ES256", ec.generate_private_key(ec.SECP256R1()).public_key())


# ---------------------------------------------------------------------- JWKS validator


def test_the_jwks_validator_checks_what_kafka_checks() -> None:
    with OidcProvider() as idp:
        validator = JwksTokenValidator(
            idp.jwks_url, expected_audience="kafka", expected_issuer=idp.issuer, clock_skew_seconds=0
        )
        accepted = validator(idp.mint("alice"), {})
        assert accepted.principal == "alice" and accepted.expires_at is not None
        bad = {
            "unexpected audience": idp.mint("alice", audience="other"),
            "unexpected issuer": idp.mint("alice", issuer="https://other"),
            "expired": idp.mint("alice", lifetime_s=-5),
            "in the future": idp.mint("alice", iat=time.time() + 600),
            "no 'sub' claim": idp.mint("", lifetime_s=60),
            "bad signature": idp.mint("alice")[:-4] + "AAAA",
            "not a JWT": "opaque",
        }
        for reason, token in bad.items():
            with pytest.raises(AuthenticationError, match=reason):
                validator(token, {})
        payload = idp.mint("alice").split(".")[1]
        none_header = json.dumps({"alg": "none"}).encode()
        forged = base64.urlsafe_b64encode(none_header).rstrip(b"=").decode() + f".{payload}."
        with pytest.raises(AuthenticationError, match="algorithm"):
            validator(forged, {})


async def test_a_file_url_reads_the_token_from_the_file(anyio_backend: str, tmp_path: Any) -> None:
    """Java's FileJwtRetriever: the token is read from the file, again once due."""
    path = tmp_path / "token.jwt"
    path.write_text(_jwt(jti="first") + "\n")
    retriever = OidcTokenRetriever(f"file://{path}")
    assert jwt_claims(await retriever())["jti"] == "first"
    path.write_text(_jwt(jti="second"))
    assert jwt_claims(await retriever())["jti"] == "first"  # cached until due
    retriever._refresh_at = 0.0
    assert jwt_claims(await retriever())["jti"] == "second"
    missing = OidcTokenRetriever(f"file://{tmp_path}/absent.jwt")
    with pytest.raises(E.OAuthBearerTokenError, match="cannot read the token file"):
        await missing()
