"""SASL GSSAPI (Kerberos V5, RFC 4752) for the client, on the ``gssapi`` package.

Install the ``kerberos`` extra (``pip install aiokafka-lite[kerberos]``; the package
builds against MIT Kerberos' headers, Debian's ``libkrb5-dev``). Options, with Java's
and librdkafka's names in brackets:

* ``sasl_kerberos_service_name`` (``sasl.kerberos.service.name``, default ``kafka``)
  and the broker's host name make the service principal ``kafka/<host>@REALM``;
  ``sasl_kerberos_domain_name`` replaces the host (a load balancer or an IP address in
  ``bootstrap_servers`` while the brokers' principals use their DNS names);
* credentials: ``sasl_kerberos_keytab`` + ``sasl_kerberos_principal`` (librdkafka's
  ``sasl.kerberos.keytab``/``principal``; Java's ``Krb5LoginModule useKeyTab=true``)
  get tickets from the keytab into a private in-memory cache, renewed by the Kerberos
  library as they expire; without a keytab the default ticket cache (``kinit``,
  ``KRB5CCNAME``) is used, optionally checked against ``sasl_kerberos_principal``.

The exchange: the client's GSS-API context tokens travel in SaslAuthenticate until the
context is established (mutual authentication: the broker proves it holds the
service key), then RFC 4752's security-layer negotiation: the broker sends a wrapped
4-byte token (supported layers, maximum message size), the client answers with a wrapped
``0x01`` ("no security layer", as Kafka only supports) and a zero size. Kafka protects
the connection with TLS (SASL_SSL), never with a SASL layer.

Talking to the KDC (a TGT from the keytab, the service ticket) happens in
``GssapiMechanism.prepare``, which blocks; the connection runs it in a worker thread so
the event loop keeps serving other connections. Failures are ``KerberosError`` with the
library's status text and the likely cause (no or expired ticket, a keytab without the
principal's current key, an unknown client or service principal, no reachable KDC).
"""

from __future__ import annotations

import itertools
import os
from typing import TYPE_CHECKING, Any, Final

from aiokafka_lite.core.errors import ConfigError, IllegalStateError, KerberosError

if TYPE_CHECKING:  # pragma: no cover
    import gssapi as _gssapi

__all__ = ["GssapiMechanism", "gssapi_available", "kerberos_error"]

#: RFC 4752 section 3.3: the security layer bit masks.
NO_SECURITY_LAYER: Final = 0x01

_cache_ids = itertools.count(1)

# (substring of the GSS-API/Kerberos status text, what it most likely means)
_CAUSES: Final = (
    ("No Kerberos credentials available", "no ticket in the cache: run kinit, or set sasl_kerberos_keytab"),
    ("No credentials cache found", "no ticket cache: run kinit, or set sasl_kerberos_keytab"),
    ("credential has expired", "the ticket expired: kinit again, or use a keytab (renewed automatically)"),
    ("Ticket expired", "the ticket expired: kinit again, or use a keytab (renewed automatically)"),
    (
        "Decrypt integrity check failed",
        "the keytab's key is not the principal's current key (a rotated or wrong keytab)",
    ),
    (
        "Preauthentication failed",
        "the keytab's key is not the principal's current key (a rotated or wrong keytab)",
    ),
    ("Key table entry not found", "the keytab has no key for sasl_kerberos_principal"),
    ("No key table entry found", "the keytab has no key for sasl_kerberos_principal"),
    ("Key table file", "the keytab cannot be read: check sasl_kerberos_keytab"),
    ("Client not found in Kerberos database", "the KDC does not know sasl_kerberos_principal"),
    (
        "not found in Kerberos database",
        "the KDC does not know the broker's service principal: check "
        "sasl_kerberos_service_name / sasl_kerberos_domain_name and the broker's keytab",
    ),
    ("Cannot contact any KDC", "no KDC of the realm answers: check krb5.conf (KRB5_CONFIG) and the KDC"),
    ("Cannot find KDC", "krb5.conf names no KDC for the realm: check KRB5_CONFIG"),
    ("Clock skew too great", "this host's clock differs too much from the KDC's"),
    ("Cannot resolve network address", "the KDC's host name does not resolve"),
)


def gssapi_available() -> bool:
    try:
        import gssapi  # noqa: F401
    except ImportError:
        return False
    return True


def _import_gssapi() -> Any:
    try:
        import gssapi
    except ImportError:
        raise ConfigError(
            "sasl_mechanism='GSSAPI' needs the gssapi package: pip install 'aiokafka-lite[kerberos]' "
            "(it builds against MIT Kerberos: apt-get install libkrb5-dev)"
        ) from None
    return gssapi


def kerberos_error(exc: BaseException, doing: str, *, keytab: str | None = None) -> KerberosError:
    """A ``KerberosError`` for a GSS-API failure, naming the likely cause."""
    gen = getattr(exc, "gen_message", None)
    text = str(gen() if callable(gen) else exc).strip()
    text = " ".join(text.split())
    cause = next((why for needle, why in _CAUSES if needle.lower() in text.lower()), None)
    if keytab is not None and "No credentials cache found" in text:
        # With a keytab, MIT says this when the keytab has no entry for the principal.
        cause = f"keytab {keytab} holds no key for sasl_kerberos_principal (misspelt, or another keytab?)"
    hint = f": {cause}" if cause else ""
    return KerberosError(f"GSSAPI (Kerberos): {doing} failed ({text}){hint}")


class GssapiMechanism:
    """SASL GSSAPI client: a GSS-API Kerberos context, then RFC 4752's layer negotiation.

    Call ``prepare()`` (blocking: KDC traffic) before ``initial_response()``.
    """

    name = "GSSAPI"

    def __init__(
        self,
        host: str,
        *,
        service_name: str = "kafka",
        domain_name: str | None = None,
        keytab: str | None = None,
        principal: str | None = None,
    ) -> None:
        if not service_name:
            raise ConfigError("sasl_kerberos_service_name must not be empty")
        if keytab is not None and principal is None:
            raise ConfigError("sasl_kerberos_keytab needs sasl_kerberos_principal (whose key it holds)")
        self._gssapi = _import_gssapi()
        self.service = f"{service_name}@{domain_name or host}"
        self.keytab = keytab
        self.principal = principal
        self._ctx: _gssapi.SecurityContext | None = None
        self._first: bytes | None = None
        self._state = "new"
        self.complete = False

    # -- the blocking part ------------------------------------------------------------
    def prepare(self) -> None:
        """Acquire credentials and make the first context token (talks to the KDC)."""
        if self._state != "new":
            raise IllegalStateError("prepare() already called")
        gssapi = self._gssapi
        try:
            name = None
            if self.principal is not None:
                name = gssapi.Name(self.principal, gssapi.NameType.kerberos_principal)
            if self.keytab is not None:
                if not os.path.isfile(self.keytab):
                    raise KerberosError(f"GSSAPI (Kerberos): keytab {self.keytab} does not exist")
                # A private memory cache: the process's default cache stays untouched, and
                # two clients with different keytabs do not share tickets.
                store = {
                    b"client_keytab": self.keytab.encode(),
                    b"ccache": f"MEMORY:aiokafka-lite-{os.getpid()}-{next(_cache_ids)}".encode(),
                }
                creds = gssapi.Credentials(name=name, usage="initiate", store=store)
            else:
                creds = gssapi.Credentials(name=name, usage="initiate")
                creds.lifetime  # noqa: B018 - raises ExpiredCredentialsError for an expired ticket
        except gssapi.exceptions.GSSError as exc:
            raise kerberos_error(exc, "acquiring credentials", keytab=self.keytab) from None
        try:
            target = gssapi.Name(self.service, gssapi.NameType.hostbased_service)
            flags = gssapi.RequirementFlag
            self._ctx = gssapi.SecurityContext(
                name=target,
                creds=creds,
                usage="initiate",
                flags=[flags.mutual_authentication, flags.integrity],
            )
            self._first = self._ctx.step(b"") or b""
        except gssapi.exceptions.GSSError as exc:
            raise kerberos_error(
                exc, f"getting a service ticket for {self.service}", keytab=self.keytab
            ) from None
        self._state = "prepared"

    # -- the sans-I/O part ----------------------------------------------------------
    def initial_response(self) -> bytes:
        if self._state != "prepared" or self._first is None:
            raise IllegalStateError("call prepare() first (once)")
        self._state = "context"
        first, self._first = self._first, None
        return first

    def step(self, challenge: bytes) -> bytes | None:
        ctx = self._ctx
        gssapi = self._gssapi
        if ctx is None:
            raise IllegalStateError("GSSAPI exchange is not in progress")
        try:
            if self._state == "context":
                if not ctx.complete:
                    out = ctx.step(challenge)
                    return out or b""  # RFC 4752: an empty response once established
                # Established: this is the server's wrapped security-layer offer.
                return self._answer_layers(challenge)
            if self._state == "layer-sent":
                self._state = "done"
                self.complete = True
                return None
        except gssapi.exceptions.GSSError as exc:
            self._state = "failed"
            raise kerberos_error(exc, "verifying the broker's reply (mutual authentication)") from None
        raise IllegalStateError(f"GSSAPI exchange is not expecting a challenge (state {self._state})")

    def _answer_layers(self, challenge: bytes) -> bytes:
        assert self._ctx is not None
        offer = self._ctx.unwrap(challenge).message
        if len(offer) != 4:
            self._state = "failed"
            raise KerberosError(
                f"GSSAPI (Kerberos): malformed security-layer token ({len(offer)} bytes, expected 4)"
            )
        if not offer[0] & NO_SECURITY_LAYER:
            self._state = "failed"
            raise KerberosError(
                "GSSAPI (Kerberos): the broker requires a SASL security layer (integrity or "
                "confidentiality), which Kafka clients do not use; use SASL_SSL for protection"
            )
        # No layer, no maximum size, empty authorization id: the broker takes the
        # authenticated principal.
        self._state = "layer-sent"
        return bytes(self._ctx.wrap(bytes([NO_SECURITY_LAYER, 0, 0, 0]), False).message)

    def __repr__(self) -> str:
        return (
            f"GssapiMechanism(service={self.service!r}, principal={self.principal!r}, keytab={self.keytab!r})"
        )
