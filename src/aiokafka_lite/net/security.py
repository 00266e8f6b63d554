"""TLS helpers."""

from __future__ import annotations

import ssl

__all__ = ["create_ssl_context"]


def create_ssl_context(
    *,
    cafile: str | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    password: str | None = None,
    check_hostname: bool = True,
    verify: bool = True,
) -> ssl.SSLContext:
    """A client ``SSLContext`` from PEM paths.

    ``cafile`` adds trusted CAs (the system store is used too); ``certfile``/``keyfile``
    enable mutual TLS; ``password`` decrypts the key. ``verify=False`` disables
    certificate checks entirely (tests only).
    """
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if certfile is not None:
        ctx.load_cert_chain(certfile, keyfile, password)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.check_hostname = check_hostname
    return ctx
