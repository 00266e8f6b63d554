"""Amazon MSK IAM authentication over SASL OAUTHBEARER.

MSK clusters with IAM access control take, on their ``SASL_SSL`` listener (port 9098), an
OAUTHBEARER token that is a SigV4-presigned ``kafka-cluster:Connect`` URL, base64url
encoded. AWS's ``aws-msk-iam-sasl-signer-python`` makes it (``pip install
'aiokafka_lite[aws-msk]'``); ``MskIamTokenProvider`` wraps it as the client's
``sasl_oauth_token_provider``::

    from aiokafka_lite import Producer
    from aiokafka_lite.integrations.aws_msk import MskIamTokenProvider

    producer = Producer(
        "b-1.mycluster.abc123.c2.kafka.eu-west-1.amazonaws.com:9098",
        security_protocol="SASL_SSL",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=MskIamTokenProvider("eu-west-1"),
    )

Credentials come from the default AWS chain (environment, profile, container or instance
role), or from ``profile``, ``role_arn`` (assumed through STS) or a botocore
``credentials_provider``. The signer's work (loading credentials, perhaps calling STS) is
blocking, so it runs in a worker thread, on asyncio and trio alike.

Tokens live 15 minutes (the signer's fixed expiry). One is cached and reused by every
connection until ``refresh_window_factor`` of its lifetime has passed (0.8, Java's
``sasl.login.refresh.window.factor``; the same rule as ``net.oidc``), then the next
authentication signs a new one. Live connections re-authenticate before the broker's
session ends (KIP-368, ``net.connection``), which MSK bounds by the token's expiry. A
signer failure (no credentials, STS refused the role) becomes ``OAuthBearerTokenError``
naming AWS MSK IAM and the likely cause, without the credentials; callers within the
following backoff get the same error without signing again.
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlparse

from aiokafka_lite.core.errors import ConfigError, OAuthBearerTokenError
from aiokafka_lite.net.oidc import RefreshPolicy
from aiokafka_lite.net.retry import Backoff

__all__ = ["MskIamTokenProvider", "describe_msk_token"]

log = logging.getLogger(__name__)

#: A signer: ``() -> (token, expiry in epoch milliseconds)``, as the AWS library's functions.
Signer = Callable[[], tuple[str, int]]


def _signer_module() -> Any:
    try:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider
    except ImportError:  # pragma: no cover - depends on the installation
        raise ConfigError(
            "MskIamTokenProvider needs aws-msk-iam-sasl-signer-python: pip install 'aiokafka_lite[aws-msk]'"
        ) from None
    return MSKAuthTokenProvider


def describe_msk_token(token: str) -> dict[str, str]:
    """The query parameters of an MSK IAM token (the presigned URL it encodes), for
    checks and diagnostics; the signature is left out. ``ValueError`` if it is not one."""
    try:
        url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        raise ValueError("not a base64url-encoded URL") from None
    parsed = urlparse(url)
    if parsed.scheme != "https" or not parsed.hostname or not parsed.hostname.startswith("kafka."):
        raise ValueError("not an MSK IAM presigned URL (https://kafka.<region>.amazonaws.com/)")
    params = {k: v[0] for k, v in parse_qs(parsed.query).items()}
    params.pop("X-Amz-Signature", None)
    params["host"] = parsed.hostname
    return params


class MskIamTokenProvider:
    """``sasl_oauth_token_provider`` for Amazon MSK IAM (see the module docstring).

    ``signer`` replaces the AWS library call (tests, or a custom signing path): a
    callable returning ``(token, expiry_ms)``.
    """

    def __init__(
        self,
        region: str,
        *,
        profile: str | None = None,
        role_arn: str | None = None,
        sts_session_name: str | None = None,
        credentials_provider: Any = None,
        refresh_window_factor: float = 0.8,
        refresh_window_jitter: float = 0.05,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 10000,
        signer: Signer | None = None,
    ) -> None:
        if not region:
            raise ConfigError("MskIamTokenProvider needs the cluster's AWS region")
        if sum(x is not None for x in (profile, role_arn, credentials_provider)) > 1:
            raise ConfigError("give at most one of profile, role_arn and credentials_provider")
        self.region = region
        self.profile = profile
        self.role_arn = role_arn
        self._sts_session_name = sts_session_name
        self._credentials_provider = credentials_provider
        self._signer = signer or self._aws_signer()
        # No minimum period or buffer: the token's 15 minutes are all there is.
        self.refresh = RefreshPolicy(refresh_window_factor, refresh_window_jitter, 0, 0)
        self.backoff = Backoff(retry_backoff_ms, max(retry_backoff_ms, retry_backoff_max_ms))
        self._token: str | None = None
        self._expires_at = 0.0
        self._refresh_at = 0.0
        self._failures = 0
        self._quiet_until = 0.0
        self._last_error: OAuthBearerTokenError | None = None
        #: Tokens signed (for tests and metrics).
        self.signed = 0

    def __repr__(self) -> str:
        source = (
            f"profile={self.profile!r}"
            if self.profile
            else f"role_arn={self.role_arn!r}"
            if self.role_arn
            else "credentials_provider"
            if self._credentials_provider is not None
            else "default credentials"
        )
        return f"MskIamTokenProvider(region={self.region!r}, {source})"

    def _aws_signer(self) -> Signer:
        module = _signer_module()
        region = self.region
        if self.profile is not None:
            profile = self.profile
            return lambda: module.generate_auth_token_from_profile(region, profile)
        if self.role_arn is not None:
            role_arn, extra = self.role_arn, {}
            if self._sts_session_name:
                extra["sts_session_name"] = self._sts_session_name
            return lambda: module.generate_auth_token_from_role_arn(region, role_arn, **extra)
        if self._credentials_provider is not None:
            provider = self._credentials_provider
            return lambda: module.generate_auth_token_from_credentials_provider(region, provider)
        return lambda: module.generate_auth_token(region)

    @property
    def expires_at(self) -> float:
        """Expiry (epoch seconds) of the cached token; 0 when there is none."""
        return self._expires_at if self._token is not None else 0.0

    async def __call__(self) -> str:
        now = time.time()
        if self._token is not None and now < self._refresh_at and now < self._expires_at:
            return self._token
        if self._last_error is not None and time.monotonic() < self._quiet_until:
            return self._keep_or_raise(self._last_error)
        import anyio

        try:
            token, expiry_ms = await anyio.to_thread.run_sync(self._signer, abandon_on_cancel=True)
        except Exception as exc:
            # The class name and the library's message (it names what is missing, e.g.
            # "AWS Credentials can not be empty"), never credentials: none are in there.
            error = OAuthBearerTokenError(
                f"AWS MSK IAM: cannot sign an OAUTHBEARER token for region {self.region!r} "
                f"({type(exc).__name__}: {str(exc)[:200]}); are AWS credentials available "
                "(environment, profile, role) and allowed kafka-cluster:Connect?"
            )
            self._last_error = error
            self._quiet_until = time.monotonic() + self.backoff.delay_s(self._failures)
            self._failures += 1
            return self._keep_or_raise(error)
        now = time.time()
        expires_at = expiry_ms / 1000
        if expires_at <= now:
            raise OAuthBearerTokenError(
                "AWS MSK IAM: the signer made an already expired token (is this machine's clock right?)"
            )
        self.signed += 1
        self._failures = 0
        self._last_error = None
        self._token = token
        self._expires_at = expires_at
        self._refresh_at = self.refresh.refresh_at(now, expires_at)
        log.debug("AWS MSK IAM: new token, expires in %.0f s", expires_at - now)
        return token

    def _keep_or_raise(self, error: OAuthBearerTokenError) -> str:
        if self._token is not None and time.time() < self._expires_at:
            log.warning("AWS MSK IAM: token refresh failed, keeping the current token: %s", error)
            return self._token
        raise error
