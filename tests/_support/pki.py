"""A throw-away PKI for mutual-TLS tests, made with the openssl command line tool.

``Pki(dir)`` makes a root CA and an intermediate CA under it; ``server()`` issues a
certificate for 127.0.0.1/localhost signed by the root, ``client(cn, ...)`` one for a
client signed by the intermediate (its file holds the leaf, then the intermediate: a
chain), optionally with an encrypted key. ``rogue_client`` is signed by a CA nobody
trusts. Files are PEM; keys PKCS#8 (what Kafka's PEM keystore wants).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CertFiles", "Pki"]


@dataclass(frozen=True)
class CertFiles:
    cert: Path  # leaf certificate, then the issuing intermediate (if any)
    key: Path
    subject: str  # openssl -subj form, e.g. /O=Acme/OU=payments/CN=alice


def _run(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


class Pki:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.root = self._ca("root", "/O=Test/CN=Test Root CA", issuer=None)
        self.intermediate = self._ca("intermediate", "/O=Test/CN=Test Client CA", issuer=self.root)
        self.rogue = self._ca("rogue", "/O=Rogue/CN=Rogue CA", issuer=None)

    def _key(self, path: Path, password: str | None = None) -> None:
        args = ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", str(path)]
        if password is not None:
            args += ["-aes-256-cbc", "-pass", f"pass:{password}"]
        _run(*args)

    def _sign(
        self,
        name: str,
        subject: str,
        issuer: CertFiles | None,
        extensions: str,
        password: str | None = None,
        key: Path | None = None,
    ) -> Path:
        if key is None:
            key = self.dir / f"{name}.key"
            self._key(key, password)
        csr, cert, ext = self.dir / f"{name}.csr", self.dir / f"{name}.crt", self.dir / f"{name}.ext"
        ext.write_text(extensions)
        passin = ["-passin", f"pass:{password}"] if password is not None else []
        _run("req", "-new", "-key", str(key), *passin, "-subj", subject, "-out", str(csr))
        if issuer is None:
            sign = ["-signkey", str(key), *passin]
        else:
            sign = ["-CA", str(issuer.cert), "-CAkey", str(issuer.key), "-CAcreateserial"]
        _run("x509", "-req", "-in", str(csr), *sign, "-days", "3", "-extfile", str(ext), "-out", str(cert))
        return cert

    def _ca(self, name: str, subject: str, issuer: CertFiles | None) -> CertFiles:
        ext = "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
        cert = self._sign(name, subject, issuer, ext)
        return CertFiles(cert, self.dir / f"{name}.key", subject)

    def server(self, name: str = "server") -> CertFiles:
        ext = "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n"
        cert = self._sign(name, "/CN=localhost", self.root, ext)
        return CertFiles(cert, self.dir / f"{name}.key", "/CN=localhost")

    def client(
        self,
        cn: str,
        *,
        ou: str = "clients",
        name: str | None = None,
        password: str | None = None,
        issuer: CertFiles | None = None,
        key: Path | None = None,
    ) -> CertFiles:
        """A client certificate ``/O=Test/OU=<ou>/CN=<cn>`` (principal ``CN=<cn>,OU=<ou>,O=Test``),
        chain file = leaf + issuer; ``key`` reuses an existing key (a renewal)."""
        name = name or cn
        issuer = issuer or self.intermediate
        subject = f"/O=Test/OU={ou}/CN={cn}"
        leaf = self._sign(name, subject, issuer, "extendedKeyUsage=clientAuth\n", password, key)
        chain = self.dir / f"{name}-chain.pem"
        chain.write_text(leaf.read_text() + (issuer.cert.read_text() if issuer is not self.rogue else ""))
        return CertFiles(chain, key or self.dir / f"{name}.key", subject)

    def rogue_client(self, cn: str) -> CertFiles:
        return self.client(cn, name=f"rogue-{cn}", issuer=self.rogue)

    @staticmethod
    def principal(files: CertFiles) -> str:
        """The Kafka principal name (RFC 2253, most specific first) of ``files``' subject."""
        parts = [p for p in files.subject.split("/") if p]
        return ",".join(reversed(parts))
