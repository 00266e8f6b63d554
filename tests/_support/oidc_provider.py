"""A small OAuth 2 / OIDC identity provider on loopback, for the OAUTHBEARER tests.

``OidcProvider()`` serves, from a daemon thread (``http.server``; it never touches the test's
event loop, so asyncio, trio, the embedded broker's thread and a JVM can all call it):

* ``POST /token``: the client_credentials grant (HTTP Basic or form ``client_id`` /
  ``client_secret``) for the clients in ``clients``, and the jwt-bearer grant (RFC 7523)
  for assertions signed by a key in ``assertion_keys`` (public keys by assertion ``iss``);
  it answers an RS256 JWT signed by the current key, with ``iss``, ``aud``, ``sub``
  (the client id, or the assertion's ``sub``), ``scope``, ``iat``, ``exp`` and ``kid``;
* ``GET /jwks``: the public keys (``keys``), the current one and any not yet retired;
* ``rotate()``: a new RSA key becomes the signing key (the old one stays in the JWKS until
  ``retire``), as identity providers rotate theirs;
* ``mint(...)``: a token signed here without a request (expired, wrong audience, unknown
  key...), for the broker-side rejection tests.

Counters (``token_requests``, ``jwks_requests``) and knobs (``token_lifetime_s``,
``fail_next``: answer the next N token requests with a given HTTP status) let tests
assert what happened without sleeping.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from aiokafka_lite.broker.oidc import _verify, public_key_from_jwk
from aiokafka_lite.net.oidc import jwt_claims, jwt_header, sign_jwt

__all__ = ["OidcProvider", "SigningKey", "rsa_private_pem"]


def _b64url_uint(value: int) -> str:
    raw = value.to_bytes((value.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


@dataclass
class SigningKey:
    kid: str
    private: Any = field(repr=False)

    @classmethod
    def generate(cls, kid: str | None = None) -> SigningKey:
        return cls(
            kid or uuid.uuid4().hex[:12], rsa.generate_private_key(public_exponent=65537, key_size=2048)
        )

    def jwk(self) -> dict[str, str]:
        numbers = self.private.public_key().public_numbers()
        return {
            "kty": "RSA",
            "use": "sig",
            "alg": "RS256",
            "kid": self.kid,
            "n": _b64url_uint(numbers.n),
            "e": _b64url_uint(numbers.e),
        }


def rsa_private_pem(key: Any, passphrase: str | None = None) -> bytes:
    """PKCS#8 PEM of a private key, encrypted when ``passphrase`` is given."""
    encryption: Any = (
        serialization.BestAvailableEncryption(passphrase.encode())
        if passphrase
        else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


class OidcProvider:
    """See the module docstring. Use as a context manager (starts and stops the server)."""

    def __init__(
        self,
        *,
        issuer: str = "https://idp.test",
        audience: str = "kafka",
        clients: Mapping[str, str] | None = None,
        token_lifetime_s: float = 3600,
        host: str = "127.0.0.1",
    ) -> None:
        self.issuer = issuer
        self.audience = audience
        self.clients = dict(clients or {})
        #: Public keys (JWK dicts) allowed to sign jwt-bearer assertions, by the assertion's iss.
        self.assertion_keys: dict[str, dict[str, str]] = {}
        self.token_lifetime_s = token_lifetime_s
        self.keys: list[SigningKey] = [SigningKey.generate()]
        self.token_requests = 0
        self.jwks_requests = 0
        self.grants: list[str] = []
        self.fail_next: list[int] = []  # HTTP statuses for the next token requests
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: Mapping[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/jwks":
                    self._answer(404, {"error": "not_found"})
                    return
                with provider._lock:
                    provider.jwks_requests += 1
                    keys = [k.jwk() for k in provider.keys]
                self._answer(200, {"keys": keys})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                if self.path.split("?")[0] != "/token":
                    self._answer(404, {"error": "not_found"})
                    return
                status, body = provider._token_answer(form, self.headers.get("Authorization"))
                self._answer(status, body)

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def token_url(self) -> str:
        return self.url + "/token"

    @property
    def jwks_url(self) -> str:
        return self.url + "/jwks"

    def start(self) -> OidcProvider:
        self._thread = threading.Thread(target=self._server.serve_forever, name="oidc-provider", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> OidcProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ keys

    @property
    def current_key(self) -> SigningKey:
        return self.keys[-1]

    def rotate(self) -> SigningKey:
        """A new signing key; the previous ones stay published until ``retire``."""
        key = SigningKey.generate()
        with self._lock:
            self.keys.append(key)
        return key

    def retire(self, kid: str) -> None:
        with self._lock:
            self.keys = [k for k in self.keys if k.kid != kid]

    # ------------------------------------------------------------------ tokens

    def mint(
        self,
        sub: str,
        *,
        lifetime_s: float | None = None,
        audience: str | None = None,
        issuer: str | None = None,
        key: SigningKey | None = None,
        scope: str = "",
        iat: float | None = None,
        **claims: Any,
    ) -> str:
        now = time.time() if iat is None else iat
        body: dict[str, Any] = {
            "iss": issuer or self.issuer,
            "aud": audience or self.audience,
            "sub": sub,
            "iat": int(now),
            "exp": int(now + (self.token_lifetime_s if lifetime_s is None else lifetime_s)),
            "jti": uuid.uuid4().hex,
            **claims,
        }
        if scope:
            body["scope"] = scope
        signer = key or self.current_key
        return sign_jwt(body, signer.private, "RS256", signer.kid)

    def _token_answer(self, form: Mapping[str, str], authorization: str | None) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.token_requests += 1
            if self.fail_next:
                status = self.fail_next.pop(0)
                return status, {"error": "server_error" if status >= 500 else "invalid_request"}
        grant = form.get("grant_type", "")
        self.grants.append(grant)
        if grant == "client_credentials":
            client_id, secret = form.get("client_id"), form.get("client_secret")
            if authorization and authorization.startswith("Basic "):
                decoded = base64.b64decode(authorization[6:]).decode()
                client_id, _, secret = decoded.partition(":")
            if client_id is None or self.clients.get(client_id) != secret:
                return 401, {"error": "invalid_client"}
            sub = client_id
        elif grant == "urn:ietf:params:oauth:grant-type:jwt-bearer":
            assertion = form.get("assertion", "")
            try:
                header, claims = jwt_header(assertion), jwt_claims(assertion)
            except ValueError:
                return 400, {"error": "invalid_grant"}
            jwk = self.assertion_keys.get(str(claims.get("iss")))
            now = time.time()
            if (
                jwk is None
                or header.get("alg") != "RS256"
                or not _verify(assertion, "RS256", public_key_from_jwk(jwk))
                or not isinstance(claims.get("exp"), int)
                or claims["exp"] <= now
                or claims.get("aud") != self.token_url
            ):
                return 400, {"error": "invalid_grant"}
            sub = str(claims.get("sub") or claims["iss"])
        else:
            return 400, {"error": "unsupported_grant_type"}
        token = self.mint(sub, scope=form.get("scope", ""))
        return 200, {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": int(self.token_lifetime_s),
        }
