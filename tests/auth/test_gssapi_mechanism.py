"""The SASL GSSAPI client mechanism (RFC 4752) against a GSS-API acceptor holding the
broker's keytab, with a real MIT KDC (tests/_support/kdc.py), without Kafka: the context
tokens, mutual authentication, the security-layer negotiation (the client answers "no
layer" wrapped, with no size and no authorization id), and the typed errors. The Kafka
end to end runs in tests/kafka4/test_gssapi_apache.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support.kdc import Kdc

from aiokafka_lite.core import errors as E
from aiokafka_lite.net import ClientConfig
from aiokafka_lite.net.gssapi import GssapiMechanism, gssapi_available

pytestmark = pytest.mark.skipif(
    not (Kdc.available() and gssapi_available()),
    reason="needs MIT Kerberos (krb5-kdc, krb5-admin-server, krb5-user) and the gssapi package: scripts/test.sh installs them",
)


class Realm:
    def __init__(self, kdc: Kdc) -> None:
        self.kdc = kdc
        self.service_keytab = kdc.keytab(kdc.add_principal("kafka/localhost"))
        self.client = kdc.add_principal("alice")
        self.client_keytab = kdc.keytab("alice")


@pytest.fixture(scope="module")
def realm() -> Iterator[Realm]:
    with Kdc() as kdc:
        saved = os.environ.get("KRB5_CONFIG")
        os.environ["KRB5_CONFIG"] = str(kdc.krb5_config)
        try:
            yield Realm(kdc)
        finally:
            if saved is None:
                os.environ.pop("KRB5_CONFIG", None)
            else:
                os.environ["KRB5_CONFIG"] = saved


def _acceptor(realm: Realm) -> object:
    import gssapi

    creds = gssapi.Credentials(usage="accept", store={b"keytab": str(realm.service_keytab).encode()})
    return gssapi.SecurityContext(creds=creds, usage="accept")


def _mechanism(realm: Realm, **options: object) -> GssapiMechanism:
    kwargs: dict[str, object] = {"keytab": str(realm.client_keytab), "principal": realm.client, **options}
    return GssapiMechanism("localhost", **kwargs)  # type: ignore[arg-type]


def _establish(realm: Realm, mech: GssapiMechanism) -> object:
    server = _acceptor(realm)
    mech.prepare()
    reply = server.step(mech.initial_response())  # type: ignore[attr-defined]
    assert server.complete  # type: ignore[attr-defined]
    assert str(server.initiator_name) == realm.client  # type: ignore[attr-defined]
    assert mech.step(reply or b"") == b""  # mutual authentication verified; nothing to send
    return server


def test_context_and_security_layer_negotiation(realm: Realm) -> None:
    mech = _mechanism(realm)
    assert mech.service == "kafka@localhost"
    server = _establish(realm, mech)
    # The broker offers every layer and a 64 KiB maximum; the client takes "none".
    offer = server.wrap(bytes([0x07, 0x01, 0x00, 0x00]), False).message  # type: ignore[attr-defined]
    answer = mech.step(offer)
    assert answer is not None
    assert server.unwrap(answer).message == bytes([0x01, 0, 0, 0])  # type: ignore[attr-defined]
    assert not mech.complete
    assert mech.step(b"") is None and mech.complete


def test_a_broker_that_requires_a_security_layer_is_refused(realm: Realm) -> None:
    mech = _mechanism(realm)
    server = _establish(realm, mech)
    offer = server.wrap(bytes([0x04, 0x01, 0x00, 0x00]), False).message  # type: ignore[attr-defined]
    with pytest.raises(E.KerberosError, match="requires a SASL security layer"):
        mech.step(offer)
    bad = _mechanism(realm)
    server = _establish(realm, bad)
    with pytest.raises(E.KerberosError, match="malformed security-layer token"):
        bad.step(server.wrap(b"\x01\x00", False).message)  # type: ignore[attr-defined]


def test_typed_errors(realm: Realm, tmp_path: Path) -> None:
    kdc = realm.kdc
    with pytest.raises(E.KerberosError, match="does not know the broker's service principal"):
        _mechanism(realm, service_name="other").prepare()
    with pytest.raises(E.KerberosError, match="holds no key for sasl_kerberos_principal"):
        _mechanism(realm, principal=kdc.principal("nobody")).prepare()
    with pytest.raises(E.KerberosError, match="does not exist"):
        _mechanism(realm, keytab=str(tmp_path / "missing.keytab")).prepare()
    kdc.add_principal("rotating")
    stale = kdc.keytab("rotating", tmp_path / "stale.keytab")
    kdc.keytab("rotating", tmp_path / "current.keytab")
    with pytest.raises(E.KerberosError, match="not the principal's current key"):
        _mechanism(realm, keytab=str(stale), principal=kdc.principal("rotating")).prepare()
    _mechanism(realm, keytab=str(tmp_path / "current.keytab"), principal=kdc.principal("rotating")).prepare()


def test_options() -> None:
    with pytest.raises(E.ConfigError, match="needs sasl_kerberos_principal"):
        ClientConfig(
            security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI", sasl_kerberos_keytab="/x.keytab"
        )
    with pytest.raises(E.ConfigError):
        ClientConfig(sasl_kerberos_service_name="")
    cfg = ClientConfig(security_protocol="SASL_SSL", sasl_mechanism="GSSAPI")
    assert cfg.sasl_kerberos_service_name == "kafka"


def test_aiokafka_compat_accepts_gssapi() -> None:
    """aiokafka's GSSAPI options (the ticket cache, service and domain name) reach the
    native client instead of the ConfigError the compat layer raised before."""
    from aiokafka_lite.compat.aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    common = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_service_name": "kafka-svc",
        "sasl_kerberos_domain_name": "kafka.example.com",
    }
    producer = AIOKafkaProducer(bootstrap_servers="h:1", **common)
    consumer = AIOKafkaConsumer(bootstrap_servers="h:1", **common)
    for native in (producer._producer, consumer._consumer):
        cfg = native._client.config
        assert (cfg.sasl_mechanism, cfg.sasl_kerberos_service_name, cfg.sasl_kerberos_domain_name) == (
            "GSSAPI",
            "kafka-svc",
            "kafka.example.com",
        )
