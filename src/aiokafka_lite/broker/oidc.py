"""OAUTHBEARER validation of JWTs against a JWKS for the embedded broker.

``JwksTokenValidator`` is a ``TokenValidator`` for ``ServerOAuthBearer`` doing what Kafka's
``OAuthBearerValidatorCallbackHandler`` (``BrokerJwtValidator``) does: the token must be a
JWS signed (RS256/384/512, ES256/384/512) by a key of the JWKS at ``jwks_url`` (looked up by
``kid``), with ``exp`` in the future and ``iat``/``nbf`` not in the future (each with
``clock_skew_seconds``), ``iss`` equal to ``expected_issuer`` and ``aud`` containing
``expected_audience`` when those are set, and a string ``sub_claim_name`` claim, which is
the principal. The token's expiry goes back to the broker, which bounds the KIP-368
session lifetime with it (``EmbeddedCluster(connections_max_reauth_ms=...)``).

Keys are cached; the JWKS is fetched again every ``refresh_seconds`` and when a token names
an unknown ``kid`` (at most once per ``min_refresh_interval_seconds``), so a key rotated
at the identity provider is picked up, as Java's ``RefreshingHttpsJwks`` does.

Unlike Kafka, which answers every rejected token with only ``{"status":"invalid_token"}``
(the reason goes to its log), the embedded broker sends the reason ("unexpected audience",
"no key with kid ...") to the client, so that a failing test says why.

Honest limits: the JWKS request is a blocking ``urllib`` call made from the broker's
event loop (with ``timeout_seconds``), which is fine for an identity provider on loopback
or in another thread/process, not for one served by the broker's own event loop; and
Kafka's allowed-URLs check (``org.apache.kafka.sasl.oauthbearer.allowed.urls``) does not
apply: the URL is the one the test gives.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from aiokafka_lite.broker.sasl import ValidatedToken
from aiokafka_lite.core.errors import AuthenticationError, ConfigError
from aiokafka_lite.net.oidc import _b64url_decode, _crypto, jwt_claims, jwt_header

__all__ = ["JwksTokenValidator", "public_key_from_jwk"]

log = logging.getLogger(__name__)

_HASHES = {"256": "SHA256", "384": "SHA384", "512": "SHA512"}
_CURVE_SIZES = {"P-256": 32, "P-384": 48, "P-521": 66}


def _int(value: str) -> int:
    return int.from_bytes(_b64url_decode(value), "big")


def public_key_from_jwk(jwk: Mapping[str, Any]) -> Any:
    """A ``cryptography`` public key from an RSA or EC JWK (RFC 7518 section 6)."""
    _, _, ec, _, _ = _crypto()
    from cryptography.hazmat.primitives.asymmetric import rsa

    kty = jwk.get("kty")
    if kty == "RSA":
        return rsa.RSAPublicNumbers(_int(jwk["e"]), _int(jwk["n"])).public_key()
    if kty == "EC":
        curves = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}
        curve = curves.get(jwk.get("crv", ""))
        if curve is None:
            raise ValueError(f"unsupported EC curve {jwk.get('crv')!r}")
        return ec.EllipticCurvePublicNumbers(_int(jwk["x"]), _int(jwk["y"]), curve).public_key()
    raise ValueError(f"unsupported JWK key type {kty!r}")


def _verify(token: str, alg: str, key: Any) -> bool:
    hashes, _, ec, padding, utils = _crypto()
    from cryptography.exceptions import InvalidSignature

    head, payload, sig_b64 = token.split(".")
    signing_input = f"{head}.{payload}".encode("ascii")
    try:
        signature = _b64url_decode(sig_b64)
    except ValueError:
        return False
    digest = getattr(hashes, _HASHES.get(alg[2:], ""), None)
    if digest is None:
        return False
    try:
        if alg.startswith("RS"):
            key.verify(signature, signing_input, padding.PKCS1v15(), digest())
        elif alg.startswith("ES"):
            size = (key.curve.key_size + 7) // 8
            if len(signature) != 2 * size:
                return False
            r, s = int.from_bytes(signature[:size], "big"), int.from_bytes(signature[size:], "big")
            key.verify(utils.encode_dss_signature(r, s), signing_input, ec.ECDSA(digest()))
        else:
            return False
    except (InvalidSignature, TypeError, ValueError):
        return False
    return True


class JwksTokenValidator:
    """Validates OAUTHBEARER JWTs against the JWKS at ``jwks_url`` (see the module docstring)."""

    def __init__(
        self,
        jwks_url: str,
        *,
        expected_audience: str | None = None,
        expected_issuer: str | None = None,
        sub_claim_name: str = "sub",
        clock_skew_seconds: float = 30,
        refresh_seconds: float = 3600,
        min_refresh_interval_seconds: float = 1.0,
        timeout_seconds: float = 5.0,
    ) -> None:
        if not jwks_url.startswith(("http://", "https://", "file:")):
            raise ConfigError("jwks_url must be an http(s):// or file: URL")
        self.jwks_url = jwks_url
        self.expected_audience = expected_audience
        self.expected_issuer = expected_issuer
        self.sub_claim_name = sub_claim_name
        self.clock_skew_seconds = clock_skew_seconds
        self.refresh_seconds = refresh_seconds
        self.min_refresh_interval_seconds = min_refresh_interval_seconds
        self.timeout_seconds = timeout_seconds
        self._keys: dict[str, tuple[str | None, Any]] = {}  # kid -> (alg, key)
        self._fetched_at = float("-inf")  # monotonic
        self._lock = threading.Lock()
        #: JWKS fetches made (for tests).
        self.fetches = 0

    def __repr__(self) -> str:
        return (
            f"JwksTokenValidator(jwks_url={self.jwks_url!r}, audience={self.expected_audience!r}, "
            f"issuer={self.expected_issuer!r})"
        )

    def _fetch(self) -> None:
        self.fetches += 1
        self._fetched_at = time.monotonic()
        try:
            with urllib.request.urlopen(self.jwks_url, timeout=self.timeout_seconds) as resp:
                document = json.loads(resp.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            log.warning("OAUTHBEARER: cannot fetch the JWKS from %s: %s", self.jwks_url, exc)
            return
        keys: dict[str, tuple[str | None, Any]] = {}
        for jwk in document.get("keys", []) if isinstance(document, dict) else []:
            if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
                continue
            try:
                keys[str(jwk.get("kid", ""))] = (jwk.get("alg"), public_key_from_jwk(jwk))
            except (KeyError, ValueError, TypeError) as exc:
                log.warning("OAUTHBEARER: skipping a JWK of %s: %s", self.jwks_url, exc)
        self._keys = keys

    def _key(self, kid: str) -> tuple[str | None, Any] | None:
        with self._lock:
            now = time.monotonic()
            if now - self._fetched_at > self.refresh_seconds:
                self._fetch()
            found = self._keys.get(kid)
            if found is None and now - self._fetched_at >= self.min_refresh_interval_seconds:
                self._fetch()  # an unknown kid: the provider may have rotated its keys
                found = self._keys.get(kid)
            return found

    def __call__(self, token: str, extensions: Mapping[str, str]) -> ValidatedToken:
        try:
            header, claims = jwt_header(token), jwt_claims(token)
        except ValueError:
            raise AuthenticationError("invalid_token: not a JWT") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg == "none" or alg[:2] not in ("RS", "ES"):
            raise AuthenticationError(f"invalid_token: unsupported signature algorithm {alg!r}")
        kid = str(header.get("kid", ""))
        found = self._key(kid)
        if found is None:
            raise AuthenticationError(f"invalid_token: no key with kid {kid!r} in the JWKS")
        key_alg, key = found
        if key_alg is not None and key_alg != alg:
            raise AuthenticationError("invalid_token: the token's algorithm does not match its key")
        if not _verify(token, alg, key):
            raise AuthenticationError("invalid_token: bad signature")
        now = time.time()
        skew = self.clock_skew_seconds
        exp = claims.get("exp")
        if not isinstance(exp, int | float) or isinstance(exp, bool):
            raise AuthenticationError("invalid_token: no exp claim")
        if exp + skew <= now:
            raise AuthenticationError("invalid_token: the token has expired")
        for name in ("iat", "nbf"):
            value = claims.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool) and value - skew > now:
                raise AuthenticationError(f"invalid_token: the token's {name} is in the future")
        if self.expected_issuer is not None and claims.get("iss") != self.expected_issuer:
            raise AuthenticationError("invalid_token: unexpected issuer")
        if self.expected_audience is not None:
            aud = claims.get("aud")
            audiences = aud if isinstance(aud, list) else [aud]
            if self.expected_audience not in audiences:
                raise AuthenticationError("invalid_token: unexpected audience")
        principal = claims.get(self.sub_claim_name)
        if not isinstance(principal, str) or not principal:
            raise AuthenticationError(f"invalid_token: no {self.sub_claim_name!r} claim")
        return ValidatedToken(principal, float(exp))
