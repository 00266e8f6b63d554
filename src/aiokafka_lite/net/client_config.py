"""Options of the network client (``Client``): the single definition of each one.

Defaults follow the Java client where it has the same setting (names are the Java
ones with dots replaced by underscores).
"""

from __future__ import annotations

import functools
import re
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from aiokafka_lite import __version__
from aiokafka_lite.core.errors import ConfigError
from aiokafka_lite.core.options import Options, at_least, between, non_empty, one_of, option
from aiokafka_lite.net.oidc import OidcTokenRetriever, RefreshPolicy
from aiokafka_lite.net.security import ReloadingSslContext

__all__ = [
    "DEFAULT_MAX_RESPONSE_SIZE",
    "ClientConfig",
    "ClientDnsLookup",
    "MetadataRecoveryStrategy",
    "SecurityProtocol",
    "TokenProvider",
]

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
#: KIP-899: what the client does once it cannot refresh metadata from the brokers it knows.
MetadataRecoveryStrategy = Literal["rebootstrap", "none"]
#: KIP-235/KIP-302: how bootstrap and broker host names are resolved.
ClientDnsLookup = Literal["use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"]

#: Async callable returning a fresh OAUTHBEARER token (called for every (re-)authentication).
TokenProvider = Callable[[], Awaitable[str]]

DEFAULT_MAX_RESPONSE_SIZE = 100 * 1024 * 1024

# KIP-511: client software name and version must match this.
_SOFTWARE_RE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


def _software(value: str) -> str | None:
    return None if _SOFTWARE_RE.fullmatch(value) else "must match [a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?"


def _mechanism(value: str) -> str | None:
    return None if value.upper() in _SASL_MECHANISMS else "must be one of " + ", ".join(_SASL_MECHANISMS)


def _max_versions(value: Mapping[int, int]) -> str | None:
    for key, ver in value.items():
        if not isinstance(key, int) or not isinstance(ver, int) or ver < 0:
            return "must map API keys (int) to non-negative versions (int)"
    return None


@dataclass(frozen=True, kw_only=True)
class ClientConfig(Options):
    """Connection, metadata and security options shared by Producer, Consumer and Admin."""

    client_id: str = option("aiokafka-lite", "Logical name sent with every request (broker logs, quotas).")
    request_timeout_ms: float = option(
        30000,
        "How long to wait for a response before failing the request (and, once the request "
        "was written, closing the connection since the broker is presumed stuck).",
        at_least(1),
    )
    metadata_max_age_ms: float = option(
        300000, "Refresh cluster metadata at least this often, even without errors.", at_least(0)
    )
    reconnect_backoff_ms: float = option(
        50,
        "Initial wait before reconnecting to a broker after a failure (doubles per failure, 20% jitter).",
        at_least(0),
    )
    reconnect_backoff_max_ms: float = option(1000, "Upper bound of the reconnect backoff.", at_least(0))
    retry_backoff_ms: float = option(
        100, "Initial wait before retrying a failed request (doubles per attempt, 20% jitter).", at_least(0)
    )
    retry_backoff_max_ms: float = option(1000, "Upper bound of the retry backoff.", at_least(0))
    connections_max_idle_ms: float = option(
        540000, "Close connections that carried no request for this long.", at_least(1)
    )
    socket_connection_setup_timeout_ms: float = option(
        10000, "How long one TCP/TLS connection attempt (per resolved address) may take.", at_least(1)
    )
    max_in_flight_requests_per_connection: int = option(
        5,
        "Requests sent on one connection without having received their responses (pipelining); "
        "producer ordering relies on this bound.",
        between(1, 1_000_000),
    )
    max_response_size: int = option(
        DEFAULT_MAX_RESPONSE_SIZE,
        "Largest response frame accepted; bigger ones are refused before "
        "allocation and close the connection.",
        between(1024, 2**31 - 1),
    )
    metadata_recovery_strategy: MetadataRecoveryStrategy = option(
        "rebootstrap",
        "What to do when metadata cannot be refreshed from the brokers the client knows "
        "(KIP-899, KIP-1102; Java 4.x default 'rebootstrap'): 'rebootstrap' drops the known "
        "brokers and starts again from bootstrap_servers, resolving their names anew, when "
        "every known broker is unreachable, when no refresh succeeded for "
        "metadata_recovery_rebootstrap_trigger_ms, or when a broker answers "
        "REBOOTSTRAP_REQUIRED; 'none' keeps the known brokers (bootstrap servers stay a "
        "last resort, their names resolved again on each connect).",
        one_of("rebootstrap", "none"),
    )
    metadata_recovery_rebootstrap_trigger_ms: float = option(
        300000,
        "With metadata_recovery_strategy='rebootstrap': rebootstrap once metadata refreshes "
        "have been failing for this long (KIP-1102), even while some known broker still "
        "accepts connections.",
        at_least(0),
    )
    client_dns_lookup: ClientDnsLookup = option(
        "use_all_dns_ips",
        "'use_all_dns_ips' (Java's default) connects to every address a host name resolves "
        "to in turn until one answers; 'resolve_canonical_bootstrap_servers_only' also "
        "replaces each bootstrap name, at every (re)bootstrap, by the canonical names of its "
        "addresses (reverse lookup; for Kerberos/SASL host-based principals).",
        one_of("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"),
    )
    allow_auto_topic_creation: bool = option(
        True, "Let metadata requests for unknown topics create them (if the broker allows it)."
    )
    security_protocol: SecurityProtocol = option("PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.")
    ssl_context: ssl.SSLContext | ReloadingSslContext | None = option(
        None,
        "TLS context for SSL/SASL_SSL (see aiokafka_lite.net.create_ssl_context); a default "
        "verifying context is used when None. A ReloadingSslContext re-reads its PEM files "
        "for new connections when they change.",
    )
    ssl_cafile: str | None = option(
        None,
        "PEM file of CAs to trust besides the system store (Java: ssl.truststore.location); "
        "an alternative to ssl_context.",
    )
    ssl_certfile: str | None = option(
        None,
        "Mutual TLS: PEM file with the client certificate, then its intermediates (Java: "
        "ssl.keystore.location); may also hold the key. Re-read when it changes (new "
        "connections use the renewed certificate). An alternative to ssl_context.",
    )
    ssl_keyfile: str | None = option(
        None, "Mutual TLS: PEM file with the private key, when it is not in ssl_certfile."
    )
    ssl_password: str | Callable[[], str] | None = option(
        None,
        "Mutual TLS: password of an encrypted private key (Java: ssl.key.password), or a "
        "callable returning it, called whenever the key is (re)loaded.",
        secret=True,
    )
    sasl_mechanism: str = option(
        "PLAIN",
        "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI (Kerberos; the kerberos extra).",
        _mechanism,
    )
    sasl_plain_username: str | None = option(None, "Username for PLAIN and SCRAM.")
    sasl_plain_password: str | None = option(None, "Password for PLAIN and SCRAM.", secret=True)
    sasl_scram_token_auth: bool = option(
        False,
        "SCRAM: log in with a delegation token (KIP-48): the token id as sasl_plain_username, "
        "its HMAC in base64 as sasl_plain_password (Java: ScramLoginModule tokenauth=true).",
    )
    sasl_oauth_token_provider: TokenProvider | None = option(
        None, "Async callable returning an OAUTHBEARER token; called for every (re-)authentication."
    )
    sasl_kerberos_service_name: str = option(
        "kafka",
        "GSSAPI: the brokers' Kerberos service name; the service principal is "
        "<name>/<broker host>@REALM (Java: sasl.kerberos.service.name).",
        non_empty,
    )
    sasl_kerberos_domain_name: str | None = option(
        None,
        "GSSAPI: host part of the brokers' service principal instead of the host each "
        "connection goes to (e.g. the brokers' DNS name while bootstrap_servers holds an address).",
    )
    sasl_kerberos_keytab: str | None = option(
        None,
        "GSSAPI: keytab holding sasl_kerberos_principal's key; tickets go to a private "
        "in-memory cache (librdkafka: sasl.kerberos.keytab). Without it the default ticket "
        "cache (kinit, KRB5CCNAME) is used.",
    )
    sasl_kerberos_principal: str | None = option(
        None,
        "GSSAPI: the client's Kerberos principal, e.g. 'app@EXAMPLE.COM' (librdkafka: "
        "sasl.kerberos.principal); required with a keytab, optional with the ticket cache.",
    )
    # OAUTHBEARER with OIDC built in (KIP-768, KIP-1139); see aiokafka_lite.net.oidc.
    sasl_oauthbearer_token_endpoint_url: str | None = option(
        None,
        "OAUTHBEARER: the OAuth/OIDC token endpoint to get tokens from (instead of "
        "sasl_oauth_token_provider); client_credentials grant with the client id/secret, "
        "jwt-bearer grant with an assertion key or file (needs the [oidc] extra); a file: URL "
        "reads the token from that file instead (Java's FileJwtRetriever).",
    )
    sasl_oauthbearer_client_credentials_client_id: str | None = option(
        None, "OIDC client_credentials grant: the client id (sent with HTTP Basic authentication)."
    )
    sasl_oauthbearer_client_credentials_client_secret: str | None = option(
        None, "OIDC client_credentials grant: the client secret.", secret=True
    )
    sasl_oauthbearer_scope: str | None = option(
        None, "OIDC: the scope requested from the token endpoint (space-separated)."
    )
    sasl_oauthbearer_extensions: Mapping[str, str] = option(
        doc="OAUTHBEARER SASL extensions sent with the token (RFC 7628; e.g. Confluent Cloud's "
        "logicalCluster and identityPoolId); Java sets them as JAAS extension_<name> options.",
        default_factory=dict,
    )
    sasl_oauthbearer_assertion_private_key_file: str | None = option(
        None,
        "OIDC jwt-bearer grant (KIP-1139): PEM private key signing the assertion (encrypted "
        "keys need sasl_oauthbearer_assertion_private_key_passphrase).",
    )
    sasl_oauthbearer_assertion_private_key_passphrase: str | None = option(
        None, "OIDC jwt-bearer grant: passphrase of the assertion private key.", secret=True
    )
    sasl_oauthbearer_assertion_algorithm: Literal["RS256", "ES256"] = option(
        "RS256", "OIDC jwt-bearer grant: signature algorithm of the assertion.", one_of("RS256", "ES256")
    )
    sasl_oauthbearer_assertion_claim_iss: str | None = option(
        None, "OIDC jwt-bearer grant: the assertion's iss claim."
    )
    sasl_oauthbearer_assertion_claim_sub: str | None = option(
        None, "OIDC jwt-bearer grant: the assertion's sub claim."
    )
    sasl_oauthbearer_assertion_claim_aud: str | None = option(
        None, "OIDC jwt-bearer grant: the assertion's aud claim (often the token endpoint URL)."
    )
    sasl_oauthbearer_assertion_claim_exp_seconds: int = option(
        300, "OIDC jwt-bearer grant: the assertion expires this long after it is made.", between(1, 86400)
    )
    sasl_oauthbearer_assertion_claim_nbf_seconds: int = option(
        60, "OIDC jwt-bearer grant: the assertion's nbf is this long before it is made.", between(0, 3600)
    )
    sasl_oauthbearer_assertion_claim_jti_include: bool = option(
        False, "OIDC jwt-bearer grant: add a random jti claim to each assertion."
    )
    sasl_oauthbearer_assertion_file: str | None = option(
        None,
        "OIDC jwt-bearer grant: a file holding a ready-made assertion, read for each token "
        "request (instead of signing one with a private key).",
    )
    sasl_oauthbearer_sub_claim_name: str = option(
        "sub", "OIDC: the token claim naming the principal (checked when a token arrives).", non_empty
    )
    sasl_oauthbearer_scope_claim_name: str = option("scope", "OIDC: the token claim holding its scopes.")
    sasl_oauthbearer_token_endpoint_ssl_context: ssl.SSLContext | None = option(
        None, "OIDC: TLS context for an https token endpoint (default: the system CA store)."
    )
    sasl_login_refresh_window_factor: float = option(
        0.8,
        "OAUTHBEARER token refresh: refresh once this fraction of the token's lifetime has passed.",
        between(0.5, 1.0),
    )
    sasl_login_refresh_window_jitter: float = option(
        0.05,
        "OAUTHBEARER token refresh: up to this fraction of the lifetime added at random.",
        between(0, 0.25),
    )
    sasl_login_refresh_min_period_seconds: int = option(
        60, "OAUTHBEARER token refresh: never sooner than this after the token was obtained.", between(0, 900)
    )
    sasl_login_refresh_buffer_seconds: int = option(
        300, "OAUTHBEARER token refresh: no later than this before the token expires.", between(0, 3600)
    )
    sasl_login_connect_timeout_ms: float = option(
        10000, "OIDC: connect timeout of a token endpoint request.", at_least(1)
    )
    sasl_login_read_timeout_ms: float = option(
        10000, "OIDC: read timeout of a token endpoint request.", at_least(1)
    )
    sasl_login_retry_backoff_ms: float = option(
        100,
        "OIDC: first wait before retrying an unreachable or failing (5xx) token endpoint; "
        "doubles per attempt (a 4xx answer is not retried).",
        at_least(0),
    )
    sasl_login_retry_backoff_max_ms: float = option(
        10000, "OIDC: total wait spent retrying one token request before it fails.", at_least(0)
    )
    client_software_name: str = option(
        "aiokafka-lite", "Sent in ApiVersions (KIP-511) for broker-side client metrics.", _software
    )
    client_software_version: str = option(__version__, "Sent in ApiVersions (KIP-511).", _software)
    max_versions: Mapping[int, int] = option(
        doc="Per API key, the highest version this client may use (caps negotiation; for tests and "
        "working around broker bugs).",
        default_factory=dict,
        validator=_max_versions,
    )
    metrics_latency_samples: int = option(
        1024, "How many recent request latencies per broker feed the metrics percentiles.", at_least(1)
    )

    def validate(self) -> None:
        non_empty_id = non_empty(self.client_id)
        if non_empty_id:
            raise ConfigError(f"client_id: {non_empty_id}")
        if self.reconnect_backoff_max_ms < self.reconnect_backoff_ms:
            raise ConfigError("reconnect_backoff_max_ms must be >= reconnect_backoff_ms")
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise ConfigError("retry_backoff_max_ms must be >= retry_backoff_ms")
        tls_files = (self.ssl_cafile, self.ssl_certfile, self.ssl_keyfile, self.ssl_password)
        if self.ssl_context is not None and any(v is not None for v in tls_files):
            raise ConfigError(
                "give either ssl_context or the ssl_cafile/ssl_certfile/ssl_keyfile/ssl_password options"
            )
        if self.ssl_certfile is None and (self.ssl_keyfile is not None or self.ssl_password is not None):
            raise ConfigError("ssl_keyfile and ssl_password need ssl_certfile (mutual TLS)")
        if self.uses_ssl and (self.ssl_certfile is not None or self.ssl_cafile is not None):
            self._tls_files  # noqa: B018 - load now: bad files fail at configuration time
        if self.uses_sasl:
            mech = self.sasl_mechanism.upper()
            if mech == "OAUTHBEARER":
                if (
                    self.sasl_oauth_token_provider is None
                    and self.sasl_oauthbearer_token_endpoint_url is None
                ):
                    raise ConfigError(
                        "OAUTHBEARER needs sasl_oauth_token_provider or sasl_oauthbearer_token_endpoint_url"
                    )
                if self.sasl_oauth_token_provider is not None and self.sasl_oauthbearer_token_endpoint_url:
                    raise ConfigError(
                        "give either sasl_oauth_token_provider or sasl_oauthbearer_token_endpoint_url"
                    )
                self.oauth_token_provider  # noqa: B018 - build now: bad OIDC options fail here
            elif mech == "GSSAPI":
                if self.sasl_kerberos_keytab is not None and self.sasl_kerberos_principal is None:
                    raise ConfigError(
                        "sasl_kerberos_keytab needs sasl_kerberos_principal (whose key it holds)"
                    )
            elif self.sasl_plain_username is None or self.sasl_plain_password is None:
                raise ConfigError(f"sasl_plain_username and sasl_plain_password are required for {mech}")

    @functools.cached_property
    def _tls_files(self) -> ReloadingSslContext:
        return ReloadingSslContext(
            cafile=self.ssl_cafile,
            certfile=self.ssl_certfile,
            keyfile=self.ssl_keyfile,
            password=self.ssl_password,
        )

    def client_ssl_context(self) -> ssl.SSLContext:
        """The TLS context for a new connection: ``ssl_context`` (the current one of a
        ``ReloadingSslContext``), one built from the ``ssl_*file`` options (re-read when
        the files change), or a default verifying context."""
        ctx = self.ssl_context
        if isinstance(ctx, ReloadingSslContext):
            return ctx.current()
        if ctx is not None:
            return ctx
        if self.ssl_certfile is not None or self.ssl_cafile is not None:
            return self._tls_files.current()
        return ssl.create_default_context()

    @functools.cached_property
    def oauth_token_provider(self) -> TokenProvider | None:
        """What OAUTHBEARER authentications get their token from: sasl_oauth_token_provider,
        or one ``OidcTokenRetriever`` per configuration (shared by its connections, so the
        token is cached and refreshed once for all of them) built from the OIDC options."""
        if self.sasl_oauth_token_provider is not None:
            return self.sasl_oauth_token_provider
        url = self.sasl_oauthbearer_token_endpoint_url
        if url is None:
            return None
        return OidcTokenRetriever(
            url,
            client_id=self.sasl_oauthbearer_client_credentials_client_id,
            client_secret=self.sasl_oauthbearer_client_credentials_client_secret,
            scope=self.sasl_oauthbearer_scope,
            assertion_private_key_file=self.sasl_oauthbearer_assertion_private_key_file,
            assertion_private_key_passphrase=self.sasl_oauthbearer_assertion_private_key_passphrase,
            assertion_algorithm=self.sasl_oauthbearer_assertion_algorithm,
            assertion_claim_iss=self.sasl_oauthbearer_assertion_claim_iss,
            assertion_claim_sub=self.sasl_oauthbearer_assertion_claim_sub,
            assertion_claim_aud=self.sasl_oauthbearer_assertion_claim_aud,
            assertion_claim_exp_seconds=self.sasl_oauthbearer_assertion_claim_exp_seconds,
            assertion_claim_nbf_seconds=self.sasl_oauthbearer_assertion_claim_nbf_seconds,
            assertion_claim_jti_include=self.sasl_oauthbearer_assertion_claim_jti_include,
            assertion_file=self.sasl_oauthbearer_assertion_file,
            refresh=RefreshPolicy(
                self.sasl_login_refresh_window_factor,
                self.sasl_login_refresh_window_jitter,
                self.sasl_login_refresh_min_period_seconds,
                self.sasl_login_refresh_buffer_seconds,
            ),
            connect_timeout_ms=self.sasl_login_connect_timeout_ms,
            read_timeout_ms=self.sasl_login_read_timeout_ms,
            retry_backoff_ms=self.sasl_login_retry_backoff_ms,
            retry_backoff_max_ms=self.sasl_login_retry_backoff_max_ms,
            ssl_context=self.sasl_oauthbearer_token_endpoint_ssl_context,
            sub_claim_name=self.sasl_oauthbearer_sub_claim_name,
            scope_claim_name=self.sasl_oauthbearer_scope_claim_name,
        )

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")
