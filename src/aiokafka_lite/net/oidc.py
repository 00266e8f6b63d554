"""OAUTHBEARER tokens from an OAuth 2 / OIDC token endpoint (KIP-768, KIP-1139).

``OidcTokenRetriever`` is an async callable returning a bearer token, so it fits
``sasl_oauth_token_provider``; a ``ClientConfig`` with ``sasl_oauthbearer_token_endpoint_url``
builds one itself (``ClientConfig.oauth_token_provider``). Two grants, as Java's
``ClientCredentialsJwtRetriever`` and ``JwtBearerJwtRetriever``:

* **client_credentials** (RFC 6749 section 4.4): ``client_id`` and ``client_secret`` are
  sent with HTTP Basic authentication, ``scope`` in the form;
* **jwt-bearer** (RFC 7523, KIP-1139): an assertion signed with a private key (RS256 or
  ES256; claims ``iss``/``sub``/``aud``/``iat``/``exp``/``nbf``/``jti`` as Java's
  ``sasl.oauthbearer.assertion.claim.*``) or read ready-made from a file, sent as
  ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=...``.

A ``file:`` URL instead of the endpoint reads the token from that file (Java's
``FileJwtRetriever``), again whenever a new one is due.

Refresh follows Java's ``sasl.login.refresh.*`` rules (``ExpiringCredentialRefreshingLogin``):
the token is refreshed once ``window_factor`` (+ up to ``window_jitter``, random) of its
lifetime has passed, but no later than ``buffer_seconds`` before it expires and no sooner
than ``min_period_seconds`` after it was obtained; when the token lives too briefly for
both, it is refreshed at half its remaining lifetime. Deviation from Java, on purpose:
there is no background login thread. The token is refreshed on the first
(re-)authentication after its refresh time, which is when a connection needs one, so an
idle client does not poll the identity provider and no task outlives the client. KIP-368
re-authentication (``net.connection``) asks for a token at 85-95 % of the broker's session
lifetime, which the broker bounds by the token's expiry, so live connections pick up the
refreshed token before the old one expires.

Failures: a 4xx answer (bad client secret, unknown client, bad assertion) fails at once;
an unreachable endpoint, a timeout or a 5xx is retried with ``sasl_login_retry_backoff_ms``
doubling up to ``sasl_login_retry_backoff_max_ms`` of total wait, then fails. Either way
the caller gets ``OAuthBearerTokenError`` naming OAUTHBEARER/OIDC and the likely cause,
and callers arriving within the following backoff get the same error without a new
request (no retry storm from many connections). A refresh that fails while the current
token is still valid keeps that token (as Java does) until it expires.

HTTP goes through ``httpx`` (the ``[oidc]`` extra, shared with the Schema Registry client),
which runs on asyncio and trio. Secrets (client secret, key passphrase, tokens, assertions)
are never logged, shown in ``repr`` or put in exception messages.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import ssl
import time
import urllib.parse
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from aiokafka_lite.core import concurrency as _backend
from aiokafka_lite.core.errors import ConfigError, OAuthBearerTokenError
from aiokafka_lite.net.retry import Backoff

__all__ = [
    "AssertionAlgorithm",
    "OAuthBearerToken",
    "OidcTokenRetriever",
    "RefreshPolicy",
    "jwt_claims",
    "jwt_header",
    "sign_jwt",
]

log = logging.getLogger(__name__)

AssertionAlgorithm = Literal["RS256", "ES256"]

JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"


# --------------------------------------------------------------------------------------
# JWT helpers (pure; signing needs the ``cryptography`` package)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _jwt_part(token: str, index: int) -> dict[str, Any]:
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("not a JWS compact serialization (three dot-separated parts)")
    try:
        value = json.loads(_b64url_decode(parts[index]))
    except (ValueError, UnicodeDecodeError):
        raise ValueError("JWT part is not base64url-encoded JSON") from None
    if not isinstance(value, dict):
        raise ValueError("JWT part is not a JSON object")
    return value


def jwt_header(token: str) -> dict[str, Any]:
    """The (unverified) JOSE header of a compact JWT; ``ValueError`` if malformed."""
    return _jwt_part(token, 0)


def jwt_claims(token: str) -> dict[str, Any]:
    """The (unverified) claims of a compact JWT; ``ValueError`` if malformed."""
    return _jwt_part(token, 1)


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, padding, utils
    except ImportError:  # pragma: no cover - depends on the installation
        raise ConfigError(
            "OAUTHBEARER jwt-bearer assertions and JWKS validation need the 'cryptography' "
            "package: pip install 'aiokafka_lite[oidc]'"
        ) from None
    return hashes, serialization, ec, padding, utils


def load_private_key(pem: bytes, passphrase: str | None = None) -> Any:
    """A private key object from PEM (PKCS#8 or traditional, optionally encrypted)."""
    _, serialization, *_ = _crypto()
    try:
        return serialization.load_pem_private_key(pem, passphrase.encode() if passphrase else None)
    except (ValueError, TypeError) as exc:
        # The library's message names the problem (bad passphrase, not PEM), never the key.
        raise ConfigError(f"OAUTHBEARER assertion private key cannot be loaded: {exc}") from None


def sign_jwt(
    claims: Mapping[str, Any],
    private_key: Any,
    algorithm: AssertionAlgorithm = "RS256",
    kid: str | None = None,
) -> str:
    """A compact JWS of ``claims`` signed with ``private_key`` (a ``cryptography`` key)."""
    hashes, _, ec, padding, utils = _crypto()
    header: dict[str, Any] = {"alg": algorithm, "typ": "JWT"}
    if kid is not None:
        header["kid"] = kid
    signing_input = (
        _b64url(json.dumps(header, separators=(",", ":")).encode())
        + "."
        + _b64url(json.dumps(dict(claims), separators=(",", ":")).encode())
    ).encode("ascii")
    if algorithm == "RS256":
        signature = private_key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    elif algorithm == "ES256":
        der = private_key.sign(signing_input, ec.ECDSA(hashes.SHA256()))
        r, s = utils.decode_dss_signature(der)
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    else:
        raise ConfigError(f"unsupported assertion algorithm {algorithm!r}; expected RS256 or ES256")
    return signing_input.decode("ascii") + "." + _b64url(signature)


# --------------------------------------------------------------------------------------
# Refresh policy (pure)


@dataclass(frozen=True)
class RefreshPolicy:
    """Java's ``sasl.login.refresh.*``: when a token obtained at ``start`` that expires at
    ``expiry`` (epoch seconds) should be replaced."""

    window_factor: float = 0.8
    window_jitter: float = 0.05
    min_period_seconds: float = 60
    buffer_seconds: float = 300

    def __post_init__(self) -> None:
        if not 0.5 <= self.window_factor <= 1.0:
            raise ConfigError("sasl_login_refresh_window_factor must be between 0.5 and 1.0")
        if not 0 <= self.window_jitter <= 0.25:
            raise ConfigError("sasl_login_refresh_window_jitter must be between 0 and 0.25")
        if not 0 <= self.min_period_seconds <= 900:
            raise ConfigError("sasl_login_refresh_min_period_seconds must be between 0 and 900")
        if not 0 <= self.buffer_seconds <= 3600:
            raise ConfigError("sasl_login_refresh_buffer_seconds must be between 0 and 3600")

    def refresh_at(self, start: float, expiry: float, *, rand: Callable[[], float] = random.random) -> float:
        lifetime = expiry - start
        if lifetime <= 0:
            return start
        if lifetime < self.min_period_seconds + self.buffer_seconds:
            # Too short-lived for both the minimum period and the buffer (Java warns and
            # refreshes well before expiry): half way.
            return start + lifetime / 2
        proposed = start + lifetime * (self.window_factor + self.window_jitter * rand())
        proposed = min(proposed, expiry - self.buffer_seconds)
        return max(proposed, start + self.min_period_seconds)


# --------------------------------------------------------------------------------------
# Tokens


@dataclass(frozen=True)
class OAuthBearerToken:
    """A bearer token and what the client knows about it (the value stays out of repr)."""

    value: str = field(repr=False)
    expires_at: float  # epoch seconds
    obtained_at: float  # epoch seconds
    principal: str | None = None
    scope: tuple[str, ...] = ()

    def expired(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) >= self.expires_at


def token_from_response(
    body: Mapping[str, Any], *, now: float, sub_claim_name: str = "sub", scope_claim_name: str = "scope"
) -> OAuthBearerToken:
    """Check a token endpoint's JSON answer (RFC 6749 section 5.1) as Java's
    ``ClientJwtValidator`` does: an ``access_token`` that is a JWT with ``exp`` (and the
    subject claim) in the future; ``expires_in`` is the fallback for ``exp``."""
    value = body.get("access_token")
    if not isinstance(value, str) or not value:
        raise OAuthBearerTokenError(
            "OAUTHBEARER/OIDC: the token endpoint's answer has no access_token "
            "(is sasl_oauthbearer_token_endpoint_url the token endpoint?)"
        )
    try:
        claims = jwt_claims(value)
    except ValueError as exc:
        raise OAuthBearerTokenError(
            f"OAUTHBEARER/OIDC: the access token is not a JWT ({exc}); Kafka brokers validate JWTs"
        ) from None
    exp = claims.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        expires_in = body.get("expires_in")
        if not isinstance(expires_in, int | float) or isinstance(expires_in, bool):
            raise OAuthBearerTokenError("OAUTHBEARER/OIDC: the access token has no 'exp' claim")
        exp = now + float(expires_in)
    if exp <= now:
        raise OAuthBearerTokenError(
            "OAUTHBEARER/OIDC: the token endpoint issued an already expired token "
            "(is this machine's clock or the identity provider's wrong?)"
        )
    sub = claims.get(sub_claim_name)
    if sub is not None and not isinstance(sub, str):
        raise OAuthBearerTokenError(f"OAUTHBEARER/OIDC: the token's {sub_claim_name!r} claim is not a string")
    raw_scope = claims.get(scope_claim_name, body.get("scope", ""))
    if isinstance(raw_scope, str):
        scope = tuple(raw_scope.split())
    elif isinstance(raw_scope, list):
        scope = tuple(str(s) for s in raw_scope)
    else:
        scope = ()
    iat = claims.get("iat")
    obtained = (
        float(iat) if isinstance(iat, int | float) and not isinstance(iat, bool) and iat <= now else now
    )
    return OAuthBearerToken(value, float(exp), obtained, sub, scope)


class _Secret:
    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'<redacted>'"


# --------------------------------------------------------------------------------------
# The retriever


class OidcTokenRetriever:
    """Fetches, caches and refreshes OAUTHBEARER tokens from an OIDC token endpoint.

    ``await retriever()`` returns the current token, fetching a new one when none is
    cached or the cached one is due for refresh (see the module docstring). Concurrent
    callers share one request. Give either ``client_id`` + ``client_secret``
    (client_credentials grant) or an assertion: ``assertion_private_key_pem`` /
    ``assertion_private_key_file`` (signed here) or ``assertion_file`` (read for each
    request, for assertions minted by another tool). ``http_transport`` is for tests
    (an ``httpx`` transport).
    """

    def __init__(
        self,
        token_endpoint_url: str,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        scope: str | None = None,
        assertion_private_key_file: str | None = None,
        assertion_private_key_pem: bytes | None = None,
        assertion_private_key_passphrase: str | None = None,
        assertion_algorithm: AssertionAlgorithm = "RS256",
        assertion_kid: str | None = None,
        assertion_claim_iss: str | None = None,
        assertion_claim_sub: str | None = None,
        assertion_claim_aud: str | None = None,
        assertion_claim_exp_seconds: int = 300,
        assertion_claim_nbf_seconds: int = 60,
        assertion_claim_jti_include: bool = False,
        assertion_file: str | None = None,
        refresh: RefreshPolicy | None = None,
        connect_timeout_ms: float = 10000,
        read_timeout_ms: float = 10000,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 10000,
        ssl_context: ssl.SSLContext | None = None,
        sub_claim_name: str = "sub",
        scope_claim_name: str = "scope",
        http_transport: Any = None,
    ) -> None:
        if not token_endpoint_url.startswith(("https://", "http://", "file:")):
            raise ConfigError(
                "sasl_oauthbearer_token_endpoint_url must be an http(s) URL of the token endpoint "
                "(or a file: URL of a file holding the token)"
            )
        signed = assertion_private_key_file is not None or assertion_private_key_pem is not None
        if signed and assertion_file is not None:
            raise ConfigError("give either an assertion private key or sasl_oauthbearer_assertion_file")
        self.grant = "jwt-bearer" if signed or assertion_file is not None else "client_credentials"
        if token_endpoint_url.startswith("file:"):
            # Java's FileJwtRetriever: the token is read from the file (e.g. a Kubernetes
            # projected service account token), again whenever a new one is due.
            self.grant = "file"
        elif self.grant == "client_credentials" and (not client_id or client_secret is None):
            raise ConfigError(
                "OAUTHBEARER/OIDC: sasl_oauthbearer_token_endpoint_url needs either "
                "sasl_oauthbearer_client_credentials_client_id and _client_secret (client_credentials "
                "grant) or sasl_oauthbearer_assertion_private_key_file / sasl_oauthbearer_assertion_file "
                "(jwt-bearer grant)"
            )
        if assertion_algorithm not in ("RS256", "ES256"):
            raise ConfigError("sasl_oauthbearer_assertion_algorithm must be RS256 or ES256")
        self.token_endpoint_url = token_endpoint_url
        self.client_id = client_id
        self._client_secret = _Secret(client_secret) if client_secret is not None else None
        self.scope = scope
        self._private_key: Any = None
        if signed:
            if assertion_private_key_pem is None:
                assert assertion_private_key_file is not None
                try:
                    with open(assertion_private_key_file, "rb") as fh:
                        assertion_private_key_pem = fh.read()
                except OSError as exc:
                    raise ConfigError(
                        f"sasl_oauthbearer_assertion_private_key_file cannot be read: {exc.strerror}"
                    ) from None
            self._private_key = load_private_key(assertion_private_key_pem, assertion_private_key_passphrase)
        self.assertion_file = assertion_file
        self.assertion_algorithm: AssertionAlgorithm = assertion_algorithm
        self.assertion_kid = assertion_kid
        self.assertion_claims = {
            "iss": assertion_claim_iss,
            "sub": assertion_claim_sub,
            "aud": assertion_claim_aud,
        }
        self.assertion_exp_seconds = assertion_claim_exp_seconds
        self.assertion_nbf_seconds = assertion_claim_nbf_seconds
        self.assertion_jti = assertion_claim_jti_include
        self.refresh = refresh or RefreshPolicy()
        self.connect_timeout_s = connect_timeout_ms / 1000
        self.read_timeout_s = read_timeout_ms / 1000
        self.backoff = Backoff(retry_backoff_ms, max(retry_backoff_ms, retry_backoff_max_ms))
        self.retry_budget_s = max(retry_backoff_ms, retry_backoff_max_ms) / 1000
        self.ssl_context = ssl_context
        self.sub_claim_name = sub_claim_name
        self.scope_claim_name = scope_claim_name
        self._transport = http_transport
        self._token: OAuthBearerToken | None = None
        self._refresh_at = 0.0
        self._inflight: Any = None  # an event while a request is under way
        self._failures = 0
        self._quiet_until = 0.0  # monotonic: no new request before this after a failure
        self._last_error: OAuthBearerTokenError | None = None
        #: Requests sent to the token endpoint (for tests and metrics).
        self.requests = 0

    def __repr__(self) -> str:
        return (
            f"OidcTokenRetriever(url={self.token_endpoint_url!r}, grant={self.grant!r}, "
            f"client_id={self.client_id!r}, scope={self.scope!r})"
        )

    @property
    def current(self) -> OAuthBearerToken | None:
        """The cached token, if any (it may be due for refresh)."""
        return self._token

    def invalidate(self) -> None:
        """Forget the cached token: the next call fetches a new one (after any backoff)."""
        self._token = None
        self._refresh_at = 0.0

    async def __call__(self) -> str:
        return (await self.token()).value

    async def token(self) -> OAuthBearerToken:
        while True:
            now = time.time()
            cached = self._token
            if cached is not None and now < self._refresh_at and not cached.expired(now):
                return cached
            if self._inflight is not None:
                await self._inflight.wait()
                if self._token is not None and self._token is not cached and not self._token.expired():
                    return self._token
                if self._last_error is not None and time.monotonic() < self._quiet_until:
                    return self._fallback_or_raise(self._last_error)
                continue
            if self._last_error is not None and time.monotonic() < self._quiet_until:
                return self._fallback_or_raise(self._last_error)
            event = _backend.event()
            self._inflight = event
            try:
                token = await self._fetch()
            except OAuthBearerTokenError as exc:
                self._last_error = exc
                self._quiet_until = time.monotonic() + self.backoff.delay_s(self._failures)
                self._failures += 1
                return self._fallback_or_raise(exc)
            finally:
                self._inflight = None
                event.set()
            self._failures = 0
            self._last_error = None
            self._token = token
            self._refresh_at = self.refresh.refresh_at(token.obtained_at, token.expires_at)
            log.debug(
                "OAUTHBEARER/OIDC: new token for %s from %s, expires in %.0f s, refresh in %.0f s",
                token.principal,
                self.token_endpoint_url,
                token.expires_at - time.time(),
                self._refresh_at - time.time(),
            )
            return token

    def _fallback_or_raise(self, exc: OAuthBearerTokenError) -> OAuthBearerToken:
        cached = self._token
        if cached is not None and not cached.expired():
            log.warning(
                "OAUTHBEARER/OIDC: token refresh failed, keeping the current token until it "
                "expires in %.0f s: %s",
                cached.expires_at - time.time(),
                exc,
            )
            return cached
        raise exc

    # ------------------------------------------------------------------ HTTP

    def _form(self) -> dict[str, str]:
        form: dict[str, str] = {}
        if self.grant == "client_credentials":
            form["grant_type"] = "client_credentials"
        else:
            form["grant_type"] = JWT_BEARER_GRANT
            form["assertion"] = self._assertion()
        if self.scope:
            form["scope"] = self.scope
        return form

    def _assertion(self) -> str:
        if self.assertion_file is not None:
            try:
                with open(self.assertion_file, encoding="utf-8") as fh:
                    return fh.read().strip()
            except OSError as exc:
                raise OAuthBearerTokenError(
                    f"OAUTHBEARER/OIDC: sasl_oauthbearer_assertion_file cannot be read: {exc.strerror}"
                ) from None
        now = int(time.time())
        claims: dict[str, Any] = {k: v for k, v in self.assertion_claims.items() if v is not None}
        claims["iat"] = now
        claims["exp"] = now + self.assertion_exp_seconds
        claims["nbf"] = now - self.assertion_nbf_seconds
        if self.assertion_jti:
            claims["jti"] = str(uuid.uuid4())
        return sign_jwt(claims, self._private_key, self.assertion_algorithm, self.assertion_kid)

    def _httpx(self) -> Any:
        try:
            import httpx
        except ImportError:  # pragma: no cover - depends on the installation
            raise ConfigError(
                "sasl_oauthbearer_token_endpoint_url needs httpx: pip install 'aiokafka_lite[oidc]'"
            ) from None
        return httpx

    async def _fetch(self) -> OAuthBearerToken:
        if self.grant == "file":
            return self._read_token_file()
        httpx = self._httpx()
        where = self.token_endpoint_url
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                form = self._form()
                auth = None
                if self.grant == "client_credentials":
                    assert self.client_id is not None and self._client_secret is not None
                    auth = (self.client_id, self._client_secret.reveal())
                timeout = httpx.Timeout(self.read_timeout_s, connect=self.connect_timeout_s)
                verify: Any = self.ssl_context if self.ssl_context is not None else True
                self.requests += 1
                async with httpx.AsyncClient(
                    timeout=timeout, verify=verify, transport=self._transport, trust_env=False
                ) as http:
                    resp = await http.post(
                        where, data=form, auth=auth, headers={"Accept": "application/json"}
                    )
            except httpx.HTTPError as exc:
                # Type name only: httpx messages can echo the request.
                error = OAuthBearerTokenError(
                    f"OAUTHBEARER/OIDC: token endpoint {where} unreachable ({type(exc).__name__}); "
                    "is sasl_oauthbearer_token_endpoint_url right and the identity provider up?"
                )
            else:
                if resp.status_code == 200:
                    try:
                        body = resp.json()
                    except ValueError:
                        body = None
                    if not isinstance(body, dict):
                        raise OAuthBearerTokenError(
                            f"OAUTHBEARER/OIDC: token endpoint {where} answered 200 without a JSON object"
                        )
                    return token_from_response(
                        body,
                        now=time.time(),
                        sub_claim_name=self.sub_claim_name,
                        scope_claim_name=self.scope_claim_name,
                    )
                error = OAuthBearerTokenError(self._describe_refusal(resp))
                if 400 <= resp.status_code < 500 and resp.status_code != 429:
                    raise error
            delay = self.backoff.delay_s(attempt)
            attempt += 1
            if time.monotonic() + delay - started > self.retry_budget_s:
                raise error
            log.debug("OAUTHBEARER/OIDC: %s; retrying in %.2f s", error, delay)
            await _backend.sleep(delay)

    def _read_token_file(self) -> OAuthBearerToken:
        path = urllib.parse.urlparse(self.token_endpoint_url).path
        try:
            with open(path, encoding="utf-8") as fh:
                value = fh.read().strip()
        except OSError as exc:
            raise OAuthBearerTokenError(
                f"OAUTHBEARER/OIDC: cannot read the token file {path}: {exc.strerror}"
            ) from None
        return token_from_response(
            {"access_token": value},
            now=time.time(),
            sub_claim_name=self.sub_claim_name,
            scope_claim_name=self.scope_claim_name,
        )

    def _describe_refusal(self, resp: Any) -> str:
        code = resp.status_code
        oauth_error = ""
        try:
            body = resp.json()
            if isinstance(body, dict) and isinstance(body.get("error"), str):
                # RFC 6749 section 5.2 error codes are fixed tokens, safe to show;
                # error_description is free text from the server and is left out.
                oauth_error = f" error={body['error'][:64]!r}"
        except ValueError:
            pass
        if code in (400, 401, 403):
            cause = (
                "the identity provider refused the client credentials (wrong client id or secret?)"
                if self.grant == "client_credentials"
                else "the identity provider refused the assertion (wrong key, issuer, subject or audience?)"
            )
            if "invalid_scope" in oauth_error:
                cause = "the identity provider refused the scope (sasl_oauthbearer_scope)"
        elif code == 404:
            cause = "no token endpoint at this URL (sasl_oauthbearer_token_endpoint_url)"
        elif code == 429:
            cause = "the identity provider is rate limiting this client"
        else:
            cause = "the identity provider failed"
        return f"OAUTHBEARER/OIDC: token endpoint {self.token_endpoint_url} answered HTTP {code}{oauth_error}: {cause}"
