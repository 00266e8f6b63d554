"""The mTLS principal as Kafka's default principal builder writes it (X500Principal's
RFC 2253 form), from the subject ``getpeercert()`` decodes."""

from __future__ import annotations

from aiokafka_lite.broker.tls_principal import ANONYMOUS, rfc2253_name, tls_principal


def test_most_specific_first_with_keywords() -> None:
    subject = (
        (("countryName", "DE"),),
        (("organizationName", "Acme"),),
        (("organizationalUnitName", "pay"),),
        (("commonName", "svc"),),
    )
    assert rfc2253_name(subject) == "CN=svc,OU=pay,O=Acme,C=DE"


def test_special_characters_are_escaped() -> None:
    subject = ((("organizationName", "Acme, Inc."),), (("commonName", ' a+b=c;<d>"#'),))
    assert rfc2253_name(subject) == 'CN=\\ a\\+b\\=c\\;\\<d\\>\\"#,O=Acme\\, Inc.'
    assert rfc2253_name(((("commonName", "#lead"),),)) == "CN=\\#lead"
    assert rfc2253_name(((("commonName", "trail "),),)) == "CN=trail\\ "


def test_other_attributes_as_oid_and_der_hex_and_multivalued_rdns() -> None:
    subject = ((("commonName", "svc"), ("emailAddress", "a@b")),)
    # IA5String (0x16), length 3, "a@b"
    assert rfc2253_name(subject) == "CN=svc+1.2.840.113549.1.9.1=#1603614062"
    assert rfc2253_name(((("domainComponent", "example"),), (("userId", "u1"),))) == "UID=u1,DC=example"


def test_no_certificate_is_anonymous() -> None:
    assert tls_principal(None) == ANONYMOUS
    assert tls_principal({}) == ANONYMOUS
    assert tls_principal({"subject": ((("commonName", "x"),),)}) == "CN=x"
