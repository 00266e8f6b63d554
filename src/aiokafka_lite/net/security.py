"""TLS helpers: client contexts, mutual TLS credentials, and certificate reload.

Mutual TLS (Java's ``ssl.keystore.*``/``ssl.key.password``): the client certificate
(PEM; the leaf first, then any intermediates, in ``certfile``) and its private key
(``keyfile``, or inside ``certfile``), optionally encrypted and unlocked by a password
given as a string or as a callable that returns it (read it from a secret store at load
time instead of keeping it in a config object).

Certificate reload without a restart. Certificates used for mTLS are short-lived and
renewed in place by an agent (cert-manager, Vault agent, SPIFFE helper); nothing tells
the application. ``ReloadingSslContext`` therefore looks at the files' identity
(mtime, size, inode) whenever a new connection is opened and builds a fresh
``SSLContext`` when any of them changed: new connections present the renewed
certificate, open ones keep the session they negotiated (as a TLS server would expect).
A stat per connection costs microseconds next to a TLS handshake, and needs no timer or
signal. An agent that writes the certificate and then the key briefly leaves a pair
that does not match: a reload that fails keeps the previous context (and logs why), so
connections keep working with the old, still valid, certificate; the next connection
tries again. ``reload()`` forces a re-read and raises what went wrong. (The Java client
has no client-side reload; its brokers reload keystores through AlterConfigs.)

Load errors are typed: ``SslCredentialsError`` (a ``ConfigError``) names the file and
the likely cause (a wrong or missing password, a key that does not belong to the
certificate, a file that is not PEM).
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from collections.abc import Callable
from typing import Final

from aiokafka_lite.core.errors import SslCredentialsError

__all__ = ["PasswordSource", "ReloadingSslContext", "create_ssl_context", "load_client_certificate"]

log = logging.getLogger(__name__)

#: A private key's password: the text itself, or a callable that returns it when the
#: key is (re)loaded.
PasswordSource = str | bytes | Callable[[], str | bytes]

_BAD_PASSWORD_REASONS: Final = frozenset({"BAD_DECRYPT", "BAD_PASSWORD_READ", "PROBLEMS_GETTING_PASSWORD"})
_MISMATCH_REASONS: Final = frozenset({"KEY_VALUES_MISMATCH", "X509_CHECK_PRIVATE_KEY"})


def load_client_certificate(
    ctx: ssl.SSLContext, certfile: str, keyfile: str | None = None, password: PasswordSource | None = None
) -> None:
    """``ctx.load_cert_chain`` with typed errors that say what is wrong with the files."""
    files = certfile if keyfile is None else f"{certfile} / {keyfile}"
    pw = _password_callback(password, files)
    try:
        ctx.load_cert_chain(certfile, keyfile, pw)
    except SslCredentialsError:
        raise
    except FileNotFoundError as exc:
        raise SslCredentialsError(f"mTLS: cannot read {exc.filename or files}: no such file") from None
    except PermissionError as exc:
        raise SslCredentialsError(f"mTLS: cannot read {exc.filename or files}: permission denied") from None
    except ssl.SSLError as exc:
        encrypted = _key_is_encrypted(keyfile or certfile)
        raise SslCredentialsError(_describe_load_error(exc, files, password is not None, encrypted)) from None
    except OSError as exc:
        raise SslCredentialsError(f"mTLS: cannot read {files}: {exc.strerror or exc}") from None


def _password_callback(
    password: PasswordSource | None, files: str
) -> str | bytes | Callable[[], str | bytes]:
    """What ``load_cert_chain`` gets as its password: never None (OpenSSL would prompt on
    the terminal for an encrypted key), and a failing callable is not a wrong password."""
    if isinstance(password, str | bytes):
        return password
    if password is None:

        def missing() -> str | bytes:
            raise SslCredentialsError(f"mTLS: the private key in {files} is encrypted: set ssl_password")

        return missing
    source = password

    def call() -> str | bytes:
        try:
            value = source()
        except Exception as exc:
            raise SslCredentialsError(
                f"mTLS: the ssl_password callable failed ({type(exc).__name__}) while loading {files}"
            ) from exc
        if not isinstance(value, str | bytes):
            raise SslCredentialsError(
                f"mTLS: the ssl_password callable returned {type(value).__name__}, not str or bytes"
            )
        return value

    return call


def _key_is_encrypted(path: str) -> bool:
    """Whether the PEM file holds an encrypted private key (PKCS#8 or the legacy form)."""
    try:
        with open(path, "rb") as f:
            text = f.read(1 << 20)
    except OSError:
        return False
    return b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in text or b"Proc-Type: 4,ENCRYPTED" in text


def _describe_load_error(exc: ssl.SSLError, files: str, has_password: bool, encrypted: bool) -> str:
    # OpenSSL 3 reports a wrong password as a bare "PEM lib" error, hence the look at the
    # key file itself.
    reason = getattr(exc, "reason", None) or ""
    text = str(exc)
    if reason in _MISMATCH_REASONS or "key values mismatch" in text:
        return (
            f"mTLS: the private key does not belong to the certificate ({files}): a renewed "
            "certificate with the old key, or files from two different pairs?"
        )
    if reason in _BAD_PASSWORD_REASONS or "bad decrypt" in text or encrypted:
        if has_password:
            return f"mTLS: the private key in {files} could not be decrypted: wrong ssl_password"
        return f"mTLS: the private key in {files} is encrypted: set ssl_password"
    return (
        f"mTLS: cannot load the client certificate and key from {files} ({reason or text}): "
        "expected PEM (certificate chain, then an unencrypted or password-protected private key)"
    )


def create_ssl_context(
    *,
    cafile: str | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    password: PasswordSource | None = None,
    check_hostname: bool = True,
    verify: bool = True,
) -> ssl.SSLContext:
    """A client ``SSLContext`` from PEM paths.

    ``cafile`` adds trusted CAs (the system store is used too); ``certfile``/``keyfile``
    enable mutual TLS (the chain in ``certfile``, leaf first); ``password`` decrypts the
    key (a string, or a callable returning it). ``verify=False`` disables certificate
    checks entirely (tests only). Unloadable credentials raise ``SslCredentialsError``.
    """
    try:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        raise SslCredentialsError(f"TLS: cannot load the CA certificates from {cafile}: {exc}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if certfile is not None:
        load_client_certificate(ctx, certfile, keyfile, password)
    elif keyfile is not None:
        raise SslCredentialsError("mTLS: ssl_keyfile given without ssl_certfile")
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.check_hostname = check_hostname
    return ctx


_FileId = tuple[int, int, int] | None


def _file_id(path: str | None) -> _FileId:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class ReloadingSslContext:
    """A client TLS context that follows its PEM files: ``current()`` returns an
    ``SSLContext`` built from their latest good contents (see the module docstring).

    Pass it as ``ssl_context=`` to any client, or set ``ssl_certfile``/``ssl_keyfile``/
    ``ssl_password``/``ssl_cafile`` (the client builds one). The first load happens in
    the constructor, so bad files fail at configuration time. Thread-safe.
    """

    def __init__(
        self,
        *,
        cafile: str | None = None,
        certfile: str | None = None,
        keyfile: str | None = None,
        password: PasswordSource | None = None,
        check_hostname: bool = True,
        verify: bool = True,
    ) -> None:
        self.cafile = cafile
        self.certfile = certfile
        self.keyfile = keyfile
        self._password = password
        self.check_hostname = check_hostname
        self.verify = verify
        self._lock = threading.Lock()
        #: How many times new files were loaded after the first load.
        self.reloads = 0
        #: The last reload failure (None once a reload succeeds).
        self.last_error: SslCredentialsError | None = None
        self._ids = self._file_ids()
        self._ctx = self._build()

    def _file_ids(self) -> tuple[_FileId, ...]:
        return tuple(_file_id(p) for p in (self.cafile, self.certfile, self.keyfile))

    def _build(self) -> ssl.SSLContext:
        return create_ssl_context(
            cafile=self.cafile,
            certfile=self.certfile,
            keyfile=self.keyfile,
            password=self._password,
            check_hostname=self.check_hostname,
            verify=self.verify,
        )

    def current(self) -> ssl.SSLContext:
        """The context for a new connection; re-reads the files if they changed."""
        ids = self._file_ids()
        if ids == self._ids:
            return self._ctx
        with self._lock:
            if ids != self._ids:
                try:
                    self._ctx = self._build()
                except SslCredentialsError as exc:
                    if self.last_error is None or str(exc) != str(self.last_error):
                        log.warning(
                            "TLS files changed but cannot be loaded; keeping the previous ones: %s", exc
                        )
                    self.last_error = exc
                    return self._ctx  # retried at the next connection (ids not recorded)
                self._ids = ids
                self.reloads += 1
                self.last_error = None
                log.info("TLS certificate files changed; new connections use them (%s)", self.certfile)
            return self._ctx

    def reload(self) -> ssl.SSLContext:
        """Re-read the files now; raises ``SslCredentialsError`` (and keeps the previous
        context) when they cannot be loaded."""
        with self._lock:
            ids = self._file_ids()
            ctx = self._build()
            self._ctx, self._ids = ctx, ids
            self.reloads += 1
            self.last_error = None
            return ctx

    def __repr__(self) -> str:
        return (
            f"ReloadingSslContext(cafile={self.cafile!r}, certfile={self.certfile!r}, "
            f"keyfile={self.keyfile!r}, reloads={self.reloads})"
        )
