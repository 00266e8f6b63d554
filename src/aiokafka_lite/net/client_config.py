"""Options of the network client (``Client``): the single definition of each one.

Defaults follow the Java client where it has the same setting (names are the Java
ones with dots replaced by underscores).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from aiokafka_lite import __version__
from aiokafka_lite.core.errors import ConfigError
from aiokafka_lite.core.options import Options, at_least, between, non_empty, one_of, option

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

_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


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
    ssl_context: ssl.SSLContext | None = option(
        None,
        "TLS context for SSL/SASL_SSL (see aiokafka_lite.net.create_ssl_context); a default "
        "verifying context is used when None.",
    )
    sasl_mechanism: str = option("PLAIN", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER.", _mechanism)
    sasl_plain_username: str | None = option(None, "Username for PLAIN and SCRAM.")
    sasl_plain_password: str | None = option(None, "Password for PLAIN and SCRAM.", secret=True)
    sasl_oauth_token_provider: TokenProvider | None = option(
        None, "Async callable returning an OAUTHBEARER token; called for every (re-)authentication."
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
        if self.uses_sasl:
            mech = self.sasl_mechanism.upper()
            if mech == "OAUTHBEARER":
                if self.sasl_oauth_token_provider is None:
                    raise ConfigError("sasl_oauth_token_provider is required for OAUTHBEARER")
            elif self.sasl_plain_username is None or self.sasl_plain_password is None:
                raise ConfigError(f"sasl_plain_username and sasl_plain_password are required for {mech}")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")
