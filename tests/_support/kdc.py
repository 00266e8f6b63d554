"""A real MIT Kerberos KDC for the GSSAPI tests, in a temporary directory.

``with Kdc() as kdc:`` makes a realm (krb5.conf and kdc.conf in a temp dir,
``kdb5_util create -s``), starts ``krb5kdc -n`` on a free loopback port (TCP, and UDP on
the same number) and stops it and removes everything at the end. ``add_principal``
(``kadmin.local addprinc -randkey``) and ``keytab`` (``ktadd``) make principals and
keytabs; ``kinit`` fills a ticket cache. ``krb5_config`` is the file clients need
(``KRB5_CONFIG`` for the Python process, ``-Djava.security.krb5.conf`` for Java).
Needs Debian's ``krb5-kdc krb5-admin-server krb5-user`` (scripts/test.sh installs them);
``Kdc.available()`` says whether they are there.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = ["Kdc"]

_SBIN = ("/usr/sbin", "/usr/bin", "/sbin")


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in _SBIN:
        if os.access(f"{d}/{name}", os.X_OK):
            return f"{d}/{name}"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Kdc:
    def __init__(self, realm: str = "AIOKAFKA.TEST") -> None:
        self.realm = realm
        self._tmp = tempfile.TemporaryDirectory(prefix="kdc-")
        self.dir = Path(self._tmp.name)
        self.port = _free_port()
        self.krb5_config = self.dir / "krb5.conf"
        self.kdc_config = self.dir / "kdc.conf"
        self._proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def available() -> bool:
        return all(_tool(t) for t in ("krb5kdc", "kdb5_util", "kadmin.local", "kinit"))

    # -- set-up ---------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "KRB5_CONFIG": str(self.krb5_config),
            "KRB5_KDC_PROFILE": str(self.kdc_config),
        }

    def _run(self, *args: str) -> str:
        proc = subprocess.run(args, env=self._env(), capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:3])} failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
        return proc.stdout

    def write_krb5_conf(self, path: Path, kdc_port: int) -> Path:
        """A client krb5.conf for this realm pointing at ``kdc_port`` (a dead port makes
        'the KDC is down')."""
        path.write_text(
            f"""[libdefaults]
    default_realm = {self.realm}
    dns_lookup_realm = false
    dns_lookup_kdc = false
    rdns = false
    dns_canonicalize_hostname = false
    udp_preference_limit = 1
    ticket_lifetime = 1h
    forwardable = false
    max_retries = 1
    kdc_timeout = 3000
    default_ccache_name = FILE:{self.dir}/default-ccache

[realms]
    {self.realm} = {{
        kdc = 127.0.0.1:{kdc_port}
    }}

[domain_realm]
    localhost = {self.realm}
    127.0.0.1 = {self.realm}
"""
        )
        return path

    def start(self) -> None:
        self.write_krb5_conf(self.krb5_config, self.port)
        self.kdc_config.write_text(
            f"""[kdcdefaults]
    kdc_listen = 127.0.0.1:{self.port}
    kdc_tcp_listen = 127.0.0.1:{self.port}

[realms]
    {self.realm} = {{
        database_name = {self.dir}/principal
        key_stash_file = {self.dir}/stash
        acl_file = {self.dir}/kadm5.acl
        max_life = 1h
        max_renewable_life = 1h
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{self.dir}/kdc.log
"""
        )
        (self.dir / "kadm5.acl").write_text("")
        self._run(
            _tool("kdb5_util") or "kdb5_util", "-r", self.realm, "create", "-s", "-P", "master-password"
        )
        kdc = _tool("krb5kdc") or "krb5kdc"
        self._proc = subprocess.Popen(
            [kdc, "-n", "-r", self.realm],
            env=self._env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"krb5kdc exited ({self._proc.returncode}): {self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"krb5kdc does not listen on {self.port}: {self.log_tail()}") from None
                time.sleep(0.05)

    def log_tail(self) -> str:
        try:
            return (self.dir / "kdc.log").read_text()[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def close(self) -> None:
        self.stop()
        self._tmp.cleanup()

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- principals -----------------------------------------------------------------
    def principal(self, name: str) -> str:
        return name if "@" in name else f"{name}@{self.realm}"

    def kadmin(self, query: str) -> str:
        return self._run(_tool("kadmin.local") or "kadmin.local", "-r", self.realm, "-q", query)

    def add_principal(self, name: str) -> str:
        full = self.principal(name)
        self.kadmin(f"addprinc -randkey {full}")
        return full

    def delete_principal(self, name: str) -> None:
        self.kadmin(f"delprinc -force {self.principal(name)}")

    def keytab(self, name: str, path: Path | None = None) -> Path:
        """A keytab with ``name``'s keys; ``ktadd`` makes new keys, so an older keytab of the
        same principal stops working (a rotated key)."""
        path = path or self.dir / f"{name.replace('/', '_').split('@')[0]}.keytab"
        self.kadmin(f"ktadd -k {path} {self.principal(name)}")
        return path

    def kinit(self, name: str, keytab: Path, ccache: Path, lifetime: str | None = None) -> None:
        args = [_tool("kinit") or "kinit", "-k", "-t", str(keytab), "-c", f"FILE:{ccache}"]
        if lifetime is not None:
            args += ["-l", lifetime]
        self._run(*args, self.principal(name))

    def ticket_valid(self, ccache: Path) -> bool:
        """``klist -s``: whether the cache holds an unexpired ticket."""
        proc = subprocess.run(
            [_tool("klist") or "klist", "-s", "-c", f"FILE:{ccache}"], env=self._env(), timeout=30
        )
        return proc.returncode == 0
