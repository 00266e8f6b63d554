"""``create_ssl_context`` with aiokafka's parameters (the standard library does the work)."""

from __future__ import annotations

import ssl
from typing import Any

__all__ = ["create_ssl_context"]


def create_ssl_context(
    *,
    cafile: str | None = None,
    capath: str | None = None,
    cadata: str | bytes | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    password: Any = None,
    crlfile: Any = None,
) -> ssl.SSLContext:
    """A client TLS context that verifies the broker (hostname included), optionally with
    a client certificate. ``crlfile`` enables CRL checking of the leaf certificate."""
    context = ssl.create_default_context(
        purpose=ssl.Purpose.SERVER_AUTH, cafile=cafile, capath=capath, cadata=cadata
    )
    if crlfile:
        context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
        context.load_verify_locations(crlfile)
    if certfile:
        context.load_cert_chain(certfile=certfile, keyfile=keyfile, password=password)
    return context
