"""The principal of a mutual-TLS client, as Kafka's default principal builder names it.

Kafka's ``DefaultKafkaPrincipalBuilder`` on an SSL listener (with the default
``ssl.principal.mapping.rules=DEFAULT``) makes ``User:<DN>``, where the DN is the peer
certificate's subject as Java's ``X500Principal.getName()`` writes it: RFC 2253, the
most specific RDN first (``CN=alice,OU=payments,O=Acme,C=DE``), the RFC 2253 keywords
(CN, C, L, ST, O, OU, STREET, DC, UID) by name and other attributes as a dotted OID with
the DER value in hex (``1.2.840.113549.1.9.1=#16...`` for an e-mail address). A client
without a certificate is ``ANONYMOUS``.

Python's ``getpeercert()`` gives the subject decoded, without the ASN.1 string type of
each value, so the hex form is rebuilt with the type such attributes use in practice
(IA5String for e-mail, PrintableString for serialNumber, UTF8String otherwise); a
certificate encoding them otherwise gets a different principal than on Apache Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["ANONYMOUS", "rfc2253_name", "tls_principal"]

ANONYMOUS: Final = "ANONYMOUS"

# Python's attribute names -> RFC 2253 keywords.
_KEYWORDS: Final[Mapping[str, str]] = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
# Other common attributes -> (OID, DER tag of the string type they are usually encoded in).
_OIDS: Final[Mapping[str, tuple[str, int]]] = {
    "emailAddress": ("1.2.840.113549.1.9.1", 0x16),
    "serialNumber": ("2.5.4.5", 0x13),
    "title": ("2.5.4.12", 0x0C),
    "surname": ("2.5.4.4", 0x0C),
    "givenName": ("2.5.4.42", 0x0C),
    "initials": ("2.5.4.43", 0x0C),
    "generationQualifier": ("2.5.4.44", 0x0C),
    "dnQualifier": ("2.5.4.46", 0x13),
    "pseudonym": ("2.5.4.65", 0x0C),
    "businessCategory": ("2.5.4.15", 0x0C),
    "postalCode": ("2.5.4.17", 0x0C),
}
_SPECIAL: Final = frozenset(',+"\\<>;=')


def _escape(value: str) -> str:
    out = "".join("\\" + ch if ch in _SPECIAL else ch for ch in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def _der_hex(tag: int, value: str) -> str:
    data = value.encode()
    n = len(data)
    length = (
        bytes([n]) if n < 0x80 else (b"\x81" + bytes([n]) if n < 0x100 else b"\x82" + n.to_bytes(2, "big"))
    )
    return "#" + (bytes([tag]) + length + data).hex()


def _attribute(name: str, value: str) -> str:
    keyword = _KEYWORDS.get(name)
    if keyword is not None:
        return f"{keyword}={_escape(value)}"
    oid = _OIDS.get(name)
    if oid is not None:
        return f"{oid[0]}={_der_hex(oid[1], value)}"
    return f"{name}={_escape(value)}"


def rfc2253_name(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """A subject from ``SSLSocket.getpeercert()['subject']`` as ``X500Principal.getName()``."""
    rdns = ["+".join(_attribute(name, value) for name, value in rdn) for rdn in subject]
    return ",".join(reversed(rdns))


def tls_principal(peercert: Mapping[str, Any] | None) -> str:
    """The principal name (without ``User:``) for a TLS client's verified certificate."""
    if not peercert or not peercert.get("subject"):
        return ANONYMOUS
    return rfc2253_name(peercert["subject"])
